"""The IKEv2 connections both ends load over vici, and their credentials.

The server proves itself with the site's chain (its AUTH payload signed with the leaf's key); initiators authenticate
with a pre-shared key (strongSwan's vici has no NULL authentication, RFC 7619): random, kept 0600 beside the chain's
root certificate, which is how the client finds it. What a handshake carries and verifies of public keys is the
server's chain and signature, as in the TLS cells. MOBIKE is off (no NAT: the ports stay as they began) and IKE SAs
are childless (RFC 6023): no IPsec SA is negotiated or installed.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from pqbench.endpoints.base import Site
from pqbench.endpoints.strongswan import proposals

CLIENT_ID = "client.pqbench.test"
CONN = "pqbench"


def psk_path(root_cert: str | Path) -> Path:
    return Path(root_cert).parent / "ike-initiator.psk"


def psk(root_cert: str | Path, create: bool = False) -> bytes:
    """The initiators' pre-shared key of a chain (made once, 0600, when create)."""
    path = psk_path(root_cert)
    if create and not path.exists():
        tmp = path.with_name(f"{path.name}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        try:
            os.link(tmp, path)  # the first of two servers made at once wins; the other reads its key
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    return path.read_bytes()


def shared(key: bytes) -> dict:
    return {"type": "IKE", "data": key, "owners": [CLIENT_ID]}


def server_conn(addr: str, site: Site, groups: list[str]) -> dict:
    certs = [site.chain.leaf_cert.read_bytes()]
    more = site.options.get("additional_ke")
    return {CONN: {"version": "2", "local_addrs": [addr], "proposals": [proposals.proposal(g, more) for g in groups],
                   "childless": "force", "mobike": "no", "fragmentation": "yes", "send_cert": "always",
                   "local": {"auth": "pubkey", "certs": certs, "id": site.chain.server_name},
                   "remote": {"auth": "psk", "id": CLIENT_ID}}}


def client_conn(addr: str, port: int, kex: str, servername: str, root: bytes, additional: str | None = None) -> dict:
    return {CONN: {"version": "2", "remote_addrs": [addr], "remote_port": port,
                   "proposals": [proposals.proposal(kex, additional)],
                   "childless": "force", "mobike": "no", "fragmentation": "yes", "send_certreq": "yes",
                   "local": {"auth": "psk", "id": CLIENT_ID},
                   "remote": {"auth": "pubkey", "id": servername, "cacerts": [root]}}}


def load_credentials(session, site: Site) -> None:
    """The leaf's key, the initiators' key and the intermediates (sent after the leaf when the initiator asks for
    the root)."""
    session.load_key({"type": "any", "data": site.chain.leaf_key.read_bytes()})
    session.load_shared(shared(psk(site.chain.root_cert, create=True)))
    text = site.chain.intermediates_file.read_text() if site.chain.intermediates_file.exists() else ""
    for block in text.split("-----END CERTIFICATE-----")[:-1]:
        pem = (block.strip() + "\n-----END CERTIFICATE-----\n").encode()
        session.load_cert({"type": "X509", "flag": "CA", "data": pem})
