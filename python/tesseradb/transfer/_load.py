"""``db.load``: a file, a directory store or a glob into an object of any kind that loads,
made when it does not exist and appended to otherwise, all or nothing per call.

This module only dispatches: each data model says what it loads and how
(:class:`tesseradb.kinds.Loading`; arrays read FITS, TIFF, NetCDF/HDF5, Zarr and
npy/npz, streams CSV, Parquet, Arrow and packed binary records, collections
JSON, plain tables CSV, Parquet, JSON and Arrow). The kind comes from the target
when it exists, else from ``kind=``, else from the files' format. A new object is
pending until its data is in (the registry's ``provisionally``), so a load that
fails or is killed leaves nothing. docs/load-export.md says each kind's memory
bounds.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tesseradb.errors import InvalidArgumentError, LoadError
from tesseradb.kinds import Loading, LoadRequest
from tesseradb.progress import Cancel, ProgressLike, tracker
from tesseradb.storage import is_url

__all__ = ["Loaded", "load", "loading_kinds"]


@dataclass(frozen=True)
class Loaded:
    """What one load did."""

    name: str
    kind: str  # the catalog kind of the object (array, stream, collection, table, ...)
    created: bool  # the object was made by this load (else appended to)
    files: int
    items: int  # cells (arrays), records, objects or rows loaded
    bytes: int  # bytes of the input files
    schema: str  # the object's schema as text (what was inferred, or what it was)
    unit: str = "rows"  # what ``items`` counts

    def __str__(self) -> str:
        verb = "created" if self.created else "appended to"
        return (
            f"{verb} {self.kind} {self.name}: {self.items:,} {self.unit} from {self.files} "
            f"file(s), {self.bytes:,} bytes\n{self.schema}"
        )


def loading_kinds(objects: Any) -> dict[str, Loading]:
    """Every kind of the database that loads, by its catalog name."""
    found: dict[str, Loading] = objects.capable(Loading)
    return found


def _suffixes(kinds: dict[str, Loading]) -> dict[str, str]:
    """File name endings -> format, over every kind (longest endings first)."""
    merged: dict[str, str] = {}
    for made in kinds.values():
        for suffix, fmt in made.load_suffixes.items():
            merged.setdefault(suffix, fmt)
    return dict(sorted(merged.items(), key=lambda item: len(item[0]), reverse=True))


def _formats(made: Loading) -> set[str]:
    return set(made.load_suffixes.values())


def source_format(path: str, given: str | None, kinds: dict[str, Loading]) -> str:
    """The format of ``path``: ``given``, or by its name."""
    if given is not None:
        known = sorted(set().union(*(_formats(k) for k in kinds.values())))
        if not isinstance(given, str) or given not in known:
            raise InvalidArgumentError(
                f"db.load: format is one of {', '.join(known)}, not {given!r}"
            )
        return given
    lowered = path.lower().rstrip("/")
    suffixes = _suffixes(kinds)
    for suffix, fmt in suffixes.items():
        if lowered.endswith(suffix):
            return fmt
    known_endings = ", ".join(sorted(suffixes))
    raise LoadError(f"{path}: the format is not known by its name ({known_endings}); give format=")


def expand(source: str, kinds: dict[str, Loading]) -> list[str]:
    """The files a source names: a file, a directory store (a Zarr store: a directory whose
    name says its format), or a glob (sorted)."""
    import glob

    if any(c in source for c in "*?["):
        found = sorted(glob.glob(os.path.expanduser(source)))
        if not found:
            raise LoadError(f"{source}: the pattern matches no file")
        return found
    path = os.path.expanduser(source)
    if not os.path.exists(path):
        raise LoadError(f"{source}: no such file")
    lowered = path.lower().rstrip("/")
    if os.path.isdir(path) and not any(lowered.endswith(s) for s in _suffixes(kinds)):
        raise LoadError(f"{source} is a directory; give a file or a glob such as {source}/*.fits")
    return [str(Path(path))]


def path_bytes(path: str) -> int:
    """Bytes of a file, or of every file under a directory (a Zarr store)."""
    if os.path.isdir(path):
        return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())
    return os.path.getsize(path)


def default_name(source: str) -> str:
    """The object name a load gives when none is: the file's stem (a glob's directory)."""
    path = Path(source)
    stem = path.parent.name if any(c in path.name for c in "*?[") else path.name.split(".")[0]
    name = re.sub(r"[^A-Za-z0-9_]", "_", stem) or "loaded"
    return f"t_{name}" if name[0].isdigit() else name


def load(
    db: Any,
    objects: Any,
    source: str | os.PathLike[str],
    into: str | None = None,
    kind: str | None = None,
    *,
    format: str | None = None,
    progress: ProgressLike = None,
    cancel: Cancel | None = None,
    **options: Any,
) -> Loaded:
    """See ``Database.load``."""
    if not isinstance(source, (str, os.PathLike)):
        raise InvalidArgumentError(
            f"db.load: source is a file name, directory store or glob, not {type(source).__name__}"
        )
    text = os.fspath(source)
    if not isinstance(text, str):
        raise InvalidArgumentError("db.load: source must be text")
    kinds = loading_kinds(objects)
    if kind is not None and (not isinstance(kind, str) or kind not in kinds):
        raise InvalidArgumentError(f"db.load: kind is one of {', '.join(kinds)}, not {kind!r}")
    if is_url(text):
        from tesseradb.transfer._remote import downloaded

        with downloaded(objects.context.storage, text, progress, cancel) as local:
            loaded = load(
                db,
                objects,
                local,
                into if into is not None else default_name(text),
                kind,
                format=format,
                progress=progress,
                cancel=cancel,
                **options,
            )
        return loaded
    files = expand(text, kinds)
    fmt = source_format(files[0], format, kinds)
    existing = db.catalog.get(into) if into is not None else None
    name = into if into is not None else default_name(text)
    if existing is None and into is None:
        existing = db.catalog.get(name)
    have = _loadable(existing.kind, kinds) if existing is not None else None
    if have is not None and kind is not None and kind != have:
        raise LoadError(f"{name!r} is a {have}, not a {kind}; load into another name")
    target = have or kind or _default_kind(fmt, kinds)
    made = kinds[target]
    if fmt not in _formats(made):
        raise LoadError(
            f"{files[0]}: a {fmt} file cannot be loaded into a {target}; a {target} loads "
            f"{', '.join(sorted(_formats(made)))}"
        )
    if existing is not None:
        name = existing.name
    unknown = sorted(set(options) - made.load_options)
    if unknown:
        takes = ", ".join(sorted(made.load_options)) or "no options"
        raise InvalidArgumentError(
            f"db.load: a load into a {target} takes {takes}; not {', '.join(unknown)}"
        )
    total = sum(path_bytes(f) for f in files)
    task = f"load {text} into {name}"
    with tracker(task, total, "bytes", progress, cancel, "db.load") as watch:
        watch.advance(0)  # the first event: the load has begun
        request = LoadRequest(files, fmt, name, existing is not None, watch, options, db)
        # an object the load makes is seen by others only once it is whole, and a writer
        # killed mid-load leaves it for the next writer to drop
        with objects.provisionally():
            items, schema = made.load(request)
    return Loaded(name, target, existing is None, len(files), items, total, schema, made.load_unit)


def _loadable(catalog_kind: str, kinds: dict[str, Loading]) -> str:
    if catalog_kind in kinds:
        return catalog_kind
    raise LoadError(f"a {catalog_kind} cannot be loaded into; give another name")


def _default_kind(fmt: str, kinds: dict[str, Loading]) -> str:
    for name, made in kinds.items():
        if fmt in made.load_defaults:
            return name
    return next(name for name, made in kinds.items() if fmt in _formats(made))
