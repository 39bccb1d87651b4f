"""The endpoint seam holds: outside pqbench/endpoints/, no module imports a stack's own code."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "pqbench"
STACK_SPECIFIC = ("pqbench.endpoints.openssl", "nginx", "pqtimer")


def imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_no_module_outside_endpoints_imports_a_stack():
    offenders = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC)
        if rel.parts[0] == "endpoints":
            continue
        bad = sorted(n for n in imports(path) if any(s in n for s in STACK_SPECIFIC))
        if bad:
            offenders[str(rel)] = bad
    assert offenders == {}


def test_the_openssl_stack_lives_in_its_own_folder():
    found = {p.relative_to(SRC).as_posix() for p in SRC.rglob("*.py") if p.stem in ("nginx", "pqtimer")}
    assert found == {"endpoints/openssl/nginx.py", "endpoints/openssl/pqtimer.py"}
