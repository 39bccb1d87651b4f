"""The origins of a multi-origin page, served by nginx on our OpenSSL in the server namespace: origin K is
originK.pqbench.test at its own address of the server namespace (Testbed.add_server_addresses), with its own
certificate (a leaf for its name, all issued by one CA, the one the browser trusts), in a server block of its
own that listens on its address only. Every origin serves the same root (pqbench.webpages.content)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from pqbench.algorithms import catalog, certs
from pqbench.endpoints.base import Site
from pqbench.endpoints.openssl import probe
from pqbench.endpoints.openssl.nginx import NginxServer
from pqbench.endpoints.openssl.nginx_config import NginxConfig
from pqbench.endpoints.ready import Starting, tcp_probe
from pqbench.webpages import content
from pqbench.webpages.pages import WebPage, origin_name


def _leaf(root: certs.Chain, sig: str, out: Path, name: str) -> certs.Chain:
    """A leaf for name issued by root's CA (its key beside its certificate), as certs.make_chain issues one."""
    out.mkdir(parents=True, exist_ok=True)
    ext = out / "extensions.cnf"
    ext.write_text(certs.EXTENSIONS.format(server_name=name))
    certs._new_key(catalog.find(sig, "sig"), out / "leaf.key")
    csr = certs._openssl(["req", "-new", "-key", str(out / "leaf.key"), "-subj", f"/O=pqbench/CN={name}",
                          "-config", str(ext)], f"make {name}'s request")
    ca = root.directory
    certs._openssl(["x509", "-req", "-CA", str(ca / "root.crt"), "-CAkey", str(ca / "root.key"),
                    "-set_serial", str(int.from_bytes(os.urandom(8), "big")), "-days", str(certs.VALID_DAYS),
                    "-extfile", str(ext), "-extensions", "leaf", "-out", str(out / "leaf.crt")],
                   f"sign {name}'s certificate", input=csr)
    (out / "intermediates.pem").write_text("")
    (out / "chain.pem").write_text((out / "leaf.crt").read_text())
    sizes = {"root": root.der_sizes["root"], "leaf": certs.der_size(out / "leaf.crt")}
    chain = certs.Chain(out, root.sig, root.ca_sig, 0, name, root.root_cert, out / "chain.pem", out / "leaf.crt",
                        out / "intermediates.pem", out / "leaf.key", sizes)
    (out / "chain.json").write_text(json.dumps(chain.to_json(), indent=2) + "\n")
    return chain


def make_chains(sig: str, out: Path, count: int) -> list[certs.Chain]:
    """One chain per origin name, all under origin 0's root."""
    first = certs.make_chain(sig, out / "origin0", server_name=origin_name(0))
    return [first, *(_leaf(first, sig, out / f"origin{k}", origin_name(k)) for k in range(1, count))]


@dataclasses.dataclass
class Origins:
    """A page's origins: the address and chain of each, the port they all listen on."""
    page: WebPage
    addrs: list[str]
    chains: list[certs.Chain]
    port: int
    http2: bool = True

    def sites(self) -> list[Site]:
        return [Site(self.port, chain, host=addr, options={"http": "2"} if self.http2 else {})
                for addr, chain in zip(self.addrs, self.chains)]

    def hosts(self) -> dict[str, str]:
        """name -> address, for the browser's own name mapping (no DNS)."""
        return {origin_name(k): addr for k, addr in enumerate(self.addrs)}


class OriginsConfig(NginxConfig):
    """nginx's config with each site listening on its own address (Site.host), and the types a browser checks."""
    HTTP_EXTRA = (*NginxConfig.HTTP_EXTRA,
                  "types { text/html html; text/css css; application/javascript js; image/png png; }")

    def listen(self, site: Site) -> list[str]:
        h2 = " http2" if (site.options or {}).get("http") == "2" else ""
        return [f"listen {site.host}:{site.port} ssl{h2} reuseport;"]


class OriginsServer(NginxServer):
    """nginx serving a page's origins: started in the server namespace, ready once each origin completes a TLS
    handshake at its own address under its own name."""

    def __init__(self, origins: Origins, run_dir: Path, groups: list[str], workers: int = 2):
        config = OriginsConfig(run_dir, origins.addrs[0], origins.sites(), groups, workers, pages={})
        super().__init__(config)
        self.origins = origins
        content.write(run_dir / "www", origins.page, origins.port)

    def ready(self, client_place) -> None:
        c = self.config
        up = Starting("nginx (origins)", self.proc, [c.run_dir / "nginx-error.log"], self.stop)
        for site in c.sites:
            up.wait([site.port], lambda port, addr=site.host: None if tcp_probe(client_place, addr, port)
                    else "no TCP connection", f"listen on {site.host}")
            up.serves([site], lambda s: probe.tls_handshake(client_place, s.host, s, c.groups[0]), "a TLS handshake")
