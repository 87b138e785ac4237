"""The modules of ``mlcal/`` import each other without cycles (issue 27, item 3).

The graph is built from the source with ``ast``, without importing anything. An edge A -> B means
that module A imports module B *at module level* (including inside ``if``/``try`` blocks at the top
of the module, but not inside functions or classes' methods, nor under ``if TYPE_CHECKING:``).
Module-level imports are the ones that define import order: a cycle among them makes the result
depend on which module a user imports first (half-initialised modules, ``ImportError`` on names
that exist). Function-level imports run when the function is called, after every module has
loaded, so they are the accepted way for an optional integration or a lazy dependency to reach
back; they are not counted.

``from mlcal.pkg import name`` counts as an edge to ``mlcal.pkg.name`` when that is a module, and
to ``mlcal.pkg`` otherwise; importing ``mlcal.pkg.mod`` also runs ``mlcal/pkg/__init__.py``, but
a package's ``__init__`` importing its own submodules is how packages expose their names, so the
implicit parent edge is not added (it would make every package a cycle with its members).
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mlcal"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_level_imports(tree: ast.Module):
    """Import statements executed when the module loads (not in functions, not type-only)."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node):
                stack.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            stack.extend(node.body + node.orelse + node.finalbody)
            for handler in node.handlers:
                stack.extend(handler.body)
        elif isinstance(node, (ast.With, ast.ClassDef)):
            stack.extend(node.body)


def _resolve(name: str, is_package: bool, node: ast.ImportFrom) -> str:
    base = name.split(".") if is_package else name.split(".")[:-1]
    if node.level > 1:
        base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        is_package = path.name == "__init__.py"
        for node in _module_level_imports(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                target = _resolve(name, is_package, node) if node.level else node.module or ""
                targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target
                           for a in node.names]
            for target in targets:
                while target and target not in modules:   # ``import mlcal.x.y`` of a name
                    target = target.rpartition(".")[0]
                if target in modules and target != name and not name.startswith(target + "."):
                    graph[name].add(target)
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return components


def test_the_checker_sees_known_edges_and_cycles():
    # guards the scanner: a known module-level import is an edge, and a planted cycle is found
    graph = import_graph()
    assert "mlcal.maps" in graph["mlcal.calibrators.platt"]
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_mlcal_has_no_import_cycles():
    cycles = find_cycles(import_graph())
    assert not cycles, "module-level import cycles in mlcal/: " + "; ".join(
        " <-> ".join(c) for c in cycles)
