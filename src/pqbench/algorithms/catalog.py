"""The algorithm catalog: catalog/algorithms.toml, with hybrids expanded and availability computed.

The TOML file is the single source of truth. Hybrids are composed here from their components
(see the file's header for the two encodings), so their sizes can never disagree with the parts.
"""

import dataclasses
import difflib
import functools
import tomllib
from pathlib import Path

from pqbench import paths
from pqbench import protocol as proto
from pqbench.algorithms import liboqs, openssl_build
from pqbench.errors import BadInput

KINDS = ("kem", "sig")
SIZE_ONLY_PREFIX = "sizeonly-"  # an SSH host key that only has an algorithm's sizes (see the TOML header)
OQS_LENGTH_PREFIX = 4  # OQS hybrids carry a 4-byte length of the classical share


@dataclasses.dataclass(frozen=True)
class Algorithm:
    name: str
    kind: str  # "kem" or "sig"
    family: str
    level: int
    source: str  # "openssl", "liboqs" (through pqprov), "synthetic" (pqprov), or a protocol it alone has ("ssh")
    status: str
    pk: int
    ct: int | None = None  # KEM: server key share
    ss: int | None = None  # KEM: shared secret
    sig: int | None = None  # signature (maximum when variable)
    codepoint: int | None = None
    codepoint_source: str = ""
    aliases: tuple[str, ...] = ()
    liboqs: str | None = None
    tls: bool = True
    components: tuple[str, ...] = ()
    encoding: str | None = None
    keytype: str | None = None
    keyopt: tuple[str, ...] = ()
    sigalg: str | None = None
    oid: str | None = None
    tls_via: str | None = None  # "pqprov": OpenSSL's implementation, TLS signature scheme from pqprov
    timings_ms: tuple[tuple[str, float], ...] = ()  # synthetic algorithms' configured costs
    ssh: tuple[str, ...] = ()  # SSH's names for it (key exchange methods, host key algorithms)

    @property
    def hybrid(self) -> bool:
        return bool(self.components)

    @property
    def only_in(self) -> str | None:
        """The protocol it exists in alone (its source names one: SSH's finite-field groups), or None."""
        return self.source if self.source in proto.names() else None

    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    def ssh_names(self) -> tuple[str, ...]:
        """Its SSH names; a signature SSH has no name for gets its size-only host key's name."""
        if self.ssh or self.kind == "kem":
            return self.ssh
        return (SIZE_ONLY_PREFIX + self.name,)

    def names_in(self, protocol: str | None) -> tuple[str, ...]:
        """What it is called in a protocol ("tls", "ssh"; None: either)."""
        if protocol is None:
            return tuple(dict.fromkeys(n for p in proto.registered() for n in getattr(self, p.catalog_names)()))
        return getattr(self, proto.get(protocol).catalog_names)()

    def to_json(self) -> dict:
        d = {k: v for k, v in dataclasses.asdict(self).items() if v not in (None, (), "")}
        d["hybrid"] = self.hybrid
        if self.codepoint is not None:
            d["codepoint"] = f"0x{self.codepoint:04x}"
        if self.timings_ms:
            d["timings_ms"] = dict(self.timings_ms)
        return d


_TIMING_KEYS = ("keygen_ms", "encaps_ms", "decaps_ms", "sign_ms", "verify_ms")
_SIMPLE_KEYS = {f.name for f in dataclasses.fields(Algorithm)} - {"kind", "timings_ms"}


def _algorithm(kind: str, entry: dict, where: str) -> Algorithm:
    unknown = set(entry) - _SIMPLE_KEYS - set(_TIMING_KEYS) - {"hybrids"}
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
    fields = {k: v for k, v in entry.items() if k in _SIMPLE_KEYS}
    for key in ("aliases", "components", "keyopt", "ssh"):
        if key in fields:
            fields[key] = tuple(fields[key])
    timings = tuple((k, float(entry[k])) for k in _TIMING_KEYS if k in entry)
    return Algorithm(kind=kind, timings_ms=timings, **fields)


def _compose(name: str, parts: list[Algorithm], encoding: str) -> dict:
    """Sizes of a hybrid KEM from its components."""
    if encoding == "concat":
        overhead = 0
    elif encoding == "oqs":
        overhead = OQS_LENGTH_PREFIX
    else:
        raise ValueError(f"{name}: unknown hybrid encoding {encoding!r}")
    return {"pk": overhead + sum(p.pk for p in parts),
            "ct": overhead + sum(p.ct for p in parts),
            "ss": sum(p.ss for p in parts)}


def read(path: Path = paths.CATALOG_FILE) -> tuple[Algorithm, ...]:
    data = tomllib.loads(Path(path).read_text())
    classical = data.get("classical", {})
    by_name: dict[str, Algorithm] = {}
    pending_hybrids = []
    order: list[str] = []
    for kind in KINDS:
        for i, entry in enumerate(data.get(kind, [])):
            where = f"{path}: [[{kind}]] #{i + 1} ({entry.get('name')})"
            entry = dict(entry)
            hybrids = entry.pop("hybrids", {})
            if "components" in entry:
                pending_hybrids.append((entry, where))
                order.append(entry["name"])
                continue
            alg = _algorithm(kind, entry, where)
            by_name[alg.name] = alg
            order.append(alg.name)
            for prefix, codepoint in hybrids.items():
                if prefix not in classical:
                    raise ValueError(f"{where}: hybrid prefix {prefix!r} not in [classical]")
                pending_hybrids.append(({
                    "name": f"{prefix}_{alg.name.lower()}", "family": alg.family,
                    "level": alg.level, "components": [classical[prefix], alg.name],
                    "encoding": "oqs", "codepoint": codepoint, "source": "liboqs",
                    "liboqs": alg.liboqs,
                    "status": f"Open Quantum Safe hybrid of {classical[prefix]} and {alg.name}",
                }, where))
                order.append(pending_hybrids[-1][0]["name"])
    for entry, where in pending_hybrids:
        parts = [by_name[c] for c in entry["components"]]
        alg = _algorithm("kem", {**entry, **_compose(entry["name"], parts, entry["encoding"])}, where)
        by_name[alg.name] = alg
    return tuple(by_name[n] for n in order)


@functools.lru_cache(maxsize=None)
def catalog() -> tuple[Algorithm, ...]:
    return read()


def algorithms(kind: str | None = None) -> list[Algorithm]:
    return [a for a in catalog() if kind is None or a.kind == kind]


def find(name: str, kind: str | None = None, field: str = "algorithm", protocol: str | None = None) -> Algorithm:
    """Look an algorithm up by name or alias (case-insensitive), as the protocol calls it ("tls", "ssh";
    None: either); bad names list the closest names of that protocol."""
    candidates = algorithms(kind)
    wanted = name.lower()
    for alg in candidates:
        if wanted in (n.lower() for n in alg.names_in(protocol)):
            return alg
    by_lower = {n.lower(): n for a in candidates for n in a.names_in(protocol)}
    close = [by_lower[n] for n in difflib.get_close_matches(wanted, by_lower, n=5, cutoff=0.3)]
    hint = f"closest: {', '.join(close)}" if close else "see `pqbench algorithms`"
    p = proto.get(protocol)
    what = {"kem": "key exchange", "sig": p.sig_word}.get(kind, "algorithm")
    raise BadInput(field, f"unknown {p.qualify(what) if protocol else what} {name!r} ({hint})")


def spelled(name: str, kind: str, field: str = "algorithm", protocol: str | None = None) -> str:
    """The catalog's spelling of a name the protocol knows (BadInput with the closest names otherwise)."""
    alg = find(name, kind, field=field, protocol=protocol)
    return next(n for n in alg.names_in(protocol) if n.lower() == name.lower())


def checked(name: str, kind: str, protocol: str, field: str = "algorithm") -> str:
    """What a cell of the protocol holds for an algorithm named as the protocol names it: the catalog's name
    where the protocol's names are spellings of one (TLS's), else the protocol's own name as the catalog spells
    it (SSH's methods). BadInput with the closest names of the protocol."""
    if proto.get(protocol).catalog_names == "names":
        return find(name, kind, field=field, protocol=protocol).name
    return spelled(name, kind, field=field, protocol=protocol)


def name_in(name: str, kind: str, protocol: str, field: str = "algorithm") -> str:
    """The name a protocol gives the algorithm called name (in either protocol): the TLS name, or the SSH
    name as written when it is one, else the algorithm's first SSH name (a size-only host key for a
    signature SSH has no name for). Raises BadInput when the protocol has no name for it."""
    alg = find(name, kind, field=field)
    p = proto.get(protocol)
    if p.catalog_names == "names":
        return alg.name
    own = alg.names_in(protocol)
    for n in own:
        if n.lower() == name.lower():
            return n
    if not own:
        raise BadInput(field, f"{alg.name} has no {p.label} name ({p.label} key exchanges: "
                              f"{', '.join(names_of('kem', protocol))})")
    return own[0]


@functools.lru_cache(maxsize=None)
def reported(name: str, kind: str, protocol: str) -> str:
    """The catalog's spelling of a group ("kem") or signature ("sig") a stack reported in a protocol's sample: a
    group by its catalog name where the protocol's names are spellings of one (TLS: pqtimer prints "x25519",
    Chromium "X25519"), a signature scheme as the catalog writes its sigalg, an SSH method as the catalog writes
    it; a name the catalog does not know stays as sent."""
    spellings = proto.get(protocol).catalog_names == "names"
    if kind == "sig" and spellings:
        return next((a.sigalg for a in algorithms("sig") if a.sigalg and a.sigalg.lower() == name.lower()), name)
    try:
        return find(name, kind, protocol=protocol).name if spellings else spelled(name, kind, protocol=protocol)
    except BadInput:
        return name


def respelled(record: dict, protocol: str) -> dict:
    """A sample or load step with its group and signature as the catalog spells them (reported), whatever the
    client printed; the client's own spelling, where it differs, stays beside it (group_as_sent, sigalg_as_sent)."""
    for field, kind in (("group", "kem"), ("sigalg", "sig")):
        sent = record.get(field)
        if isinstance(sent, str) and (named := reported(sent, kind, protocol)) != sent:
            record[field] = named
            record.setdefault(f"{field}_as_sent", sent)  # a client that respelled it already kept its own
    return record


def names_of(kind: str, protocol: str) -> list[str]:
    """Every name a protocol has for the catalog's algorithms of a kind, catalog order (size-only host keys
    last): one per algorithm where its names are spellings of one (the catalog's name and aliases), each
    where they are methods of their own (SSH's)."""
    spellings = proto.get(protocol).catalog_names == "names"
    names = [n for a in algorithms(kind) for n in (a.names_in(protocol)[:1] if spellings else a.names_in(protocol))]
    return sorted(names, key=is_size_only)


def ssh_names(kind: str) -> list[str]:
    """Every SSH name of a kind, catalog order (size-only host keys last)."""
    return names_of(kind, "ssh")


def is_size_only(name: str) -> bool:
    return name.lower().startswith(SIZE_ONLY_PREFIX)


def certificate_signer(field: str, value, default: str) -> str | None:
    """An axis's value naming a signature that makes real certificates (a chain level, the chain a cell is sized
    as): its catalog name, or None for the axis's default word."""
    if value == default:
        return None
    if not isinstance(value, str):
        raise BadInput(field, f"{value!r} is not a signature name (allowed: {default} or a signature of the catalog)")
    alg = find(value, "sig", field=field)
    if alg.only_in or is_size_only(alg.name):
        raise BadInput(field, f"{alg.name} makes no certificate here (allowed: {default} or a signature of "
                              "`pqbench algorithms --kind sig` that OpenSSL signs certificates with)")
    return alg.name


@dataclasses.dataclass(frozen=True)
class Availability:
    available: bool  # usable here: key exchange / certificates (and crypto benchmarks)
    tls: bool  # usable in a TLS 1.3 handshake here
    reason: str = ""


def _needs_provider(alg: Algorithm) -> str:
    if alg.source == "openssl":
        return "not offered by this OpenSSL build"
    if alg.liboqs and liboqs.lacks([alg.liboqs]):
        return ("liboqs here has the demo's algorithms only: pqbench builds the catalog's the first time a run or "
                "command names one (about 3 min on 2 cores, once; ahead: make stacks)")
    if not openssl_build.pqprov_path().exists():
        return "needs pqprov, pqbench's OpenSSL provider (not built yet)"
    return "pqprov is loaded but does not offer it"


def availability(alg: Algorithm) -> Availability:
    """Computed from the real build by asking our OpenSSL what it offers — never hard-coded."""
    if alg.only_in:
        return Availability(False, False, f"{proto.get(alg.only_in).label} only")
    if alg.kind == "kem":
        groups = {g.lower() for g in openssl_build.tls_groups()}
        in_tls = any(n.lower() in groups for n in alg.names())
        if in_tls:
            return Availability(True, True)
        kems = openssl_build.kem_algorithms()
        if any(n.lower() in kems for n in alg.names()):
            return Availability(True, False, "" if not alg.tls else "KEM works but no TLS group")
        return Availability(False, False, _needs_provider(alg))
    if (alg.keytype or alg.name).lower() not in openssl_build.key_managers():
        return Availability(False, False, _needs_provider(alg))
    sigalgs = {s.lower() for s in openssl_build.tls_sigalgs()}
    if alg.tls and (alg.sigalg or alg.name).lower() in sigalgs:
        return Availability(True, True)
    return Availability(True, False, "certificates only: no TLS 1.3 signature scheme in this OpenSSL")
