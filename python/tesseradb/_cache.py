"""A least-recently-used cache bounded in bytes, for what never changes under its key
(a committed snapshot's chunk, a block of a file version): every kind's warm data."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Sized
from typing import Generic, TypeVar

__all__ = ["ByteBudgetCache"]

Key = TypeVar("Key", bound=Hashable)
Value = TypeVar("Value", bound=Sized)


class ByteBudgetCache(Generic[Key, Value]):
    """Values by key (each value's ``len`` is its size in bytes), least recently used
    dropped once their sizes pass ``budget``. A value larger than ``largest`` is not
    kept: one huge entry would push out everything else. Safe to share between threads."""

    def __init__(self, budget: int, largest: int | None = None) -> None:
        self.budget = budget
        self.largest = budget if largest is None else largest
        self._held = 0
        self._lock = threading.Lock()
        self._entries: OrderedDict[Key, Value] = OrderedDict()

    def get(self, key: Key) -> Value | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: Key, value: Value) -> None:
        if len(value) > self.largest:
            return
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = value
            self._held += len(value)
            while self._held > self.budget:
                _, dropped = self._entries.popitem(last=False)
                self._held -= len(dropped)

    def shrink_to(self, budget: int) -> None:
        """Lower the budget to ``budget`` bytes if it is higher (dropping the least
        recently used entries over it); a higher one leaves it as it is."""
        with self._lock:
            if budget >= self.budget:
                return
            self.largest = self.largest * budget // self.budget  # (the same share of it)
            self.budget = budget
            while self._held > self.budget and self._entries:
                _, dropped = self._entries.popitem(last=False)
                self._held -= len(dropped)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._held = 0
