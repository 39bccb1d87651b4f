#!/usr/bin/env python3
"""The liboqs algorithms pqbench's catalog names, for a build of liboqs with only those.

    liboqs_algorithms.py                 the catalog's liboqs names, one per line (keys the build cache)
    liboqs_algorithms.py LIBOQS_SOURCE   the same as liboqs's OQS_MINIMAL_BUILD list ("KEM_ml_kem_768;...")
    liboqs_algorithms.py --spec SPEC [LIBOQS_SOURCE]
                                         only those a spec's key exchanges and signatures need (the demo's
                                         liboqs: `make` builds that, the catalog's on first use of another)

liboqs's headers map each name to its switch (`#define OQS_KEM_alg_ml_kem_768 "ML-KEM-768"` is switch
KEM_ml_kem_768), so no table here repeats them. Building only these cuts liboqs's build by more than half
(Classic McEliece alone has ten variants, UOV twelve, CROSS eighteen); nothing in pqbench can use an
algorithm the catalog does not list. Runs on the system's Python (before the virtualenv exists).
"""

import re
import sys
import tomllib
from pathlib import Path

CATALOG = Path(__file__).resolve().parents[1] / "catalog" / "algorithms.toml"
HEADERS = {"KEM": "src/kem/kem.h", "SIG": "src/sig/sig.h"}


def catalog_names() -> list[str]:
    data = tomllib.loads(CATALOG.read_text())
    return sorted({e["liboqs"] for kind in ("kem", "sig") for e in data.get(kind, []) if e.get("liboqs")})


def spec_names(spec: Path) -> list[str]:
    """The liboqs algorithms behind a spec's kex and sig axes, hybrids through their post-quantum part (the
    catalog's own reading of names; it needs nothing beyond the standard library)."""
    sys.path.insert(0, str(CATALOG.parents[1] / "src"))
    from pqbench.algorithms import catalog
    axes = tomllib.loads(spec.read_text()).get("axes", {})
    found = (catalog.find(n, kind) for axis, kind in (("kex", "kem"), ("sig", "sig")) for n in axes.get(axis, []))
    return sorted({a.liboqs for a in found if a.liboqs})


def switches(source: Path) -> dict[str, str]:
    """liboqs name -> its OQS_MINIMAL_BUILD entry, from the source's own headers."""
    out = {}
    for kind, header in HEADERS.items():
        for switch, name in re.findall(rf'#define OQS_{kind}_alg_(\w+) "([^"]+)"', (source / header).read_text()):
            out[name] = f"{kind}_{switch}"
    return out


def main(argv: list[str]) -> int:
    if argv[:1] == ["--spec"]:
        names, argv = spec_names(Path(argv[1])), argv[2:]
    else:
        names = catalog_names()
    if not argv:
        print("\n".join(names))
        return 0
    known = switches(Path(argv[0]))
    missing = [n for n in names if n not in known]
    if missing:
        print(f"liboqs at {argv[0]} has no algorithm named {', '.join(missing)} (catalog/algorithms.toml "
              f"names them)", file=sys.stderr)
        return 1
    print(";".join(known[n] for n in names))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
