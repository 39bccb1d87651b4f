"""`pqbench serve`: pqbench's servers on this machine, for clients elsewhere (targets)."""

import signal
import sys
import time
from pathlib import Path

from pqbench import units
from pqbench.commands import axis_options
from pqbench.cli import print_json
from pqbench.errors import BadInput
from pqbench.endpoints.base import DEFAULT_WORKERS
from pqbench.measure import serve
from pqbench.measure.single import new_run_dir


def register(sub):
    p = sub.add_parser("serve", help="run pqbench's servers on an address of this machine (one port per certificate "
                                     "chain, every key exchange) and write a manifest for targets")
    p.add_argument("--address", required=True, help="the IPv4 address to listen on (only it)")
    p.add_argument("--any-address", action="store_true", help="allow a wildcard --address (0.0.0.0): every address")
    p.add_argument("--sig", default="ecdsap256,mldsa44", help="signature algorithms, one chain and port each "
                                                             "(comma-separated; default ecdsap256,mldsa44)")
    p.add_argument("--stack", default="nginx", choices=sorted(serve.SERVER_STACKS), help="the TLS server (default nginx)")
    p.add_argument("--port", default="4433", help="the first TLS port (default 4433; one per --sig, in order)")
    p.add_argument("--ssh-hostkey", default="", help="also serve SSH with these host keys (comma-separated, e.g. "
                                                     "ssh-ed25519,ssh-mldsa-44), one port each")
    p.add_argument("--ssh-stack", default="openssh", choices=serve.SSH_STACKS, help="the SSH server (default openssh)")
    p.add_argument("--ssh-port", default="2222", help="the first SSH port (default 2222)")
    p.add_argument("--workers", default=str(DEFAULT_WORKERS), help=f"server worker processes (default {DEFAULT_WORKERS})")
    p.add_argument("--dir", type=Path, help="where certificates, keys, logs and manifest.json go "
                                            "(default a new folder under build/runs)")
    p.add_argument("--duration", help="stop after this long (e.g. 10m; default: until Ctrl-C)")
    p.add_argument("--netns", help="serve inside this existing network namespace instead of the host's")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")
    axis_options.add(p, timing_client=False, protocol="tls", sites_only=True)
    p.set_defaults(func=handle)


def _names(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def plan_from_args(args) -> serve.ServePlan:
    from pqbench.endpoints import sshkeys
    from pqbench.algorithms import catalog
    sigs = [catalog.find(s, "sig", field="--sig", protocol="tls").name for s in _names(args.sig)]
    hostkeys = [sshkeys.check_hostkey(h, "--ssh-hostkey") for h in _names(args.ssh_hostkey)]
    if not sigs and not hostkeys:
        raise BadInput("--sig", "serve at least one chain (--sig) or one SSH host key (--ssh-hostkey)")
    return serve.ServePlan(
        address=serve.check_address(args.address, args.any_address), directory=args.dir or new_run_dir("serve"),
        sigs=sigs, stack=args.stack, first_port=units.integer("--port", args.port, minimum=1, maximum=65535 - len(sigs)),
        hostkeys=hostkeys, ssh_stack=args.ssh_stack,
        ssh_port=units.integer("--ssh-port", args.ssh_port, minimum=1, maximum=65535 - len(hostkeys)),
        workers=units.integer("--workers", args.workers, minimum=1, maximum=256), netns=args.netns,
        any_address=args.any_address, axes=_axes(args, sigs))


def _axes(args, sigs: list[str]) -> dict:
    """The axes given, checked as a cell of every --sig would check them (exit 2 naming the option)."""
    from pqbench import axis
    given = axis_options.values(args, timing_client=False, protocol="tls", sites_only=True)
    if given and not sigs:
        raise BadInput(axis.get(next(iter(given))).command_option, "applies to the TLS ports: serve a --sig too")
    for sig in sigs:
        values = {**{a.name: a.default for a in axis.registered()}, **given, "sig": sig, "protocol": "tls"}
        refused = axis.refusal(given, "tls", values)
        if refused:
            raise BadInput(refused[0].command_option, refused[1])
    return given


def stop_after_s(args) -> float | None:
    """--duration in seconds (10m, 1h30m, 90s ...), or None: until Ctrl-C."""
    return units.duration_ms("--duration", args.duration, allow_zero=False) / 1000 if args.duration else None


def handle(args) -> int:
    plan = plan_from_args(args)
    seconds = stop_after_s(args)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))  # stop as Ctrl-C does
    with serve.serving(plan) as manifest:
        if args.json:
            print_json(manifest)
        else:
            print(summary(manifest, plan.directory / "manifest.json"))
        sys.stdout.flush()
        try:
            if seconds:
                time.sleep(seconds)
            else:
                signal.pause()
        except KeyboardInterrupt:
            pass
    print("[serve] stopped; nothing left running", file=sys.stderr)
    return 0


def summary(m: dict, path: Path) -> str:
    lines = [f"serving on {m['address']} (manifest: {path})"]
    for s in m["tls"]:
        lines.append(f"  TLS {m['address']}:{s['port']}  {s['sig']:<12} chain {s['bytes_sent']} B, trust {s['ca']}, "
                     f"server name {s['server_name']}, {len(s['groups'])} key exchanges")
    for s in m["ssh"]:
        lines.append(f"  SSH {m['address']}:{s['port']}  {s['sig']:<12} {s['fingerprint']}, {len(s['kex'])} key exchanges")
    lines.append("Ctrl-C stops it and removes what it started.")
    return "\n".join(lines)
