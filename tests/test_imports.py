"""The packages of src/esopt form layers: no package imports one that imports it back.

Every `import esopt.x...` / `from esopt.x... import` counts, also those inside functions
(a lazy import is still a dependency). Top-level modules (`esopt.chat`, `esopt.models`,
`esopt.cli`) are nodes of their own.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "esopt"


def _unit(module: str) -> str:
    """The package (or top-level module) a dotted esopt module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def package_graph(root: Path = SRC) -> dict[str, dict[str, set[str]]]:
    """unit -> {imported unit -> the modules (file:line) whose import makes the edge}."""
    graph: dict[str, dict[str, set[str]]] = {}
    for path in root.rglob("*.py"):
        rel = path.relative_to(root.parent).with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__")
        unit = _unit(module)
        graph.setdefault(unit, {})
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
                if node.module == "esopt":  # from esopt import x
                    names = [f"esopt.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                if name.startswith("esopt.") and _unit(name) != unit:
                    graph[unit].setdefault(_unit(name), set()).add(f"{module}:{node.lineno}")
    return graph


def find_cycle(graph: dict[str, dict[str, set[str]]]) -> list[str] | None:
    """One cycle of units (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(u: str) -> list[str] | None:
        state[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, {})):
            if state.get(v) == 1:
                return stack[stack.index(v):] + [v]
            if v not in state and (cycle := visit(v)):
                return cycle
        stack.pop()
        state[u] = 2
        return None

    for u in sorted(graph):
        if u not in state and (cycle := visit(u)):
            return cycle
    return None


def test_no_package_imports_a_package_that_imports_it_back():
    graph = package_graph()
    cycle = find_cycle(graph)
    if cycle:
        pairs = zip(cycle, cycle[1:], strict=False)
        edges = [f"{a} -> {b}: {sorted(graph[a][b])}" for a, b in pairs]
        raise AssertionError("import cycle between packages:\n" + "\n".join(edges))


def test_the_walker_finds_a_cycle_when_there_is_one(tmp_path):
    """The check itself can fail: two packages importing each other (one lazily)."""
    pkg = tmp_path / "esopt"
    for name, body in (("a/__init__.py", "from esopt.b import x\n"),
                       ("b/__init__.py", "def f():\n    import esopt.a.mod\n"),
                       ("a/mod.py", ""), ("c.py", "import esopt.a\n")):
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(body)
    cycle = find_cycle(package_graph(pkg))
    assert cycle is not None and set(cycle) == {"a", "b"}
