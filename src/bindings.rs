//! Python bindings of the kernels: numpy in, numpy out, the GIL released for the work.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::sync::RwLock;

use crate::kdtree::{self, KdNode, NodeOrderedTree, PackedKdTree, QueryBox};
use crate::rtree::SegmentIndex;

type Labels<'py> = (Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<u32>>);
/// What [`search_segments`] returns: segments, rows, and per probe whether it was held.
type Found<'py> = (
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    Vec<bool>,
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
    let (labels, roots) =
        py.detach(|| kdtree::partition(&kdtree::build(data, dims, 0), max_records));
    Ok((labels.into_pyarray(py), roots.into_pyarray(py)))
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
    fn find_probing(
        &self,
        query: &QueryBox,
        sequential: bool,
        probes: &[(usize, f64)],
    ) -> (Vec<u32>, Vec<bool>) {
        let found = self.inner.search_nodes(query, sequential);
        let held = probes
            .iter()
            .map(|&(dim, value)| self.inner.holds(&found, dim, value))
            .collect();
        (self.inner.records(&found), held)
    }
}

#[pymethods]
impl PyKdTree {
    /// Build the packed kd-tree of the rows of `coords` (median pivots by quickselect).
    #[new]
    #[pyo3(signature = (coords, initial_dimension = 0))]
    fn new(
        py: Python<'_>,
        coords: PyReadonlyArray2<'_, f64>,
        initial_dimension: usize,
    ) -> PyResult<Self> {
        let (data, dims) = rows(&coords)?;
        let inner =
            py.detach(|| NodeOrderedTree::new(kdtree::build(data, dims, initial_dimension), data));
        Ok(PyKdTree { inner })
    }

    /// A tree read back from its parts (a segment file), checked to be a tree of these rows.
    #[staticmethod]
    fn from_parts(
        coords: PyReadonlyArray2<'_, f64>,
        records: PyReadonlyArray1<'_, u32>,
        left: PyReadonlyArray1<'_, i32>,
        right: PyReadonlyArray1<'_, i32>,
        initial_dimension: usize,
    ) -> PyResult<Self> {
        let (data, dims) = rows(&coords)?;
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
        Ok(PyKdTree {
            inner: NodeOrderedTree::new(tree, data),
        })
    }

    fn __len__(&self) -> usize {
        self.rows()
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
/// Returns (segment, row, held): the position in `trees` and the row within
/// that segment of each record found, grouped by segment in the order of
/// `trees`; and per probe (dimension, value) whether a record found holds
/// that value on that dimension (how an aggregate learns that a row sits on a
/// float literal's ambiguity point without reading the column).
#[pyfunction]
#[pyo3(signature = (trees, lo, hi, sequential = false, probes = Vec::new()))]
pub fn search_segments<'py>(
    py: Python<'py>,
    trees: Vec<Py<PyKdTree>>,
    lo: Vec<f64>,
    hi: Vec<f64>,
    sequential: bool,
    probes: Vec<(usize, f64)>,
) -> PyResult<Found<'py>> {
    use rayon::prelude::*;
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
    let (segments, found, held) = py.detach(|| {
        let found: Vec<(Vec<u32>, Vec<bool>)> = crate::pool::install(|| {
            refs.par_iter()
                .map(|t| t.find_probing(&query, sequential, &probes))
                .collect()
        });
        let total = found.iter().map(|(rows, _)| rows.len()).sum();
        let mut held = vec![false; probes.len()];
        let mut segments = Vec::with_capacity(total);
        let mut all = Vec::with_capacity(total);
        for (s, (rows, hits)) in found.into_iter().enumerate() {
            for (h, hit) in held.iter_mut().zip(hits) {
                *h |= hit;
            }
            segments.extend(std::iter::repeat_n(s as u32, rows.len()));
            all.extend(rows);
        }
        (segments, all, held)
    });
    Ok((segments.into_pyarray(py), found.into_pyarray(py), held))
}

/// A segment built by [`build_segments`]: its kd-tree and bounding box.
type SegmentParts = (PyKdTree, Vec<f64>, Vec<f64>);
/// What [`build_segments`] returns: order, bounds and the segments' parts.
type BuiltChunk<'py> = (Bound<'py, PyArray1<u32>>, Vec<usize>, Vec<SegmentParts>);

/// The segments of a chunk: its records grouped by segment label, each group's
/// kd-tree (from dimension `initial_dimensions[s]`) and box, built in parallel.
///
/// Returns (order, bounds, segments): the chunk's record positions grouped by
/// segment, in chunk order within a segment; where each group starts (one more
/// entry than segments); and per segment (tree, lo, hi).
#[pyfunction]
pub fn build_segments<'py>(
    py: Python<'py>,
    coords: PyReadonlyArray2<'py, f64>,
    labels: PyReadonlyArray1<'py, u32>,
    initial_dimensions: Vec<usize>,
) -> PyResult<BuiltChunk<'py>> {
    let (data, dims) = rows(&coords)?;
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
        py.detach(|| kdtree::build_segments(data, dims, labels, &initial_dimensions));
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

/// Rows of JSON documents flattened for one of Argo's mappings (see `_core.pyi`).
type DocumentRows<'py> = (Vec<Bound<'py, PyList>>, Vec<usize>);

/// The leaves of a Python dict, as `_keys.flatten_document` makes them.
///
/// Only the exact built-in types are walked (dict, list, tuple, str, int, float,
/// bool, None): a subclass may iterate or convert otherwise (an OrderedDict
/// keeps its own order), so it is refused and takes the Python path, as is
/// anything that path would reject (a key that is not a string, an integer
/// outside 64 bits, NaN, a lone surrogate).
fn flatten_object(
    doc: &Bound<'_, PyAny>,
    limits: &crate::jsonflat::Limits,
) -> Result<Vec<crate::jsonflat::Leaf>, crate::jsonflat::Refused> {
    use crate::jsonflat::{flatten_tree, Node, Refused, Scalar, KIND_NULL};
    use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString, PyTuple};

    fn members<'py>(map: &Bound<'py, PyDict>) -> Result<Vec<(String, Bound<'py, PyAny>)>, Refused> {
        map.iter()
            .map(|(key, value)| {
                if !key.is_exact_instance_of::<PyString>() {
                    return Err(Refused);
                }
                let text = key.cast::<PyString>().map_err(|_| Refused)?.to_str();
                Ok((text.map_err(|_| Refused)?.to_owned(), value))
            })
            .collect()
    }

    if !doc.is_exact_instance_of::<PyDict>() {
        return Err(Refused);
    }
    let root = members(doc.cast::<PyDict>().map_err(|_| Refused)?)?;
    flatten_tree(root, limits, |value: Bound<'_, PyAny>| {
        Ok(if value.is_exact_instance_of::<PyString>() {
            let text = value.cast::<PyString>().map_err(|_| Refused)?;
            Node::Leaf(Scalar::Str(text.to_str().map_err(|_| Refused)?.to_owned()))
        } else if value.is_exact_instance_of::<PyBool>() {
            Node::Leaf(Scalar::Bool(value.is_truthy().map_err(|_| Refused)?))
        } else if value.is_exact_instance_of::<PyInt>() {
            Node::Leaf(Scalar::Int(value.extract::<i64>().map_err(|_| Refused)?))
        } else if value.is_exact_instance_of::<PyFloat>() {
            let x = value.extract::<f64>().map_err(|_| Refused)?;
            if !x.is_finite() {
                return Err(Refused);
            }
            Node::Leaf(Scalar::Float(x))
        } else if value.is_none() {
            Node::Leaf(Scalar::Kind(KIND_NULL))
        } else if value.is_exact_instance_of::<PyDict>() {
            Node::Object(members(value.cast::<PyDict>().map_err(|_| Refused)?)?)
        } else if value.is_exact_instance_of::<PyList>() || value.is_exact_instance_of::<PyTuple>()
        {
            let items = value.try_iter().map_err(|_| Refused)?;
            Node::Array(items.collect::<PyResult<_>>().map_err(|_| Refused)?)
        } else {
            return Err(Refused);
        })
    })
}

/// Flattens JSON texts (bytes or str) and plain dicts into row tuples; objids
/// count from `first_objid`.
///
/// Returns the rows (`wide`: one list of Argo/1's 8-tuples; otherwise four lists,
/// one per Argo/3 table) and the positions of the documents it refused, which
/// the caller flattens on the Python path (where errors are named). Texts are
/// parsed in parallel without the GIL; dicts are walked with it. With `group`
/// above 1, each tuple holds the values of `group` rows one after another (the
/// last of a list maybe fewer), as one multi-row INSERT binds them. `limits`
/// is (depth, key characters, string bytes, key and string bytes or 0, leaves,
/// whether U+0000 is allowed):
/// a document past one is refused, so the Python path names the limit.
#[pyfunction]
#[pyo3(signature = (texts, first_objid, wide, limits, group = 1))]
pub fn flatten_documents<'py>(
    py: Python<'py>,
    texts: &Bound<'py, PyList>,
    first_objid: i64,
    wide: bool,
    limits: (usize, usize, usize, usize, usize, bool),
    group: usize,
) -> PyResult<DocumentRows<'py>> {
    use crate::jsonflat::{self, Scalar};
    let limits = jsonflat::Limits {
        depth: limits.0,
        key_chars: limits.1,
        string_bytes: limits.2,
        key_and_string_bytes: limits.3,
        leaves: limits.4,
        nul: limits.5,
    };
    use pyo3::types::{PyBytes, PyString, PyTuple};
    use rayon::prelude::*;
    use std::collections::HashMap;

    enum Input {
        Text(Vec<u8>),
        Flat(Vec<jsonflat::Leaf>),
        Refused,
    }
    // Texts are copied out so the parse can run without the GIL, in parallel.
    let inputs: Vec<Input> = texts
        .iter()
        .map(|item| {
            if let Ok(bytes) = item.cast::<PyBytes>() {
                Input::Text(bytes.as_bytes().to_vec())
            } else if let Ok(text) = item.cast::<PyString>() {
                match text.to_str() {
                    Ok(s) => Input::Text(s.as_bytes().to_vec()),
                    Err(_) => Input::Refused, // lone surrogates
                }
            } else {
                flatten_object(&item, &limits).map_or(Input::Refused, Input::Flat)
            }
        })
        .collect();
    let flattened: Vec<Option<Vec<jsonflat::Leaf>>> = py.detach(|| {
        crate::pool::install(|| {
            inputs
                .into_par_iter()
                .map(|input| match input {
                    Input::Text(text) => jsonflat::flatten(&text, &limits).ok(),
                    Input::Flat(leaves) => Some(leaves),
                    Input::Refused => None,
                })
                .collect()
        })
    });

    if group == 0 {
        return Err(PyValueError::new_err("group must be at least 1 row"));
    }
    let _gc = GcPause::new(py);
    // values per row of each list, and the values of rows not yet in a tuple
    let widths: &[usize] = if wide { &[8] } else { &[4, 5, 4, 4] };
    let mut pending: Vec<Vec<Bound<'py, PyAny>>> = widths
        .iter()
        .map(|w| Vec::with_capacity(w * group))
        .collect();
    let lists: Vec<Bound<'py, PyList>> = (0..if wide { 1 } else { 4 })
        .map(|_| PyList::empty(py))
        .collect();
    let none = py.None().into_bound(py);
    // Documents repeat their keys: one Python string per distinct key.
    let mut keys: HashMap<&str, Bound<'py, PyString>> = HashMap::new();
    let mut refused = Vec::new();
    for (position, leaves) in flattened.iter().enumerate() {
        let Some(leaves) = leaves else {
            refused.push(position);
            continue;
        };
        let objid = (first_objid + position as i64)
            .into_pyobject(py)?
            .into_any();
        for leaf in leaves {
            let key = keys
                .entry(leaf.key.as_str())
                .or_insert_with(|| PyString::new(py, &leaf.key))
                .clone()
                .into_any();
            let ord = leaf.ord.into_pyobject(py)?.into_any();
            // the value columns: valstr, valnum, valint, valbool, valkind
            let mut values: [Bound<'py, PyAny>; 5] = std::array::from_fn(|_| none.clone());
            let table = match &leaf.value {
                Scalar::Str(s) => {
                    values[0] = PyString::new(py, s).into_any();
                    0
                }
                Scalar::Int(i) => {
                    values[1] = (*i as f64).into_pyobject(py)?.into_any();
                    values[2] = i.into_pyobject(py)?.into_any();
                    1
                }
                Scalar::Float(x) => {
                    values[1] = x.into_pyobject(py)?.into_any();
                    1
                }
                Scalar::Bool(b) => {
                    values[3] = b.into_pyobject(py)?.to_owned().into_any();
                    2
                }
                Scalar::Kind(k) => {
                    values[4] = k.into_pyobject(py)?.into_any();
                    3
                }
            };
            let [valstr, valnum, valint, valbool, valkind] = values;
            let objid = objid.clone();
            let list = if wide { 0 } else { table };
            let pending = &mut pending[list];
            match (wide, table) {
                (true, _) => {
                    pending.extend([objid, key, ord, valstr, valnum, valint, valbool, valkind])
                }
                (false, 0) => pending.extend([objid, key, ord, valstr]),
                (false, 1) => pending.extend([objid, key, ord, valnum, valint]),
                (false, 2) => pending.extend([objid, key, ord, valbool]),
                (false, _) => pending.extend([objid, key, ord, valkind]),
            }
            if pending.len() >= group * widths[list] {
                lists[list].append(PyTuple::new(py, pending.drain(..))?)?;
            }
        }
    }
    for (list, rest) in lists.iter().zip(pending) {
        if !rest.is_empty() {
            list.append(PyTuple::new(py, rest)?)?;
        }
    }
    Ok((lists, refused))
}

/// FNV-1a: the builder looks up a short key for every row, where the
/// standard library's DoS-resistant SipHash took 7% of a profiled rebuild.
/// The keys are the collection's own, so there is nothing to defend against.
struct FnvHasher(u64);

impl Default for FnvHasher {
    fn default() -> Self {
        FnvHasher(0xcbf2_9ce4_8422_2325) // the offset basis
    }
}

impl std::hash::Hasher for FnvHasher {
    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type FnvMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<FnvHasher>>;

/// Pauses Python's cyclic garbage collector while a kernel makes many fresh
/// containers (row tuples, documents' dicts and lists, none in a cycle), and
/// restores its previous state when dropped. Every collection those allocations
/// set off walks the objects made so far, and the older generations the whole
/// heap: 0.7-1.8 s of the 2-3 s rebuild of a 1M-object NoBench Q1.
struct GcPause {
    was_enabled: bool,
}

impl GcPause {
    fn new(_py: Python<'_>) -> Self {
        // SAFETY: the GIL is held (the token says so); PyGC_Disable has no other requirement.
        let was_enabled = unsafe { pyo3::ffi::PyGC_Disable() } != 0;
        GcPause { was_enabled }
    }
}

impl Drop for GcPause {
    fn drop(&mut self) {
        if self.was_enabled {
            // SAFETY: dropped where it was made, in a function holding the GIL.
            unsafe { pyo3::ffi::PyGC_Enable() };
        }
    }
}

/// Objects rebuilt from Argo rows given in (objid, ord) order, as the
/// reference `_keys.rebuild_documents` builds them.
struct DocumentBuilder<'py> {
    _gc: GcPause,
    py: Python<'py>,
    out: Bound<'py, PyList>,
    parsed: FnvMap<String, std::rc::Rc<Vec<PyStep<'py>>>>,
    current: Option<(i64, Bound<'py, pyo3::types::PyDict>)>,
    // Subscripts come back compacted (a projection of kids[3] is a one-element
    // array): a list's last element is reused only for the subscript it was made for.
    last_index: FnvMap<usize, i64>,
}

enum PyStep<'py> {
    Key(Bound<'py, pyo3::types::PyString>),
    Index(i64),
}

/// A row's value: a primitive, or what its `valkind` stands for.
enum RowValue<'py> {
    Value(Bound<'py, PyAny>),
    Kind(Option<i64>),
}

impl<'py> DocumentBuilder<'py> {
    fn new(py: Python<'py>) -> Self {
        DocumentBuilder {
            _gc: GcPause::new(py),
            py,
            out: PyList::empty(py),
            parsed: FnvMap::default(),
            current: None,
            last_index: FnvMap::default(),
        }
    }

    fn container(&self, following: &PyStep<'py>) -> Bound<'py, PyAny> {
        match following {
            PyStep::Index(_) => PyList::empty(self.py).into_any(),
            PyStep::Key(_) => pyo3::types::PyDict::new(self.py).into_any(),
        }
    }

    fn steps(&mut self, keystr: &str) -> PyResult<std::rc::Rc<Vec<PyStep<'py>>>> {
        use crate::jsonflat::{self, Step};
        if let Some(steps) = self.parsed.get(keystr) {
            return Ok(steps.clone());
        }
        let steps = jsonflat::parse_key(keystr)
            .ok_or_else(|| PyValueError::new_err(format!("{keystr:?} is not a flattened key")))?;
        let py = self.py;
        let steps: std::rc::Rc<Vec<PyStep<'py>>> = std::rc::Rc::new(
            steps
                .into_iter()
                .map(|s| match s {
                    Step::Key(k) => PyStep::Key(pyo3::types::PyString::new(py, &k)),
                    Step::Index(i) => PyStep::Index(i),
                })
                .collect(),
        );
        self.parsed.insert(keystr.to_owned(), steps.clone());
        Ok(steps)
    }

    /// Adds one row of object `objid` (rows of one object come together, in `ord` order).
    fn row(&mut self, objid: i64, keystr: &str, value: RowValue<'py>) -> PyResult<()> {
        use crate::jsonflat::{KIND_EMPTY_ARRAY, KIND_EMPTY_DOCUMENT, KIND_EMPTY_OBJECT};
        use pyo3::types::PyDict;
        let py = self.py;
        if self.current.as_ref().is_none_or(|(id, _)| *id != objid) {
            if let Some((id, doc)) = self.current.take() {
                self.out.append((id, doc))?;
            }
            self.current = Some((objid, PyDict::new(py)));
            self.last_index.clear();
        }
        let value = match value {
            RowValue::Value(value) => value,
            RowValue::Kind(Some(KIND_EMPTY_DOCUMENT)) => return Ok(()),
            RowValue::Kind(Some(KIND_EMPTY_OBJECT)) => PyDict::new(py).into_any(),
            RowValue::Kind(Some(KIND_EMPTY_ARRAY)) => PyList::empty(py).into_any(),
            RowValue::Kind(_) => py.None().into_bound(py),
        };
        let steps = self.steps(keystr)?;
        let (_, root) = self.current.as_ref().expect("a document is open");
        let mut node = root.clone().into_any();
        let mut value = Some(value);
        for (i, step) in steps.iter().enumerate() {
            let following = steps.get(i + 1);
            match step {
                PyStep::Key(key) => {
                    let dict = node.cast::<PyDict>()?.clone();
                    match following {
                        None => dict.set_item(key, value.take())?,
                        Some(next) => {
                            node = match dict.get_item(key)? {
                                Some(child) => child,
                                None => {
                                    let child = self.container(next);
                                    dict.set_item(key, &child)?;
                                    child
                                }
                            };
                        }
                    }
                }
                PyStep::Index(index) => {
                    let list = node.cast::<PyList>()?.clone();
                    let address = list.as_ptr() as usize;
                    match following {
                        None => {
                            list.append(value.take())?;
                            self.last_index.insert(address, *index);
                        }
                        Some(next) => {
                            let len = list.len();
                            node = if len > 0 && self.last_index.get(&address) == Some(index) {
                                list.get_item(len - 1)?
                            } else {
                                let child = self.container(next);
                                list.append(&child)?;
                                self.last_index.insert(address, *index);
                                child
                            };
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn finish(mut self) -> PyResult<Bound<'py, PyList>> {
        if let Some((id, doc)) = self.current.take() {
            self.out.append((id, doc))?;
        }
        Ok(self.out)
    }
}

/// Rebuilds documents from their rows (see `_core.pyi`): `(objid, document)` pairs.
///
/// Rows are `(objid, keystr, ord, valstr, valnum, valint, valbool, valkind)`,
/// grouped by objid and in `ord` order within it, as `_keys.rebuild_documents`
/// (the reference) takes them.
#[pyfunction]
pub fn rebuild_documents<'py>(
    py: Python<'py>,
    rows: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    use pyo3::types::{PyString, PyTuple};

    let mut builder = DocumentBuilder::new(py);
    for row in rows.try_iter()? {
        let row = row?;
        let row = row.cast::<PyTuple>()?;
        if row.len() != 8 {
            return Err(PyValueError::new_err(format!(
                "a document row has 8 columns, not {}",
                row.len()
            )));
        }
        let objid: i64 = row.get_item(0)?.extract()?;
        let (valstr, valnum, valint, valbool) = (
            row.get_item(3)?,
            row.get_item(4)?,
            row.get_item(5)?,
            row.get_item(6)?,
        );
        let value = if !valstr.is_none() {
            RowValue::Value(valstr)
        } else if !valint.is_none() {
            RowValue::Value(valint.extract::<i64>()?.into_pyobject(py)?.into_any())
        } else if !valnum.is_none() {
            RowValue::Value(valnum.extract::<f64>()?.into_pyobject(py)?.into_any())
        } else if !valbool.is_none() {
            RowValue::Value(
                valbool
                    .is_truthy()?
                    .into_pyobject(py)?
                    .to_owned()
                    .into_any(),
            )
        } else {
            RowValue::Kind(row.get_item(7)?.extract()?)
        };
        let keystr = row.get_item(1)?;
        builder.row(objid, keystr.cast::<PyString>()?.to_str()?, value)?;
    }
    builder.finish()
}

/// Rebuilds documents from packed row texts (see `_core.pyi`): `(objid, document)` pairs.
///
/// Each text is a JSON array of `jsonflat::PackedRow`s, one per table, in
/// any order; the texts are parsed and their rows put in (objid, ord) order
/// without the GIL.
#[pyfunction]
pub fn rebuild_packed_documents<'py>(
    py: Python<'py>,
    texts: Vec<Bound<'py, pyo3::types::PyString>>,
) -> PyResult<Bound<'py, PyList>> {
    use pyo3::types::PyString;

    // borrowed from the Python strings, which the call keeps alive (a Q1 at 1M
    // objects packs ~115 MB: no copy of it)
    let parts: Vec<&str> = texts.iter().map(|t| t.to_str()).collect::<PyResult<_>>()?;
    let rows = py
        .detach(|| crate::jsonflat::packed_rows(&parts))
        .map_err(PyValueError::new_err)?;
    let mut builder = DocumentBuilder::new(py);
    for row in rows {
        let value = if let Some(text) = row.valstr {
            RowValue::Value(PyString::new(py, &text).into_any())
        } else if let Some(int) = row.valint {
            RowValue::Value(int.into_pyobject(py)?.into_any())
        } else if let Some(text) = row.valnum {
            let number: f64 = text.parse().map_err(|_| {
                PyValueError::new_err(format!(
                    "{text:?} (at {:?} of object {}) is not a number",
                    row.keystr, row.objid
                ))
            })?;
            RowValue::Value(number.into_pyobject(py)?.into_any())
        } else if let Some(flag) = row.valbool {
            RowValue::Value((flag != 0).into_pyobject(py)?.to_owned().into_any())
        } else {
            RowValue::Kind(row.valkind)
        };
        builder.row(row.objid, &row.keystr, value)?;
    }
    builder.finish()
}

fn chunk_layout(
    chunk_shape: Vec<usize>,
    lo: Vec<usize>,
    hi: Vec<usize>,
    itemsize: usize,
    codec: &str,
    checksum: bool,
) -> PyResult<crate::chunks::Layout> {
    use crate::chunks::Codec;
    let codec = match codec {
        "zstd" => Codec::Zstd,
        "raw" => Codec::Raw,
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown chunk codec {other:?}; one of zstd, raw"
            )))
        }
    };
    Ok(crate::chunks::Layout {
        chunk: chunk_shape,
        lo,
        hi,
        itemsize,
        codec,
        checksum,
    })
}

type StoredChunks = Vec<(pyo3::pybacked::PyBackedBytes, Vec<usize>)>;

/// (payload, grid coordinates) of each stored chunk, as slices the kernels borrow.
fn chunk_parts(chunks: &StoredChunks) -> Vec<(&[u8], &[usize])> {
    chunks
        .iter()
        .map(|(payload, coords)| (&payload[..], coords.as_slice()))
        .collect()
}

/// Decodes stored Zarr chunks of one attribute into `out`, the byte view of
/// the box `lo..hi` (C order). `chunks` are (payload, grid coordinates);
/// `codec` is "zstd" or "raw", `checksum` whether a CRC-32C ends each payload.
/// Returns None, or (index, reason) for the first chunk that cannot be decoded.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn decode_chunks(
    py: Python<'_>,
    chunks: StoredChunks,
    chunk_shape: Vec<usize>,
    lo: Vec<usize>,
    hi: Vec<usize>,
    itemsize: usize,
    codec: &str,
    checksum: bool,
    mut out: numpy::PyReadwriteArray1<'_, u8>,
) -> PyResult<Option<(usize, String)>> {
    use crate::chunks::{self, Failure};
    let layout = chunk_layout(chunk_shape, lo, hi, itemsize, codec, checksum)?;
    let out = out
        .as_slice_mut()
        .map_err(|_| PyValueError::new_err("out must be a contiguous uint8 array"))?;
    let parts = chunk_parts(&chunks);
    match py.detach(|| chunks::decode_chunks(&layout, &parts, out)) {
        Ok(()) => Ok(None),
        Err(Failure::Chunk(index, reason)) => Ok(Some((index, reason))),
        Err(Failure::Input(reason)) => Err(PyValueError::new_err(reason)),
    }
}

type ChunkPartials<'py> = (Vec<Bound<'py, PyAny>>, Option<(usize, String)>);

/// Count, sum, min, max and NaN-seen of the non-NULL cells of each chunk's
/// part of the box `lo..hi`, without writing the cells anywhere. `kind` is
/// numpy's dtype kind ("i", "u", "b" or "f"), `null` the fill value's bytes
/// of a nullable attribute; without `extremes` min and max are not computed.
/// Returns (partials, None), or ([], (index, reason)) for the first chunk
/// that cannot be decoded.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn reduce_chunks<'py>(
    py: Python<'py>,
    chunks: StoredChunks,
    chunk_shape: Vec<usize>,
    lo: Vec<usize>,
    hi: Vec<usize>,
    itemsize: usize,
    codec: &str,
    checksum: bool,
    kind: &str,
    null: Option<Vec<u8>>,
    extremes: bool,
) -> PyResult<ChunkPartials<'py>> {
    use crate::chunks::{self, Failure, Kind, Partial};
    let layout = chunk_layout(chunk_shape, lo, hi, itemsize, codec, checksum)?;
    let kind = match kind {
        "i" => Kind::Signed,
        "u" | "b" => Kind::Unsigned,
        "f" => Kind::Float,
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown cell kind {other:?}; one of i, u, b, f"
            )))
        }
    };
    let parts = chunk_parts(&chunks);
    let partials = match py
        .detach(|| chunks::reduce_chunks(&layout, kind, null.as_deref(), extremes, &parts))
    {
        Ok(partials) => partials,
        Err(Failure::Chunk(index, reason)) => return Ok((Vec::new(), Some((index, reason)))),
        Err(Failure::Input(reason)) => return Err(PyValueError::new_err(reason)),
    };
    fn totals<'py, T: IntoPyObject<'py>, S: IntoPyObject<'py>>(
        py: Python<'py>,
        t: crate::chunks::Totals<T, S>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let tuple = (t.count, t.sum, t.min, t.max, t.nan).into_pyobject(py);
        tuple.map(|t| t.into_any())
    }
    let partials = partials
        .into_iter()
        .map(|p| match p {
            Partial::Signed(t) => totals(py, t),
            Partial::Unsigned(t) => totals(py, t),
            Partial::Float(t) => totals(py, t),
        })
        .collect::<PyResult<_>>()?;
    Ok((partials, None))
}
