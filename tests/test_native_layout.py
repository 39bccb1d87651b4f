"""native/'s C programs read top-down too: no two units of a program (a .c file with its header) use each
other. A unit uses another when it includes that unit's header or names a function or variable only that
unit defines with external linkage (pqtimer's transports once called helpers back in pqtimer.c)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NATIVE = ROOT / "native"

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'", re.S)
# At the start of a line, not static: a function definition's name (its body follows) or a variable's.
_FUNC = re.compile(r"^(?!static\b|typedef\b|extern\b)[A-Za-z_][\w \t\*]*?\b(\w+)\s*\([^;{]*\)\s*\{", re.M)
_VAR = re.compile(r"^(?!static\b|typedef\b|extern\b|return\b)(?:const\s+)?(?:struct\s+|enum\s+)?\w+[\s\*]+(?:const\s+)?"
                  r"(\w+)\s*(?:\[[^\]]*\])*\s*=", re.M)
_INCLUDE = re.compile(r'^#include\s+"([\w/]+)\.h"', re.M)


def uses(folder: Path) -> dict[str, set[str]]:
    """Each .c file's stem in folder -> the stems of the other units it uses."""
    units = {p.stem: p.read_text() for p in sorted(folder.glob("*.c"))}
    code = {u: _COMMENT.sub(" ", text) for u, text in units.items()}
    owner: dict[str, set[str]] = {}
    for u, text in code.items():
        for name in {*_FUNC.findall(text), *_VAR.findall(text)}:
            owner.setdefault(name, set()).add(u)
    graph = {}
    for u, text in code.items():
        words = set(re.findall(r"\b\w+\b", text))
        named = {next(iter(us)) for n, us in owner.items() if len(us) == 1 and n in words}
        included = {h for h in _INCLUDE.findall(units[u]) if h in units}
        graph[u] = (named | included) - {u}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, done = [], set()

    def visit(v, path):
        for w in sorted(graph[v]):
            if w in path:
                found.append(path[path.index(w):] + [w])
            elif w not in done:
                visit(w, path + [w])
        done.add(v)

    for v in sorted(graph):
        if v not in done:
            visit(v, [v])
    return found


def folders() -> list[Path]:
    return sorted({p.parent for p in NATIVE.rglob("*.c") if "third_party" not in p.parts})


def test_no_c_unit_of_a_native_program_uses_one_that_uses_it():
    found = {str(f.relative_to(ROOT)): c for f in folders() if (c := circles(uses(f)))}
    assert found == {}


def test_pqtimers_transports_use_the_shared_helpers_not_pqtimer_c():
    graph = uses(NATIVE / "pqtimer")
    assert graph["pqtimer"] >= {"tcp", "quic", "sample"}
    assert "pqtimer" not in graph["tcp"] | graph["quic"] | graph["sample"]


def test_the_walk_finds_a_circle_when_there_is_one(tmp_path):
    (tmp_path / "main.h").write_text("int helper(void);\n")
    (tmp_path / "main.c").write_text('#include "path.h"\nint helper(void) {\n    return 1;\n}\n'
                                     "int main(void) { return run_path(); }\n")
    (tmp_path / "path.h").write_text("int run_path(void);\n")
    (tmp_path / "path.c").write_text('/* helper() in a comment is no use */\nint run_path(void)\n{\n'
                                     "    return helper();\n}\n")
    assert circles(uses(tmp_path)) == [["main", "path", "main"]]
    (tmp_path / "path.c").write_text("const int table[2] = {1, 2};\nint run_path(void) {\n    return 0;\n}\n")
    (tmp_path / "main.c").write_text("int main(void) { return run_path() + table[0]; }\n")
    assert uses(tmp_path) == {"main": {"path"}, "path": set()}
    assert circles(uses(tmp_path)) == []
