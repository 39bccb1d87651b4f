"""What the browser client stacks (chromium, firefox) share: a trusted CA in an NSS database, the sample
indices shared among workers, the client namespace's own record of which local port a connection used, and
a browser's per-connection timings turned into a pqbench sample and compared with the wire."""

from pqbench.algorithms import catalog
from pqbench.endpoints.browsers import nssdb
from pqbench.errors import MissingCapability


def unsupported_for(stack: str, label: str, offers, untrusted=nssdb.refuses):
    """A browser client's capability check: a client only; offers() -> the groups its ClientHello offers and the
    server signatures it accepts, by the catalog's names (or a string: why neither can be known). A signature
    it accepts still needs our root trusted (untrusted(sig): why it cannot be, or None); a size-only chain stands
    in for any."""
    def unsupported(kex: str, sig: str, role: str) -> str | None:
        if role == "server":
            return f"{stack} is a browser: a client only (its cells take another stack's server, e.g. --server openssl)"
        offered = offers()
        if isinstance(offered, str):
            return offered
        groups, signatures = offered
        if catalog.find(kex, "kem").name not in groups:
            return f"{label} offers only {', '.join(groups)} in its ClientHello, not {kex}"
        if catalog.is_size_only(sig):
            return None
        name = catalog.find(sig, "sig").name
        if name not in signatures:
            return (f"{label}'s ClientHello accepts only {', '.join(signatures)} server signatures, not {sig} (a "
                    "size-only chain stands in for its size)")
        why = untrusted(name)
        if why:
            return (f"{label} accepts {name} signatures, but its trust store here cannot hold a root that signs with "
                    f"{name} ({why}); a size-only chain stands in for its size")
        return None
    return unsupported


def offered(found) -> tuple[tuple[str, ...], tuple[str, ...]] | str:
    """What a browser's ClientHello (hello.of_browser's answer) offers by the catalog's names, or why it is not known."""
    return found if isinstance(found, str) else offered_names(found)


def offered_names(hello) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A ClientHello's (pqbench.endpoints.browsers.hello.Hello) groups and signature schemes by the catalog's
    names, in its order (a signature scheme names every catalog key it verifies: RSA-PSS each RSA size)."""
    def names(kind: str, codes: tuple[int, ...]) -> tuple[str, ...]:
        algs = [a for a in catalog.algorithms(kind) if a.tls and a.codepoint is not None and a.family != "synthetic"]
        return tuple(a.name for code in codes for a in algs if a.codepoint == code)
    return names("kem", hello.groups), names("sig", hello.sigalgs)


class NoServer:
    """A browser's server role: it serves nothing."""

    def start(self, place, serving) -> None:
        raise MissingCapability("a browser serves nothing", "serve its cells with --server openssl")

    def ready(self, client_place) -> None: ...

    def stop(self) -> None: ...
