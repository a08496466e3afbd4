"""Typed stub of the Rust extension module ``tesseradb._core``."""

from collections.abc import Iterable, Sequence
from typing import Any, final

import numpy as np
import numpy.typing as npt

__all__ = [
    "ChunkLayout",
    "Grouper",
    "KdTree",
    "SegmentTree",
    "TripleCells",
    "__version__",
    "build_info",
    "build_segments",
    "crc32c_bytes",
    "decode_chunks",
    "decode_column",
    "encode_chunks",
    "encode_columns",
    "flatten_documents",
    "gather",
    "gather_strings",
    "intern_keys",
    "kdtree_partition",
    "load_documents",
    "merge_keys",
    "pack_documents",
    "pad_strings",
    "rebuild_documents",
    "rebuild_packed_documents",
    "reduce_chunks",
    "regrid_block",
    "regrid_chunks",
    "search_segments",
    "search_text",
    "sparse_product",
    "sql_insert_values",
    "ssdb_cook",
    "ssdb_density_counts",
    "ssdb_polygons_overlap_box",
    "top_segments",
    "triple_bounds",
    "triples_csr",
    "unpack_records",
    "unpack_texts",
]

__version__: str

def build_info() -> dict[str, str | int]:
    """Facts about this build of the Rust kernels.

    Returns
    -------
    dict
        ``version`` (the crate version, equal to the package version),
        ``profile`` (``release`` or ``debug``), ``target_arch``, ``target_os``
        and ``threads`` (the size of the rayon pool the kernels share).
    """

def crc32c_bytes(data: np.ndarray) -> int:
    """The CRC-32C (Castagnoli) of a one-dimensional uint8 array, with the GIL released.

    Parameters
    ----------
    data
        The bytes (a numpy uint8 array, or a memory map of a file viewed as one).

    Returns
    -------
    int
        The checksum, an unsigned 32-bit integer: what each stored file of the
        database that has no checksum of its own carries in its manifest.
    """

def flatten_documents(
    texts: list[Any],
    first_objid: int,
    wide: bool,
    limits: tuple[int, int, int, int, int, bool],
    group: int = 1,
    whole: bool = False,
    negative_zero: bool = True,
) -> tuple[list[list[tuple[Any, ...]]], list[int]]:
    """Argo's key flattening of JSON texts (``bytes`` or ``str``) and plain dicts.

    Texts are parsed in parallel without the GIL; dicts are walked with it.
    Item ``i`` gets objid ``first_objid + i``. Returns the rows and the
    positions of the items it refused: anything not a JSON object it can
    read exactly as Python's ``json`` would (malformed text, numbers beyond
    64-bit integers or doubles, lone surrogates), dicts holding anything but
    the exact built-in JSON types (subclasses included) or that
    ``documents.flatten_document`` would reject, documents past one of the
    ``limits`` (depth, key characters, string bytes, key and string bytes or 0
    for none, leaves, whether U+0000 may appear; see ``documents.DocumentLimits``),
    and anything else. With
    ``wide`` the rows are one list of ``(objid, keystr, ord, valstr, valnum,
    valint, valbool, valkind)``; otherwise four lists, for strings
    ``(..., valstr)``, numbers ``(..., valnum, valint)``, booleans
    ``(..., valbool)`` and null/empty containers ``(..., valkind)``, each
    starting ``objid, keystr, ord``. With ``group`` above 1 each tuple holds
    the values of ``group`` such rows one after another (the last tuple of a
    list maybe fewer), as a multi-row INSERT binds them. With ``whole`` one
    more list follows: ``(objid, packed)`` per document, grouped alike, where
    ``packed`` is ``pack_documents`` of exactly ``json.dumps(document,
    ensure_ascii=False)`` of the document its rows rebuild into (the hybrid
    mapping's object table); without ``negative_zero`` the text has 0.0 for
    -0.0, as a backend that stores it so gives it back in the rows.
    """

def pack_documents(texts: list[str]) -> list[bytes]:
    """JSON texts packed as the hybrid mapping keeps them: one zstd frame each."""

def load_documents(packed: list[bytes]) -> list[Any]:
    """The values of ``pack_documents``' frames, as ``json.loads`` reads each text.

    Unpacked in parallel without the GIL, then read straight into Python
    objects, with one string per distinct key across all the texts. Raises
    ``ValueError`` naming the position of a damaged frame or a text that is
    not JSON.
    """

def sql_insert_values(
    prefix: str, tuples: list[tuple[Any, ...]], width: int, max_bytes: int
) -> list[bytes]:
    """Multi-row INSERT statements for the rows of ``tuples``: each is ``prefix``
    (``INSERT INTO t (a, b) VALUES ``) and rows ``(1, X'61')`` joined by commas, a next
    statement begun once one has reached ``max_bytes`` (so one is at most that and a
    row); ``width`` values a row, a tuple holding one row or several rows' values one
    after another. Strings are
    ``_utf8mb4 X'..'`` literals, bytes ``X'..'``, floats the shortest digits that read
    back as them with an exponent (a DOUBLE). Values: None, bool, int (64-bit), finite
    float, str, bytes; another raises ``TypeError``, an int past 64 bits or a float
    without a literal ``ValueError``, naming the value's position.
    """

def unpack_texts(packed: list[bytes]) -> list[str]:
    """The JSON texts of ``pack_documents``' frames, unpacked without the GIL and
    checked to be JSON (their callers hand them on unparsed).

    Raises ``ValueError`` naming the position of a damaged frame or text.
    """

def rebuild_documents(rows: Iterable[tuple[Any, ...]]) -> list[tuple[int, dict[str, Any]]]:
    """``(objid, document)`` from Argo rows ``(objid, keystr, ord, valstr, valnum, valint, valbool, valkind)``.

    Rows come grouped by objid and in ``ord`` order within it; the same
    documents as ``tesseradb.documents.rebuild_documents`` (the reference).
    Raises ``ValueError`` for a key the flattening cannot have made.
    """

def rebuild_packed_documents(texts: list[str]) -> list[tuple[int, dict[str, Any]]]:
    """``(objid, document)`` from Argo rows packed by a backend into JSON texts.

    Each text is a JSON array of rows ``[objid, keystr, ord, valstr, valnum,
    valint, valbool, valkind]`` (``valnum`` as the double's exact decimal
    text, ``valbool`` 0 or 1), one text per table, rows in any order; a row
    given twice is kept once. The texts are read and the rows put in (objid,
    ord) order without the GIL, then rebuilt as :func:`rebuild_documents`
    does. Raises ``ValueError`` for a text that is not such an array or a
    key the flattening cannot have made.
    """

def kdtree_partition(
    coords: npt.NDArray[np.float64], max_records: int
) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]:
    """Kd-tree partitioning (MDDS IV-B) of the rows of ``coords`` into segments of at most ``max_records``.

    Builds the chunk's kd-tree, then from the root, larger subtrees first,
    makes each subtree that fits a segment. Returns per row its segment
    number, and per segment the depth of its root (its own kd-tree starts
    from that dimension).
    """

def search_segments(
    trees: list[KdTree],
    lo: list[float],
    hi: list[float],
    iterator: str = "kdtree",
    probes: Sequence[tuple[int, float]] = ...,
) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32], list[bool], list[int]]:
    """Rows inside ``[lo, hi]`` in many segments' trees at once, searched in parallel (rayon).

    Returns ``(segments, rows, held, ways)``: per record found, its tree's position
    in ``trees`` and its row in that segment, grouped by tree in order, rows
    ascending within a tree; and per probe ``(dimension, value)`` whether a
    record found holds that value on that dimension (as DuckDB compares:
    -0.0 equals 0.0, NaN equals NaN).
    ``iterator``: ``kdtree`` descends each tree, ``sequential`` looks at
    every row (MDDS's sequential iterator), ``auto`` chooses per tree: the
    shortest run of one of its key orders when it holds at most 64 nodes, or
    fewer than the share of the tree's top levels a descent would enter (and
    than a third of the tree); else every row when a third of those levels or
    more would be entered, else a descent. ``ways`` (the fourth result) says
    per tree how: -1 a descent, -2 every row, k >= 0 through key order k.
    """

def top_segments(
    trees: list[KdTree],
    lo: list[float],
    hi: list[float],
    dim: int,
    descending: bool,
    count: int,
    distinct: bool,
) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32], list[int | None]] | None:
    """The records of many segments inside ``[lo, hi]`` that may be among the first
    ``count`` in dimension ``dim``'s order (``distinct``: the first ``count`` distinct
    keys), every tie with the last kept: what ``ORDER BY dim LIMIT count`` needs.

    Each tree's run of a key order sorted on ``dim`` under the box (its
    dimensions before ``dim`` pinned to one value) is read from its first
    end, trees best first (by the best key each holds on ``dim``), until a key
    falls behind the ``count``-th met so far; a tree whose best key falls
    behind is not read. Returns ``(segments, rows, ways)`` as
    :func:`search_segments` does, ``ways`` per tree the key order read (None:
    not read); None when some tree has no such order, or ``count`` is 0.
    """

def build_segments(
    coords: npt.NDArray[np.float64],
    labels: npt.NDArray[np.uint32],
    initial_dimensions: list[int],
    orders: list[list[int]] = ...,
) -> tuple[npt.NDArray[np.uint32], list[int], list[tuple[KdTree, list[float], list[float]]]]:
    """The segments of a chunk, built in parallel (rayon) without the GIL.

    ``labels[r]`` is row r's segment, below ``len(initial_dimensions)``.
    Returns ``(order, bounds, segments)``: the rows grouped by segment (in
    row order within one), where each group starts in ``order`` (one more
    entry than segments), and per segment its kd-tree over its rows in that
    order (from dimension ``initial_dimensions[s]``, with a key order on
    each of ``orders``) and its box ``lo``, ``hi`` (NaN, if present, as the
    largest value; -0.0 as 0.0).
    """

def unpack_records(
    buffer: npt.NDArray[np.uint8], fields: list[tuple[int, bool]]
) -> tuple[
    list[npt.NDArray[np.uint8] | tuple[npt.NDArray[np.int32], npt.NDArray[np.uint8]]],
    tuple[int, int] | None,
]:
    """Columns of packed binary records, each field given as ``(width, is_char)``.

    A fixed-width field gives its values' native bytes; a ``char`` field an
    ``(offsets, data)`` pair in Arrow's string layout, trailing NULs dropped.
    Returns ``(columns, None)``, or ``([], (record, field))`` for the first
    ``char`` value (by record, then field) that is not UTF-8. Raises
    ``ValueError`` for a buffer that is not whole records.
    """

def gather_strings(
    columns: list[tuple[npt.NDArray[np.int32], npt.NDArray[np.uint8]]],
    segments: npt.NDArray[np.uint32],
    rows: npt.NDArray[np.uint32],
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.uint8]] | None:
    """Strings ``rows[i]`` of ``columns[segments[i]]``, each column an Arrow string
    column's offsets (moved by the array's offset) and data: the offsets and data of
    one Arrow ``string`` array, or None past 2 GiB of text."""

def gather(
    columns: list[npt.NDArray[np.uint8]],
    itemsize: int,
    segments: npt.NDArray[np.uint32],
    rows: npt.NDArray[np.uint32],
) -> npt.NDArray[np.uint8]:
    """Item ``rows[i]`` of ``columns[segments[i]]`` for each i, concatenated.

    ``columns`` are byte views of one fixed-width field in many segments,
    ``itemsize`` bytes per item. Raises ``ValueError`` for positions outside them.
    """

def encode_columns(
    columns: Sequence[tuple[npt.NDArray[np.uint8], int]], level: int
) -> list[tuple[int, bytes]]:
    """Each (raw bytes, item width) column as a segment file stores it: (encoding, stored bytes).

    Encoding 2 is zstd at ``level`` of the byte-shuffled column, 0 the raw bytes
    where compression would not make them smaller. Runs with the GIL released.
    """

def decode_column(stored: bytes, encoding: int, width: int, raw_len: int) -> bytes:
    """The ``raw_len`` raw bytes of a column stored with ``encoding`` (0 raw, 1 zstd, 2 shuffled zstd).

    Raises ``ValueError`` when the stored bytes do not decode to exactly that.
    """

def intern_keys(
    sources: list[object], arrow: bool = False
) -> list[
    tuple[
        list[str] | npt.NDArray[np.float64] | tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]],
        npt.NDArray[np.int64],
    ]
]:
    """Sorted unique keys of each source and each input key's place among them.

    A source is a D4M string (its last character the delimiter), a list of
    ``str``, a float64 array (no NaN; -0.0 is 0.0) or an ``(n, width)``
    uint32 view of a numpy fixed-width ``str`` array. Keys are hashed once,
    radix-partitioned by hash and interned per partition; only the unique
    keys are sorted (UTF-8 byte order, which is code point order). Sources
    are interned in parallel, each as soon as it is read, without the GIL.

    Returns, per source, (unique keys: a list of ``str`` or a float64 array,
    ids: int64 array); with ``arrow``, string keys come as (offsets, data),
    the buffers of an Arrow large string array, and no Python string is
    made. Raises ``TypeError``/``ValueError`` naming the source
    and the item ("source 1: item 5 is int, not str").
    """

def triples_csr(
    rows: npt.NDArray[np.int64],
    cols: npt.NDArray[np.int64],
    vals: npt.NDArray[np.float64],
    nrows: int,
    ncols: int,
    aggregate: str,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """(indptr, indices, data) of the ``nrows`` x ``ncols`` matrix of the triples.

    Colliding triples are combined by ``aggregate`` (``min``, ``max``,
    ``sum``, ``first``, ``last``) in input order; entries that come to zero
    are dropped; columns ascend within a row. Raises ``ValueError`` for
    triples of unequal lengths, an id outside its axis or an unknown
    aggregate.
    """

def merge_keys(
    a: list[str] | npt.NDArray[np.float64], b: list[str] | npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], int]:
    """Places of two sorted unique key lists in their sorted union.

    Both are lists of ``str`` or both float64 arrays. Returns (places of
    ``a``, places of ``b``, length of the union): a linear merge.
    """

def sparse_product(
    a_indptr: npt.NDArray[np.int64],
    a_indices: npt.NDArray[np.int64],
    a_data: npt.NDArray[np.float64],
    inner: npt.NDArray[np.int64],
    b_indptr: npt.NDArray[np.int64],
    b_indices: npt.NDArray[np.int64],
    b_data: npt.NDArray[np.float64],
    b_cols: int,
) -> tuple[
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.float64],
]:
    """``A @ B`` of two CSR matrices, ``inner[k]`` the row of B that A's
    column k meets (-1: none), B of ``b_cols`` columns.

    Returns (kept rows of A, kept columns of B, indptr, indices, data): rows
    and columns without entries dropped, columns ascending within a row, no
    zeros stored. Runs in parallel with the GIL released. Raises
    ``ValueError`` for parts that do not describe the matrices.
    """

def search_text(
    offsets: npt.NDArray[np.int64], data: npt.NDArray[np.uint8], probes: list[str], right: bool
) -> npt.NDArray[np.int64]:
    """Where each probe goes among sorted strings held as an Arrow large string
    array (``offsets``, ``data``), as numpy's ``searchsorted`` (left, or
    ``right``): a binary search over the bytes, so a memory-mapped key file
    is searched without being read. Raises ``ValueError`` for offsets that
    do not describe strings of the data.
    """

def pad_strings(
    offsets: npt.NDArray[np.int64], data: npt.NDArray[np.uint8], width: int
) -> npt.NDArray[np.uint8]:
    """An Arrow string array's values (``offsets``, ``data``) as ``width``-byte NUL-padded items.

    Raises ``ValueError`` naming the first string longer than ``width`` bytes.
    """

@final
class KdTree:
    """A segment's packed kd-tree with the keys of its records (MDDS V-B).

    Built over the rows of a C-contiguous ``(n, dims)`` float64 array by
    quickselect (median pivots, dimensions round-robin from
    ``initial_dimension``); values compare as in DuckDB: -0.0 equals 0.0 and
    NaN sorts above +inf.
    """

    def __new__(
        cls,
        coords: npt.NDArray[np.float64],
        initial_dimension: int = 0,
        orders: list[list[int]] = ...,
    ) -> KdTree: ...
    @staticmethod
    def from_parts(
        coords: npt.NDArray[np.float64],
        records: npt.NDArray[np.uint32],
        left: npt.NDArray[np.int32],
        right: npt.NDArray[np.int32],
        initial_dimension: int,
        orders: list[list[int]] = ...,
    ) -> KdTree:
        """A tree from its stored nodes; ``ValueError`` if they are not a tree of these rows."""
    def __len__(self) -> int: ...
    @property
    def orders(self) -> list[list[int]]:
        """The dimensions of each key order: the nodes sorted by their keys on those
        dimensions, first one first (a composite index), for the ``auto`` iterator."""
    @property
    def orders_nbytes(self) -> int:
        """Memory held by the key orders, in bytes."""
    @property
    def dims(self) -> int:
        """The number of indexing dimensions."""
    @property
    def initial_dimension(self) -> int:
        """The branching dimension of the root."""
    def nodes(
        self,
    ) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int32], npt.NDArray[np.int32]]:
        """Per node in pre-order: the row of its record and its children's node indices (-1: none)."""
    def search(
        self, lo: list[float], hi: list[float], sequential: bool = False
    ) -> npt.NDArray[np.uint32]:
        """Rows with ``lo[d] <= value <= hi[d]`` in every dimension, ascending.

        Bounds are inclusive in DuckDB's order; ``-inf`` as ``lo`` opens a
        range below and ``nan`` as ``hi`` opens it above with NaN included.
        ``sequential`` looks at every row instead of descending the tree.
        """

@final
class SegmentTree:
    """An R*-tree of segment boxes over 1 to 9 indexing dimensions (thread-safe).

    Queries return a superset of the segments whose boxes meet the query box
    (boxes are indexed under a monotone, bounded transform of the values).
    """

    def __new__(cls, dims: int) -> SegmentTree: ...
    @property
    def dims(self) -> int:
        """The number of indexing dimensions."""
    def __len__(self) -> int: ...
    def insert(self, id: int, lo: list[float], hi: list[float]) -> None:
        """Add segment ``id`` with the box ``[lo, hi]``."""
    def remove(self, id: int, lo: list[float], hi: list[float]) -> bool:
        """Remove segment ``id`` (with the box it was inserted with); whether it was there."""
    def query(self, lo: list[float], hi: list[float]) -> npt.NDArray[np.uint64]:
        """Ids of the segments whose boxes may meet ``[lo, hi]``, ascending."""

@final
class ChunkLayout:
    """How one attribute's chunks lie over a box and are encoded.

    The box ``lo..hi`` (cells of the whole array) chunked by ``chunk_shape``, cells of
    ``itemsize`` bytes, ``codec`` "zstd" or "raw" (after little-endian bytes), and
    whether a CRC-32C ends each payload.
    """

    def __new__(
        cls,
        chunk_shape: list[int],
        lo: list[int],
        hi: list[int],
        itemsize: int,
        codec: str,
        checksum: bool,
    ) -> ChunkLayout: ...

def encode_chunks(
    values: npt.NDArray[np.uint8],
    layout: ChunkLayout,
    level: int,
    fill: bytes,
    coords: list[list[int]],
) -> list[bytes]:
    """Encode the chunks at ``coords`` of the layout's box, whose cells' bytes are ``values``.

    Each chunk is encoded whole, its cells outside the box set to ``fill`` (one
    cell's bytes), as the layout says (zstd at ``level``). Returns the payloads in order.
    """

def triple_bounds(
    columns: list[npt.NDArray[np.int32] | npt.NDArray[np.int64] | int],
) -> list[tuple[int, int] | None]:
    """The smallest and largest value of each coordinate column (None when empty)."""

@final
class TripleCells:
    """Cells of a triple ingest bucketed by the chunk they fall in (a counting sort).

    Built from ``columns`` (one per dimension; an int serves every cell; position =
    coordinate - ``origin``) over the chunks of an array of ``extent`` cells.
    """

    def __new__(
        cls,
        columns: list[npt.NDArray[np.int32] | npt.NDArray[np.int64] | int],
        origin: list[int],
        chunk_shape: list[int],
        extent: list[int],
    ) -> TripleCells: ...
    @property
    def chunks(self) -> list[list[int]]:
        """Grid coordinates (ascending, C order) of the chunks the cells touch."""
    def scatter(
        self,
        values: npt.NDArray[np.uint8],
        layout: ChunkLayout,
        level: int,
        fill: bytes,
        existing: list[tuple[npt.NDArray[np.uint8], list[int]]],
    ) -> tuple[list[list[int]], list[bytes], tuple[int, str] | None]:
        """Write the cells' ``values`` (bytes, in coordinate order) into the chunks they
        touch and encode each whole.

        A chunk in ``existing`` (payload, grid coordinates) starts from its stored cells, any
        other from ``fill``; the last of repeated positions wins. Returns (coordinates,
        payloads, None) ascending, or ([], [], (index, reason)) for a damaged stored chunk.
        """

def decode_chunks(
    chunks: list[tuple[npt.NDArray[np.uint8], list[int]]],
    layout: ChunkLayout,
    out: npt.NDArray[np.uint8],
) -> tuple[int, str] | None:
    """Decode stored Zarr chunks of one attribute into ``out``, the byte view of the
    layout's box.

    ``chunks`` are (payload, grid coordinates). Returns None, or (index, reason) for
    the first chunk that cannot be decoded.
    """

def regrid_block(
    input: npt.NDArray[Any],
    weights: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]],
) -> npt.NDArray[np.float64]:
    """Area-weighted regrid of a C-contiguous 3-D block by one CSR matrix per axis.

    Each matrix is (indptr, indices, weights): output cell k takes input cell i with
    the share of i that k covers. The result (float64, the matrices' output shape) is
    the input contracted with every matrix divided by the product of their row sums;
    a cell whose weights sum to zero is NaN. Blocks without NULL cells only.
    """

def regrid_chunks(
    chunks: list[tuple[npt.NDArray[np.uint8], list[int]]],
    layout: ChunkLayout,
    kind: str,
    weights: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]],
) -> tuple[npt.NDArray[np.float64] | None, tuple[int, str] | None]:
    """Area-weighted regrid of the layout's box of one attribute from its stored chunks.

    The chunks must cover the box; each is decoded and contracted in its thread, the
    box never materialised. ``kind`` is numpy's dtype kind, ``weights`` one CSR matrix
    per axis. Returns (result, None), or (None, (index, reason)) for a damaged chunk.
    """

def reduce_chunks(
    chunks: list[tuple[npt.NDArray[np.uint8], list[int]]],
    layout: ChunkLayout,
    kind: str,
    null: bytes | None,
    extremes: bool,
) -> tuple[list[tuple[Any, Any, Any, Any, bool]], tuple[int, str] | None]:
    """Count, sum, min, max and NaN-seen of the non-NULL cells of each chunk's part of the
    layout's box, without making the cells.

    ``kind`` is numpy's dtype kind ("i", "u", "b" or "f"); ``null`` the fill value's bytes
    of a nullable attribute. Integer sums are exact Python ints (kept in 128 bits, as SQL's
    sum widens to HUGEINT); float sums are float64; float min and max skip NaN; without ``extremes`` min, max and NaN-seen are not computed. Returns
    (partials, None), or ([], (index, reason)) for the first chunk that cannot be decoded.
    """

# --- SS-DB (src/ssdb.rs) -------------------------------------------------------------
def ssdb_cook(
    pix: npt.NDArray[np.int32],
    threshold: int,
    max_extent: int,
    max_vertices: int,
    origin: tuple[int, int],
    core: tuple[int, int, int, int] | None = None,
) -> dict[str, npt.NDArray[Any]]:
    """F1 over a 2-D int32 image: observation columns in world coordinates, first-pixel order.

    Columns ``first_x, first_y, x, y, pixelsum, avgdist, npix, xmin, ymin, xmax, ymax``
    and the polygons as ``poly_offsets``, ``poly_x``, ``poly_y``. ``core`` (x0, y0, x1,
    y1, half-open, world) keeps only observations centred inside it.
    """

def ssdb_polygons_overlap_box(
    offsets: npt.NDArray[np.int64],
    xs: npt.NDArray[np.int64],
    ys: npt.NDArray[np.int64],
    lo: tuple[int, int],
    hi: tuple[int, int],
) -> npt.NDArray[np.bool_]:
    """For each polygon, whether it shares a point with the closed box ``lo..=hi``."""

def ssdb_density_counts(
    xs: npt.NDArray[np.int64], ys: npt.NDArray[np.int64], lo: int, hi: int
) -> npt.NDArray[np.int64]:
    """For each point, the points within ``[x + lo, x + hi] x [y + lo, y + hi]``."""

@final
class Grouper:
    """F2's state across calls: D3 = ``num / den``, a grid of ``cell`` world units."""

    def __new__(cls, num: int, den: int, cell: int) -> Grouper: ...
    def add(
        self,
        images: npt.NDArray[np.int64],
        xs: npt.NDArray[np.int64],
        ys: npt.NDArray[np.int64],
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Add observations in time order: (position in the batch, group id) of each membership."""
    @property
    def observations(self) -> int: ...
    @property
    def groups(self) -> int: ...
