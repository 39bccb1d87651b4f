"""`pqbench clean`: remove old run folders and dead runs' testbeds, listing what goes."""

from pqbench.cli import print_json
from pqbench.machine import clean


def register(sub):
    p = sub.add_parser("clean", help="remove the run folders under build/runs that no running pqbench uses, and the "
                                     "testbeds of pqbench processes that died; lists what it removes")
    p.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=handle)


def handle(args) -> int:
    out = clean.clean(dry_run=args.dry_run)
    if args.json:
        print_json(out)
        return 0
    verb = "would remove" if args.dry_run else "removed"
    for r in out["removed"]:
        print(f"{verb} {r['path']} ({r['bytes'] / 1e6:.1f} MB)")
    for k in out["kept"]:
        print(f"kept {k['path']}: {k['why']}")
    gone = out["testbeds"].get("testbeds") or []
    for name in gone:
        print(f"removed testbed {name} (its pqbench died)")
    print(f"{verb} {len(out['removed'])} run folder(s), {out['bytes'] / 1e6:.1f} MB"
          + (f", {len(gone)} testbed(s)" if gone else ""))
    return 0
