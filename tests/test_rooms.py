"""The package's layering: each subpackage is entered only through its __init__, the data
models' rooms never reach into the database, and no imports go round in a circle.

The subpackages and rooms are read from the package itself (its folders and
:data:`tesseradb.database.KINDS`), so a new one is covered without being listed here.
Tests are white-box and exempt.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import tesseradb
from tesseradb.database import KINDS

PACKAGE = Path(tesseradb.__file__).parent
SUBPACKAGES = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
ROOMS = sorted({target.split(":")[0].split(".")[1] for target in KINDS.values()})


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(path: Path, at_run_time: bool) -> Iterator[str]:
    """The tesseradb modules ``path`` imports (``from x import y`` names module ``x.y`` when
    it is one); ``at_run_time`` leaves out imports under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    if at_run_time:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skipped.update(id(child) for child in ast.walk(node))
    me = _module_name(path)
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
                package = package[: len(package) - node.level + 1]
                base = ".".join([*package, *([node.module] if node.module else [])])
            names = [f"{base}.{alias.name}" for alias in node.names]
            modules = [n for n in names if n in MODULES]
            yield from modules
            if len(modules) < len(names):
                yield base


def test_no_module_reaches_into_another_subpackages_private_modules() -> None:
    wrong = []
    for name, path in MODULES.items():
        for module in _imports(path, at_run_time=False):
            parts = module.split(".")
            if (
                len(parts) >= 3
                and parts[0] == "tesseradb"
                and parts[1] in SUBPACKAGES
                and parts[2].startswith("_")
                and name.split(".")[1] != parts[1]
            ):
                wrong.append(f"{name} imports {module}")
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_no_room_imports_the_database() -> None:
    assert ROOMS, "no data model is registered"
    wrong = [
        f"{name} imports the database"
        for name, path in MODULES.items()
        if name.split(".")[1:2] and name.split(".")[1] in ROOMS
        for module in _imports(path, at_run_time=False)
        if module == "tesseradb.database"
    ]
    assert not wrong, "\n".join(wrong)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(edges.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def _graph(unit: int | None) -> dict[str, set[str]]:
    """Who imports whom at run time, by module (``unit=None``) or by the first ``unit``
    parts of the name (2: by subpackage or top-level module)."""

    def of(module: str) -> str:
        return module if unit is None else ".".join(module.split(".")[:unit])

    edges: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        for module in _imports(path, at_run_time=True):
            if module in MODULES and of(module) != of(name):
                edges.setdefault(of(name), set()).add(of(module))
    return edges


def test_no_import_circles_between_modules_or_between_subpackages() -> None:
    assert _cycles(_graph(None)) == []
    assert _cycles(_graph(2)) == []
