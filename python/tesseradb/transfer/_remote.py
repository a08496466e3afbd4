"""Loads from and exports to ``s3://`` URLs.

A load streams the matching objects into a private temporary folder (8 MiB pieces,
with progress and cancel), then loads those files exactly as local ones, and removes
the folder; an export writes its file or store to a temporary folder, then uploads it
(in parts when large). The database never sees a half-downloaded input, and a bucket
never sees a half-written export: the upload starts only once the export is whole.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tesseradb.errors import ExportError, LoadError
from tesseradb.progress import Cancel, ProgressLike, tracker
from tesseradb.storage import parse_url

__all__ = ["downloaded", "upload_export"]


@contextlib.contextmanager
def downloaded(
    storage: Any, source: str, progress: ProgressLike, cancel: Cancel | None
) -> Iterator[str]:
    """For the block, a local source (a file, a folder store or a glob) holding what the
    ``s3://`` ``source`` names; removed afterwards, whatever happens."""
    where = f"db.load {source!r}"
    try:
        root, objects = storage.matching(source, where)
    except FileNotFoundError:
        raise LoadError(f"{source}: no such object") from None
    if not objects:
        raise LoadError(f"{source}: the pattern matches no object")
    folder = Path(tempfile.mkdtemp(prefix="tessera-download-"))
    try:
        total = sum(o.size for o in objects)
        with tracker(f"download {source}", total, "bytes", progress, cancel, "db.load") as watch:
            for stored in objects:
                target = folder / stored.path
                target.parent.mkdir(parents=True, exist_ok=True)
                root.download(stored.path, target, _advancing(watch))
        # the same name, glob or store, now over the local copies
        yield str(folder / parse_url(source, where)[1])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _advancing(watch: Any) -> Any:
    def advance(size: int) -> None:
        watch.check()  # (a cancel stops the download between pieces)
        watch.advance(size)

    return advance


@contextlib.contextmanager
def upload_export(storage: Any, target: str, overwrite: bool) -> Iterator[str]:
    """For the block, a local path to export to; its file (or folder store) is uploaded
    to the ``s3://`` ``target`` when the block ends without an error."""
    where = f"db.export {target!r}"
    root, existing = _existing(storage, target, where)
    if existing and not overwrite:
        raise ExportError(
            f"{target} exists; to replace it, give overwrite=True (tessera export --overwrite)"
        )
    key = parse_url(target, where)[1]
    if not key:
        raise ExportError(f"{target}: name the object to write inside the bucket")
    folder = Path(tempfile.mkdtemp(prefix="tessera-export-"))
    local = folder / key.rsplit("/", 1)[-1]
    try:
        yield str(local)
        for stale in existing:  # overwrite: the old file, or every object of the old store
            root.delete(stale.path)
        if local.is_dir():
            for file in sorted(p for p in local.rglob("*") if p.is_file()):
                root.upload(file, f"{key}/{file.relative_to(local).as_posix()}")
        else:
            root.upload(local, key)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _existing(storage: Any, target: str, where: str) -> tuple[Any, list[Any]]:
    try:
        return storage.matching(target, where)  # type: ignore[no-any-return]
    except FileNotFoundError:  # (nothing there yet)
        pass
    bucket, _ = parse_url(target, where)
    return storage.at(f"s3://{bucket}", where), []
