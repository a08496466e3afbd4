"""Documentation is tested: every CLI command and public name appears in docs/."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import tesseradb
import tesseradb.sql
from tesseradb.cli import app
from tesseradb.database import Database
from tesseradb.sql import Result

ROOT = Path(__file__).resolve().parents[1]
DOCS = "\n".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))


def public_methods(cls: type) -> list[str]:
    return [n for n, _ in inspect.getmembers(cls) if not n.startswith("_")]


@pytest.mark.parametrize(
    "command", sorted(c.name or c.callback.__name__ for c in app.registered_commands)
)
def test_every_cli_command_is_documented(command: str) -> None:
    assert f"tessera {command}" in DOCS


# Plumbing exported for the package's own use, not user API.
INTERNAL = {"__version__", "errors", "SQLEngine", "RelationScan", "ExplainedRelation"}
# The namespace protocol the SQL engine asks the database, not user API.
NAMESPACE_PROTOCOL = {
    "format_version",
    "catalog",
    "kind_of",
    "known_names",
    "sync_tables",
    "columns_of",
}


@pytest.mark.parametrize(
    "name", sorted((set(tesseradb.__all__) | set(tesseradb.sql.__all__)) - INTERNAL)
)
def test_every_public_name_is_documented(name: str) -> None:
    assert re.search(rf"\b{re.escape(name)}\b", DOCS), f"{name} is not mentioned in docs/"


@pytest.mark.parametrize(
    "method",
    [m for m in public_methods(Database) if m not in NAMESPACE_PROTOCOL]
    + [f"Result.{m}" for m in public_methods(Result)],
)
def test_every_public_method_is_documented(method: str) -> None:
    name = method.split(".")[-1]
    assert re.search(rf"[.`]{re.escape(name)}\b", DOCS), f"{method} is not mentioned in docs/"


def test_every_error_is_documented() -> None:
    for name in tesseradb.errors.__all__:
        assert name in DOCS, name


def test_readme_has_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme
