"""``db.export``: any table, stream, relation or query to Parquet, CSV, JSON (lines) or Arrow
IPC, and an object whose kind writes files of its own (an array to Zarr v3, NetCDF, FITS
or npy; a collection to JSON lines) through that kind (:class:`tesseradb.kinds.Exporting`).

Every export writes beside the target (``<target>.partial``) and renames it
into place at the end, so a failed or cancelled export leaves no target.
Query rows are streamed from the statement to the file batch by batch
(DuckDB's COPY writes Parquet, CSV and JSON from the Arrow stream, so every
DuckDB type, nested ones included, keeps its form), so memory stays bounded;
so does each kind's own writer.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from dataclasses import dataclass
from typing import Any

from tesseradb._rows import JSON_FILE_SUFFIXES, ROW_FILE_SUFFIXES, write_rows
from tesseradb._sqltext import quote_identifier
from tesseradb.errors import ExportError, InvalidArgumentError
from tesseradb.kinds import Exporting, ExportRequest
from tesseradb.progress import Cancel, ProgressLike, tracker
from tesseradb.storage import is_url
from tesseradb.transfer._load import path_bytes

__all__ = ["ROW_FORMATS", "Exported", "export", "write_rows"]

# what any rows are written as, by file name ending (the endings row readers know, but a
# tab-separated or compressed name, which a CSV writer would not honour)
ROW_SUFFIXES = {
    suffix: fmt
    for suffix, fmt in {**ROW_FILE_SUFFIXES, **JSON_FILE_SUFFIXES}.items()
    if suffix not in (".tsv", ".csv.gz")
}
ROW_FORMATS = ("parquet", "csv", "json", "jsonl", "arrow")
_OPTIONS = frozenset({"overwrite"})  # every export's; a kind's own add to them


@dataclass(frozen=True)
class Exported:
    """What one export wrote."""

    source: str
    target: str
    format: str
    items: int  # cells, rows or objects written
    bytes: int  # bytes of the target
    unit: str = "rows"  # what ``items`` counts

    def __str__(self) -> str:
        return (
            f"wrote {self.items:,} {self.unit} of {self.source} to {self.target} "
            f"({self.format}, {self.bytes:,} bytes)"
        )


def _suffixes(kinds: dict[str, Exporting]) -> dict[str, str]:
    merged = dict(ROW_SUFFIXES)
    for made in kinds.values():
        for suffix, fmt in made.export_suffixes.items():
            merged.setdefault(suffix, fmt)
    return dict(sorted(merged.items(), key=lambda item: len(item[0]), reverse=True))


def target_format(target: str, given: str | None, kinds: dict[str, Exporting]) -> str:
    suffixes = _suffixes(kinds)
    if given is not None:
        known = sorted(set(suffixes.values()))
        if given not in known:
            raise InvalidArgumentError(f"export format is one of {', '.join(known)}, not {given!r}")
        return given
    lowered = target.lower().rstrip("/")
    for suffix, fmt in suffixes.items():
        if lowered.endswith(suffix):
            return fmt
    raise ExportError(
        f"{target}: the format is not known by its name ({', '.join(sorted(suffixes))}); "
        "give format="
    )


def export(
    db: Any,
    objects: Any,
    source: str,
    target: str | os.PathLike[str],
    *,
    format: str | None = None,
    params: Any = None,
    progress: ProgressLike = None,
    cancel: Cancel | None = None,
    **options: Any,
) -> Exported:
    """See ``Database.export``."""
    if not isinstance(target, (str, os.PathLike)):
        raise InvalidArgumentError(f"db.export: target is a file name, not {type(target).__name__}")
    kinds: dict[str, Exporting] = objects.capable(Exporting)
    obj = db.catalog.get(source) if _is_name(source) else None
    own = kinds.get(obj.kind) if obj is not None else None
    takes = _OPTIONS | (own.export_options if own is not None else frozenset())
    unknown = sorted(set(options) - takes)
    if unknown:
        what = f"an export of {obj.kind} {obj.name!r}" if obj is not None else "db.export"
        raise InvalidArgumentError(
            f"{what} takes {', '.join(sorted(takes))}; not {', '.join(unknown)}"
        )
    if is_url(os.fspath(target)):
        from tesseradb.transfer._remote import upload_export

        url = os.fspath(target)
        target_format(url, format, kinds)  # (a wrong name is refused before anything runs)
        overwrite = options.pop("overwrite", False)
        if not isinstance(overwrite, bool):
            raise InvalidArgumentError(f"db.export: overwrite is True or False, not {overwrite!r}")
        with upload_export(objects.context.storage, url, overwrite) as local:
            done = export(
                db,
                objects,
                source,
                local,
                format=format,
                params=params,
                progress=progress,
                cancel=cancel,
                **options,
            )
        return dataclasses.replace(done, target=url)
    path = os.path.abspath(os.path.expanduser(os.fspath(target)))
    fmt = target_format(path, format, kinds)
    overwrite = options.pop("overwrite", False)
    if not isinstance(overwrite, bool):
        raise InvalidArgumentError(f"db.export: overwrite is True or False, not {overwrite!r}")
    if os.path.exists(path) and not overwrite:
        raise ExportError(
            f"{path} exists; to replace it, give overwrite=True (tessera export --overwrite)"
        )
    if not os.path.isdir(os.path.dirname(path)):
        raise ExportError(f"{path}: the directory {os.path.dirname(path)} does not exist")
    own_formats = set(own.export_suffixes.values()) if own is not None else set()
    if own is not None and fmt not in own_formats and not own.export_rows:
        raise ExportError(
            f"{obj.kind} {obj.name!r} exports to {', '.join(sorted(own_formats))}, not {fmt}"
        )
    if fmt not in own_formats and fmt not in ROW_FORMATS:
        what = f"{obj.kind} {obj.name!r}" if obj is not None else "a query's rows"
        elsewhere = "; ".join(
            f"a {name} goes to {', '.join(sorted(set(k.export_suffixes.values())))}"
            for name, k in kinds.items()
        )
        raise ExportError(f"{what} exports to {', '.join(ROW_FORMATS)}, not {fmt} ({elsewhere})")
    partial = path + ".partial"
    _remove(partial)
    task = f"export {source if len(source) < 60 else source[:57] + '...'} to {path}"
    unit = "rows"
    try:
        with tracker(task, None, "rows", progress, cancel) as watch:
            if own is not None and fmt in own_formats:
                request = ExportRequest(partial, fmt, watch, options, db)
                items = own.export(obj.name, objects.get(obj.name), request)
                unit = own.export_unit
            else:
                query = _query_of(db, source, obj)
                items = write_rows(
                    lambda sink: db.stream_sql(query, sink, params), partial, fmt, watch
                )
        if os.path.exists(path):
            _remove(path)
        os.replace(partial, path)
    except BaseException:
        _remove(partial)
        raise
    return Exported(source, path, fmt, items, path_bytes(path), unit)


def _is_name(source: str) -> bool:
    return source.replace("_", "a").replace(".", "a").isalnum()


def _query_of(db: Any, source: str, obj: Any) -> str:
    if obj is not None:
        if obj.kind not in ("table", "view") and db.relation(obj.name) is None:
            raise ExportError(
                f"{obj.kind} {obj.name!r} holds several tables; export one of them "
                f"({obj.name}.<table>) or a query"
            )
        return f"SELECT * FROM {quote_identifier(obj.name)}"
    if _is_name(source):
        if db.relation(source) is None:
            raise ExportError(f"no object or relation called {source!r} to export")
        return "SELECT * FROM " + ".".join(quote_identifier(p) for p in source.split("."))
    return source


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)
