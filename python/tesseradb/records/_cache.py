"""A memory-bounded cache of segments read back from disk, with CLOCK replacement.

MDDS caches segments (not result sets) and evicts with a CLOCK variant
(§V-C). Entries sit on a circular list with a reference bit; a hit sets the
bit; to make room, the hand sweeps the circle, clearing set bits and evicting
the first entry whose bit is clear. Loading happens outside the lock, so a
slow read never blocks other queries (two threads may load the same segment
at once; one copy is kept). Ingest never touches the cache: new segments are
served from memory by the store until they are written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from tesseradb.errors import InvalidArgumentError

__all__ = ["CacheStats", "ClockCache"]

V = TypeVar("V")


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0


class ClockCache(Generic[V]):
    """Values by key within ``capacity`` bytes (``size(value)`` says how many each takes)."""

    def __init__(self, capacity: int, size: Callable[[V], int]) -> None:
        if capacity < 0:
            raise InvalidArgumentError("a cache capacity is a number of bytes, 0 or more")
        self.capacity = capacity
        self._size = size
        self._slots: list[int] = []  # keys on the circle
        self._entries: dict[int, tuple[V, int]] = {}  # key -> (value, bytes)
        self._referenced: dict[int, bool] = {}
        self._hand = 0
        self._used = 0
        self._lock = threading.Lock()
        self.stats = CacheStats()

    @property
    def used(self) -> int:
        return self._used

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: int) -> bool:
        return key in self._entries

    def get(self, key: int, load: Callable[[], V]) -> V:
        """The cached value of ``key``, loading (and caching) it with ``load()`` on a miss."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._referenced[key] = True
                self.stats.hits += 1
                return entry[0]
            self.stats.misses += 1
        value = load()  # outside the lock: other queries go on meanwhile
        nbytes = self._size(value)
        with self._lock:
            if key in self._entries:  # loaded meanwhile by another thread
                return self._entries[key][0]
            self._insert(key, value, nbytes)
            return value

    def peek(self, key: int) -> V | None:
        """The cached value of ``key`` (a hit, as :meth:`get` counts it), or None when it
        is not cached (nothing is loaded, and no miss is counted)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._referenced[key] = True
            self.stats.hits += 1
            return entry[0]

    def _insert(self, key: int, value: V, nbytes: int) -> None:
        if nbytes > self.capacity:
            return  # too big to keep: served, not cached
        while self._used + nbytes > self.capacity:
            self._evict_one()
        self._slots.append(key)
        self._entries[key] = (value, nbytes)
        self._referenced[key] = False  # CLOCK: a new entry must be hit again to be kept
        self._used += nbytes

    def put(self, key: int, value: V) -> None:
        """Cache ``value`` under ``key`` (unless it is larger than the whole cache)."""
        nbytes = self._size(value)
        with self._lock:
            if key in self._entries:
                self._remove(key)
            self._insert(key, value, nbytes)

    def clear(self) -> None:
        """Drop every entry (the stream is closing: its memory goes back now)."""
        with self._lock:
            self._slots.clear()
            self._entries.clear()
            self._referenced.clear()
            self._hand = 0
            self._used = 0

    def discard(self, key: int) -> None:
        with self._lock:
            if key in self._entries:
                self._remove(key)

    def _evict_one(self) -> None:
        while True:
            if self._hand >= len(self._slots):
                self._hand = 0
            key = self._slots[self._hand]
            if self._referenced[key]:
                self._referenced[key] = False  # a second chance
                self._hand += 1
                continue
            self._remove(key)
            self.stats.evictions += 1
            return

    def _remove(self, key: int) -> None:
        position = self._slots.index(key)
        self._slots.pop(position)
        if position < self._hand:
            self._hand -= 1
        _, nbytes = self._entries.pop(key)
        del self._referenced[key]
        self._used -= nbytes
