"""SSH names and keys shared by the SSH stacks (`openssh`, `gossh`): the key exchanges and host keys
pqbench knows by their SSH names, and the key set of one SSH "site" (the SSH analogue of a
certificate chain).

A key set is a directory:
    host_key, host_key.pub   the server's host key (private 0600; public in authorized_keys format)
    hostkey_alg              the host key name the client asks for (e.g. rsa-sha2-512-4096)
    user_key, user_key.pub   the client's key (ed25519), authorized on the server
It is made by the Go keygen (`sshserver keygen`, every host key including ML-DSA) or, without it, by
OpenSSH's ssh-keygen (no ML-DSA). `SshKeys` has the fields of `pqbench.certs.Chain` the rig and the
clients read (`root_cert` = the host public key a client trusts, `server_name`, `leaf_key`), so a
`Site` can carry it unchanged.

Host key names are SSH public key algorithm names; RSA names may end in the modulus size
(rsa-sha2-256-2048; no suffix: 3072 bits).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import subprocess
from pathlib import Path

from pqbench import paths
from pqbench.errors import BadInput, MeasurementFailed, MissingCapability

PROTOCOL = "ssh"
# The key exchanges of issue 18, in SSH's names.
KEX = ("mlkem768x25519-sha256", "sntrup761x25519-sha512", "curve25519-sha256", "ecdh-sha2-nistp256",
       "ecdh-sha2-nistp384", "ecdh-sha2-nistp521", "diffie-hellman-group14-sha256",
       "diffie-hellman-group16-sha512", "diffie-hellman-group18-sha512")
RSA_SIZES = (2048, 3072, 4096)
DEFAULT_RSA_BITS = 3072
HOSTKEYS = (("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521")
            + tuple(f"{a}{s}" for a in ("rsa-sha2-256", "rsa-sha2-512") for s in ("", *(f"-{b}" for b in RSA_SIZES)))
            + ("ssh-mldsa-44", "ssh-mldsa-65", "ssh-mldsa-87"))
MLDSA = ("ssh-mldsa-44", "ssh-mldsa-65", "ssh-mldsa-87")
USER = "pqbench"  # the login name clients use (sshd maps it to uid 0 in its own namespace; Go takes any)


def split_hostkey(name: str) -> tuple[str, int]:
    """(SSH signature algorithm, RSA bits or 0) of a host key name."""
    for base in ("rsa-sha2-256", "rsa-sha2-512"):
        if name == base:
            return base, DEFAULT_RSA_BITS
        if name.startswith(base + "-") and name[len(base) + 1:].isdigit():
            return base, int(name[len(base) + 1:])
    return name, 0


def check_kex(name: str, field: str = "kex") -> str:
    if name not in KEX:
        close = difflib.get_close_matches(name, KEX, n=3, cutoff=0.4)
        raise BadInput(field, f"{name!r} is not an SSH key exchange pqbench knows"
                              + (f"; closest: {', '.join(close)}" if close else f" (known: {', '.join(KEX)})"))
    return name


def check_hostkey(name: str, field: str = "hostkey") -> str:
    if name not in HOSTKEYS:
        close = difflib.get_close_matches(name, HOSTKEYS, n=3, cutoff=0.4)
        raise BadInput(field, f"{name!r} is not an SSH host key pqbench knows"
                              + (f"; closest: {', '.join(close)}" if close else f" (known: {', '.join(HOSTKEYS)})"))
    return name


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
    def root_cert(self) -> Path:
        return self.directory / "host_key.pub"

    chain_file = root_cert

    @property
    def user_key(self) -> Path:
        return self.directory / "user_key"

    @property
    def user_pub(self) -> Path:
        return self.directory / "user_key.pub"

    @property
    def sent_bytes(self) -> int:
        """Bytes of the host public key blob (what the server sends besides its signature)."""
        import base64
        return len(base64.b64decode(self.root_cert.read_text().split()[1]))

    def to_json(self) -> dict:
        return {"directory": str(self.directory), "sig": self.sig, "protocol": PROTOCOL,
                "host_key_pub": str(self.root_cert), "sent_bytes": self.sent_bytes}


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


def make_keys(hostkey: str, directory: Path) -> SshKeys:
    """A host key of the named kind and an ed25519 user key in directory (private keys 0600)."""
    check_hostkey(hostkey)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    keys = SshKeys(directory, hostkey)
    _keygen(hostkey, keys.leaf_key)
    _keygen("ssh-ed25519", keys.user_key)
    (directory / "hostkey_alg").write_text(hostkey + "\n")
    return keys
