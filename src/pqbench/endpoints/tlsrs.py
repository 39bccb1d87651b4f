"""What the Rust TLS stacks (`rustls`, `s2n`, `boringssl`) share on the Python side: their binaries (built by
scripts/build-rust.sh from a Cargo workspace under native/ into build/<its step>/bin), the capabilities each
binary reports (`--capabilities`, JSON), the server process and the timing client's command line.

The binaries mirror pqtimer: `PROG client` takes pqtimer's options and prints pqtimer's sample, `PROG
server --addr A --site PORT,CHAIN,KEY ... --groups G:G --page NAME=BYTES ...` serves one port per
chain with a thread per connection. Group and signature names are matched to the catalog by TLS code
point, as the binary reports them.
"""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

from pqbench import interrupts, paths
from pqbench.algorithms import catalog
from pqbench.sample import TLS_MILESTONES
from pqbench.endpoints.base import ClientJob, Place, Serving, probe, stop_group
from pqbench.endpoints.offer import parse_offer
from pqbench.endpoints.ready import Starting, listening
from pqbench.errors import MeasurementFailed, MissingCapability

FIX = "run `make stacks` (scripts/build-rust.sh builds the Rust stacks)"
# Each binary's build step: its folder under build/, and the workspace under native/ it is built from.
STEPS = {"pqrustls": "tlsrs", "pqs2n": "tlsrs", "pqboring": "tlsboring"}  # pqboring: the boringssl and dtlsboring stacks


def home(name: str = "pqrustls") -> Path:
    return paths.BUILD / STEPS[name]


def binary(name: str) -> Path:
    return home(name) / "bin" / name


def require(name: str) -> Path:
    b = binary(name)
    if not b.exists():
        raise MissingCapability(f"{b} is not built", FIX)
    return b


def capabilities(name: str) -> dict | None:
    """What the built binary says it can do (`name --capabilities`), or None when it is not built
    (not remembered: it may be built on first use, pqbench.endpoints.ondemand)."""
    b = binary(name)
    if not b.exists():
        return None
    st = b.stat()
    return _capabilities(b, (st.st_size, st.st_mtime_ns))


@functools.lru_cache(maxsize=None)
def _capabilities(b: Path, stamp: tuple) -> dict:
    out = subprocess.run([str(b), "--capabilities"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise MeasurementFailed(f"{b} --capabilities failed ({out.returncode}): {out.stderr.strip()[-300:]}")
    return json.loads(out.stdout)


def provenance(name: str = "pqrustls") -> dict:
    try:
        return json.loads((home(name) / "PROVENANCE.json").read_text())
    except (OSError, ValueError):
        return {}


def versions(*crates: str, binary_name: str = "pqrustls") -> dict:
    v = provenance(binary_name).get("versions") or {}
    return {c: v.get(c) for c in crates}


def group_for(caps: dict, kex: str) -> str | None:
    """The binary's name for the catalog's key exchange (by TLS code point), or None if it has none."""
    try:
        alg = catalog.find(kex, "kem")
    except Exception:
        return None
    for name, code in (caps.get("group_codepoints") or {}).items():
        if alg.codepoint is not None and code == alg.codepoint:
            return name
    return None


def sigalg_for(caps: dict, sig: str) -> str | None:
    """The TLS signature scheme name of the catalog's signature algorithm, as the binary spells it."""
    alg = catalog.find(sig, "sig")
    for name, code in (caps.get("sigalg_codepoints") or {}).items():
        if alg.codepoint is not None and code == alg.codepoint:
            return name
    return alg.sigalg


def chain_problem(sig: str) -> str | None:
    """Why no certificate chain for sig can be made here (our OpenSSL writes them), or None."""
    s = catalog.find(sig, "sig")
    avail = catalog.availability(s)
    if not avail.available:
        return f"no {s.name} certificates here: {avail.reason}"
    if s.codepoint is None:
        return f"{s.name} has no TLS signature scheme"
    return None


def library_gap(name: str, lib: str, kex: str, sig: str, role: str) -> str | None:
    """Why the binary `name` (lib, as errors call it) cannot run kex with sig in TLS 1.3 in this role, from its
    capabilities, or None."""
    caps = capabilities(name)
    if caps is None:
        return f"{binary(name)} is not built: {FIX}"
    if group_for(caps, kex) is None:
        return f"{lib} has no TLS group {kex} (it has {', '.join(caps['groups'])})"
    why = chain_problem(sig)
    if why:
        return why
    scheme = sigalg_for(caps, sig)
    if scheme is None:
        return f"{lib} has no TLS signature scheme for {sig}"
    if role == "server":
        have = caps["server"]["sign_sigalgs"]
        return None if scheme in have else f"{lib} cannot sign with {sig} keys (it signs with {', '.join(have)})"
    have = caps["client"]["verify_sigalgs"]
    return None if scheme in have else f"{lib} cannot verify {sig} signatures (it verifies {', '.join(have)})"


def group_names(caps: dict, groups: list[str], field: str = "groups") -> list[str]:
    """serving/job groups (catalog names) as the binary names them; MissingCapability for one it lacks."""
    out = []
    for g in groups:
        name = group_for(caps, g)
        if name is None:
            raise MissingCapability(f"{caps.get('stack')} has no TLS group {g}",
                                    "see `pqbench algorithms` for what each stack offers")
        out.append(name)
    return out


class NativeServer:
    """A Rust stack's server: one process in the server namespace, a port per site, logs in run_dir."""
    binary_name = ""
    label = ""

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.place: Place | None = None
        self.serving: Serving | None = None
        self.log: Path | None = None

    def caps(self) -> dict:
        require(self.binary_name)
        return capabilities(self.binary_name)

    def start(self, place: Place, serving: Serving) -> None:
        b = require(self.binary_name)
        self.place, self.serving = place, serving
        serving.run_dir.mkdir(parents=True, exist_ok=True)
        groups = group_names(self.caps(), serving.groups)
        argv = [str(b), "server", "--addr", place.addr, "--groups", ":".join(groups), "--run-dir", str(serving.run_dir)]
        for site in serving.sites:
            chain, key = self.site_files(site)
            argv += ["--site", f"{site.port},{chain},{key}"]
        for name, size in serving.pages.items():
            argv += ["--page", f"{name}={size}"]
        argv += self.extra_server_args(serving)
        self.log = serving.run_dir / f"{self.binary_name}-server.log"
        with open(self.log, "ab") as log, interrupts.deferred():  # a Ctrl-C as it starts: raised once stop() finds it
            self.proc = place.popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, process_group=0)

    def site_files(self, site) -> tuple:
        """The chain and key a site's port serves by default."""
        return site.chain.chain_file, site.chain.leaf_key

    def probe_cafile(self, site) -> str:
        """The trust file of the readiness handshake to a site (a client without options gets the default chain)."""
        return str(site.chain.root_cert)

    def extra_server_args(self, serving: Serving) -> list[str]:
        return []

    def probe_args(self) -> list[str]:
        """Client options for the readiness handshake (default: the first group the server accepts)."""
        return ["--groups", group_names(self.caps(), self.serving.groups)[0]]

    def ready(self, client_place: Place) -> None:
        """Every port accepts TCP, then completes one real TLS handshake with this stack's own client."""
        up = Starting(f"{self.binary_name} server", self.proc, [self.log], self.stop)
        up.wait([s.port for s in self.serving.sites], listening(client_place, self.place.addr), "listen on")
        up.serves(self.serving.sites, lambda site: probe(client_place, [
            str(binary(self.binary_name)), "client", "--host", self.place.addr, "--port", str(site.port),
            "--cafile", self.probe_cafile(site), "--servername", site.chain.server_name,
            "--count", "1", "--timeout-ms", "5000", *self.probe_args()]), "a TLS handshake")

    def stop(self) -> None:
        stop_group(self.proc)


class NativeClient:
    """A Rust stack's timing client: pqtimer's command line and sample (see the module doc)."""
    name = ""
    milestones = TLS_MILESTONES
    takes_offers = False  # its --groups takes an offer in OpenSSL's notation, key shares marked (the offer feature)

    def argv(self, job: ClientJob, count: int, worker: int, claims: Path | None) -> list[str]:
        b = require(self.name)
        if job.pad:
            raise MissingCapability(f"--pad: {self.name} cannot pad its ClientHello (only pqtimer can)",
                                    "measure ClientHello padding with the openssl client")
        job.plain_offer(self.name, offers=self.takes_offers)
        groups = [parse_offer(job.offer).openssl()] if job.offer and self.takes_offers else \
            group_names(capabilities(self.name), job.groups)
        return [str(b), "client", *job.tls_client_options(groups, count, worker, claims)]

    def env(self) -> dict:
        return {}
