//! Python bindings of the kernels: numpy in, numpy out, the GIL released for the work.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::sync::RwLock;

use crate::kdtree::{self, KdNode, PackedKdTree, QueryBox};
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

/// Build a packed kd-tree over the rows of `coords`; returns (records, left, right).
#[pyfunction]
#[pyo3(signature = (coords, initial_dimension = 0))]
pub fn kdtree_build<'py>(
    py: Python<'py>,
    coords: PyReadonlyArray2<'py, f64>,
    initial_dimension: usize,
) -> PyResult<NodeArrays<'py>> {
    let (data, dims) = rows(&coords)?;
    let tree = py.detach(|| kdtree::build(data, dims, initial_dimension));
    let records: Vec<u32> = tree.nodes.iter().map(|n| n.record).collect();
    let left: Vec<i32> = tree.nodes.iter().map(|n| n.left).collect();
    let right: Vec<i32> = tree.nodes.iter().map(|n| n.right).collect();
    Ok((
        records.into_pyarray(py),
        left.into_pyarray(py),
        right.into_pyarray(py),
    ))
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

/// Rows of `coords` inside the box [lo, hi], found through a packed kd-tree.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn kdtree_search<'py>(
    py: Python<'py>,
    coords: PyReadonlyArray2<'py, f64>,
    records: PyReadonlyArray1<'py, u32>,
    left: PyReadonlyArray1<'py, i32>,
    right: PyReadonlyArray1<'py, i32>,
    initial_dimension: usize,
    lo: Vec<f64>,
    hi: Vec<f64>,
) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let (data, dims) = rows(&coords)?;
    let query = query_box(lo, hi, dims)?;
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
    let tree = PackedKdTree {
        initial_dimension: initial_dimension % dims,
        dims,
        nodes: (0..n)
            .map(|i| KdNode {
                record: records[i],
                left: left[i],
                right: right[i],
            })
            .collect(),
    };
    let found = py.detach(|| kdtree::search(&tree, data, &query));
    Ok(found.into_pyarray(py))
}

/// Rows of `coords` inside the box [lo, hi], looking at every row (the sequential iterator).
#[pyfunction]
pub fn box_scan<'py>(
    py: Python<'py>,
    coords: PyReadonlyArray2<'py, f64>,
    lo: Vec<f64>,
    hi: Vec<f64>,
) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let (data, dims) = rows(&coords)?;
    let query = query_box(lo, hi, dims)?;
    Ok(py
        .detach(|| kdtree::scan(data, dims, &query))
        .into_pyarray(py))
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
