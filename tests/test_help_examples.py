"""Every example a user is shown works as shown: the command lines of each (sub)command's --help (its
description and epilog, `pqbench ...` in backticks, and the "e.g." values of its options) and of README.md's
code blocks ("Using it" and every other section's). Each is parsed by the real parser, in this process
(nothing is measured, nothing started), and where pqbench checks a command's values before it acts,
checked as the command checks them. An example that fails is named with where it came from and the error.

README synopses are expanded: `[...]` is optional (taken and left out), `a|b` and `[x | y]` are
alternatives (each is tried), `...` is dropped, a bracketed phrase (`[link options]`) is prose, shell
variables become their assigned value or 1, and for the checks placeholders become values (HOST:PORT an
address, ROOT.pem a file).
"""

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from pqbench.cli import build_parser
from pqbench.commands import crypto, handshake, load, serve, ssh
from pqbench.commands.net import parse_link_options
from pqbench.errors import PqbenchError

ROOT = Path(__file__).resolve().parents[1]
PARSER = build_parser()

# What a command needs before an option's example can be shown on it (its required arguments).
BASE = {
    "handshake": {"kex": ["--kex", "X25519MLKEM768"], "sig": ["--sig", "mldsa44"]},
    "ssh": {"kex": ["--kex", "mlkem768x25519-sha256"], "hostkey": ["--hostkey", "ssh-ed25519"]},
    "load": {"kex": ["--kex", "X25519"], "sig": ["--sig", "ecdsap256"]},
    "serve": {"address": ["--address", "127.0.0.1"]},
    "certs": {"sig": ["--sig", "mldsa44"], "out": ["--out", "DIR"]},
    "run": {"spec": ["SPEC.toml"]},
    "worker": {"scheduler": ["tcp://127.0.0.1:8786"]},
    "merge": {"parts": ["PART.duckdb"]},
    "net down": {"name": ["pqb-example"]},
}


def _serve_checks(args):
    serve.stop_after_s(args)
    args.dir = args.dir or Path("/nonexistent/serve-example")  # else the plan makes a run folder
    serve.plan_from_args(args)


# The checks a command makes before it acts, for the commands that have them apart from acting.
CHECKS = {
    "handshake": handshake.config_from_args,
    "ssh": ssh.config_from_args,
    "serve": _serve_checks,
    "crypto": lambda args: crypto.microbench.check_seconds(args.seconds),
    "load": lambda args: (parse_link_options(args), load.plan_from_args(args)),
    "net up": parse_link_options,
    "net calibrate": parse_link_options,
}


# --- the parser's own examples ----------------------------------------------------------------------

def commands(parser=PARSER, path=()):
    """(path, parser) of every command and subcommand."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


# an example value: no spaces; commas only inside it (ssh-ed25519,ssh-mldsa-44); several are listed
# with ", " or " or " ("e.g. reno, cubic, bbr", "e.g. 1% or 0.01")
_VALUE = r"[^\s,;)`]+(?:,[^\s,;)`]+)*"
_EG = re.compile(r"e\.g\.\s+(" + _VALUE + r"(?:(?:,\s+|\s+or\s+)" + _VALUE + r")*)")


def help_text(parser, action) -> str:
    """The option's help as --help prints it (%(default)s expanded, %% as %)."""
    return parser._get_formatter()._expand_help(action) if action.help else ""


PATHS = {path for path, _ in commands()}


def _parses(argv) -> bool:
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            PARSER.parse_args(argv)
        return True
    except SystemExit as e:
        return e.code == 0


def base(path, leave_out=None) -> list[str]:
    return [t for dest, tokens in BASE.get(" ".join(path), {}).items() if dest != leave_out for t in tokens]


def help_examples():
    """(where, argv) for every example in the --help texts."""
    out = []
    for path, parser in commands():
        where = " ".join(("pqbench", *path, "--help"))
        texts = [parser.description or "", parser.epilog or ""]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):  # the subcommands' lines in this --help
                texts += [help_text(parser, a) for a in action._choices_actions]
            text = help_text(parser, action)
            texts.append(text)
            for m in _EG.finditer(text):
                for value in re.split(r",\s+|\s+or\s+", m.group(1)):
                    value = value.rstrip(".")
                    if action.option_strings:
                        argv = [*path, *base(path, action.dest), action.option_strings[-1], value]
                    else:
                        argv = [*path, *base(path, action.dest), value]
                    out.append((f"{where}: {action.option_strings[-1] if action.option_strings else action.dest} "
                                f"e.g. {value}", argv))
        for text in texts:
            for m in re.finditer(r"`pqbench ([^`]+)`", text):
                argv = shlex.split(m.group(1))
                if tuple(argv) in PATHS and not _parses(argv):
                    argv = ["--help-of", *argv]  # a command named in a sentence: it must exist, that is all
                out.append((f"{where}: `pqbench {m.group(1)}`", argv))
            for m in re.finditer(r"^\s*\$?\s*pqbench\s+(.+)$", text, re.M):  # an epilog's example lines
                out.append((f"{where}: pqbench {m.group(1)}", shlex.split(m.group(1))))
    return out


# --- README's -----------------------------------------------------------------------------------------

def code_blocks() -> list[tuple[int, list[str]]]:
    """README's code blocks, each with the number of its first line."""
    lines = (ROOT / "README.md").read_text().splitlines()
    blocks, block = [], None
    for k in range(len(lines)):
        if lines[k].startswith("```"):
            if block is None:
                block = (k + 2, [])
            else:
                blocks.append(block)
                block = None
        elif block is not None:
            block[1].append(lines[k])
    return blocks


def logical_lines(first: int, lines: list[str]):
    """(line number, text): a command continued by a backslash, inside double quotes, or on lines
    indented under it that start with an option ([--page ...]) is one line."""
    out = []
    for k, line in enumerate(lines, start=first):
        if not line.lstrip().startswith("#"):
            line = re.split(r"\s#", line)[0]  # a comment
        line = re.sub(r"(\S)\s{3,}\S.*$", r"\1", line)  # a synopsis's description column
        if out and (out[-1][1].endswith("\\") or out[-1][1].count('"') % 2
                    or (re.match(r"\s+[\[-]", line) and "pqbench" in out[-1][1])):
            out[-1] = (out[-1][0], out[-1][1].removesuffix("\\") + " " + line.strip())
        else:
            out.append((k, line))
    return out


def shell_values(text: str, assigned: dict) -> str:
    text = re.sub(r"\$\(\([^)]*\)\)", "1", text)
    return re.sub(r"\$\{?(\w+)\}?", lambda m: assigned.get(m.group(1), "1"), text)


def synopsis_variants(text: str) -> list[list[str]]:
    """The command lines a synopsis stands for: all optional parts with the k-th alternative of each
    choice, for every k, and none of the optional parts."""
    tokens = re.findall(r"\[|\]|[^\s\[\]]+", text)

    def parse_seq(i):
        seq = []
        while i < len(tokens) and tokens[i] not in ("]", "|"):
            if tokens[i] == "[":
                alts, i = [], i + 1
                while True:
                    s, i = parse_seq(i)
                    alts.append(s)
                    if tokens[i] == "]":
                        break
                    i += 1  # "|"
                seq.append(("group", alts))
                i += 1
            else:
                seq.append(("word", tokens[i].split("|") if "|" in tokens[i] and tokens[i] != "|" else [tokens[i]]))
                i += 1
        return seq, i

    try:
        seq, i = parse_seq(0)
    except IndexError:  # a "[" not closed
        i = -1
    if i != len(tokens):  # a "]" not opened, or "|" outside brackets: say so rather than check half of it
        raise ValueError(f"cannot read the synopsis {text!r}: use [a | b] or a|b for alternatives")

    def prose(alts):
        words = [w for alt in alts for kind, v in alt if kind == "word" for w in v if w not in ("...", "…")]
        return len(words) > 1 and not any(w.startswith("-") for w in words)

    def width(seq):
        n = 1
        for kind, v in seq:
            n = max(n, len(v), *(width(alt) for alt in v)) if kind == "group" else max(n, len(v))
        return n

    def expand(seq, k, optional):
        out = []
        for kind, v in seq:
            if kind == "word":
                if v[0] not in ("...", "…"):
                    out.append(v[k % len(v)])
            elif optional and not prose(v):
                out += expand(v[k % len(v)], k, optional)
        return out

    return [expand(seq, k, True) for k in range(width(seq))] + [expand(seq, 0, False)]


def readme_examples():
    out = []
    for first, lines in code_blocks():
        assigned = {}
        for number, line in logical_lines(first, lines):
            m = re.fullmatch(r'\s*(\w+)="([^"]*)"\s*', line)
            if m:
                assigned[m.group(1)] = m.group(2)
                continue
            m = re.search(r'(?:^|[\s/"])pqbench\s+(.*)', line)
            if not m:
                continue
            command = m.group(1)
            if command.count('"') % 2:  # the end of a quoted shell command (sh -c "... pqbench worker ...")
                command = command[:command.rfind('"')]
            command = re.split(r"&&|\s&(?:\s|$)|;", command)[0].strip()
            if not command:
                continue
            for argv in synopsis_variants(shell_values(command, assigned)):
                where = f"README.md:{number}: pqbench {' '.join(argv)}"
                if where not in {w for w, _ in out}:
                    out.append((where, shlex.split(" ".join(argv))))
    return out


# --- the test -----------------------------------------------------------------------------------------

def filled(argv: list[str], files: Path) -> list[str]:
    """Placeholders as values the checks take: HOST:PORT an address, ROOT.pem (a NAME.ext) a file."""
    out = []
    for word in argv:
        word = re.sub(r"\bHOST\b", "192.0.2.10", re.sub(r"\bPORT\b", "4433", word))
        if re.fullmatch(r"[A-Z][A-Z_]*\.[a-z]+", word):
            (files / word).touch()
            word = str(files / word)
        out.append(word)
    return out


def check(argv: list[str], files: Path | None = None) -> None:
    """Parses argv with pqbench's parser and runs the command's own checks; raises AssertionError saying
    what failed. files: where placeholder files go (none: placeholders stay as written)."""
    if argv[:1] == ["--help-of"]:
        argv = [*argv[1:], "--help"]  # a command named in a sentence (`pqbench merge` joins the parts)
    if files is not None:
        argv = filled(argv, files)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args = PARSER.parse_args(argv)
    except SystemExit as e:
        if e.code == 0:  # --help, --version
            return
        raise AssertionError(err.getvalue().strip().splitlines()[-1]) from None
    path = " ".join(argv[:2]) if argv[0] == "net" else argv[0]
    if path in CHECKS:
        try:
            CHECKS[path](args)
        except PqbenchError as e:
            raise AssertionError(f"pqbench {path}: {e}") from None


EXAMPLES = help_examples() + readme_examples()


def test_the_examples_were_found():
    # what the extraction must see, or the test below checks nothing
    found = {where for where, _ in EXAMPLES}
    assert any("serve --help: --duration e.g. 10m" in w for w in found), sorted(found)
    assert any(w.startswith("README.md:") and "pqbench handshake" in w for w in found)
    assert any("`pqbench worker SCHEDULER`" in w for w in found)
    assert sum(w.startswith("README.md:") for w in found) >= 20


@pytest.mark.parametrize("where,argv", EXAMPLES, ids=[w for w, _ in EXAMPLES])
def test_example_parses(where, argv, tmp_path):
    check(argv, tmp_path)


@pytest.mark.parametrize("argv,named", [
    (["serve", "--address", "127.0.0.1", "--duration", "10x"], "--duration"),  # a value the command refuses
    (["net", "up", "--rtt", "1q"], "--rtt"),
    (["handshake", "--kex", "X25519", "--sig", "ecdsap256", "--tiemout", "1s"], "--tiemout"),  # no such option
    (["net", "down", "--rtt", "31.1ms"], "--rtt"),
    (["--help-of", "nosuchcommand"], "nosuchcommand"),
])
def test_a_wrong_example_fails_naming_what(argv, named):
    with pytest.raises(AssertionError) as e:
        check(argv)
    assert named in str(e.value), str(e.value)


@pytest.mark.parametrize("text", ["net down NAME | list", "run [--resume", "run --resume]"])
def test_a_synopsis_that_cannot_be_read_is_an_error(text):
    with pytest.raises(ValueError, match="cannot read the synopsis"):
        synopsis_variants(text)


def test_synopses_expand_to_every_alternative():
    assert synopsis_variants("algorithms [--kind kem|sig] [--json]") == [
        ["algorithms", "--kind", "kem", "--json"], ["algorithms", "--kind", "sig", "--json"], ["algorithms"]]
    assert synopsis_variants("run X [--resume [RUN]] [--page 1k | --resume] [link options] ...") == [
        ["run", "X", "--resume", "RUN", "--page", "1k"], ["run", "X", "--resume", "RUN", "--resume"], ["run", "X"]]
    assert synopsis_variants("scan HOST:PORT [ssh://HOST:PORT ...]") == [["scan", "HOST:PORT", "ssh://HOST:PORT"],
                                                                       ["scan", "HOST:PORT"]]
