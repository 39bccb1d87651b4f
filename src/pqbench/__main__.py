import sys

try:
    from pqbench.cli import run
except KeyboardInterrupt:  # Ctrl-C while Python imports the CLI: end as an interrupted command does, quietly
    print("pqbench: interrupted", file=sys.stderr)
    raise SystemExit(130) from None

run()
