"""Attached files as a data model of the database (the :class:`~tesseradb.kinds.Kind` contract).

An attachment's catalog spec describes its files (``attach_spec``) and its
indexes; its only storage is the sidecar bitmap indexes under
``attached/<name>/``. Each table of the files is the relation ``<name>.<table>``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tesseradb.attached._attachment import Attachment
from tesseradb.kinds import KeptInStorage, ObjectInfo

if TYPE_CHECKING:
    from tesseradb.catalog import CatalogObject
    from tesseradb.checks import Finding, Verified
    from tesseradb.progress import Cancel, ProgressLike
    from tesseradb.sql.relation import Relation

__all__ = ["AttachedKind", "default_name"]


def default_name(path: str) -> str:
    """The name an attachment gets when none is given: the file's stem, as an identifier."""
    import re
    from pathlib import Path

    stem = Path(path).name.split(".")[0]
    name = re.sub(r"[^A-Za-z0-9_]", "_", stem) or "attached"
    return f"f_{name}" if name[0].isdigit() else name


class AttachedKind(KeptInStorage):
    name = "attached"
    label = "attachment"
    location_key = "index_location"  # (its sidecar indexes: the files stay where they are)
    directory = "attached"

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        if context.memory_limit is not None:  # (the block cache is the process's)
            from tesseradb._limits import limit_bytes
            from tesseradb.attached._bytes import bound_block_cache

            bound_block_cache(limit_bytes(context.memory_limit))

    # --- what db.attach and db.create_index do (their docstrings say how to call them) ---
    def attach(
        self,
        path: Any,
        name: str | None,
        threads: int | None,
        batch_bytes: int | None,
        stale_index: str,
        progress: ProgressLike,
        cancel: Cancel | None,
    ) -> Attachment:
        from tesseradb.attached._attachment import attach_spec
        from tesseradb.catalog import validate_name
        from tesseradb.errors import InvalidArgumentError, require_str

        self.check_writable("attach files")
        if stale_index not in ("rebuild", "bypass"):
            raise InvalidArgumentError(
                f"stale_index must be 'rebuild' or 'bypass', not {stale_index!r}"
            )
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidArgumentError(
                f"db.attach: path must be a file name or glob (a str or path), not {type(path).__name__}"
            )
        text = os.fspath(path)
        if not isinstance(text, str):
            raise InvalidArgumentError(f"db.attach: path must be text, not {type(text).__name__}")
        if name is not None:
            require_str(name, "name", "db.attach")
        name = default_name(text) if name is None else name
        validate_name(name, "attachment")
        options = {"threads": threads, "batch_bytes": batch_bytes, "stale_index": stale_index}
        from tesseradb.progress import tracker

        with tracker(f"attach {text}", None, "files", progress, cancel, "db.attach") as watch:
            spec = attach_spec(text, options, watch, self.context.storage)
        attachment: Attachment = self.context.objects.create("attached", name, spec)
        return attachment

    def create_index(
        self,
        table: str,
        columns: str | Sequence[str],
        kind: str,
        edges: Sequence[float] | None,
        count: int | None,
        precision: int | None,
        exact: bool,
        encoding: str,
        threads: int | None,
        progress: ProgressLike,
        cancel: Cancel | None,
    ) -> None:
        from tesseradb.attached._bitmap import Binning
        from tesseradb.errors import AttachError, InvalidArgumentError, require_str

        require_str(table, "table", "db.create_index")

        self.check_writable("create an index")
        if kind != "bitmap":
            raise InvalidArgumentError(
                f"unknown index kind {kind!r}: attached tables have bitmap indexes"
            )
        owner, _, part = table.partition(".")
        if not part:
            raise AttachError(
                f"index {table!r}: name a table of an attachment, as in ptf.candidate"
            )
        if threads is not None and (
            isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
        ):
            raise InvalidArgumentError(
                f"index on {table!r}: threads must be a whole number >= 1, not {threads!r}"
            )
        binning = Binning.from_options(f"index on {table!r}", edges, count, precision, exact)
        attachment = self.context.objects.get(owner, self.name)
        relation = attachment.table(part)  # validates the table name
        names = [columns] if isinstance(columns, str) else columns
        if not isinstance(names, (list, tuple)) or not all(isinstance(c, str) for c in names):
            raise InvalidArgumentError(
                f"index on {table!r}: columns is a column name or a list of them, not {columns!r}"
            )
        from tesseradb.progress import tracker

        task = f"index {table} on {', '.join(names)}"
        with tracker(task, None, "indexes", progress, cancel, "db.create_index") as watch:
            specs = attachment.create_index(
                relation.layout.name, names, binning, encoding, threads, watch
            )
        self.context.objects.update_spec(attachment.name, {**attachment.spec, "indexes": specs})
        attachment.spec["indexes"] = specs

    def open(self, name: str, spec: dict[str, Any]) -> Attachment:
        # its folder holds the sidecar indexes, made when asked for; the files are never written
        attachment = Attachment(
            name, spec, self.folder(name), self.context.read_only, self.context.storage
        )
        attachment.executors = self.context.executors  # where scans and index builds run
        return attachment

    def details(self, name: str, opened: Attachment) -> dict[str, Any]:
        return {
            "files": list(opened.files),
            "indexes": {k: dict(v) for k, v in opened.index_specs.items()},
            "tables": sorted(opened.layouts),
        }

    def relations(self, opened: Attachment) -> Mapping[str, Relation]:
        return {table: opened.table(table) for table in opened.tables()}

    def relation_names(self, name: str, spec: dict[str, Any]) -> list[str]:
        return [f"{name}.{table}" for table in spec.get("tables", {})]

    def close(self, opened: Attachment) -> None:
        opened.close()

    def drop(self, name: str, spec: dict[str, Any], opened: Attachment | None) -> None:
        if opened is not None:
            opened.close()
        shutil.rmtree(self.folder(name), ignore_errors=True)
        self.delete_stored(name, spec)  # (the indexes only: the files are never touched)

    def describe_one(self, obj: CatalogObject) -> list[ObjectInfo]:
        size = sum(i.get("size", 0) for i in obj.spec.get("identities", []))
        tables = [
            ObjectInfo(f"{obj.name}.{table}", "attached table", sum(counts), None, None, None)
            for table, counts in obj.spec.get("rows", {}).items()
        ]
        return [ObjectInfo(obj.name, self.name, None, size, obj.created, obj.modified), *tables]

    def check_one(self, obj: CatalogObject, repair: bool) -> tuple[list[Finding], Verified]:
        checked: tuple[list[Finding], Verified] = self.context.objects.get(obj.name).check(repair)
        return checked
