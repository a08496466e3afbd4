//! Bindings of the associative-array kernels: key interning and the sparse
//! matrix of triples.

use crate::assoc::{Aggregate, Keys};
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

/// Reads one column of keys, with the GIL held: the bytes are copied out so
/// the interning can run without it.
fn read_keys(source: &Bound<'_, PyAny>, at: usize) -> PyResult<Keys> {
    if let Ok(text) = source.cast::<PyString>() {
        return Ok(Keys::delimited(text.to_str()?));
    }
    if let Ok(list) = source.cast::<PyList>() {
        let mut data = Vec::new();
        let mut offsets = Vec::with_capacity(list.len() + 1);
        offsets.push(0usize);
        for (i, item) in list.iter().enumerate() {
            let text = item.cast::<PyString>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "source {at}: item {i} is {}, not str",
                    item.get_type()
                        .name()
                        .map_or_else(|_| "?".to_string(), |n| n.to_string())
                ))
            })?;
            data.extend_from_slice(text.to_str()?.as_bytes());
            offsets.push(data.len());
        }
        return Ok(Keys::Text { data, offsets });
    }
    if let Ok(numbers) = source.extract::<PyReadonlyArray1<'_, f64>>() {
        let values = numbers.as_slice()?.to_vec();
        if let Some(i) = values.iter().position(|v| v.is_nan()) {
            return Err(PyValueError::new_err(format!(
                "source {at}: item {i} is NaN"
            )));
        }
        return Ok(Keys::Numbers(values));
    }
    if let Ok(codes) = source.extract::<PyReadonlyArray2<'_, u32>>() {
        let width = codes.shape()[1];
        return Keys::from_ucs4(codes.as_slice()?, width).map_err(|i| {
            PyValueError::new_err(format!("source {at}: item {i} is not Unicode text"))
        });
    }
    Err(PyTypeError::new_err(format!(
        "source {at}: keys must be a D4M string, a list of str, a float64 array \
         or a uint32 (n, width) view of a numpy str array"
    )))
}

type InternedKeys<'py> = (Bound<'py, PyAny>, Bound<'py, PyArray1<i64>>);

/// Sorted unique keys of each source and each input key's place among them.
///
/// A source is a D4M string (its last character the delimiter), a list of
/// str, a float64 array (no NaN) or an (n, width) uint32 view of a numpy
/// fixed-width str array. Returns, per source, (unique keys: a list of str or
/// a float64 array, ids: int64 array). Sources are interned in parallel.
/// With `arrow`, string keys come back as (offsets int64, data uint8): the
/// buffers of an Arrow large string array, and no Python string is made.
#[pyfunction]
#[pyo3(signature = (sources, arrow=false))]
pub fn intern_keys<'py>(
    py: Python<'py>,
    sources: Vec<Bound<'py, PyAny>>,
    arrow: bool,
) -> PyResult<Vec<InternedKeys<'py>>> {
    // each source is interned on its own thread as soon as it is read, so
    // reading the next one (which needs the GIL) overlaps the work
    let done: Vec<(Keys, Vec<i64>)> = std::thread::scope(|scope| {
        let mut running = Vec::with_capacity(sources.len());
        for (at, source) in sources.iter().enumerate() {
            let keys = read_keys(source, at)?;
            if keys.len() > u32::MAX as usize {
                return Err(PyValueError::new_err(format!(
                    "source {at}: {} keys; one call interns at most 2^32 - 1",
                    keys.len()
                )));
            }
            running.push(scope.spawn(move || {
                crate::pool::install(|| {
                    let interned = crate::assoc::intern(&keys);
                    (keys.gather(&interned.unique), interned.ids)
                })
            }));
        }
        Ok::<_, PyErr>(py.detach(|| {
            running
                .into_iter()
                .map(|thread| thread.join().expect("an interning thread panicked"))
                .collect()
        }))
    })?;
    done.into_iter()
        .map(|(unique, ids)| {
            let unique = match unique {
                Keys::Text { data, offsets } if arrow => {
                    let offsets: Vec<i64> = offsets.into_iter().map(|o| o as i64).collect();
                    (offsets.into_pyarray(py), data.into_pyarray(py))
                        .into_pyobject(py)?
                        .into_any()
                }
                Keys::Text { data, offsets } => {
                    let text = std::str::from_utf8(&data)
                        .map_err(|_| PyValueError::new_err("keys are not UTF-8"))?;
                    let keys = offsets.windows(2).map(|w| &text[w[0]..w[1]]);
                    PyList::new(py, keys)?.into_any()
                }
                Keys::Numbers(values) => values.into_pyarray(py).into_any(),
            };
            Ok((unique, ids.into_pyarray(py)))
        })
        .collect()
}

type CsrArrays<'py> = (
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<f64>>,
);

/// (indptr, indices, data) of the `nrows` x `ncols` matrix holding the
/// triples, colliding triples combined by `aggregate` (min, max, sum, first,
/// last) in input order and entries that come to zero dropped.
#[pyfunction]
pub fn triples_csr<'py>(
    py: Python<'py>,
    rows: PyReadonlyArray1<'py, i64>,
    cols: PyReadonlyArray1<'py, i64>,
    vals: PyReadonlyArray1<'py, f64>,
    nrows: usize,
    ncols: usize,
    aggregate: &str,
) -> PyResult<CsrArrays<'py>> {
    let aggregate = Aggregate::parse(aggregate).ok_or_else(|| {
        PyValueError::new_err(format!(
            "unknown aggregate {aggregate:?}; one of min, max, sum, first, last"
        ))
    })?;
    let (rows, cols, vals) = (rows.as_slice()?, cols.as_slice()?, vals.as_slice()?);
    if rows.len() != cols.len() || rows.len() != vals.len() {
        return Err(PyValueError::new_err(format!(
            "{} rows, {} columns and {} values: the triples must be as many",
            rows.len(),
            cols.len(),
            vals.len()
        )));
    }
    if let Some(i) = rows.iter().position(|&r| r < 0 || r as usize >= nrows) {
        return Err(PyValueError::new_err(format!(
            "row id {} of triple {i} is outside 0..{nrows}",
            rows[i]
        )));
    }
    if let Some(i) = cols.iter().position(|&c| c < 0 || c as usize >= ncols) {
        return Err(PyValueError::new_err(format!(
            "column id {} of triple {i} is outside 0..{ncols}",
            cols[i]
        )));
    }
    let csr = py.detach(|| {
        crate::pool::install(|| crate::assoc::build_csr(rows, cols, vals, nrows, aggregate))
    });
    Ok((
        csr.indptr.into_pyarray(py),
        csr.indices.into_pyarray(py),
        csr.data.into_pyarray(py),
    ))
}

type MergedPlaces<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<i64>>, usize);

/// Places of two sorted unique key lists (both lists of str, or both float64
/// arrays) in their sorted union: (places of `a`, places of `b`, union length).
#[pyfunction]
pub fn merge_keys<'py>(
    py: Python<'py>,
    a: Bound<'py, PyAny>,
    b: Bound<'py, PyAny>,
) -> PyResult<MergedPlaces<'py>> {
    let (a_at, b_at, n) = if let (Ok(a), Ok(b)) = (a.cast::<PyList>(), b.cast::<PyList>()) {
        let texts = |list: &Bound<'py, PyList>| -> PyResult<Vec<Bound<'py, PyString>>> {
            list.iter()
                .map(|item| {
                    item.cast_into::<PyString>()
                        .map_err(|e| PyTypeError::new_err(e.to_string()))
                })
                .collect()
        };
        let (a, b) = (texts(a)?, texts(b)?);
        let a: Vec<&str> = a.iter().map(|s| s.to_str()).collect::<PyResult<_>>()?;
        let b: Vec<&str> = b.iter().map(|s| s.to_str()).collect::<PyResult<_>>()?;
        crate::assoc::merge_sorted::<str>(&a, &b)
    } else {
        let a: PyReadonlyArray1<'py, f64> = a.extract()?;
        let b: PyReadonlyArray1<'py, f64> = b.extract()?;
        let a: Vec<&f64> = a.as_slice()?.iter().collect();
        let b: Vec<&f64> = b.as_slice()?.iter().collect();
        crate::assoc::merge_sorted::<f64>(&a, &b)
    };
    Ok((a_at.into_pyarray(py), b_at.into_pyarray(py), n))
}

/// For each probe, where it goes among sorted strings held as an Arrow large
/// string array (`offsets`, `data`): numpy's `searchsorted` (left, or
/// `right`), by binary search over the bytes, so a memory-mapped key file
/// is searched without being read.
#[pyfunction]
pub fn search_text<'py>(
    py: Python<'py>,
    offsets: PyReadonlyArray1<'py, i64>,
    data: PyReadonlyArray1<'py, u8>,
    probes: Vec<String>,
    right: bool,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let (offsets, data) = (offsets.as_slice()?, data.as_slice()?);
    let found: Option<Vec<i64>> = probes
        .iter()
        .map(|p| crate::assoc::search_sorted(offsets, data, p.as_bytes(), right).map(|i| i as i64))
        .collect();
    let found = found
        .ok_or_else(|| PyValueError::new_err("the offsets do not describe strings of the data"))?;
    Ok(found.into_pyarray(py))
}

type SparseProduct<'py> = (
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<f64>>,
);

/// `A @ B` of two CSR matrices (int64 indptr and indices, float64 data) where
/// `inner[k]` is the row of B that A's column k meets (-1: none), B having
/// `b_cols` columns: (kept rows of A, kept columns of B, indptr, indices,
/// data), rows and columns without entries dropped, columns ascending
/// within each row, no zeros stored.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn sparse_product<'py>(
    py: Python<'py>,
    a_indptr: PyReadonlyArray1<'py, i64>,
    a_indices: PyReadonlyArray1<'py, i64>,
    a_data: PyReadonlyArray1<'py, f64>,
    inner: PyReadonlyArray1<'py, i64>,
    b_indptr: PyReadonlyArray1<'py, i64>,
    b_indices: PyReadonlyArray1<'py, i64>,
    b_data: PyReadonlyArray1<'py, f64>,
    b_cols: usize,
) -> PyResult<SparseProduct<'py>> {
    use crate::spgemm::{multiply, CsrRef, ProductError};
    let a = CsrRef {
        indptr: a_indptr.as_slice()?,
        indices: a_indices.as_slice()?,
        data: a_data.as_slice()?,
    };
    let b = CsrRef {
        indptr: b_indptr.as_slice()?,
        indices: b_indices.as_slice()?,
        data: b_data.as_slice()?,
    };
    let inner = inner.as_slice()?;
    let product = py
        .detach(|| crate::pool::install(|| multiply(&a, inner, &b, b_cols)))
        .map_err(|err| {
            PyValueError::new_err(match err {
                ProductError::Inner { column, row } => {
                    format!("A's column {column} meets row {row}, outside B's rows")
                }
                ProductError::Column { entry, column } => {
                    format!("entry {entry} has column {column}, outside its matrix")
                }
                ProductError::Malformed(why) => why.to_string(),
            })
        })?;
    Ok((
        product.rows.into_pyarray(py),
        product.cols.into_pyarray(py),
        product.indptr.into_pyarray(py),
        product.indices.into_pyarray(py),
        product.data.into_pyarray(py),
    ))
}
