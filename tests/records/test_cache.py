"""The CLOCK segment cache against a reference model of the algorithm, and its bounds."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tesseradb.records._cache import ClockCache


class ReferenceClock:
    """CLOCK written the plainest way, to compare with."""

    def __init__(self, capacity: int) -> None:
        self.capacity, self.ring, self.bits, self.sizes, self.hand = capacity, [], {}, {}, 0

    def get(self, key: int, size: int) -> None:
        if key in self.sizes:
            self.bits[key] = True
            return
        if size > self.capacity:
            return
        while sum(self.sizes.values()) + size > self.capacity:
            self.hand %= len(self.ring)
            victim = self.ring[self.hand]
            if self.bits[victim]:
                self.bits[victim] = False
                self.hand += 1
                continue
            self.ring.pop(self.hand)
            del self.bits[victim], self.sizes[victim]
        self.ring.append(key)
        self.bits[key], self.sizes[key] = False, size


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 50), st.lists(st.tuples(st.integers(0, 15), st.integers(1, 20)), max_size=200)
)
def test_matches_the_reference_clock(capacity: int, accesses: list[tuple[int, int]]) -> None:
    sizes: dict[int, int] = {}
    cache: ClockCache[int] = ClockCache(capacity, size=lambda key: sizes[key])
    model = ReferenceClock(capacity)
    for key, size in accesses:
        size = sizes.setdefault(key, size)  # a segment's size does not change
        assert cache.get(key, lambda key=key: key) == key
        model.get(key, size)
        assert set(model.sizes) == {k for k in range(16) if k in cache}
        assert cache.used == sum(model.sizes.values()) <= capacity


def test_hits_misses_and_loads() -> None:
    loads: list[int] = []

    def load(key: int) -> str:
        loads.append(key)
        return f"segment {key}"

    cache: ClockCache[str] = ClockCache(30, size=lambda value: 10)
    for key in (1, 2, 1, 3, 4, 1):
        assert cache.get(key, lambda key=key: load(key)) == f"segment {key}"
    assert loads == [1, 2, 3, 4]  # 1 was kept: it was hit, so 2 went
    assert cache.stats.hits == 2 and cache.stats.misses == 4 and cache.stats.evictions == 1
    assert 2 not in cache and 1 in cache
    cache.discard(1)
    assert 1 not in cache and cache.used == 20
    big: ClockCache[str] = ClockCache(5, size=lambda value: 10)
    assert big.get(9, lambda: "too big") == "too big" and len(big) == 0  # served, not kept
    with pytest.raises(ValueError):
        ClockCache(-1, size=len)


def test_concurrent_use_stays_within_capacity() -> None:
    cache: ClockCache[bytes] = ClockCache(1000, size=len)

    def work(offset: int) -> None:
        for i in range(2000):
            key = (i * 7 + offset) % 50
            assert cache.get(key, lambda key=key: bytes(40 + key)) == bytes(40 + key)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.used <= 1000 and cache.used == sum(40 + k for k in range(50) if k in cache)


def test_peek_answers_a_hit_as_get_does_and_loads_nothing() -> None:
    cache: ClockCache[str] = ClockCache(100, size=len)
    assert cache.peek(1) is None and cache.stats.misses == 0 and len(cache) == 0
    assert cache.get(1, lambda: "one") == "one"
    hits = cache.stats.hits
    assert cache.peek(1) == "one" and cache.stats.hits == hits + 1
    # a peeked entry is referenced: the hand passes over it once, as after a get
    cache.get(2, lambda: "x" * 50)
    cache.get(3, lambda: "y" * 60)  # makes room: 2 (not referenced) goes, 1 stays
    assert 1 in cache and 2 not in cache
