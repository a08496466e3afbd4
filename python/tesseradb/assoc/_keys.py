"""Keys of associative arrays: reading D4M strings and sequences, interning
them in the Rust kernel, aligning two key lists, and the selectors of
``A[rows, cols]``.

Keys of one axis are either all strings (kept as a numpy object array of
``str``, sorted by code point, which is UTF-8 byte order) or all numbers
(a float64 array). The kernels hold the loops; this module decides what a
user's input means and says so when it means nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tesseradb import _core
from tesseradb.errors import AssocError, AssocIndexError

__all__ = ["StartsWith"]

# The sorted keys of one axis: object array of str, or float64 (or, for a
# stored table, an object with the same len / searchsorted / [positions] /
# dtype: a memory-mapped key file).
KeyArray = np.ndarray


def is_text(keys: KeyArray) -> bool:
    return keys.dtype == object


def d4m_delimiter(text: str, what: str) -> str:
    """The delimiter of a non-empty D4M string ``"a,b,"``: its last character.

    A letter or digit cannot be one, so ``"a,b"`` (the delimiter forgotten)
    is refused instead of being read as the keys ``"a,"`` and ``""``.
    """
    delimiter = text[-1]
    if delimiter.isalnum():
        raise AssocError(
            f"{what} {_short(text)} must end with its delimiter (D4M form: 'a,b,c,'); "
            f"its last character {delimiter!r} is a letter or digit"
        )
    return delimiter


def d4m_items(text: str, what: str) -> list[str]:
    """Items of a D4M string ``"a,b,"`` (see :func:`d4m_delimiter`)."""
    if text == "":
        return []
    return text[:-1].split(d4m_delimiter(text, what))


def _short(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


@dataclass(frozen=True)
class Source:
    """One column of a triple list as the kernel takes it, and its length."""

    kernel_input: Any  # D4M string, list of str, float64 array, uint32 view
    length: int
    text: bool


def key_source(keys: Any, what: str, values: bool = False) -> Source:
    """Normalises row or column keys, or with ``values`` an Assoc's values, for
    ``_core.intern_keys`` (numbers are interned only as keys).

    Values also take booleans (as 1 and 0); a NaN is refused in both.
    """
    number = _is_value if values else _is_number
    if isinstance(keys, str):
        if keys == "":
            return Source([], 0, True)
        return Source(keys, keys.count(d4m_delimiter(keys, what)), True)
    if number(keys):
        _check_exact([keys], what, values)
        return _numbers(np.array([keys], dtype=np.float64), what, values)
    if isinstance(keys, np.ndarray):
        if keys.ndim != 1:
            raise AssocError(f"{what} must be one-dimensional, not of shape {keys.shape}")
        kind = keys.dtype.kind
        if kind == "U":
            width = keys.dtype.itemsize // 4
            if width == 0:
                return Source(keys.astype(object).tolist(), len(keys), True)
            codes = np.ascontiguousarray(keys).view(np.uint32).reshape(len(keys), width)
            return Source(codes, len(keys), True)
        if kind in ("iufb" if values else "iuf"):
            if kind in "iu":
                _check_exact_array(keys, what, values)
            return _numbers(keys.astype(np.float64, copy=False), what, values)
        if kind == "O":
            keys = keys.tolist()
        else:
            raise AssocError(f"{what} of numpy dtype {keys.dtype} are neither strings nor numbers")
    if isinstance(keys, (dict, set, frozenset)):
        raise AssocError(
            f"{what} must be in order (a sequence or an array), not a {type(keys).__name__}"
        )
    if isinstance(keys, Sequence) or hasattr(keys, "__iter__"):
        items = keys if isinstance(keys, list) else list(keys)
        if not items:
            return Source([], 0, True)
        first = items[0]
        if isinstance(first, str):
            return Source(items, len(items), True)  # the kernel names an item not a str
        if not number(first):
            raise AssocError(f"{what}: item 0 is {type(first).__name__}; they are str or numbers")
        try:
            numbers = np.array(items, dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            bad = next((i for i, x in enumerate(items) if not number(x)), None)
            if bad is None:  # (an integer past float64's range)
                _check_exact(items, what, values)
            raise AssocError(
                f"{what}: item {bad} is {type(items[bad]).__name__}, but item 0 is a number; "
                "they are all str or all numbers"
            ) from None
        _check_exact(items, what, values)
        return _numbers(numbers, what, values)
    raise AssocError(
        f"{what} must be a D4M string, a sequence or an array, not {type(keys).__name__}"
    )


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def _is_value(x: object) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating, np.bool_))


# Numbers are held as float64 (D4M's doubles), which holds every integer up to 2**53
# exactly and some beyond: an integer it would change is refused, never rounded.
_EXACT = 2**53


def _refuse_inexact(what: str, index: int, value: object, values: bool) -> None:
    what_it_is = "value" if values else "key"
    raise AssocError(
        f"{what}: item {index} ({value}) is an integer a {what_it_is} cannot hold exactly "
        f"(numbers are 64-bit floats: integers are exact up to 2**53)"
    )


def _check_exact(items: Sequence[Any], what: str, values: bool) -> None:
    """Refuse a Python or numpy integer that float64 would change."""
    for i, x in enumerate(items):
        if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
            n = int(x)
            if abs(n) > _EXACT:
                try:
                    kept = int(float(n)) == n
                except OverflowError:
                    kept = False
                if not kept:
                    _refuse_inexact(what, i, n, values)


def _check_exact_array(keys: np.ndarray, what: str, values: bool) -> None:
    """Refuse integers of an integer array that float64 would change."""
    if keys.dtype.itemsize < 8:  # (every int32 is exact)
        return
    outside = keys > _EXACT
    if keys.dtype.kind == "i":
        outside |= keys < -_EXACT
    big = np.flatnonzero(outside)
    for i in big:  # (few, if any: checked one by one, exactly)
        n = int(keys[i])
        if int(float(n)) != n:
            _refuse_inexact(what, int(i), n, values)


def _numbers(numbers: np.ndarray, what: str, values: bool) -> Source:
    bad = np.flatnonzero(np.isnan(numbers))
    if len(bad):
        what_it_is = "a value" if values else "a key"
        raise AssocError(f"{what}: item {int(bad[0])} is NaN, which cannot be {what_it_is}")
    return Source(np.ascontiguousarray(numbers), len(numbers), False)


def intern(
    sources: list[Source], whats: list[str], arrow: bool = False
) -> list[tuple[Any, np.ndarray]]:
    """Sorted unique keys and ids of each source, interned in parallel in Rust.

    String keys come as an object array of ``str``, or with ``arrow`` as a
    pyarrow large string array made from the kernel's buffers (no Python
    string is made: a table's put writes them as they are).
    """
    try:
        out = _core.intern_keys([s.kernel_input for s in sources], arrow)
    except (TypeError, ValueError) as exc:
        # the kernel names the source by position and the item by index
        message = str(exc)
        for at, what in enumerate(whats):
            message = message.replace(f"source {at}:", f"{what}:")
        raise AssocError(message) from None
    result = []
    for unique, ids in out:
        keys: Any
        if isinstance(unique, list):
            keys = np.empty(len(unique), dtype=object)
            keys[:] = unique
        elif isinstance(unique, tuple):
            import pyarrow as pa

            offsets, data = unique
            keys = pa.LargeStringArray.from_buffers(
                len(offsets) - 1, pa.py_buffer(offsets), pa.py_buffer(data)
            )
        else:
            keys = unique
        result.append((keys, ids))
    return result


def merge(a: KeyArray, b: KeyArray, what: str) -> tuple[KeyArray, np.ndarray, np.ndarray]:
    """The sorted union of two sorted unique key arrays, and where each one's keys are in it."""
    if len(a) == 0:
        return b, np.empty(0, np.int64), np.arange(len(b), dtype=np.int64)
    if len(b) == 0:
        return a, np.arange(len(a), dtype=np.int64), np.empty(0, np.int64)
    if is_text(a) != is_text(b):
        kinds = ("strings" if is_text(a) else "numbers", "strings" if is_text(b) else "numbers")
        raise AssocError(
            f"{what} keys are {kinds[0]} on the left and {kinds[1]} on the right; "
            "an operation needs the same kind of keys on both sides"
        )
    if is_text(a):
        a_at, b_at, n = _core.merge_keys(a.tolist(), b.tolist())
        union = np.empty(n, dtype=object)
    else:
        a_at, b_at, n = _core.merge_keys(a, b)
        union = np.empty(n, dtype=np.float64)
    union[a_at] = a
    union[b_at] = b
    return union, a_at, b_at


# --- selectors of A[rows, cols] ---------------------------------------------


@dataclass(frozen=True)
class StartsWith:
    """Keys beginning with any of the prefixes of a D4M string: ``StartsWith("al,be,")``.

    The shorthand ``"al*,"`` in a key string means the same for one prefix.
    """

    prefixes: str

    def __post_init__(self) -> None:
        d4m_items(self.prefixes, "StartsWith prefixes")


def _successor(prefix: str) -> str | None:
    """The least string greater than every string that starts with ``prefix``."""
    stripped = prefix.rstrip("\U0010ffff")
    if not stripped:
        return None
    return stripped[:-1] + chr(ord(stripped[-1]) + 1)


def _key_value(item: str, keys: KeyArray, what: str) -> Any:
    if is_text(keys):
        return item
    try:
        return float(item)
    except ValueError:
        raise AssocError(
            f"{what} {item!r} is not a number, and this axis has numeric keys"
        ) from None


def _span(keys: KeyArray, lo: Any, hi: Any) -> np.ndarray:
    """Positions of keys in [lo, hi] (None: open end)."""
    start = 0 if lo is None else int(keys.searchsorted(lo, side="left"))
    stop = len(keys) if hi is None else int(keys.searchsorted(hi, side="right"))
    return np.arange(start, max(start, stop), dtype=np.int64)


def _prefix_span(keys: KeyArray, prefix: str, what: str) -> np.ndarray:
    if not is_text(keys):
        raise AssocError(f"{what}: a prefix selects string keys; this axis has numeric keys")
    start = int(keys.searchsorted(prefix, side="left"))
    after = _successor(prefix)
    stop = len(keys) if after is None else int(keys.searchsorted(after, side="left"))
    return np.arange(start, max(start, stop), dtype=np.int64)


def exact_positions(keys: KeyArray, wanted: np.ndarray) -> np.ndarray:
    """Positions of the wanted keys that exist (missing keys select nothing, as in D4M)."""
    if len(keys) == 0 or len(wanted) == 0:
        return np.empty(0, np.int64)
    at = np.asarray(keys.searchsorted(wanted), dtype=np.int64)
    inside = at < len(keys)
    at, wanted = at[inside], wanted[inside]
    return np.unique(at[keys[at] == wanted].astype(np.int64))


def _from_d4m(keys: KeyArray, text: str, what: str) -> np.ndarray:
    items = d4m_items(text, what)
    parts: list[np.ndarray] = []
    exact: list[Any] = []
    i = 0
    while i < len(items):
        item = items[i]
        if i + 1 < len(items) and items[i + 1] == ":":
            # "a,:,b," inclusive; an empty or missing end is open
            hi_item = items[i + 2] if i + 2 < len(items) else ""
            lo = None if item == "" else _key_value(item, keys, what)
            hi = None if hi_item == "" else _key_value(hi_item, keys, what)
            parts.append(_span(keys, lo, hi))
            i += 3
        elif item == ":" and i == 0:
            # ":,b," : from the first key to b
            hi_item = items[1] if len(items) > 1 else ""
            parts.append(
                _span(keys, None, None if hi_item == "" else _key_value(hi_item, keys, what))
            )
            i += 2
        elif item.endswith("*") and is_text(keys):
            parts.append(_prefix_span(keys, item[:-1], what))
            i += 1
        else:
            exact.append(_key_value(item, keys, what))
            i += 1
    if exact:
        wanted = np.empty(len(exact), dtype=object) if is_text(keys) else np.array(exact)
        if is_text(keys):
            wanted[:] = exact
        parts.append(exact_positions(keys, wanted))
    return union_positions(parts)


def union_positions(parts: list[np.ndarray]) -> np.ndarray:
    if not parts:
        return np.empty(0, np.int64)
    if len(parts) == 1:
        return parts[0]
    return np.unique(np.concatenate(parts))


def positions(keys: KeyArray, selector: Any, what: str) -> np.ndarray | None:
    """Sorted positions along one axis that ``selector`` picks; None for all of them.

    Integers, integer slices and integer arrays are positions (0-based, as in
    Python; MATLAB's are 1-based); strings, string sequences and
    :class:`StartsWith` are keys; on a numeric axis the items of a D4M
    string are read as numbers.
    """
    n = len(keys)
    if isinstance(selector, slice):
        if selector == slice(None):
            return None
        for part in (selector.start, selector.stop, selector.step):
            if part is not None and not isinstance(part, (int, np.integer)):
                raise AssocError(
                    f"{what} slice {selector!r}: a slice takes integer positions; "
                    "select keys with a D4M range such as 'a,:,b,'"
                )
        return np.arange(n, dtype=np.int64)[selector]
    if isinstance(selector, str):
        if selector == ":":
            return None
        return _from_d4m(keys, selector, what)
    if isinstance(selector, StartsWith):
        return union_positions(
            [_prefix_span(keys, p, what) for p in d4m_items(selector.prefixes, what)]
        )
    if isinstance(selector, (int, np.integer)) and not isinstance(selector, bool):
        return _checked_positions(np.array([int(selector)]), n, what)
    if isinstance(selector, (np.ndarray, list, tuple)):
        array = np.asarray(selector) if not isinstance(selector, np.ndarray) else selector
        if array.ndim != 1:
            raise AssocError(f"{what} selector must be one-dimensional")
        if len(array) == 0:
            return np.empty(0, np.int64)
        if array.dtype.kind in "iu":
            return _checked_positions(array.astype(np.int64), n, what)
        if array.dtype.kind == "b":
            raise AssocError(f"{what}: select with positions or keys, not booleans")
        if array.dtype.kind in "UO":
            wanted = np.empty(len(array), dtype=object)
            wanted[:] = [str(x) if not isinstance(x, str) else x for x in array.tolist()]
            if not is_text(keys):
                return exact_positions(keys, np.array([_key_value(w, keys, what) for w in wanted]))
            return exact_positions(keys, wanted)
        if array.dtype.kind == "f":
            if is_text(keys):
                raise AssocError(f"{what}: numbers select numeric keys; this axis has string keys")
            return exact_positions(keys, array.astype(np.float64))
    raise AssocError(
        f"{what} selector {selector!r} is not one of ':', a D4M key string, "
        "StartsWith, a position, a slice or a sequence of keys or positions"
    )


def _checked_positions(at: np.ndarray, n: int, what: str) -> np.ndarray:
    bad = (at < -n) | (at >= n)
    if bad.any():
        raise AssocIndexError(
            f"{what} position {int(at[bad][0])} is out of range for {n} {what.split()[0]}s"
        )
    return np.unique(np.where(at < 0, at + n, at))
