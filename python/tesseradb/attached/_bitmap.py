"""Binned bitmap indexes (FastBit's design) over one column of one attached file.

Values fall into bins; each bin keeps the roaring bitmap of its rows and the
smallest and largest value actually in it. A query range is answered from
the bins it covers fully ("sure" rows) plus the edge bins it cuts ("maybe"
rows), whose raw values the scan checks; an exact index (one bin per
distinct value, for keys and codes) has no edge bins. NaN rows have a bin of
their own and, as in DuckDB's order, sort above every other value.

Binning: explicit ``edges``, ``count`` bins of equal weight (quantiles),
``precision`` d (values rounded to d significant digits, FastBit's
``precision=d``), or ``exact``. Encoding: ``equality`` (a bitmap per bin, the
default) or ``range`` (bitmap j holds bins 0..j, so any run of bins is one
difference of two bitmaps).

A sidecar file holds one index: a magic, a JSON header (column, binning,
identity of the indexed file and dataset, bitmap lengths), the serialised
bitmaps and a SHA-256 of all of it. A file that fails any check is not used.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tesseradb.errors import IndexFileError, InvalidArgumentError

if TYPE_CHECKING:
    import numpy as np
    from pyroaring import BitMap

    from tesseradb.sql.predicate import ColumnDomain

__all__ = ["Binning", "BitmapIndex", "IndexFileError"]

MAGIC = b"TSDBBMI\x01"
EXACT_LIMIT = 100_000  # distinct values up to which the default binning is exact


@dataclass(frozen=True)
class Binning:
    """How values are binned: ``exact``, ``edges``, ``count`` or ``precision`` (and the default ``auto``)."""

    kind: str = "auto"
    edges: tuple[float, ...] = ()
    count: int = 0
    precision: int = 0

    def to_spec(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "edges": list(self.edges),
            "count": self.count,
            "precision": self.precision,
        }

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> Binning:
        return cls(**{**spec, "edges": tuple(spec["edges"])})

    @classmethod
    def from_options(
        cls,
        where: str,
        edges: Any = None,
        count: Any = None,
        precision: Any = None,
        exact: Any = False,
    ) -> Binning:
        """The binning a user's ``create_index`` options ask for, refusing bad or clashing ones."""
        from tesseradb.errors import InvalidArgumentError

        for option, value in (("count", count), ("precision", precision)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise InvalidArgumentError(
                    f"{where}: {option} must be a whole number >= 1, not {value!r}"
                )
        if edges is not None and (
            isinstance(edges, (str, bytes))
            or not isinstance(edges, (list, tuple))
            or not all(isinstance(e, (int, float)) and not isinstance(e, bool) for e in edges)
        ):
            raise InvalidArgumentError(f"{where}: edges must be a list of numbers, not {edges!r}")
        chosen = [
            k
            for k, v in (
                ("edges", edges),
                ("count", count),
                ("precision", precision),
                ("exact", exact or None),
            )
            if v is not None
        ]
        if len(chosen) > 1:
            raise InvalidArgumentError(f"choose one binning, not {' and '.join(chosen)}")
        return cls(
            kind=chosen[0] if chosen else "auto",
            edges=tuple(edges or ()),
            count=count or 0,
            precision=precision or 0,
        )


class BitmapIndex:
    def __init__(
        self,
        column: str,
        exact: bool,
        bin_min: np.ndarray,
        bin_max: np.ndarray,
        bitmaps: list[BitMap],
        nan: BitMap,
        rows: int,
        encoding: str,
        identity: dict[str, Any],
        binning: Binning,
    ) -> None:
        self.column = column
        self.exact = exact
        self.bin_min = bin_min  # smallest value in each (non-empty) bin, ascending
        self.bin_max = bin_max
        self.bitmaps = bitmaps  # per bin (equality) or cumulative (range)
        self.nan = nan
        self.rows = rows
        self.encoding = encoding
        self.identity = identity
        self.binning = binning
        self._counts: Any = None  # running row counts per bin, for estimates

    # --- building -------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        column: str,
        values: np.ndarray,
        binning: Binning = Binning(),
        encoding: str = "equality",
        identity: dict[str, Any] | None = None,
    ) -> BitmapIndex:
        import numpy as np
        from pyroaring import BitMap

        if encoding not in ("equality", "range"):
            raise InvalidArgumentError(f"encoding must be 'equality' or 'range', not {encoding!r}")
        rows = len(values)
        if values.dtype.kind == "S":
            values = values.astype(object).astype(str)
        nan_rows = (
            np.flatnonzero(np.isnan(values)) if values.dtype.kind == "f" else np.empty(0, np.int64)
        )
        valid = np.ones(rows, bool)
        valid[nan_rows] = False
        present = values[valid] if len(nan_rows) else values
        ids = np.flatnonzero(valid) if len(nan_rows) else np.arange(rows)
        kind, edges = cls._edges(present, binning)
        if kind == "exact":
            _, bin_of = np.unique(present, return_inverse=True)
        else:
            bin_of = np.searchsorted(edges, present, side="right")
        order = np.argsort(bin_of, kind="stable")
        sorted_bins = bin_of[order]
        starts = (
            np.flatnonzero(np.r_[True, sorted_bins[1:] != sorted_bins[:-1]])
            if len(order)
            else np.empty(0, np.int64)
        )
        # no bins at all when every value is NaN (they have their own bitmap)
        ends = np.r_[starts[1:], len(order)] if len(order) else np.empty(0, np.int64)
        sorted_values = present[order]
        bitmaps: list[BitMap] = []
        mins, maxs = [], []
        running = BitMap()
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            members = ids[order[a:b]].astype(np.uint32)
            bm = BitMap(members)
            chunk = sorted_values[a:b]
            if chunk.dtype.kind in "USO":  # numpy has no min/max for strings
                items = chunk.tolist()
                mins.append(min(items))
                maxs.append(max(items))
            else:
                mins.append(chunk.min())
                maxs.append(chunk.max())
            if encoding == "range":
                running = running | bm
                bitmaps.append(running.copy() if hasattr(running, "copy") else BitMap(running))
            else:
                bitmaps.append(bm)
        for bm in bitmaps:
            bm.run_optimize()
        dtype = present.dtype if present.dtype.kind != "O" else np.dtype(str)
        spec = Binning(
            kind=kind,
            edges=tuple(edges.tolist()) if kind != "exact" else (),
            count=binning.count,
            precision=binning.precision,
        )
        return cls(
            column,
            kind == "exact",
            np.asarray(mins, dtype=dtype),
            np.asarray(maxs, dtype=dtype),
            bitmaps,
            BitMap(nan_rows.astype(np.uint32)),
            rows,
            encoding,
            identity or {},
            spec,
        )

    @staticmethod
    def _edges(values: np.ndarray, binning: Binning) -> tuple[str, np.ndarray]:
        import numpy as np

        kind = binning.kind
        if kind == "auto":
            # exact for keys, codes and strings; floats get equal-weight bins
            if values.dtype.kind in "OUS":
                kind = "exact"
            elif values.dtype.kind in "iub":
                distinct = len(np.unique(values)) if len(values) <= 50_000_000 else EXACT_LIMIT + 1
                kind = "exact" if distinct <= EXACT_LIMIT else "count"
            else:
                kind = "count"
            binning = Binning(kind=kind, count=binning.count or 1000)
        if kind == "exact":
            return "exact", np.empty(0)
        if kind == "edges":
            if not binning.edges:
                raise InvalidArgumentError("binning by edges needs at least one edge")
            if values.dtype.kind in "OUS":
                return "edges", np.unique(np.asarray(binning.edges, dtype=str))
            # float64 edges: a fractional or out-of-range edge is fine against any numbers
            return "edges", np.unique(np.asarray(binning.edges, dtype=np.float64))
        if kind == "count":
            if binning.count < 1:
                raise InvalidArgumentError("binning by count needs count >= 1")
            finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
            if not len(finite):
                return "count", np.empty(0, dtype=values.dtype)
            quantiles = np.quantile(
                finite, np.linspace(0, 1, binning.count + 1)[1:-1], method="lower"
            )
            return "count", np.unique(quantiles)
        if kind == "precision":
            if binning.precision < 1:
                raise InvalidArgumentError("binning by precision needs precision >= 1")
            return "precision", _precision_edges(values, binning.precision)
        raise InvalidArgumentError(
            f"unknown binning {kind!r}; use exact, edges, count or precision"
        )

    # --- answering ------------------------------------------------------------------
    def lookup(self, domain: ColumnDomain) -> tuple[BitMap, BitMap]:
        """Rows surely in ``domain`` and rows maybe in it (to check against the raw values)."""
        from pyroaring import BitMap

        sure_bins: list[int] = []
        maybe_bins: list[int] = []
        if domain.keys is not None:
            self._key_bins(domain, sure_bins, maybe_bins)
        else:
            for iv in domain.ranges:
                self._interval_bins(iv, sure_bins, maybe_bins)
        sure = self._union(sure_bins)
        maybe = self._union(maybe_bins)
        if self.nan and self._nan_matches(domain):
            sure |= self.nan
        maybe -= sure
        return sure, maybe if maybe else BitMap()

    def estimate(self, domain: ColumnDomain) -> int:
        """An upper bound of the matching rows, from the bins' sizes alone (no bitmap work)."""
        import numpy as np

        if self._counts is None:
            sizes = [len(bm) for bm in self.bitmaps]
            if self.encoding == "range":  # bitmap j holds bins 0..j: a bin's size is a difference
                sizes = np.diff([0, *sizes]).tolist()
            self._counts = np.concatenate([[0], np.cumsum(sizes)])
        total = len(self.nan) if self._nan_matches(domain) else 0
        if domain.keys is not None:
            try:
                where = np.unique(np.searchsorted(self.bin_max, domain.keys, side="left"))
            except TypeError:
                return self.rows
            where = where[where < len(self.bin_min)]
            sizes = np.diff(self._counts)
            return int(total + sizes[where].sum())
        for iv in domain.ranges:
            try:
                a = 0 if iv.lo is None else int(np.searchsorted(self.bin_max, iv.lo, side="left"))
                b = (
                    len(self.bin_min)
                    if iv.hi is None
                    else int(np.searchsorted(self.bin_min, iv.hi, side="right"))
                )
            except TypeError:
                return self.rows
            if b > a:
                total += int(self._counts[b] - self._counts[a])
        return total

    def count(self, domain: ColumnDomain) -> tuple[int, int]:
        """Lower and upper bounds of the number of matching rows (equal when the bins settle it)."""
        sure, maybe = self.lookup(domain)
        return len(sure), len(sure) + len(maybe)

    def _nan_matches(self, domain: ColumnDomain) -> bool:
        if domain.keys is not None:
            return bool(
                domain.keys.dtype.kind == "f" and any(math.isnan(k) for k in domain.keys.tolist())
            )
        return any(iv.hi is None for iv in domain.ranges)

    def _interval_bins(self, iv: Any, sure: list[int], maybe: list[int]) -> None:
        import numpy as np

        n = len(self.bin_min)
        try:
            if iv.lo is None:
                a = 0
            else:
                a = int(
                    np.searchsorted(
                        self.bin_max, iv.lo, side="left" if iv.lo_inclusive else "right"
                    )
                )
            if iv.hi is None:
                b = n - 1
            else:
                b = (
                    int(
                        np.searchsorted(
                            self.bin_min, iv.hi, side="right" if iv.hi_inclusive else "left"
                        )
                    )
                    - 1
                )
        except TypeError:  # a bound of another type than the column: nothing is sure
            maybe.extend(range(n))
            return
        if a > b:
            return
        for j in (a, b) if a != b else (a,):
            (
                sure
                if iv.contains(_py(self.bin_min[j])) and iv.contains(_py(self.bin_max[j]))
                else maybe
            ).append(j)
        sure.extend(range(a + 1, b))

    def _key_bins(self, domain: ColumnDomain, sure: list[int], maybe: list[int]) -> None:
        import numpy as np

        keys = domain.keys
        try:
            where = np.searchsorted(self.bin_max, keys, side="left")
        except TypeError:
            maybe.extend(range(len(self.bin_min)))
            return
        inside = where < len(self.bin_min)
        hits = np.unique(where[inside][self.bin_min[where[inside]] <= keys[inside]])
        for j in hits.tolist():
            exact_bin = self.bin_min[j] == self.bin_max[j]
            (sure if exact_bin and domain.ranges.contains(_py(self.bin_min[j])) else maybe).append(
                j
            )

    def _union(self, bins: list[int]) -> BitMap:
        from pyroaring import BitMap

        if not bins:
            return BitMap()
        bins = sorted(set(bins))
        if self.encoding == "equality":
            return BitMap.union(*(self.bitmaps[j] for j in bins))
        # range encoding: runs of consecutive bins are one difference each
        out = BitMap()
        start = prev = bins[0]
        for j in [*bins[1:], None]:
            if j is not None and j == prev + 1:
                prev = j
                continue
            run = (
                self.bitmaps[prev] - self.bitmaps[start - 1]
                if start > 0
                else self.bitmaps[prev].copy()
            )
            out |= run
            if j is not None:
                start = prev = j
        return out

    @property
    def bins(self) -> int:
        return len(self.bitmaps)

    @property
    def nbytes(self) -> int:
        return sum(len(bm.serialize()) for bm in self.bitmaps) + len(self.nan.serialize())

    # --- the sidecar file -------------------------------------------------------------
    def save(self, path: Path) -> None:
        """Write atomically: a temporary name, fsync, rename."""
        data = self.to_bytes()
        tmp = path.with_name(path.name + ".tmp")
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def to_bytes(self) -> bytes:
        """The sidecar file's bytes (what :meth:`from_bytes` reads back)."""
        blobs = [bm.serialize() for bm in self.bitmaps] + [self.nan.serialize()]
        header = {
            "column": self.column,
            "exact": self.exact,
            "rows": self.rows,
            "encoding": self.encoding,
            "identity": self.identity,
            "binning": self.binning.to_spec(),
            "dtype": self.bin_min.dtype.str,
            "bin_min": _jsonable(self.bin_min),
            "bin_max": _jsonable(self.bin_max),
            "lengths": [len(b) for b in blobs],
        }
        head = json.dumps(header).encode()
        body = MAGIC + struct.pack("<Q", len(head)) + head + b"".join(blobs)
        return body + hashlib.sha256(body).digest()

    @classmethod
    def load(cls, path: Path) -> BitmapIndex:
        return cls.from_bytes(path.read_bytes(), path)

    @classmethod
    def from_bytes(cls, data: bytes, path: Path | str) -> BitmapIndex:
        """The index a sidecar file's bytes hold (``path`` names it in errors), checked."""
        import numpy as np
        from pyroaring import BitMap

        if len(data) < len(MAGIC) + 8 + 32 or not data.startswith(MAGIC):
            raise IndexFileError(f"{path} is not a TesseraDB bitmap index")
        body, digest = data[:-32], data[-32:]
        if hashlib.sha256(body).digest() != digest:
            raise IndexFileError(f"{path} is corrupt (checksum mismatch)")
        (head_len,) = struct.unpack_from("<Q", body, len(MAGIC))
        start = len(MAGIC) + 8
        try:
            header = json.loads(body[start : start + head_len])
            pos = start + head_len
            blobs = []
            for n in header["lengths"]:
                blobs.append(BitMap.deserialize(body[pos : pos + n]))
                pos += n
            dtype = np.dtype(header["dtype"])
            binning = Binning.from_spec(header["binning"])
            return cls(
                header["column"],
                header["exact"],
                np.asarray(header["bin_min"], dtype=dtype),
                np.asarray(header["bin_max"], dtype=dtype),
                blobs[:-1],
                blobs[-1],
                int(header["rows"]),
                header["encoding"],
                header["identity"],
                binning,
            )
        except (KeyError, ValueError, TypeError) as err:
            raise IndexFileError(f"{path} has an unreadable header: {err}") from err


def _py(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _jsonable(values: np.ndarray) -> list[Any]:
    out = values.tolist()
    if values.dtype.kind == "f":
        return [v if math.isfinite(v) else str(v) for v in out]  # JSON has no infinities
    return out


def _precision_edges(values: np.ndarray, digits: int) -> np.ndarray:
    """Bin edges at every value rounded to ``digits`` significant digits."""
    import numpy as np

    finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values.astype(np.float64)
    if not len(finite):
        return np.empty(0)
    finite = finite.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        magnitude = np.where(finite == 0, 0, np.floor(np.log10(np.abs(finite))))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        scale = 10.0 ** (digits - 1 - magnitude)
        rounded = np.floor(finite * scale) / scale
    # values near the float limits overflow when scaled: they simply get no edge of their own
    return np.unique(rounded[np.isfinite(rounded)])
