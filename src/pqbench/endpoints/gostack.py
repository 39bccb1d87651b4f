"""What the two Go TLS stacks (gotls: native/tlsgo over TCP; quicgo: native/quicgo over QUIC) share on
the Python side: their build's binary, capabilities and provenance (by build step), the probe that
answers for a signature algorithm, the group/certificate checks behind `unsupported`, the versions they
report, and the ML-DSA key Go can read."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from pqbench import paths
from pqbench.errors import MeasurementFailed, MissingCapability

if TYPE_CHECKING:
    from pqbench.algorithms import catalog
    from pqbench.endpoints.base import Site

# catalog and openssl_build are imported where used: the build modules load early (on-demand builds).


class GoBuild:
    """build/STEP/bin/PROGRAM, built by scripts/build-go.sh, and what that binary says it can do."""

    def __init__(self, step: str, program: str, fix: str, caps_timeout_s: float):
        self.step, self.program, self.fix, self.caps_timeout_s = step, program, fix, caps_timeout_s
        self._caps = functools.lru_cache(maxsize=None)(self._run_capabilities)

    def home(self) -> Path:
        return paths.BUILD / self.step

    def binary(self) -> Path:
        return self.home() / "bin" / self.program

    def require(self) -> Path:
        b = self.binary()
        if not b.exists():
            raise MissingCapability(f"{b} is missing", self.fix)
        return b

    def _run_capabilities(self, stamp: tuple) -> dict:
        proc = subprocess.run([str(self.binary()), "capabilities"], capture_output=True, text=True,
                              timeout=self.caps_timeout_s, env={})
        if proc.returncode != 0:
            raise MissingCapability(f"`{self.program} capabilities` failed ({proc.returncode}): "
                                    f"{proc.stderr.strip()[-300:]}", self.fix)
        return json.loads(proc.stdout)

    def capabilities(self) -> dict | None:
        """The binary's `capabilities` report (asked again when the binary changes); None when not built."""
        b = self.binary()
        if not b.exists():
            return None
        st = b.stat()
        return self._caps((st.st_size, st.st_mtime_ns))

    def provenance(self) -> dict:
        """Go version and the checksums of the toolchain and every module, as the build recorded them."""
        try:
            return json.loads((self.home() / "PROVENANCE.json").read_text())
        except (OSError, ValueError):
            return {}

    def group_name(self, kex: str) -> str | None:
        """The binary's name for the catalog's key exchange `kex` (matched by TLS code point), or None
        when this build did not negotiate it."""
        from pqbench.algorithms import catalog
        try:
            alg = catalog.find(kex, "kem")
        except Exception:
            return None
        for g in (self.capabilities() or {}).get("groups", []):
            if g["ok"] and alg.codepoint is not None and int(g["codepoint"], 16) == alg.codepoint:
                return g["name"]
        return None


def sig_probe(caps: dict, alg: catalog.Algorithm) -> dict | None:
    """The capabilities entry that answers for alg: its own, or for RSA of any size the 2048-bit probe
    (crypto/tls and crypto/x509 take RSA keys of any size from 1024 bits; keygen of bigger ones would
    make the probe slow)."""
    sigs = {s["sig"]: s for s in caps.get("sigs", [])}
    if alg.name in sigs:
        return sigs[alg.name]
    if alg.family == "RSA":
        return sigs.get("rsa2048")
    return None


def kex_sig_gap(b: GoBuild, caps: dict, kex: str, sig: str) -> tuple[str, str] | None:
    """What of kex with sig the build lacks, for the stack to word: ("group", groups it has),
    ("certs", why no such chain is made here), ("sig", key types it has), ("chain", the probe's error);
    None when both are there."""
    from pqbench.algorithms import catalog
    if b.group_name(kex) is None:
        return "group", ", ".join(g["name"] for g in caps["groups"] if g["ok"])
    s = catalog.find(sig, "sig")
    avail = catalog.availability(s)
    if not avail.available:  # the chain is made by our OpenSSL
        return "certs", avail.reason
    probe = sig_probe(caps, s)
    if probe is None:
        return "sig", ", ".join(x["sig"] for x in caps["sigs"] if x["ok"])
    if not probe["ok"]:
        return "chain", str(probe.get("error"))
    return None


def versions(caps: dict, prov: dict, **extra) -> dict:
    """Go's version, the toolchain's and every module's checksum (and the stack's extra versions)."""
    out = {"go": caps.get("go") or prov.get("go"), **extra}
    tc = prov.get("toolchain") or {}
    if tc.get("module"):
        out["toolchain"] = f"{tc['module']} {tc.get('sum')}"
    for m in prov.get("modules", []):
        out[m["path"]] = f"{m['version']} {m['sum']}"
    return out


def go_key(site: Site, key_dir: Path) -> Path:
    """The leaf key as Go can read it: the chain's own key, or for ML-DSA a seed-only copy (0600) in
    key_dir (Go reads ML-DSA private keys only in the seed-only PKCS#8 form; our OpenSSL writes seed
    and expanded key)."""
    from pqbench.algorithms import catalog, openssl_build
    alg = catalog.find(site.chain.sig, "sig")
    if not (alg.keytype or "").upper().startswith("ML-DSA"):
        return Path(site.chain.leaf_key)
    out = key_dir / f"gotls-leaf-{site.port}.key"  # the name the gotls stack gave it first
    old = os.umask(0o077)  # never readable by others, not even briefly
    try:
        out.unlink(missing_ok=True)
        proc = openssl_build.run_openssl(["pkey", "-in", str(site.chain.leaf_key), "-provparam",
                                          "ml-dsa.output_formats=seed-only", "-out", str(out)], check=False)
    finally:
        os.umask(old)
    if proc.returncode != 0:
        raise MeasurementFailed(f"cannot convert {site.chain.leaf_key} to a seed-only ML-DSA key for Go: "
                                f"{proc.stderr.decode(errors='replace').strip()[-300:]}")
    out.chmod(0o600)
    return out


class ConfiguredServer:
    """A Go stack's server that reads its sites from a JSON file (`PROGRAM server --config FILE`: quicgo, dtlsgo)
    over UDP: the run's groups this build has, started in the server namespace, ready once every site completes a
    handshake with the stack's own client. A stack's server names its build, its transports and its library, and
    gives the file's contents (config) and one probe handshake (probe)."""
    program: str  # the binary's name, the log's and the config's
    build: GoBuild
    speaks: tuple[str, ...]  # the transports its sites may ask
    library: str  # what errors call it ("quic-go")
    handshake_word: str  # what ready() waits for ("complete a QUIC handshake on UDP")
    env: dict = {}

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.serving = None
        self.addr = ""
        self.groups: list[str] = []
        self._stderr = None

    @property
    def log_path(self) -> Path:
        return Path(self.serving.run_dir) / f"{self.program}-server.log"

    def config(self, run_dir: Path) -> dict: ...

    def probe(self, place, site, group: str) -> str | None:
        """None when one handshake with group against site succeeds from place, else why not."""

    def start(self, place, serving) -> None:
        from pqbench import interrupts
        b = self.build.require()
        self.serving, self.addr = serving, place.addr
        run_dir = Path(serving.run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        other = [s.port for s in serving.sites if s.transport not in self.speaks]
        if other:
            raise MeasurementFailed(f"the {self.program} server serves only {', '.join(self.speaks)} sites, not "
                                    f"ports {other}")
        # Only the run's groups this build has (a cell with another one is skipped before it gets here).
        self.groups = [n for n in map(self.build.group_name, serving.groups) if n]
        if not self.groups:
            raise MeasurementFailed(f"{self.library} has none of the groups {serving.groups}")
        conf = run_dir / f"{self.program}-server.json"
        conf.write_text(json.dumps(self.config(run_dir), indent=1))
        self._stderr = open(run_dir / f"{self.program}-server.stderr", "wb")
        with interrupts.deferred():  # a Ctrl-C as it starts is raised once stop() can find it
            self.proc = place.popen([str(b), "server", "--config", str(conf)], env=dict(self.env),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr,
                                    process_group=0)

    def ready(self, client_place) -> None:
        """Every site completes one handshake with the stack's client (first group), tried until the server has
        bound its ports."""
        from pqbench.endpoints.ready import Starting
        sites = {s.port: s for s in self.serving.sites}
        up = Starting(f"{self.program} server", self.proc,
                      [Path(self.serving.run_dir) / f"{self.program}-server.stderr", self.log_path], self.stop)
        up.wait(sites, lambda port: self.probe(client_place, sites[port], self.groups[0]), self.handshake_word)

    def stop(self) -> None:
        from pqbench.endpoints.base import stop_group
        stop_group(self.proc)
        if self._stderr:
            self._stderr.close()
            self._stderr = None
