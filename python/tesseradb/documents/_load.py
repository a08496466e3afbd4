"""Loading JSON into a collection (``db.load``): JSON lines, or JSON files holding an object
or an array of objects, as one ``load_jsonl`` (one backend transaction: all or nothing);
an error names the file and its line or object."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tesseradb._rows import JSON_FILE_SUFFIXES
from tesseradb.errors import DocumentError, LoadError

if TYPE_CHECKING:
    from tesseradb.kinds import LoadRequest
    from tesseradb.progress import Tracker

__all__ = ["JSON_SUFFIXES", "load_collection"]

JSON_SUFFIXES = JSON_FILE_SUFFIXES


def load_collection(request: LoadRequest, collection: Any) -> tuple[int, str]:
    """Load ``request``'s files into ``collection`` (a new one goes again on an error: the
    registry's provisionally)."""
    lines = _Lines(request.files, request.format, request.watch)
    try:
        count = collection.load_jsonl(lines)
    except DocumentError as err:
        raise type(err)(lines.locate(str(err))) from None
    return count, f"collection {collection.name} ({collection.count():,} objects)"


class _Lines:
    """The JSON objects of the files as lines (a JSON array or object becomes one line per
    object), counting bytes into the load's tracker; ``locate`` turns "line N" of the
    chained lines into the file and its own line."""

    def __init__(self, files: list[str], fmt: str, watch: Tracker) -> None:
        self.files = files
        self.fmt = fmt
        self.watch = watch
        self.starts: list[tuple[int, str, bool]] = []  # (first line number, file, lines?)

    def __iter__(self) -> Iterator[bytes]:
        number = 0
        for path in self.files:
            self.starts.append((number + 1, path, True))
            if self.fmt == "json" and not _looks_like_lines(path):
                self.starts[-1] = (number + 1, path, False)
                for line in _json_objects(path, self.watch):
                    number += 1
                    yield line
                continue
            with open(path, "rb") as handle:
                for line in handle:
                    number += 1
                    self.watch.advance(len(line))
                    yield line
        self.watch.check()  # the load commits once the lines run out: a cancel stops it here

    def locate(self, message: str) -> str:
        found = re.search(r"\bline (\d+)", message)
        if not found or not self.starts:
            return f"{self.files[0]}: {message}" if len(self.files) == 1 else message
        number = int(found.group(1))
        first, path, lines = max((s for s in self.starts if s[0] <= number), default=self.starts[0])
        where = f"line {number - first + 1}" if lines else f"object {number - first + 1}"
        return f"{path}, " + message.replace(found.group(0), where, 1)


def _looks_like_lines(path: str) -> bool:
    """Whether a .json file holds one object per line (JSON lines) rather than one value."""
    with open(path, "rb") as handle:
        head = handle.read(1 << 16).lstrip()
    if head.startswith(b"["):
        return False
    first, _, rest = head.partition(b"\n")
    return bool(rest.strip()) and first.rstrip().endswith(b"}")


def _json_objects(path: str, watch: Tracker) -> Iterator[bytes]:
    """The objects of a JSON file holding an object or an array of objects, one per line."""
    import json

    with open(path, "rb") as handle:
        text = handle.read()
    watch.advance(len(text))
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise LoadError(f"{path}, line {err.lineno}, column {err.colno}: {err.msg}") from None
    except UnicodeDecodeError as err:
        raise LoadError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except RecursionError:
        raise LoadError(
            f"{path}: JSON nested too deeply (a document nests at most "
            "100 levels; docs/reliability.md)"
        ) from None
    items = value if isinstance(value, list) else [value]
    for k, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise LoadError(
                f"{path}: item {k} of the array is a {type(item).__name__}, not an object"
            )
        yield json.dumps(item, ensure_ascii=False).encode()
