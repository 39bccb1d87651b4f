"""SSH names and keys shared by the SSH stacks (`openssh`, `gossh`): the key exchanges and host keys
pqbench knows by their SSH names, and the key set of one SSH "site" (the SSH analogue of a
certificate chain).

A key set is a directory:
    host_key, host_key.pub   the server's host key (private 0600; public in authorized_keys format)
    hostkey_alg              the host key name the client asks for (e.g. rsa-sha2-512-4096)
    user_key, user_key.pub   the client's key (ed25519), authorized on the server
It is made by the Go keygen (`sshserver keygen`, every host key including ML-DSA) or, without it, by
OpenSSH's ssh-keygen (no ML-DSA). `SshKeys` has the fields of `pqbench.algorithms.certs.Chain` the rig and the
clients read (`root_cert` = the host public key a client trusts, `server_name`, `leaf_key`), so a
`Site` can carry it unchanged.

Host key names are SSH public key algorithm names; RSA names may end in the modulus size
(rsa-sha2-256-2048; no suffix: 3072 bits).

Size-only host keys, `sizeonly-<catalog signature>` (e.g. sizeonly-sphincssha2128fsimple), stand for
signatures no SSH implementation has: an ed25519 host certificate (ssh-ed25519-cert-v01@openssh.com)
whose key id is padded so that the certificate plus the ed25519 signature the server sends are that
algorithm's public key + signature bytes. The bytes on the wire are the algorithm's, the computation
is ed25519's, and everything that names them says "size-only". Their key set adds:
    ca_key, ca_key.pub       the run's CA (ed25519; private 0600); a client trusts ca_key.pub
    host_key-cert.pub        the padded host certificate, principal `server_name`
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

from pqbench import paths
from pqbench.algorithms import catalog
from pqbench.errors import BadInput, MeasurementFailed, MissingCapability

PROTOCOL = "ssh"
# The key exchanges and (real) host keys pqbench knows by SSH names: the catalog's SSH names.
KEX = tuple(catalog.ssh_names("kem"))
HOSTKEYS = tuple(n for n in catalog.ssh_names("sig") if not catalog.is_size_only(n))
DEFAULT_RSA_BITS = 3072
MLDSA = ("ssh-mldsa-44", "ssh-mldsa-65", "ssh-mldsa-87")
SIZE_ONLY_PREFIX = catalog.SIZE_ONLY_PREFIX
CERT_ALG = "ssh-ed25519-cert-v01@openssh.com"  # what a size-only host key negotiates
ED25519_KEY_BLOB = 4 + len("ssh-ed25519") + 4 + 32  # 51: the bare ed25519 host key the server sends
ED25519_SIG_BLOB = 4 + len("ssh-ed25519") + 4 + 64  # 83: its signature, sent with a certificate too
USER = "pqbench"  # the login name clients use (sshd maps it to uid 0 in its own namespace; Go takes any)


is_size_only = catalog.is_size_only


def size_only_alg(name: str, field: str = "hostkey") -> catalog.Algorithm:
    """The catalog signature a size-only host key stands for (BadInput naming field if unknown)."""
    return catalog.find(name.removeprefix(SIZE_ONLY_PREFIX), "sig", field)


def size_only_bytes(name: str, field: str = "hostkey") -> int:
    """What a size-only host key puts on the wire for host key + signature: its algorithm's pk + sig."""
    alg = size_only_alg(name, field)
    return alg.pk + alg.sig


def split_hostkey(name: str) -> tuple[str, int]:
    """(SSH signature algorithm, RSA bits or 0) of a host key name."""
    if is_size_only(name):
        return CERT_ALG, 0
    for base in ("rsa-sha2-256", "rsa-sha2-512"):
        if name == base:
            return base, DEFAULT_RSA_BITS
        if name.startswith(base + "-") and name[len(base) + 1:].isdigit():
            return base, int(name[len(base) + 1:])
    return name, 0


def check_kex(name: str, field: str = "kex") -> str:
    """The SSH key exchange by its catalog spelling (BadInput with the closest SSH names)."""
    return catalog.spelled(name, "kem", field, protocol=PROTOCOL)


def check_hostkey(name: str, field: str = "hostkey") -> str:
    """The host key by its catalog spelling; a size-only name's algorithm must be a catalog signature."""
    if is_size_only(name):
        size_only_alg(name, field)  # the closest signature names when it is not one
    return catalog.spelled(name, "sig", field, protocol=PROTOCOL)


def go_keygen() -> Path:
    return paths.BUILD / "sshgo" / "bin" / "sshserver"


def openssh_root() -> Path:
    return paths.BUILD / "openssh" / "root"


def openssh_env() -> dict:
    """The environment OpenSSH's unpacked binaries run in (libwrap from build/openssh/lib)."""
    return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LD_LIBRARY_PATH": str(paths.BUILD / "openssh" / "lib")}


@dataclasses.dataclass
class SshKeys:
    directory: Path
    sig: str  # the host key name
    server_name: str = "pqbench"

    @property
    def leaf_key(self) -> Path:
        return self.directory / "host_key"

    @property
    def size_only(self) -> bool:
        return is_size_only(self.sig)

    @property
    def host_pub(self) -> Path:
        return self.directory / "host_key.pub"

    @property
    def host_cert(self) -> Path:
        """The padded host certificate of a size-only key set."""
        return self.directory / "host_key-cert.pub"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca_key"

    @property
    def root_cert(self) -> Path:
        """What a client trusts: the host public key, or for a size-only key set the CA's."""
        return self.directory / ("ca_key.pub" if self.size_only else "host_key.pub")

    chain_file = root_cert

    @property
    def user_key(self) -> Path:
        return self.directory / "user_key"

    @property
    def user_pub(self) -> Path:
        return self.directory / "user_key.pub"

    @property
    def sent_bytes(self) -> int:
        """Bytes of the host public key blob, or certificate blob (what the server sends besides its signature)."""
        import base64
        sent = self.host_cert if self.size_only else self.host_pub
        return len(base64.b64decode(sent.read_text().split()[1]))

    def to_json(self) -> dict:
        d = {"directory": str(self.directory), "sig": self.sig, "protocol": PROTOCOL,
             "host_key_pub": str(self.root_cert), "sent_bytes": self.sent_bytes}
        if self.size_only:
            d["size_only"] = {"stands_for": size_only_alg(self.sig).name, "bytes": size_only_bytes(self.sig)}
        return d


def keys_of(cafile: str | Path) -> SshKeys:
    """The key set whose host public key a client job names as its trust anchor (ClientJob.cafile)."""
    d = Path(cafile).parent
    return SshKeys(d, (d / "hostkey_alg").read_text().strip())


def _keygen(kind: str, out: Path) -> None:
    out.unlink(missing_ok=True)
    out.with_name(out.name + ".pub").unlink(missing_ok=True)
    g = go_keygen()
    if g.exists():
        argv = [str(g), "keygen", "--type", kind, "--out", str(out)]
        env = {}
    else:
        alg, bits = split_hostkey(kind)
        if kind in MLDSA:
            raise MissingCapability(f"{kind} keys need the Go keygen ({g} is missing)", "run `make`")
        t = {"ssh-ed25519": ["-t", "ed25519"], "ecdsa-sha2-nistp256": ["-t", "ecdsa", "-b", "256"],
             "ecdsa-sha2-nistp384": ["-t", "ecdsa", "-b", "384"], "ecdsa-sha2-nistp521": ["-t", "ecdsa", "-b", "521"]}
        kt = t.get(alg) or ["-t", "rsa", "-b", str(bits)]
        keygen = openssh_root() / "usr" / "bin" / "ssh-keygen"
        if not keygen.exists():
            raise MissingCapability("neither the Go keygen nor OpenSSH's ssh-keygen is built", "run `make`")
        argv = [str(keygen), "-q", "-N", "", "-C", "pqbench", *kt, "-f", str(out)]
        env = openssh_env()
    old = os.umask(0o077)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    finally:
        os.umask(old)
    if proc.returncode != 0:
        raise MeasurementFailed(f"cannot make a {kind} key: {proc.stderr.strip()[-300:]}")
    out.chmod(0o600)


def _size_only_cert(keys: SshKeys) -> None:
    """The CA of the key set and the host certificate padded to the size-only bytes (the Go keygen)."""
    g = go_keygen()
    if not g.exists():
        raise MissingCapability(f"size-only host keys need the Go keygen ({g} is missing)", "run `make`")
    alg, total = size_only_alg(keys.sig), size_only_bytes(keys.sig)
    _keygen("ssh-ed25519", keys.ca_key)
    # the label: short, since every byte of it is a byte the smallest size-only key cannot go below
    key_id = f"pqbench size-only host key for {alg.name} (pk {alg.pk} + sig {alg.sig} bytes), ed25519 padded: "
    keys.host_cert.unlink(missing_ok=True)
    proc = subprocess.run([str(g), "hostcert", "--ca", str(keys.ca_key), "--key", str(keys.host_pub),
                           "--principal", keys.server_name, "--total-bytes", str(total), "--key-id", key_id,
                           "--out", str(keys.host_cert)], capture_output=True, text=True, env={}, timeout=120)
    if proc.returncode == 2:  # too few bytes for an ed25519 certificate
        raise BadInput("hostkey", f"{keys.sig} stands for {total} bytes, fewer than an ed25519 host certificate "
                                  f"needs: {proc.stderr.strip()[-300:]}")
    if proc.returncode != 0:
        raise MeasurementFailed(f"cannot make the {keys.sig} host certificate: {proc.stderr.strip()[-300:]}")


def make_keys(hostkey: str, directory: Path) -> SshKeys:
    """A host key of the named kind and an ed25519 user key in directory (private keys 0600); for a
    size-only name an ed25519 host key, the run's CA and the padded host certificate."""
    check_hostkey(hostkey)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    keys = SshKeys(directory, hostkey)
    _keygen("ssh-ed25519" if keys.size_only else hostkey, keys.leaf_key)
    if keys.size_only:
        _size_only_cert(keys)
    _keygen("ssh-ed25519", keys.user_key)
    (directory / "hostkey_alg").write_text(hostkey + "\n")
    return keys
