"""The endpoint seam holds: outside pqbench/endpoints/, no module imports a stack's own code."""

import ast
import re
from pathlib import Path

from pqbench import protocol as proto
from pqbench.experiment import axes  # noqa: F401  (registers every protocol)
from pqbench.transport import TRANSPORTS

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


# protocol: the application protocols' records; transport: transports, defined once (read by the catalog, spec, store, measure, analysis, report);
# axis: the axis record and its registry (filled by the features, read by spec, cells, store, endpoints, report);
# interrupts: signals taken at a safe point while threads work (the schedule, the scan)
FOUNDATIONS = {"__init__", "__main__", "axis", "cli", "errors", "interrupts", "paths", "protocol", "sample", "stats",
               "transport", "units"}


def test_the_top_level_holds_only_foundations():
    assert {p.stem for p in SRC.glob("*.py")} == FOUNDATIONS


def test_a_path_is_asked_whether_it_is_emulated_not_compared_by_name():
    """The real path is a declared Path: code asks path.emulated instead of comparing its backend's name."""
    compares = re.compile(r"""backend_name\s*[!=]=\s*["']real["']""")
    assert [str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if compares.search(p.read_text())] == []


# A capability's differences live in its record (issues 36 and 46): code asks the Transport (pqbench.transport) or
# the Protocol (pqbench.protocol) what differs, a field saying why, instead of comparing a name. A name may still
# be a value (a CLI default, a registry key, a stored value); a comparison with one is what this looks for.
TRANSPORT_NAMES = set(TRANSPORTS)
PROTOCOL_NAMES = set(proto.names())  # every registered protocol's (the registry line fills it: experiment.axes)
RECORDS = {"transport.py": "the Transport record (pqbench.transport)", "protocol.py": "the Protocol record (pqbench.protocol)"}


def _names_in(node: ast.AST, names: set[str]) -> set[str]:
    if isinstance(node, ast.Constant) and node.value in names:
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_names_in(e, names) for e in node.elts)) if node.elts else set()
    return set()


def name_comparisons(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of each comparison with one of names: ==, !=, in, is (against the name or a tuple of
    names), and a match case on one."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
        elif isinstance(node, ast.MatchValue):
            sides = [node.value]
        else:
            continue
        found += [(node.lineno, n) for side in sides for n in sorted(_names_in(side, names))]
    return sorted(set(found))


def transport_name_comparisons(source: str) -> list[tuple[int, str]]:
    return name_comparisons(source, TRANSPORT_NAMES)


def test_no_transport_or_protocol_is_compared_by_name_outside_its_record():
    offenders = []
    for p in sorted(SRC.rglob("*.py")):
        rel = p.relative_to(SRC).as_posix()
        names = (TRANSPORT_NAMES if rel != "transport.py" else set()) | \
            (PROTOCOL_NAMES if rel != "protocol.py" else set())
        offenders += [f"src/pqbench/{rel}:{line} compares {name!r}: ask "
                      f"{RECORDS['transport.py' if name in TRANSPORT_NAMES else 'protocol.py']}"
                      for line, name in name_comparisons(p.read_text(), names)]
    assert offenders == []


def test_the_name_search_finds_comparisons_and_passes_values():
    compares = '''
if t == "quic": pass
if "tcp" != t: pass
if "quic" in transports: pass
if t not in ("tcp", "udp"): pass
ok = (flow.get("proto")
      == "udp")
match t:
    case "quic": pass
'''
    assert [n for _, n in transport_name_comparisons(compares)] == ["quic", "tcp", "quic", "tcp", "udp", "udp", "quic"]
    protocols = '''
if row["protocol"] == "ssh": pass
if {"tls", "ssh"} <= seen: pass
x = a if p != "tls" else b
'''
    assert [n for _, n in name_comparisons(protocols, PROTOCOL_NAMES)] == ["ssh", "ssh", "tls", "tls"]
    values = '''
def f(transport="tcp"): return {"quic": 1}.get(transport, "tcp")
argv = ["--transport", "quic"] + [f"{'tls' if x else 'tcp'}://"]
ok = s.get("quic") == other and x in TRANSPORTS and m["ssh"] == y
'''
    assert name_comparisons(values, TRANSPORT_NAMES | PROTOCOL_NAMES) == []
