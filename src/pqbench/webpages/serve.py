"""A run's multi-origin pages, made as its server starts: for each site whose webpage is origins-N, N-1 more
addresses of the server namespace (Testbed.add_server_addresses), a leaf for each further origin's name issued by
the site chain's own CA (the one the browser trusts), the page's files under the server's www (its document
per port: it names the port), and the site's origins in Site.options["origins"] for its nginx (address, chain)
- origin 0 is the site itself; a size-only padded site chain pads every origin's leaf alike. Returns, per port, the names the client maps to addresses without DNS."""

from __future__ import annotations

from pqbench.algorithms.chains import DEFAULT_SERVER_NAME
from pqbench.webpages import content, pages
from pqbench.webpages.origins import leaf_for


def _origin_chain(site_chain, out, name: str):
    """A further origin's chain: a leaf for its name from the site chain's CA, padded to the site chain's bytes
    when that one is a size-only stand-in (every origin of the page then sends what the cell's chain stands for)."""
    stand_in = (site_chain.parts or {}).get("stand_in") or {}
    if (site_chain.parts or {}).get("size_only") and stand_in.get("bytes"):
        from pqbench.algorithms.chains import make_padded
        return make_padded(site_chain.sig, out, stand_in["bytes"], ca_sig=site_chain.ca_sig, server_name=name,
                           root_from=site_chain.directory)
    return leaf_for(site_chain, site_chain.sig, out, name)


def prepare(tb, serving) -> dict[int, dict[str, str]]:
    hosts: dict[int, dict[str, str]] = {}
    for site in serving.sites:
        name = (site.options or {}).get("webpage")
        if not name:
            continue
        if "origins" in site.options:  # made already (a server started again after a crash)
            hosts[site.port] = {pages.origin_name(k): addr for k, (addr, _) in enumerate(site.options["origins"], 1)}
            continue
        page = pages.page(name, site.port)
        addrs = tb.add_server_addresses(page.origins - 1)
        further = [(addr, _origin_chain(site.chain, serving.run_dir / "origins" / f"{site.port}-origin{k}",
                                        pages.origin_name(k)))
                   for k, addr in enumerate(addrs, start=1)]
        site.options = {**site.options, "origins": further}
        content.write(serving.run_dir / "www", page, site.port, origin0=site.chain.server_name or DEFAULT_SERVER_NAME)
        hosts[site.port] = {pages.origin_name(k): addr for k, (addr, _) in enumerate(further, start=1)}
    return hosts
