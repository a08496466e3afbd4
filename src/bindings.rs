//! Python bindings of the kernels: numpy in, numpy out, the GIL released for the work.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::sync::RwLock;

use crate::kdtree::{self, KdNode, NodeOrderedTree, PackedKdTree, QueryBox};
use crate::rtree::SegmentIndex;

type Labels<'py> = (Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<u32>>);
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
/// Returns (segment, row): the position in `trees` and the row within that
/// segment of each record found, grouped by segment in the order of `trees`.
#[pyfunction]
#[pyo3(signature = (trees, lo, hi, sequential = false))]
pub fn search_segments<'py>(
    py: Python<'py>,
    trees: Vec<Py<PyKdTree>>,
    lo: Vec<f64>,
    hi: Vec<f64>,
    sequential: bool,
) -> PyResult<Labels<'py>> {
    use rayon::prelude::*;
    let dims = lo.len();
    let query = query_box(lo, hi, dims)?;
    let refs: Vec<&PyKdTree> = trees.iter().map(|t| t.get()).collect();
    if let Some(t) = refs.iter().find(|t| t.inner.tree.dims != dims) {
        return Err(PyValueError::new_err(format!(
            "a tree has {} dimensions; the query box has {dims}",
            t.inner.tree.dims
        )));
    }
    let (segments, found) = py.detach(|| {
        let found: Vec<Vec<u32>> = refs
            .par_iter()
            .map(|t| t.find(&query, sequential))
            .collect();
        let total = found.iter().map(Vec::len).sum();
        let mut segments = Vec::with_capacity(total);
        let mut all = Vec::with_capacity(total);
        for (s, rows) in found.into_iter().enumerate() {
            segments.extend(std::iter::repeat_n(s as u32, rows.len()));
            all.extend(rows);
        }
        (segments, all)
    });
    Ok((segments.into_pyarray(py), found.into_pyarray(py)))
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
