"""What the browser client stacks (chromium, firefox) share: a trusted CA in an NSS database, the sample
indices shared among workers, the client namespace's own record of which local port a connection used, and
a browser's per-connection timings turned into a pqbench sample and compared with the wire."""

from pqbench.algorithms import catalog
from pqbench.errors import MissingCapability


def unsupported_for(stack: str, label: str, groups: tuple, signatures: tuple):
    """A browser client's capability check: a client only, the groups its ClientHello offers, the classical
    server signatures its TLS library verifies (a size-only chain stands in for a post-quantum one)."""
    def unsupported(kex: str, sig: str, role: str) -> str | None:
        if role == "server":
            return f"{stack} is a browser: a client only (its cells take another stack's server, e.g. --server openssl)"
        if catalog.find(kex, "kem").name not in groups:
            return f"{label} offers only {', '.join(groups)} in its ClientHello, not {kex}"
        if not catalog.is_size_only(sig) and catalog.find(sig, "sig").name not in signatures:
            return (f"{label} verifies only {', '.join(signatures)} server signatures in TLS 1.3, not {sig} "
                    "(a browser has no post-quantum signature; a size-only chain stands in for its size)")
        return None
    return unsupported


class NoServer:
    """A browser's server role: it serves nothing."""

    def start(self, place, serving) -> None:
        raise MissingCapability("a browser serves nothing", "serve its cells with --server openssl")

    def ready(self, client_place) -> None: ...

    def stop(self) -> None: ...
