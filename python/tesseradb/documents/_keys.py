"""Argo's key flattening: a JSON object to typed rows and back, losslessly.

A document becomes one row per leaf value: the flattened key (``a.b``,
``a[3]``, ``kids[3].kids[0]`` as in the paper), the leaf's position in a
depth-first walk (``ord``, so objects rebuild with their keys in order) and
the value in the column of its type. Beyond the paper's prototype:

* a key's ``\\``, ``.``, ``[`` and ``]`` are escaped with a backslash, so any
  key (empty, dotted, Unicode) survives;
* ``null``, ``{}`` and ``[]`` are leaves of their own (``valkind``), and a
  document with no keys at all keeps one marker row, so it is not lost;
* integers keep their exact 64-bit value (``valint``) beside the double that
  comparisons use (``valnum``), so ``1`` and ``1.0`` come back as written.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from tesseradb.errors import DocumentError, LimitExceededError

__all__ = [
    "DEFAULT_LIMITS",
    "EMPTY_DOCUMENT_KEY",
    "KIND_EMPTY_ARRAY",
    "KIND_EMPTY_DOCUMENT",
    "KIND_EMPTY_OBJECT",
    "KIND_NULL",
    "DocumentLimits",
    "Leaf",
    "Path",
    "escape_key",
    "flatten_document",
    "join_path",
    "parse_document",
    "parse_key",
    "rebuild_documents",
]

# valkind of leaves that carry no primitive value
KIND_NULL = 0
KIND_EMPTY_OBJECT = 1
KIND_EMPTY_ARRAY = 2
KIND_EMPTY_DOCUMENT = 3  # a top-level {}: one row so the object exists
# The key of that row: no flattened key starts with an unescaped "]", so it
# cannot be mistaken for (or fall in the subtree ranges of) a real key.
EMPTY_DOCUMENT_KEY = "]"

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# A path step is a key (str) or an array subscript (int).
Path = tuple[str | int, ...]


@dataclass(frozen=True)
class DocumentLimits:
    """What one document may hold, checked at the door of every ingest path.

    ``insert``, ``insert_many``, ``load_jsonl``, Argo/SQL ``INSERT`` and
    ``UPDATE`` all flatten through :func:`flatten_document` (or the Rust
    kernel, which refuses exactly what it would refuse), so a document past
    a limit is refused with a :class:`LimitExceededError` naming the object,
    the key and the limit, and nothing of the call is kept. Each backend
    may narrow them (``Backend.limits``) where its columns or indexes are
    narrower.
    """

    depth: int = 100  # objects and arrays enclosing a value, the document itself counted
    key_chars: int = 512  # characters of a flattened key (``a.b[3].c``, escapes counted)
    string_bytes: int = 16 << 20  # UTF-8 bytes of one string value
    key_and_string_bytes: int = 0  # UTF-8 bytes of a key and its string together; 0: none
    leaves: int = 100_000  # leaves (rows) of one document
    nul: bool = True  # keys and strings may hold U+0000

    def as_tuple(self) -> tuple[int, int, int, int, int, bool]:
        """The limits as ``_core.flatten_documents`` takes them."""
        return (
            self.depth,
            self.key_chars,
            self.string_bytes,
            self.key_and_string_bytes,
            self.leaves,
            self.nul,
        )


DEFAULT_LIMITS = DocumentLimits()


@dataclass(frozen=True, slots=True)
class Leaf:
    """One row of a flattened document (the columns every mapping stores)."""

    keystr: str
    ord: int
    valstr: str | None = None
    valnum: float | None = None
    valint: int | None = None
    valbool: bool | None = None
    valkind: int | None = None


_SPECIAL = re.compile(r"[\\.\[\]]")


@functools.lru_cache(maxsize=65536)
def escape_key(key: str) -> str:
    """``key`` with ``\\ . [ ]`` escaped, so flattened paths split unambiguously."""
    # cached: a collection's objects mostly repeat the same keys
    return _SPECIAL.sub(lambda m: "\\" + m.group(), key)


def join_path(path: Path) -> str:
    """The flattened key of a path of keys and subscripts (the first step is a key)."""
    out: list[str] = []
    for i, step in enumerate(path):
        if isinstance(step, int):
            out.append(f"[{step}]")
        else:
            out.append(("." if i else "") + escape_key(step))
    return "".join(out)


def parse_key(keystr: str) -> list[str | int]:
    """The steps of a flattened key; the inverse of :func:`join_path`."""
    steps: list[str | int] = []
    current: list[str] = []
    in_key = True  # a key step is open (the first step always is)
    i, n = 0, len(keystr)
    while i < n:
        c = keystr[i]
        if c == "\\" and i + 1 < n:
            current.append(keystr[i + 1])
            i += 2
            continue
        if c == ".":
            if in_key:
                steps.append("".join(current))
            current, in_key = [], True
            i += 1
            continue
        if c == "[":
            if in_key:
                steps.append("".join(current))
            close = keystr.index("]", i)
            steps.append(int(keystr[i + 1 : close]))
            current, in_key = [], False
            i = close + 1
            continue
        current.append(c)
        i += 1
    if in_key:
        steps.append("".join(current))
    return steps


def parse_document(text: str | bytes, where: str = "document") -> dict[str, Any]:
    """A JSON object from ``text``: malformed JSON, NaN/Infinity and non-objects are errors."""

    def no_constants(name: str) -> Any:
        raise DocumentError(f"{where}: {name} is not JSON")

    try:
        value = json.loads(text, parse_constant=no_constants)
    except json.JSONDecodeError as err:
        raise DocumentError(
            f"{where}: malformed JSON at line {err.lineno} column {err.colno}: {err.msg}"
        ) from None
    except RecursionError:
        raise DocumentError(f"{where}: JSON nested too deeply") from None
    except UnicodeDecodeError as err:
        raise DocumentError(f"{where}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    if not isinstance(value, dict):
        raise DocumentError(
            f"{where}: a document must be a JSON object at the top level, not {_json_type(value)}"
        )
    return value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def flatten_document(
    doc: Any, where: str = "document", limits: DocumentLimits = DEFAULT_LIMITS
) -> list[Leaf]:
    """The leaves of one document in depth-first order (``ord`` = position).

    The reference flattening, and the path for dicts and for JSON text the
    kernel ``tesseradb._core.flatten_documents`` refuses (it raises the errors).
    A document past one of ``limits`` raises :class:`LimitExceededError`; a
    string that is not Unicode text (a lone surrogate) :class:`DocumentError`.
    """
    if not isinstance(doc, dict):
        raise DocumentError(
            f"{where}: a document must be a JSON object at the top level, not {_json_type(doc)}"
        )
    leaves: list[Leaf] = []
    if not doc:
        leaves.append(Leaf(EMPTY_DOCUMENT_KEY, 0, valkind=KIND_EMPTY_DOCUMENT))
        return leaves
    # (flattened key, value, depth: the objects and arrays enclosing the value)
    stack: list[tuple[str, Any, int]] = []
    for key, value in reversed(list(doc.items())):
        stack.append((_child_key(None, key, where, limits), value, 1))
    while stack:
        keystr, value, depth = stack.pop()
        ordinal = len(leaves)
        if ordinal >= limits.leaves:
            raise LimitExceededError(
                f"{where}: more than {limits.leaves:,} leaves (values, empty objects and "
                f"arrays); a document holds at most {limits.leaves:,}"
            )
        if isinstance(value, str):
            _check_string(keystr, value, where, limits)
            leaves.append(Leaf(keystr, ordinal, valstr=value))
        elif isinstance(value, bool):
            leaves.append(Leaf(keystr, ordinal, valbool=value))
        elif isinstance(value, int):
            if not INT64_MIN <= value <= INT64_MAX:
                raise DocumentError(
                    f"{where}: integer {value} at {keystr!r} is outside the 64-bit range"
                )
            leaves.append(Leaf(keystr, ordinal, valnum=float(value), valint=value))
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise DocumentError(f"{where}: {value} at {keystr!r} is not a JSON number")
            leaves.append(Leaf(keystr, ordinal, valnum=value))
        elif value is None:
            leaves.append(Leaf(keystr, ordinal, valkind=KIND_NULL))
        elif isinstance(value, dict):
            if not value:
                leaves.append(Leaf(keystr, ordinal, valkind=KIND_EMPTY_OBJECT))
                continue
            _check_depth(keystr, depth + 1, where, limits)
            for key, child in reversed(list(value.items())):
                stack.append((_child_key(keystr, key, where, limits), child, depth + 1))
        elif isinstance(value, list | tuple):
            if not value:
                leaves.append(Leaf(keystr, ordinal, valkind=KIND_EMPTY_ARRAY))
                continue
            _check_depth(keystr, depth + 1, where, limits)
            for index in range(len(value) - 1, -1, -1):
                stack.append((_child_key(keystr, index, where, limits), value[index], depth + 1))
        else:
            raise DocumentError(
                f"{where}: {type(value).__name__} at {keystr!r} is not a JSON value"
            )
    return leaves


def _child_key(parent: str | None, step: Any, where: str, limits: DocumentLimits) -> str:
    """The flattened key of ``step`` (an object key or a subscript) under ``parent``."""
    if isinstance(step, int):
        keystr = f"{parent}[{step}]"
    else:
        if not isinstance(step, str):
            raise DocumentError(f"{where}: object keys must be strings, not {step!r}")
        _check_text(step, "key", parent or "the top level", where)
        if not limits.nul and "\0" in step:
            raise DocumentError(
                f"{where}: the key {step!r} under {parent or 'the top level'!r} holds U+0000, "
                "which this backend cannot store"
            )
        keystr = escape_key(step) if parent is None else f"{parent}.{escape_key(step)}"
    if len(keystr) > limits.key_chars:
        raise LimitExceededError(
            f"{where}: the key {_shorten(keystr)!r} is {len(keystr):,} characters long "
            f"(flattened, escapes counted); keys hold at most {limits.key_chars:,}"
        )
    return keystr


def _check_depth(keystr: str, depth: int, where: str, limits: DocumentLimits) -> None:
    if depth > limits.depth:
        raise LimitExceededError(
            f"{where}: {_shorten(keystr)!r} is nested {depth} levels deep (objects and arrays, "
            f"the document counted); documents are nested at most {limits.depth} deep"
        )


def _check_string(keystr: str, value: str, where: str, limits: DocumentLimits) -> None:
    size = len(_check_text(value, "string", keystr, where))
    if not limits.nul and "\0" in value:
        raise DocumentError(
            f"{where}: the string at {_shorten(keystr)!r} holds U+0000, which this backend "
            "cannot store"
        )
    if size > limits.string_bytes:
        raise LimitExceededError(
            f"{where}: the string at {_shorten(keystr)!r} is {size:,} bytes; strings hold "
            f"at most {limits.string_bytes:,} bytes (UTF-8)"
        )
    together = size + len(keystr.encode("utf-8"))
    if limits.key_and_string_bytes and together > limits.key_and_string_bytes:
        raise LimitExceededError(
            f"{where}: the string at {_shorten(keystr)!r} and its key are {together:,} bytes "
            f"together; this backend's index holds at most {limits.key_and_string_bytes:,}"
        )


def _check_text(text: str, what: str, at: str, where: str) -> bytes:
    """``text`` as UTF-8, or a DocumentError naming where a lone surrogate sits."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise DocumentError(
            f"{where}: the {what} at {_shorten(at)!r} is not Unicode text: it holds a lone "
            f"surrogate ({text[err.start]!r}) at character {err.start}"
        ) from None


def _shorten(text: str, length: int = 60) -> str:
    """``text``, or its start and end around "..." when it is longer than ``length``."""
    if len(text) <= length:
        return text
    tail = length // 3
    return text[: length - tail - 3] + "..." + text[-tail:]


class _Builder:
    """Rebuilds one document from its leaves in ``ord`` order.

    Subscripts come back compacted: a projection of ``kids[3]`` yields a
    one-element ``kids`` array, since elements 0..2 were not asked for.
    """

    def __init__(self) -> None:
        self.root: dict[str, Any] = {}
        self._last_index: dict[int, int] = {}  # id(list) -> original subscript of its last element

    def add(self, keystr: str, value: Any, kind: int | None) -> None:
        if kind == KIND_EMPTY_DOCUMENT:
            return
        steps = parse_key(keystr)
        node: Any = self.root
        for step, following in zip(steps, [*steps[1:], None], strict=True):
            if following is None:
                self._put(node, step, value)
                return
            child = self._child(node, step)
            if child is None:
                child = [] if isinstance(following, int) else {}
                self._put(node, step, child)
            node = child

    def _child(self, node: Any, step: str | int) -> Any:
        if isinstance(step, int):
            if node and self._last_index.get(id(node)) == step:
                return node[-1]
            return None
        return node.get(step)

    def _put(self, node: Any, step: str | int, value: Any) -> None:
        if isinstance(step, int):
            node.append(value)
            self._last_index[id(node)] = step
        else:
            node[step] = value


def rebuild_documents(
    rows: Iterable[tuple[Any, ...]],
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(objid, document) from rows ``(objid, keystr, ord, valstr, valnum, valint, valbool, valkind)``.

    Rows must come grouped by objid and ordered by ``ord`` within it. This is
    the reference: collections use the Rust kernel
    ``tesseradb._core.rebuild_documents``, tested to give the same documents.
    """
    current: int | None = None
    builder = _Builder()
    for objid, keystr, _ord, valstr, valnum, valint, valbool, valkind in rows:
        if objid != current:
            if current is not None:
                yield current, builder.root
            current, builder = objid, _Builder()
        if valstr is not None:
            value: Any = valstr
        elif valint is not None:
            value = int(valint)
        elif valnum is not None:
            value = float(valnum)
        elif valbool is not None:
            value = bool(valbool)
        elif valkind == KIND_EMPTY_OBJECT:
            value = {}
        elif valkind == KIND_EMPTY_ARRAY:
            value = []
        else:
            value = None
        builder.add(keystr, value, valkind)
    if current is not None:
        yield current, builder.root
