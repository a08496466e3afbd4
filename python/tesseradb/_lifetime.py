"""Closed means closed: every handle of a database refuses every call once it is closed.

A :class:`Lifetime` is one open database's "still open?". The registry hands it to
every kind (``KindContext.lifetime``) and marks it closed when the database closes;
each handle class a kind gives out (an array, a stream, a collection, an associative
table, an attachment) is decorated with :func:`refuses_when_closed`, so that each of its
public methods, properties and item accesses first asks the handle's ``_check_open``,
and raises :class:`~tesseradb.errors.DatabaseClosedError` before touching anything.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tesseradb.errors import DatabaseClosedError

__all__ = ["Lifetime", "refuses_when_closed"]


class Lifetime:
    """Whether the database at ``path`` is still open."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.closed = False

    def check(self, what: str) -> None:
        if self.closed:
            raise DatabaseClosedError(
                f"{what}: its database {self.path} is closed; open it again to use it"
            )


# dunders that read or write an object's data, guarded like public methods
_GUARDED_DUNDERS = frozenset(
    {"__getitem__", "__setitem__", "__iter__", "__len__", "__contains__", "__array__"}
)
# what stays callable after closing: closing again, and saying what the handle is
_EXEMPT = frozenset({"close", "__repr__", "__enter__", "__exit__", "__del__"})

C = TypeVar("C", bound=type)


def _guard(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._check_open()
        return fn(self, *args, **kwargs)

    guarded.__refuses_when_closed__ = True  # type: ignore[attr-defined]
    return guarded


def refuses_when_closed(cls: C) -> C:
    """Guard every public method, property and item access defined on ``cls`` (not those
    it inherits: decorate each class of a hierarchy) with ``self._check_open()``."""
    for name, member in list(vars(cls).items()):
        if name in _EXEMPT or (name.startswith("_") and name not in _GUARDED_DUNDERS):
            continue
        if isinstance(member, property):
            if member.fget is not None and not hasattr(member.fget, "__refuses_when_closed__"):
                setattr(
                    cls,
                    name,
                    property(_guard(member.fget), member.fset, member.fdel, member.__doc__),
                )
        elif isinstance(member, (staticmethod, classmethod)):
            continue
        elif callable(member) and not hasattr(member, "__refuses_when_closed__"):
            setattr(cls, name, _guard(member))
    return cls
