"""Certificate chains root → intermediates → leaf, made with our OpenSSL for any signature algorithm
it (or a provider) can sign with. Private keys are written 0600.
"""

import dataclasses
import json
import os
import subprocess
import tempfile
from pathlib import Path

from pqbench.algorithms import catalog, openssl_build
from pqbench.errors import BadInput, MeasurementFailed, MissingCapability

DEFAULT_SERVER_NAME = "server.pqbench.test"
VALID_DAYS = 3650

EXTENSIONS = """
[req]
distinguished_name = req_dn

[req_dn]

[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always

[leaf]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:{server_name}
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always

[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
"""


@dataclasses.dataclass
class Chain:
    directory: Path
    sig: str
    ca_sig: str
    intermediates: int
    server_name: str
    root_cert: Path  # trust anchor for clients (CA file)
    chain_file: Path  # leaf then intermediates: what the server sends (nginx ssl_certificate)
    leaf_cert: Path
    intermediates_file: Path  # intermediates only (openssl s_server -cert_chain); may be empty
    leaf_key: Path
    der_sizes: dict  # name -> DER bytes per certificate
    parts: dict = dataclasses.field(default_factory=dict)  # bytes by part (pqbench.algorithms.chains.parts)
    # mutual TLS: the client's certificate and key, and the CA the server verifies it with (None: no client auth)
    client_cert: Path | None = None
    client_key: Path | None = None
    client_ca: Path | None = None
    # trust anchor negotiation (pqbench.algorithms.chains.ANCHOR_IDS): this chain's root's trust anchor ID and the
    # fallback chain a server sends every other client ({} : none); paths as Paths, so a cluster relocates them
    trust_anchors: dict = dataclasses.field(default_factory=dict)

    @property
    def sent_bytes(self) -> int:
        """DER bytes of the certificates the server sends (leaf + intermediates, not the root)."""
        return sum(v for k, v in self.der_sizes.items() if k != "root")

    def to_json(self) -> dict:
        d = _jsonable(dataclasses.asdict(self))
        d["sent_bytes"] = self.sent_bytes
        return d


def _jsonable(obj):
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    return obj


def _openssl(args: list[str], what: str, input: bytes | None = None) -> bytes:
    try:
        return openssl_build.run_openssl(args, input=input).stdout
    except subprocess.CalledProcessError as e:
        raise MeasurementFailed(f"openssl failed to {what}: {e.stderr.decode().strip()[-600:]}") from None


def _check_signer(alg: catalog.Algorithm, field: str) -> None:
    avail = catalog.availability(alg)
    if not avail.available:
        raise MissingCapability(f"{field} {alg.name} is not available here: {avail.reason}",
                                "see `pqbench algorithms --kind sig` for what this build offers")


def _new_key(alg: catalog.Algorithm, path: Path) -> None:
    args = ["genpkey", "-algorithm", alg.keytype or alg.name]
    for opt in alg.keyopt:
        args += ["-pkeyopt", opt]
    old = os.umask(0o077)  # the key file is never readable by others, not even briefly
    try:
        _openssl(args + ["-out", str(path)], f"generate a {alg.name} key")
    finally:
        os.umask(old)
    path.chmod(0o600)


def sign(key: Path, data: bytes) -> bytes:
    """A signature over data with key (the key's own digest, or none for algorithms that sign messages)."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "data").write_bytes(data)
        return _openssl(["pkeyutl", "-sign", "-inkey", str(key), "-rawin", "-in", str(Path(tmp) / "data")],
                        f"sign with {key.name}")


def verify(public_pem: Path, data: bytes, signature: bytes) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "data").write_bytes(data)
        (Path(tmp) / "sig").write_bytes(signature)
        r = openssl_build.run_openssl(["pkeyutl", "-verify", "-pubin", "-inkey", str(public_pem), "-rawin",
                                       "-in", str(Path(tmp) / "data"), "-sigfile", str(Path(tmp) / "sig")],
                                      check=False)
        return r.returncode == 0


def _prepare_out(out: Path) -> Path:
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out):
            pass
    except OSError as e:
        raise BadInput("--out", f"cannot write to {out}: {e.strerror}") from None
    return out


def der_size(cert: Path) -> int:
    return len(_openssl(["x509", "-in", str(cert), "-outform", "DER"], f"read {cert}"))


def make_chain(sig: str, out: Path, *, ca_sig: str | None = None, intermediates: int = 0,
               server_name: str = DEFAULT_SERVER_NAME, leaf_section: str = "leaf") -> Chain:
    """root → (intermediates →) leaf; leaf_section: the leaf's extensions (leaf: a server's, client: mutual
    TLS's)."""
    leaf_alg = catalog.find(sig, "sig", field="--sig")
    ca_alg = catalog.find(ca_sig, "sig", field="--ca-sig") if ca_sig else leaf_alg
    if not 0 <= intermediates <= 8:
        raise BadInput("--intermediates", f"{intermediates} is outside 0..8")
    _check_signer(leaf_alg, "--sig")
    _check_signer(ca_alg, "--ca-sig")
    out = _prepare_out(out)
    ext = out / "extensions.cnf"
    ext.write_text(EXTENSIONS.format(server_name=server_name))

    _new_key(ca_alg, out / "root.key")
    _openssl(["req", "-x509", "-new", "-key", str(out / "root.key"), "-subj",
              f"/O=pqbench/CN=pqbench root CA ({ca_alg.name})", "-days", str(VALID_DAYS),
              "-config", str(ext), "-extensions", "ca",
              "-out", str(out / "root.crt")], "make the root certificate")

    def issue(name: str, alg: catalog.Algorithm, subject: str, section: str, parent: str) -> None:
        _new_key(alg, out / f"{name}.key")
        csr = _openssl(["req", "-new", "-key", str(out / f"{name}.key"), "-subj", subject,
                        "-config", str(ext)], f"make the {name} request")
        _openssl(["x509", "-req", "-CA", str(out / f"{parent}.crt"), "-CAkey", str(out / f"{parent}.key"),
                  "-set_serial", str(int.from_bytes(os.urandom(8), "big")), "-days", str(VALID_DAYS),
                  "-extfile", str(ext), "-extensions", section, "-out", str(out / f"{name}.crt")],
                 f"sign the {name} certificate", input=csr)

    parent = "root"
    names = []
    for i in range(1, intermediates + 1):
        name = f"intermediate{i}"
        issue(name, ca_alg, f"/O=pqbench/CN=pqbench intermediate CA {i} ({ca_alg.name})", "ca", parent)
        names.append(name)
        parent = name
    issue("leaf", leaf_alg, f"/O=pqbench/CN={server_name}", leaf_section, parent)

    upward = "".join((out / f"{n}.crt").read_text() for n in reversed(names))
    (out / "intermediates.pem").write_text(upward)
    (out / "chain.pem").write_text((out / "leaf.crt").read_text() + upward)
    sizes = {n: der_size(out / f"{n}.crt") for n in ["root", *names, "leaf"]}
    chain = Chain(out, leaf_alg.name, ca_alg.name, intermediates, server_name, out / "root.crt",
                  out / "chain.pem", out / "leaf.crt", out / "intermediates.pem", out / "leaf.key", sizes)
    (out / "chain.json").write_text(json.dumps(chain.to_json(), indent=2) + "\n")
    return chain
