"""The `pqbench` command: a thin layer over the library. Errors become exit codes here."""

import argparse
import atexit
import faulthandler
import importlib
import json
import os
import re
import signal
import sys
import threading

from pqbench import __version__
from pqbench.errors import EXIT_BAD_INPUT, PqbenchError

# One module per command group under pqbench.commands; each has register(subparsers).
COMMAND_MODULES = ["doctor", "algorithms", "certs", "crypto", "net", "handshake", "ssh", "serve", "scan", "scan_local", "load", "run", "worker", "merge",
                   "report", "export", "clean"]


# A value that starts like a negative number: "-5ms", "-1%", "-.5"
_NEGATIVE_VALUE = re.compile(r"-[0-9.]")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's usage errors are bad input too: exit 2
        self.print_usage(sys.stderr)
        print(f"pqbench: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT)

    def parse_known_args(self, args=None, namespace=None):
        # every (sub)command parser passes through here with its own options
        return super().parse_known_args(self._attach_negative_values(args), namespace)

    def _attach_negative_values(self, args) -> list[str]:
        """`--rtt -5ms` -> `--rtt=-5ms`. argparse takes "-5ms" for an option and stops with "expected
        one argument"; attached, the value reaches our validators, which say what the option allows."""
        args = list(sys.argv[1:] if args is None else args)
        out = []
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "--":
                return out + args[i:]
            action = self._option_string_actions.get(arg)
            if action is not None and action.nargs is None and i + 1 < len(args) \
                    and _NEGATIVE_VALUE.match(args[i + 1]) and args[i + 1] not in self._option_string_actions:
                out.append(f"{arg}={args[i + 1]}")
                i += 2
                continue
            out.append(arg)
            i += 1
        return out


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="pqbench", description="Measure what post-quantum and hybrid cryptography does to TLS 1.3 connection setup.")
    parser.add_argument("--version", action="version", version=f"pqbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"pqbench.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"pqbench.commands.{name}":
                continue  # command group not built yet
            raise
        module.register(sub)
    return parser


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)  # imports every command's module: a Ctrl-C may come meanwhile
    except KeyboardInterrupt:
        print("pqbench: interrupted", file=sys.stderr)
        return 130
    # `kill -USR1 <pid>` prints every thread's stack to stderr: where a run that seems stuck waits.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        return int(args.func(args) or 0)
    except PqbenchError as e:
        print(f"pqbench {args.command}: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print(f"pqbench {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`pqbench algorithms | head -1`): what it wanted it has; end quietly,
        # and keep Python from complaining when it flushes stdout at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def run(argv=None):
    """The command line's entry point: main(), then end() with its exit code (argparse's too)."""
    try:
        code = main(argv)
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
        code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    end(code)


def end(code: int):
    """Ends the process once pqbench's own work is done: its threads joined, the atexit handlers run, the output
    flushed, then os._exit. Python's own end would next finalize every object left, libraries' too, and one of
    those hung in its finalizer: an interrupted `run --cluster` driver stayed 10 s and more in the interpreter's
    garbage collection with no Python frame (the Dask client's and the store's objects go there)."""
    for t in threading.enumerate():
        if t is not threading.main_thread() and not t.daemon:
            t.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader gone (`| head`): what it wanted it has
            pass
    os._exit(code)
