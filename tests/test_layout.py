"""The endpoint seam holds: outside pqbench/endpoints/, no module imports a stack's own code."""

import ast
import re
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


def _module_graph() -> dict[str, set[str]]:
    """pqbench's modules and the other pqbench modules each imports (lazy imports included: they tie
    the two files as much as a top-level one)."""
    names = {}
    for p in SRC.rglob("*.py"):
        rel = p.relative_to(SRC.parent).with_suffix("")
        names[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = p
    graph = {}
    for name, path in names.items():
        targets = {n for n in imports(path) if n in names and n != name and not n.startswith(name + ".")}
        # a package handing on its children's names is not a circle between files
        graph[name] = {t for t in targets if not name.startswith(t + ".")}
    return graph


def test_no_import_circle_in_the_package():
    graph, circles = _module_graph(), []

    def reach(start):
        seen, todo = set(), [(start, [start])]
        while todo:
            node, path = todo.pop()
            for nxt in graph[node]:
                if nxt == start:
                    circles.append(path + [start])
                elif nxt not in seen:
                    seen.add(nxt)
                    todo.append((nxt, path + [nxt]))
    for name in graph:
        reach(name)
    assert circles == []


def test_the_walk_finds_a_circle_when_there_is_one(tmp_path, monkeypatch):
    """The walk above can fail: two modules that import each other are a circle."""
    pkg = tmp_path / "pqbench"
    pkg.mkdir()
    (pkg / "a.py").write_text("from pqbench import b\n")
    (pkg / "b.py").write_text("from pqbench import a\n")
    monkeypatch.setattr(__import__(__name__), "SRC", pkg)
    graph = _module_graph()
    assert graph["pqbench.a"] == {"pqbench.b"} and graph["pqbench.b"] == {"pqbench.a"}


def _room(module: str) -> str:
    """The room a module stands in: its folder under pqbench/, or itself at the top level."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_the_rooms_read_top_down():
    """No import runs back up a floor: between the package's rooms (its folders and top-level modules) the
    imports form no circle, so the rooms stand in floors with every import pointing down. Each import that
    closes a circle is named."""
    graph, arrows = _module_graph(), {}
    for name, targets in graph.items():
        for t in targets:
            if _room(t) != _room(name):
                arrows.setdefault((_room(name), _room(t)), []).append(f"{name} -> {t}")
    out: dict[str, set] = {}
    for a, b in arrows:
        out.setdefault(a, set()).add(b)

    def reaches(start, goal):
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(out.get(node, ()))
        return False
    back = sorted(i for (a, b), imports in arrows.items() if reaches(b, a) for i in imports)
    assert back == [], "imports in a circle of rooms:\n" + "\n".join(back)


# transport: protocols and transports, defined once (read by the catalog, spec, store, measure, analysis, report);
# axis: the axis record and its registry (filled by the features, read by spec, cells, store, endpoints, report);
# interrupts: signals taken at a safe point while threads work (the schedule, the scan)
FOUNDATIONS = {"__init__", "__main__", "axis", "cli", "errors", "interrupts", "paths", "sample", "stats", "transport",
               "units"}


def test_the_top_level_holds_only_foundations():
    assert {p.stem for p in SRC.glob("*.py")} == FOUNDATIONS


def test_a_path_is_asked_whether_it_is_emulated_not_compared_by_name():
    """The real path is a declared Path: code asks path.emulated instead of comparing its backend's name."""
    compares = re.compile(r"""backend_name\s*[!=]=\s*["']real["']""")
    assert [str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if compares.search(p.read_text())] == []
