"""The `strongswan` stack's server: a charon per site in the server namespace, its UDP port the site's, answering
IKEv2 initiators with the cell's key exchanges only and proving itself with the site's chain (its AUTH payload
signed with the leaf's key, the leaf and any intermediates sent as CERT payloads); initiators authenticate with a
pre-shared key (pqbench.endpoints.strongswan.conns). IKE SAs only (childless, RFC 6023): no IPsec SA is
installed."""

from __future__ import annotations

from pqbench.endpoints.base import Place, Serving, Site
from pqbench.endpoints.ready import Starting
from pqbench.endpoints.strongswan import build
from pqbench.endpoints.strongswan.charon import Charon
from pqbench.endpoints.strongswan.conns import CONN, load_credentials, server_conn


class StrongswanServer:
    def __init__(self):
        build.require()
        self.charons: dict[int, Charon] = {}
        self.serving: Serving | None = None
        self.addr = ""

    def start(self, place: Place, serving: Serving) -> None:
        self.serving, self.addr = serving, place.addr
        for site in serving.sites:
            timeout_ms = site.options.get("retransmit_timeout")
            c = self.charons[site.port] = Charon(serving.run_dir / f"charon-{site.port}", port=site.port,
                                                 fragment_size=site.options.get("fragment_size"),
                                                 retransmit_timeout_s=timeout_ms / 1000 if timeout_ms else None)
            c.start(place.popen)

    def configure(self, site: Site) -> None:
        with self.charons[site.port].session(timeout_s=1.0) as session:
            load_credentials(session, site)
            session.load_conn(server_conn(self.addr, site, self.serving.groups))

    def ready(self, client_place: Place) -> None:
        """Each site's charon takes its credentials and connection over vici, then completes one IKE handshake
        with the strongSwan client (a charon of its own in the client namespace). A handshake that the path held
        back (no answer: a middlebox that drops IP fragments, heavy loss) does not stop a server that holds its
        connection: the cell's samples will say what the path does."""
        for site in self.serving.sites:
            c = self.charons[site.port]
            up = Starting("charon", c.proc, [c.log_path, c.directory / "charon.out"], self.stop)
            up.wait([site.port], lambda _port, site=site: self._configured(site), "take its configuration on")
            up.serves([site], lambda s: self._serves(client_place, s), "an IKEv2 handshake")

    def _serves(self, client_place: Place, site: Site) -> str | None:
        from pqbench.endpoints.strongswan.ikeclient import probe
        why = probe(client_place, self.addr, site, self.serving.groups[0])
        if why and why.startswith("timeout:") and self._holds_connection(site):
            return None
        return why

    def _holds_connection(self, site: Site) -> bool:
        """Its charon runs and holds the site's connection (asked over vici)."""
        try:
            with self.charons[site.port].session(timeout_s=1.0) as session:
                return any(CONN in conn for conn in session.list_conns())
        except Exception:  # noqa: BLE001  (an ended charon, a closed socket: it does not)
            return False

    def _configured(self, site: Site) -> str | None:
        try:
            self.configure(site)
            return None
        except Exception as e:  # noqa: BLE001  (vici's errors and a socket not open yet: why, for the wait's message)
            return str(e)

    def stop(self) -> None:
        for c in self.charons.values():
            c.stop()
