//! Bindings of the record kernels (MDDS): kd-tree partitioning and search, the
//! R*-tree of segments, segment building, packed records and column codecs.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::sync::RwLock;

use crate::kdtree::{self, KdNode, NodeOrderedTree, PackedKdTree, QueryBox, Searched};
use crate::rtree::SegmentIndex;

type Labels<'py> = (Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<u32>>);
/// What [`search_segments`] returns: segments, rows, per probe whether it was held,
/// and per tree how it was searched.
type Found<'py> = (
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    Vec<bool>,
    Vec<i64>,
);
type NodeArrays<'py> = (
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<i32>>,
    Bound<'py, PyArray1<i32>>,
);

fn rows<'a>(coords: &'a PyReadonlyArray2<'_, f64>) -> PyResult<(&'a [f64], usize)> {
    let dims = coords.as_array().ncols();
    if !coords.is_c_contiguous() {
        // as_slice() also accepts Fortran order, whose rows would be read as columns
        return Err(PyValueError::new_err(
            "coords must be a C-contiguous float64 array of shape (n, dims)",
        ));
    }
    let data = coords.as_slice().map_err(|_| {
        PyValueError::new_err("coords must be a C-contiguous float64 array of shape (n, dims)")
    })?;
    if dims == 0 {
        return Err(PyValueError::new_err(
            "coords must have at least one dimension (column)",
        ));
    }
    Ok((data, dims))
}

fn query_box(lo: Vec<f64>, hi: Vec<f64>, dims: usize) -> PyResult<QueryBox> {
    if lo.len() != dims || hi.len() != dims {
        return Err(PyValueError::new_err(format!(
            "the query box needs {dims} lower and upper bounds, got {} and {}",
            lo.len(),
            hi.len()
        )));
    }
    Ok(QueryBox { lo, hi })
}

/// Kd-tree partitioning of the rows of `coords` into segments of at most `max_records`.
///
/// Returns per row its segment number, and per segment the depth of its subtree's root.
#[pyfunction]
pub fn kdtree_partition<'py>(
    py: Python<'py>,
    coords: PyReadonlyArray2<'py, f64>,
    max_records: usize,
) -> PyResult<Labels<'py>> {
    let (data, dims) = rows(&coords)?;
    if max_records == 0 {
        return Err(PyValueError::new_err("max_records must be at least 1"));
    }
    let (labels, roots) = py.detach(|| kdtree::partition(data, dims, max_records));
    Ok((labels.into_pyarray(py), roots.into_pyarray(py)))
}

/// Refuses key orders that are empty, repeat a dimension or name one past `dims`.
fn check_orders(orders: &[Vec<usize>], dims: usize) -> PyResult<()> {
    for order in orders {
        let repeats = order
            .iter()
            .enumerate()
            .any(|(i, d)| order[..i].contains(d));
        if order.is_empty() || repeats || order.iter().any(|&d| d >= dims) {
            return Err(PyValueError::new_err(format!(
                "a key order must list distinct dimensions below {dims}, not {order:?}"
            )));
        }
    }
    Ok(())
}

/// A segment's packed kd-tree together with the keys of its records (owned by Rust,
/// so that a query can search many segments with the GIL released).
#[pyclass(name = "KdTree", module = "tesseradb._core", frozen)]
pub struct PyKdTree {
    inner: NodeOrderedTree,
}

impl PyKdTree {
    fn rows(&self) -> usize {
        self.inner.tree.nodes.len()
    }

    fn find(&self, query: &QueryBox, sequential: bool) -> Vec<u32> {
        self.inner.search(query, sequential)
    }

    /// The rows inside `query` (ascending), and per probe (dimension, value)
    /// whether one of them holds that value there.
    /// `sequential`: None chooses as [`NodeOrderedTree::search_chosen`] does (the
    /// `auto` iterator, the only one that uses key orders). Also says how it searched:
    /// -1 a descent, -2 every node, k >= 0 through key order k.
    fn find_probing(
        &self,
        query: &QueryBox,
        sequential: Option<bool>,
        probes: &[(usize, f64)],
    ) -> (Vec<u32>, Vec<bool>, i64) {
        let (found, how) = match sequential {
            Some(sequential) => {
                let how = if sequential {
                    Searched::Sequential
                } else {
                    Searched::Tree
                };
                (self.inner.search_nodes(query, sequential), how)
            }
            None => self.inner.search_chosen(query),
        };
        let held = probes
            .iter()
            .map(|&(dim, value)| self.inner.holds(&found, dim, value))
            .collect();
        let how = match how {
            Searched::Tree => -1,
            Searched::Sequential => -2,
            Searched::Order(k) => k as i64,
        };
        (self.inner.records(&found), held, how)
    }
}

#[pymethods]
impl PyKdTree {
    /// Build the packed kd-tree of the rows of `coords` (median pivots by quickselect).
    #[new]
    #[pyo3(signature = (coords, initial_dimension = 0, orders = Vec::new()))]
    fn new(
        py: Python<'_>,
        coords: PyReadonlyArray2<'_, f64>,
        initial_dimension: usize,
        orders: Vec<Vec<usize>>,
    ) -> PyResult<Self> {
        let (data, dims) = rows(&coords)?;
        check_orders(&orders, dims)?;
        let inner = py.detach(|| {
            NodeOrderedTree::new(kdtree::build(data, dims, initial_dimension), data)
                .with_orders(&orders)
        });
        Ok(PyKdTree { inner })
    }

    /// A tree read back from its parts (a segment file), checked to be a tree of these rows.
    #[staticmethod]
    #[pyo3(signature = (coords, records, left, right, initial_dimension, orders = Vec::new()))]
    fn from_parts(
        py: Python<'_>,
        coords: PyReadonlyArray2<'_, f64>,
        records: PyReadonlyArray1<'_, u32>,
        left: PyReadonlyArray1<'_, i32>,
        right: PyReadonlyArray1<'_, i32>,
        initial_dimension: usize,
        orders: Vec<Vec<usize>>,
    ) -> PyResult<Self> {
        let (data, dims) = rows(&coords)?;
        check_orders(&orders, dims)?;
        let (records, left, right) = (records.as_slice()?, left.as_slice()?, right.as_slice()?);
        let n = data.len() / dims;
        if records.len() != n || left.len() != n || right.len() != n {
            return Err(PyValueError::new_err(
                "the tree's arrays must have one entry per row of coords",
            ));
        }
        let bad = |i: i32| i < -1 || i >= n as i32;
        if records.iter().any(|&r| r as usize >= n) || left.iter().chain(right).any(|&i| bad(i)) {
            return Err(PyValueError::new_err(
                "the tree's arrays point outside coords: not a tree of these rows",
            ));
        }
        let nodes = (0..n)
            .map(|i| KdNode {
                record: records[i],
                left: left[i],
                right: right[i],
            })
            .collect();
        let tree = PackedKdTree {
            initial_dimension: initial_dimension % dims,
            dims,
            nodes,
        };
        let inner = py.detach(|| NodeOrderedTree::new(tree, data).with_orders(&orders));
        Ok(PyKdTree { inner })
    }

    fn __len__(&self) -> usize {
        self.rows()
    }

    /// The dimensions of each key order, as built.
    #[getter]
    fn orders(&self) -> Vec<Vec<usize>> {
        self.inner.orders.iter().map(|o| o.dims.clone()).collect()
    }

    /// Memory held by the key orders, in bytes.
    #[getter]
    fn orders_nbytes(&self) -> usize {
        self.inner.orders_nbytes()
    }

    #[getter]
    fn dims(&self) -> usize {
        self.inner.tree.dims
    }

    #[getter]
    fn initial_dimension(&self) -> usize {
        self.inner.tree.initial_dimension
    }

    /// The nodes in pre-order as (records, left, right) arrays (-1: no child).
    fn nodes<'py>(&self, py: Python<'py>) -> NodeArrays<'py> {
        let nodes = &self.inner.tree.nodes;
        (
            PyArray1::from_iter(py, nodes.iter().map(|n| n.record)),
            PyArray1::from_iter(py, nodes.iter().map(|n| n.left)),
            PyArray1::from_iter(py, nodes.iter().map(|n| n.right)),
        )
    }

    /// Rows inside the box [lo, hi], ascending: through the tree, or looking at each row.
    #[pyo3(signature = (lo, hi, sequential = false))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        lo: Vec<f64>,
        hi: Vec<f64>,
        sequential: bool,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let query = query_box(lo, hi, self.inner.tree.dims)?;
        Ok(py.detach(|| self.find(&query, sequential)).into_pyarray(py))
    }
}

/// Rows inside the box [lo, hi] in many segments at once, searched in parallel.
///
/// Returns (segment, row, held, ways): the position in `trees` and the row within
/// that segment of each record found, grouped by segment in the order of
/// `trees`; per probe (dimension, value) whether a record found holds
/// that value on that dimension (how an aggregate learns that a row sits on a
/// float literal's ambiguity point without reading the column); and per tree
/// how it was searched (-1 a descent, -2 every node, k >= 0 key order k).
#[pyfunction]
#[pyo3(signature = (trees, lo, hi, iterator = "kdtree", probes = Vec::new()))]
pub fn search_segments<'py>(
    py: Python<'py>,
    trees: Vec<Py<PyKdTree>>,
    lo: Vec<f64>,
    hi: Vec<f64>,
    iterator: &str,
    probes: Vec<(usize, f64)>,
) -> PyResult<Found<'py>> {
    let sequential = match iterator {
        "kdtree" => Some(false),
        "sequential" => Some(true),
        "auto" => None, // per tree, by its estimates (key orders too)
        other => {
            return Err(PyValueError::new_err(format!(
                "iterator must be 'kdtree', 'sequential' or 'auto', not {other:?}"
            )))
        }
    };
    let dims = lo.len();
    let query = query_box(lo, hi, dims)?;
    if let Some(&(d, _)) = probes.iter().find(|(d, _)| *d >= dims) {
        return Err(PyValueError::new_err(format!(
            "probe dimension {d}; the query box has {dims}"
        )));
    }
    let refs: Vec<&PyKdTree> = trees.iter().map(|t| t.get()).collect();
    if let Some(t) = refs.iter().find(|t| t.inner.tree.dims != dims) {
        return Err(PyValueError::new_err(format!(
            "a tree has {} dimensions; the query box has {dims}",
            t.inner.tree.dims
        )));
    }
    let (segments, found, held, ways) = py.detach(|| {
        // A search done within SERIAL_SEARCH stays on this thread: waking the pool's
        // sleeping threads (and warming their caches) costs more than such a search.
        // Past it, this thread and the pool's share the trees left.
        let found: Vec<(Vec<u32>, Vec<bool>, i64)> =
            crate::pool::map_after(&refs, SERIAL_SEARCH, |_, t| {
                t.find_probing(&query, sequential, &probes)
            });
        let total = found.iter().map(|(rows, _, _)| rows.len()).sum();
        let mut held = vec![false; probes.len()];
        let mut segments = Vec::with_capacity(total);
        let mut all = Vec::with_capacity(total);
        let mut ways = Vec::with_capacity(found.len());
        for (s, (rows, hits, way)) in found.into_iter().enumerate() {
            for (h, hit) in held.iter_mut().zip(hits) {
                *h |= hit;
            }
            segments.extend(std::iter::repeat_n(s as u32, rows.len()));
            all.extend(rows);
            ways.push(way);
        }
        (segments, all, held, ways)
    });
    Ok((
        segments.into_pyarray(py),
        found.into_pyarray(py),
        held,
        ways,
    ))
}

/// What [`top_segments`] returns: segments and rows, as [`search_segments`] gives
/// them, and per tree the key order read (None: skipped).
type Top<'py> = (
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    Vec<Option<usize>>,
);

/// The records of many segments inside the box [lo, hi] that may be among the first
/// `count` in dimension `dim`'s order (`descending` or not; `distinct`: the first
/// `count` distinct keys), every tie with the last kept: what `ORDER BY dim LIMIT
/// count` needs, read from the trees' key orders (see [`kdtree::top`]).
///
/// Returns (segment, row, ways) grouped by segment in the order of `trees`, rows
/// ascending, as [`search_segments`] does; ways is per tree the key order read, or
/// None for a tree skipped because every key it holds falls behind. None
/// when some tree has no key order sorted on `dim` under the box, or `count` is 0.
#[pyfunction]
#[allow(clippy::too_many_arguments)] // (the statement's order and limit, as Python gives them)
pub fn top_segments<'py>(
    py: Python<'py>,
    trees: Vec<Py<PyKdTree>>,
    lo: Vec<f64>,
    hi: Vec<f64>,
    dim: usize,
    descending: bool,
    count: usize,
    distinct: bool,
) -> PyResult<Option<Top<'py>>> {
    let dims = lo.len();
    let query = query_box(lo, hi, dims)?;
    if dim >= dims {
        return Err(PyValueError::new_err(format!(
            "order dimension {dim}; the query box has {dims}"
        )));
    }
    let refs: Vec<&NodeOrderedTree> = trees.iter().map(|t| &t.get().inner).collect();
    if let Some(t) = refs.iter().find(|t| t.tree.dims != dims) {
        return Err(PyValueError::new_err(format!(
            "a tree has {} dimensions; the query box has {dims}",
            t.tree.dims
        )));
    }
    let found = py.detach(|| {
        let (nodes, ways) = kdtree::top(&refs, &query, dim, descending, count, distinct)?;
        let mut segments = Vec::new();
        let mut rows = Vec::new();
        for (s, (tree, found)) in refs.iter().zip(nodes).enumerate() {
            let records = tree.records(&found);
            segments.extend(std::iter::repeat_n(s as u32, records.len()));
            rows.extend(records);
        }
        Some((segments, rows, ways))
    });
    Ok(
        found
            .map(|(segments, rows, ways)| (segments.into_pyarray(py), rows.into_pyarray(py), ways)),
    )
}

/// How long a search over several segments runs on the calling thread alone before the
/// pool's threads join it: about what waking them costs. In a statement over 2M GHCN
/// records, Q6's four segments took 0.27 ms through the pool and 0.16 ms this way;
/// taxi Q1's sixteen, which need the pool, 3.4 ms on one thread.
const SERIAL_SEARCH: std::time::Duration = std::time::Duration::from_micros(100);

/// A segment built by [`build_segments`]: its kd-tree and bounding box.
type SegmentParts = (PyKdTree, Vec<f64>, Vec<f64>);
/// What [`build_segments`] returns: order, bounds and the segments' parts.
type BuiltChunk<'py> = (Bound<'py, PyArray1<u32>>, Vec<usize>, Vec<SegmentParts>);

/// The segments of a chunk: its records grouped by segment label, each group's
/// kd-tree (from dimension `initial_dimensions[s]`) and box, built in parallel.
///
/// Returns (order, bounds, segments): the chunk's record positions grouped by
/// segment, in chunk order within a segment; where each group starts (one more
/// entry than segments); and per segment (tree, lo, hi). Each tree has a key
/// order on each of `orders`.
#[pyfunction]
#[pyo3(signature = (coords, labels, initial_dimensions, orders = Vec::new()))]
pub fn build_segments<'py>(
    py: Python<'py>,
    coords: PyReadonlyArray2<'py, f64>,
    labels: PyReadonlyArray1<'py, u32>,
    initial_dimensions: Vec<usize>,
    orders: Vec<Vec<usize>>,
) -> PyResult<BuiltChunk<'py>> {
    let (data, dims) = rows(&coords)?;
    check_orders(&orders, dims)?;
    let labels = labels.as_slice()?;
    if labels.len() * dims != data.len() {
        return Err(PyValueError::new_err(format!(
            "{} labels for {} rows of coords",
            labels.len(),
            data.len() / dims
        )));
    }
    let count = initial_dimensions.len();
    if let Some(l) = labels.iter().find(|&&l| l as usize >= count) {
        return Err(PyValueError::new_err(format!(
            "label {l} is not one of the {count} segments"
        )));
    }
    let (order, bounds, built) =
        py.detach(|| kdtree::build_segments(data, dims, labels, &initial_dimensions, &orders));
    let segments = built
        .into_iter()
        .map(|s| (PyKdTree { inner: s.tree }, s.lo, s.hi))
        .collect();
    Ok((order.into_pyarray(py), bounds, segments))
}

/// What [`unpack_records`] returns: the columns, or where the first bad text is.
type UnpackedRecords<'py> = (Vec<Bound<'py, PyAny>>, Option<(usize, usize)>);

/// The columns of packed binary records (whole records of `fields`, each given as
/// (width in bytes, is char text)), unpacked in parallel.
///
/// A fixed-width field becomes a uint8 array of its values' native bytes; a
/// `char` field an (int32 offsets, uint8 data) pair in Arrow's string layout,
/// trailing NULs dropped. Returns (columns, None), or ([], (record, field)) for
/// the first `char` value that is not UTF-8, for the caller to name.
#[pyfunction]
pub fn unpack_records<'py>(
    py: Python<'py>,
    buffer: PyReadonlyArray1<'py, u8>,
    fields: Vec<(usize, bool)>,
) -> PyResult<UnpackedRecords<'py>> {
    use crate::packed::{self, Column, PackedField};
    let buffer = buffer.as_slice()?;
    let fields: Vec<PackedField> = fields
        .into_iter()
        .map(|(width, text)| PackedField { width, text })
        .collect();
    let size: usize = fields.iter().map(|f| f.width).sum();
    if size == 0 || !buffer.len().is_multiple_of(size) {
        return Err(PyValueError::new_err(format!(
            "a buffer of {} bytes is not whole records of {size} bytes",
            buffer.len()
        )));
    }
    if fields.iter().any(|f| f.text) && buffer.len() > i32::MAX as usize {
        return Err(PyValueError::new_err(
            "unpack text records in pieces of less than 2 GiB",
        ));
    }
    let columns = match py.detach(|| packed::unpack(buffer, &fields)) {
        Ok(columns) => columns,
        Err(bad) => return Ok((Vec::new(), Some((bad.record, bad.field)))),
    };
    let columns = columns
        .into_iter()
        .map(|c| match c {
            Column::Fixed(bytes) => Ok(bytes.into_pyarray(py).into_any()),
            Column::Text { offsets, data } => (offsets.into_pyarray(py), data.into_pyarray(py))
                .into_pyobject(py)
                .map(|t| t.into_any()),
        })
        .collect::<PyResult<_>>()?;
    Ok((columns, None))
}

/// Gathers fixed-width values: item `rows[i]` of `columns[segments[i]]`, each item
/// `itemsize` bytes (the columns are byte views of one field in many segments).
#[pyfunction]
pub fn gather<'py>(
    py: Python<'py>,
    columns: Vec<PyReadonlyArray1<'py, u8>>,
    itemsize: usize,
    segments: PyReadonlyArray1<'py, u32>,
    rows: PyReadonlyArray1<'py, u32>,
) -> PyResult<Bound<'py, PyArray1<u8>>> {
    let slices: Vec<&[u8]> = columns
        .iter()
        .map(|c| c.as_slice())
        .collect::<Result<_, _>>()?;
    let (segments, rows) = (segments.as_slice()?, rows.as_slice()?);
    if segments.len() != rows.len() || itemsize == 0 {
        return Err(PyValueError::new_err(
            "segments and rows must have the same length, and itemsize must be positive",
        ));
    }
    for (&s, &r) in segments.iter().zip(rows) {
        let column = slices.get(s as usize).ok_or_else(|| {
            PyValueError::new_err(format!(
                "segment {s} is not one of the {} columns",
                slices.len()
            ))
        })?;
        if (r as usize + 1) * itemsize > column.len() {
            return Err(PyValueError::new_err(format!(
                "row {r} is outside column {s} of {} items",
                column.len() / itemsize
            )));
        }
    }
    let out = py.detach(|| {
        let mut out = Vec::with_capacity(rows.len() * itemsize);
        for (&s, &r) in segments.iter().zip(rows) {
            let at = r as usize * itemsize;
            out.extend_from_slice(&slices[s as usize][at..at + itemsize]);
        }
        out
    });
    Ok(out.into_pyarray(py))
}

/// What [`gather_strings`] returns: the Arrow offsets and data of the strings gathered.
type Strings<'py> = (Bound<'py, PyArray1<i32>>, Bound<'py, PyArray1<u8>>);

/// Gathers strings: item `rows[i]` of `columns[segments[i]]`, each column a string
/// column's Arrow offsets (already moved by the array's offset) and data. Returns the
/// offsets and data of one string array; None past 2 GiB of data (Arrow's `string`).
#[pyfunction]
pub fn gather_strings<'py>(
    py: Python<'py>,
    columns: Vec<(PyReadonlyArray1<'py, i32>, PyReadonlyArray1<'py, u8>)>,
    segments: PyReadonlyArray1<'py, u32>,
    rows: PyReadonlyArray1<'py, u32>,
) -> PyResult<Option<Strings<'py>>> {
    let slices: Vec<(&[i32], &[u8])> = columns
        .iter()
        .map(|(o, d)| Ok((o.as_slice()?, d.as_slice()?)))
        .collect::<PyResult<_>>()?;
    let (segments, rows) = (segments.as_slice()?, rows.as_slice()?);
    if segments.len() != rows.len() {
        return Err(PyValueError::new_err(
            "segments and rows must have the same length",
        ));
    }
    let mut total = 0usize;
    for (&s, &r) in segments.iter().zip(rows) {
        let (offsets, data) = slices.get(s as usize).ok_or_else(|| {
            PyValueError::new_err(format!(
                "segment {s} is not one of the {} columns",
                slices.len()
            ))
        })?;
        let r = r as usize;
        let ok = r + 1 < offsets.len()
            && 0 <= offsets[r]
            && offsets[r] <= offsets[r + 1]
            && offsets[r + 1] as usize <= data.len();
        if !ok {
            return Err(PyValueError::new_err(format!(
                "row {r} is outside string column {s} of {} items, or its offsets are broken",
                offsets.len().saturating_sub(1)
            )));
        }
        total += (offsets[r + 1] - offsets[r]) as usize;
    }
    if total > i32::MAX as usize {
        return Ok(None);
    }
    let (offsets, data) = py.detach(|| {
        let mut out_offsets = Vec::with_capacity(rows.len() + 1);
        let mut out = Vec::with_capacity(total);
        out_offsets.push(0i32);
        for (&s, &r) in segments.iter().zip(rows) {
            let (offsets, data) = slices[s as usize];
            let r = r as usize;
            out.extend_from_slice(&data[offsets[r] as usize..offsets[r + 1] as usize]);
            out_offsets.push(out.len() as i32);
        }
        (out_offsets, out)
    });
    Ok(Some((offsets.into_pyarray(py), data.into_pyarray(py))))
}

/// Each column of a segment as its file stores it: (encoding byte, stored
/// bytes), byte-shuffled and zstd-compressed at `level` where that is
/// smaller (see `columns.rs`). `columns` are (raw bytes as a uint8 array,
/// item width), borrowed, not copied; all are
/// encoded with the GIL released, so the stream's writer threads run in parallel.
#[pyfunction]
pub fn encode_columns<'py>(
    py: Python<'py>,
    columns: Vec<(PyReadonlyArray1<'py, u8>, usize)>,
    level: i32,
) -> PyResult<Vec<(u8, Py<pyo3::types::PyBytes>)>> {
    let raws = columns
        .iter()
        .map(|(raw, width)| Ok((raw.as_slice()?, *width)))
        .collect::<PyResult<Vec<(&[u8], usize)>>>()
        .map_err(|_: PyErr| PyValueError::new_err("columns must be contiguous uint8 arrays"))?;
    let encoded = py
        .detach(|| {
            raws.iter()
                .map(|(raw, width)| crate::columns::encode(raw, *width, level))
                .collect::<Result<Vec<_>, String>>()
        })
        .map_err(PyValueError::new_err)?;
    Ok(encoded
        .into_iter()
        .map(|(encoding, stored)| {
            (
                encoding as u8,
                pyo3::types::PyBytes::new(py, &stored).unbind(),
            )
        })
        .collect())
}

/// The raw bytes (`raw_len` of them) of a column stored with `encoding` (0
/// raw, 1 zstd, 2 byte-shuffled zstd) in items of `width` bytes. Raises
/// ValueError when the stored bytes do not decode to exactly that.
#[pyfunction]
pub fn decode_column<'py>(
    py: Python<'py>,
    stored: pyo3::pybacked::PyBackedBytes,
    encoding: u8,
    width: usize,
    raw_len: usize,
) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
    let encoding = crate::columns::Encoding::from_byte(encoding)
        .ok_or_else(|| PyValueError::new_err(format!("unknown column encoding {encoding}")))?;
    let raw = py
        .detach(|| crate::columns::decode(&stored, encoding, width, raw_len))
        .map_err(PyValueError::new_err)?;
    Ok(pyo3::types::PyBytes::new(py, &raw))
}

/// Strings of an Arrow string array (offsets, data) as fixed-width NUL-padded items.
///
/// Raises ValueError naming the first string longer than `width` bytes.
#[pyfunction]
pub fn pad_strings<'py>(
    py: Python<'py>,
    offsets: PyReadonlyArray1<'py, i64>,
    data: PyReadonlyArray1<'py, u8>,
    width: usize,
) -> PyResult<Bound<'py, PyArray1<u8>>> {
    let (offsets, data) = (offsets.as_slice()?, data.as_slice()?);
    let n = offsets.len().saturating_sub(1);
    for i in 0..n {
        let (a, b) = (offsets[i], offsets[i + 1]);
        if a < 0 || b < a || b as usize > data.len() {
            return Err(PyValueError::new_err(
                "the offsets do not describe strings of the data",
            ));
        }
        if (b - a) as usize > width {
            return Err(PyValueError::new_err(format!(
                "string {i} is {} bytes, longer than {width}",
                b - a
            )));
        }
    }
    let out = py.detach(|| {
        let mut out = vec![0u8; n * width];
        for i in 0..n {
            let (a, b) = (offsets[i] as usize, offsets[i + 1] as usize);
            out[i * width..i * width + (b - a)].copy_from_slice(&data[a..b]);
        }
        out
    });
    Ok(out.into_pyarray(py))
}

/// The R*-tree of a stream's segment boxes; safe to share between threads.
#[pyclass(name = "SegmentTree", module = "tesseradb._core")]
pub struct PySegmentTree {
    inner: RwLock<SegmentIndex>,
}

impl PySegmentTree {
    fn check(&self, lo: &[f64], hi: &[f64]) -> PyResult<()> {
        let dims = self.inner.read().expect("lock").dims();
        if lo.len() != dims || hi.len() != dims {
            return Err(PyValueError::new_err(format!(
                "a box needs {dims} lower and upper bounds, got {} and {}",
                lo.len(),
                hi.len()
            )));
        }
        Ok(())
    }
}

#[pymethods]
impl PySegmentTree {
    #[new]
    fn new(dims: usize) -> PyResult<Self> {
        let index = SegmentIndex::new(dims).map_err(PyValueError::new_err)?;
        Ok(PySegmentTree {
            inner: RwLock::new(index),
        })
    }

    #[getter]
    fn dims(&self) -> usize {
        self.inner.read().expect("lock").dims()
    }

    fn __len__(&self) -> usize {
        self.inner.read().expect("lock").len()
    }

    fn insert(&self, py: Python<'_>, id: u64, lo: Vec<f64>, hi: Vec<f64>) -> PyResult<()> {
        self.check(&lo, &hi)?;
        py.detach(|| self.inner.write().expect("lock").insert(id, &lo, &hi));
        Ok(())
    }

    fn remove(&self, py: Python<'_>, id: u64, lo: Vec<f64>, hi: Vec<f64>) -> PyResult<bool> {
        self.check(&lo, &hi)?;
        Ok(py.detach(|| self.inner.write().expect("lock").remove(id, &lo, &hi)))
    }

    fn query<'py>(
        &self,
        py: Python<'py>,
        lo: Vec<f64>,
        hi: Vec<f64>,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        self.check(&lo, &hi)?;
        let ids = py.detach(|| self.inner.read().expect("lock").query(&lo, &hi));
        Ok(ids.into_pyarray(py))
    }
}
