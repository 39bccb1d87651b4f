import sys

try:
    from pqbench.cli import main
except KeyboardInterrupt:  # Ctrl-C while Python imports the CLI: end as an interrupted command does, quietly
    print("pqbench: interrupted", file=sys.stderr)
    raise SystemExit(130) from None

raise SystemExit(main())
