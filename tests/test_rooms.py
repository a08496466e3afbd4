"""Rooms (the data models' subpackages) are entered only through their __init__.

Ruff's banned-api rule (pyproject.toml) keeps the rest of the package out of
the rooms' private modules; a room's own directory is exempt from it, so
this test keeps each room out of the others' private modules, and keeps
every room away from database.py (what a room needs of the database is
handed to it through its Kind's context).
"""

from __future__ import annotations

import ast
from pathlib import Path

import tesseradb

PACKAGE = Path(tesseradb.__file__).parent
ROOMS = ("arrays", "records", "documents", "attached", "assoc")


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return found


def test_no_room_reaches_into_another_or_into_the_database() -> None:
    wrong = []
    for room in ROOMS:
        for path in sorted((PACKAGE / room).glob("*.py")):
            for module in _imports(path):
                parts = module.split(".")
                if module == "tesseradb.database":
                    wrong.append(f"{room}/{path.name} imports the database")
                elif (
                    len(parts) >= 3
                    and parts[0] == "tesseradb"
                    and parts[1] in ROOMS
                    and parts[1] != room
                    and parts[2].startswith("_")
                ):
                    wrong.append(f"{room}/{path.name} imports {module}")
    assert not wrong, "\n".join(wrong)
