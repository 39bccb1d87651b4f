"""The `dtlsboring` stack: BoringSSL's DTLS 1.3 (RFC 9147) as server and client, the same binary as the boringssl
stack (pqboring, native/tlsboring) with `--transport udp`; protocol dtls.

What it can do is the binary's capabilities (its groups and signature schemes are BoringSSL's, as over TCP:
X25519MLKEM768 and MLKEM1024, ML-DSA chains signed and verified). Its server is stateful: its HelloRetryRequest asks
only for another key share, never carries a cookie, so a cell with the cookie exchange (the dtls protocol's default)
is skipped naming the feature; its client sends what a server asks for. Its sample is the dtlsgo client's (phases
from its own datagrams, what crossed, its wire milestone), with BoringSSL's retransmission timer expiries.
"""

from __future__ import annotations

import functools

from pqbench.endpoints import boringssl, tlsrs
from pqbench.endpoints.base import Capabilities, ClientJob, Place, Site, Stack, probe

__all__ = ["STACK"]

BINARY = boringssl.BINARY
MODES = ("handshake",)
PROBE_TIMEOUT_MS = 1000  # one try; a port not bound yet just times out and is tried again


@functools.lru_cache(maxsize=None)
def capabilities() -> Capabilities:
    tls = boringssl.capabilities()
    return Capabilities(stack="dtlsboring", protocol="dtls", transports=("udp",), modes=MODES,
                        transport_modes={"udp": MODES}, versions=tls.versions, unsupported=boringssl.unsupported,
                        features=("dtls_mtu", "offer"), first_timer_ms=400.0,  # BoringSSL's (RFC 9147's suggestion)
                        feature_notes={"cookie": "BoringSSL's DTLS 1.3 server is stateful: its HelloRetryRequest "
                                                 "never carries a cookie (cookie = false)"})


class DtlsBoringClient(boringssl.BoringClient):
    def argv(self, job: ClientJob, count: int, worker: int, claims) -> list[str]:
        job.handshakes_over_udp("dtlsboring", "dtls", offers=True)
        return super().argv(job, count, worker, claims)  # --transport udp among pqtimer's options


class DtlsBoringServer(boringssl.BoringServer):
    def extra_server_args(self, serving) -> list[str]:
        mtus = [a for s in serving.sites if s.options.get("dtls_mtu")
                for a in ("--site-mtu", f"{s.port},{s.options['dtls_mtu']}")]
        return [*super().extra_server_args(serving), "--transport", "udp", *mtus]

    def ready(self, client_place: Place) -> None:
        """Every site completes one DTLS handshake with this stack's client, tried until the server has bound its
        UDP ports."""
        from pqbench.endpoints.ready import Starting
        sites = {s.port: s for s in self.serving.sites}
        up = Starting(f"{self.binary_name} DTLS server", self.proc, [self.log], self.stop)
        up.wait(sites, lambda port: self._probe(client_place, sites[port]), "complete a DTLS handshake on UDP")

    def _probe(self, place: Place, site: Site) -> str | None:
        job = ClientJob(host=self.place.addr, port=site.port, groups=self.serving.groups[:1],
                        cafile=str(site.chain.root_cert), servername=site.chain.server_name,
                        timeout_ms=PROBE_TIMEOUT_MS, transport="udp")
        client = DtlsBoringClient()
        return probe(place, client.argv(job, 1, 0, None), env=client.env())


STACK = Stack(name="dtlsboring", protocol="dtls", server=DtlsBoringServer, client=DtlsBoringClient,
              capabilities=capabilities)
