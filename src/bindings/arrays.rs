//! Bindings of the array kernels: decoding stored chunks and folding them into
//! aggregates.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// How one attribute's chunks lie over a box and are encoded: the box
/// `lo..hi` (cells of the whole array) chunked by `chunk_shape`, cells of
/// `itemsize` bytes, `codec` "zstd" or "raw" (after little-endian bytes), and
/// whether a CRC-32C ends each payload. Made once per call in Python and
/// handed to every chunk kernel.
#[pyclass(name = "ChunkLayout", module = "tesseradb._core", frozen)]
pub struct PyChunkLayout {
    layout: crate::chunks::Layout,
}

#[pymethods]
impl PyChunkLayout {
    #[new]
    fn new(
        chunk_shape: Vec<usize>,
        lo: Vec<usize>,
        hi: Vec<usize>,
        itemsize: usize,
        codec: &str,
        checksum: bool,
    ) -> PyResult<Self> {
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
        if lo.len() != chunk_shape.len() || hi.len() != chunk_shape.len() {
            return Err(PyValueError::new_err(format!(
                "a chunk layout of {} dimensions needs as many lo and hi, not {} and {}",
                chunk_shape.len(),
                lo.len(),
                hi.len()
            )));
        }
        Ok(PyChunkLayout {
            layout: crate::chunks::Layout {
                chunk: chunk_shape,
                lo,
                hi,
                itemsize,
                codec,
                checksum,
            },
        })
    }

    fn __repr__(&self) -> String {
        let l = &self.layout;
        let codec = match l.codec {
            crate::chunks::Codec::Zstd => "zstd",
            crate::chunks::Codec::Raw => "raw",
        };
        let checksum = if l.checksum { "True" } else { "False" };
        format!(
            "ChunkLayout({:?}, {:?}, {:?}, {}, {codec:?}, {checksum})",
            l.chunk, l.lo, l.hi, l.itemsize
        )
    }
}

/// Stored chunks as (payload, grid coordinates). Payloads are uint8 arrays, not
/// bytes: a view of the store's buffer costs nothing, a bytes copy of a
/// 700 MB read took as long as fetching it.
type StoredChunks<'py> = Vec<(numpy::PyReadonlyArray1<'py, u8>, Vec<usize>)>;

/// (payload, grid coordinates) of each stored chunk, as slices the kernels borrow.
fn chunk_parts<'a>(chunks: &'a StoredChunks<'_>) -> PyResult<Vec<(&'a [u8], &'a [usize])>> {
    chunks
        .iter()
        .map(|(payload, coords)| {
            let bytes = payload.as_slice().map_err(|_| {
                PyValueError::new_err("a chunk payload must be a contiguous uint8 array")
            })?;
            Ok((bytes, coords.as_slice()))
        })
        .collect()
}

/// Decodes stored Zarr chunks of one attribute into `out`, the byte view of
/// the layout's box (C order). `chunks` are (payload, grid coordinates).
/// Returns None, or (index, reason) for the first chunk that cannot be decoded.
#[pyfunction]
pub fn decode_chunks<'py>(
    py: Python<'_>,
    chunks: StoredChunks<'py>,
    layout: PyRef<'_, PyChunkLayout>,
    mut out: numpy::PyReadwriteArray1<'_, u8>,
) -> PyResult<Option<(usize, String)>> {
    use crate::chunks::{self, Failure};
    let layout = &layout.layout;
    let out = out
        .as_slice_mut()
        .map_err(|_| PyValueError::new_err("out must be a contiguous uint8 array"))?;
    let parts = chunk_parts(&chunks)?;
    match py.detach(|| chunks::decode_chunks(layout, &parts, out)) {
        Ok(()) => Ok(None),
        Err(Failure::Chunk(index, reason)) => Ok(Some((index, reason))),
        Err(Failure::Input(reason)) => Err(PyValueError::new_err(reason)),
    }
}

/// Encodes the chunks at `coords` (grid coordinates) of the layout's box
/// whose cells are `values` (its bytes in C order): each chunk whole, cells
/// outside the box set to `fill` (one cell's bytes), compressed with the
/// layout's codec (zstd at `level`) and followed by a CRC-32C when it says.
/// Returns the payloads in the order of `coords`.
#[pyfunction]
pub fn encode_chunks<'py>(
    py: Python<'py>,
    values: numpy::PyReadonlyArray1<'py, u8>,
    layout: PyRef<'_, PyChunkLayout>,
    level: i32,
    fill: Vec<u8>,
    coords: Vec<Vec<usize>>,
) -> PyResult<Vec<Bound<'py, pyo3::types::PyBytes>>> {
    use crate::chunks::{self, Failure};
    let layout = &layout.layout;
    let values = values
        .as_slice()
        .map_err(|_| PyValueError::new_err("values must be a contiguous uint8 array"))?;
    let wanted: Vec<&[usize]> = coords.iter().map(Vec::as_slice).collect();
    let payloads = py
        .detach(|| chunks::encode_chunks(layout, level, &fill, values, &wanted))
        .map_err(|failure| match failure {
            Failure::Input(reason) => PyValueError::new_err(reason),
            Failure::Chunk(index, reason) => {
                PyValueError::new_err(format!("chunk {:?}: {reason}", coords[index]))
            }
        })?;
    Ok(payloads
        .iter()
        .map(|p| pyo3::types::PyBytes::new(py, p))
        .collect())
}

fn input_error(failure: crate::chunks::Failure) -> PyErr {
    match failure {
        crate::chunks::Failure::Input(reason) => PyValueError::new_err(reason),
        crate::chunks::Failure::Chunk(index, reason) => {
            PyValueError::new_err(format!("stored chunk {index}: {reason}"))
        }
    }
}

/// A coordinate of every cell as Python gives it: an int32 or int64 numpy
/// array, or one int for all cells.
enum PyColumn<'py> {
    I32(numpy::PyReadonlyArray1<'py, i32>),
    I64(numpy::PyReadonlyArray1<'py, i64>),
    Scalar(i64),
}

fn py_columns<'py>(columns: &[Bound<'py, PyAny>]) -> PyResult<Vec<PyColumn<'py>>> {
    columns
        .iter()
        .enumerate()
        .map(|(d, column)| {
            if let Ok(v) = column.extract::<numpy::PyReadonlyArray1<'py, i64>>() {
                Ok(PyColumn::I64(v))
            } else if let Ok(v) = column.extract::<numpy::PyReadonlyArray1<'py, i32>>() {
                Ok(PyColumn::I32(v))
            } else if let Ok(x) = column.extract::<i64>() {
                Ok(PyColumn::Scalar(x))
            } else {
                Err(PyValueError::new_err(format!(
                    "coordinate {d} must be a 1-d int32 or int64 array or an int"
                )))
            }
        })
        .collect()
}

fn borrow_columns<'a>(columns: &'a [PyColumn<'_>]) -> PyResult<Vec<crate::triples::Column<'a>>> {
    use crate::triples::Column;
    let contiguous = |_| PyValueError::new_err("coordinate arrays must be contiguous");
    columns
        .iter()
        .map(|column| {
            Ok(match column {
                PyColumn::I32(v) => Column::I32(v.as_slice().map_err(contiguous)?),
                PyColumn::I64(v) => Column::I64(v.as_slice().map_err(contiguous)?),
                PyColumn::Scalar(x) => Column::Scalar(*x),
            })
        })
        .collect()
}

/// The smallest and largest value of each coordinate column (None when it is
/// empty), in parallel without the GIL.
#[pyfunction]
pub fn triple_bounds(
    py: Python<'_>,
    columns: Vec<Bound<'_, PyAny>>,
) -> PyResult<Vec<Option<(i64, i64)>>> {
    let held = py_columns(&columns)?;
    let borrowed = borrow_columns(&held)?;
    Ok(py.detach(|| crate::pool::install(|| borrowed.iter().map(|c| c.bounds()).collect())))
}

type Scattered<'py> = (
    Vec<Vec<usize>>,
    Vec<Bound<'py, pyo3::types::PyBytes>>,
    Option<(usize, String)>,
);

/// Cells of a triple ingest bucketed by the chunk they fall in (a counting
/// sort in Rust), kept between listing the touched chunks, so that their
/// stored payloads can be fetched, and writing them.
#[pyclass(name = "TripleCells", module = "tesseradb._core", frozen)]
pub struct PyTripleCells {
    buckets: crate::triples::Buckets,
    chunk_shape: Vec<usize>,
    extent: Vec<usize>,
}

#[pymethods]
impl PyTripleCells {
    /// Buckets the cells whose coordinates are `columns` (one per dimension:
    /// an int32/int64 array or an int for every cell; position = coordinate -
    /// `origin`) by the chunks of an array of `extent` cells.
    #[new]
    fn new(
        py: Python<'_>,
        columns: Vec<Bound<'_, PyAny>>,
        origin: Vec<i64>,
        chunk_shape: Vec<usize>,
        extent: Vec<usize>,
    ) -> PyResult<Self> {
        let layout = crate::chunks::Layout {
            chunk: chunk_shape.clone(),
            lo: vec![0; extent.len()],
            hi: extent.clone(),
            itemsize: 1,
            codec: crate::chunks::Codec::Raw,
            checksum: false,
        };
        let held = py_columns(&columns)?;
        let borrowed = borrow_columns(&held)?;
        let buckets = py
            .detach(|| crate::pool::install(|| crate::triples::bucket(&layout, &borrowed, &origin)))
            .map_err(input_error)?;
        Ok(PyTripleCells {
            buckets,
            chunk_shape,
            extent,
        })
    }

    /// Grid coordinates (ascending, C order) of the chunks the cells touch.
    #[getter]
    fn chunks(&self) -> Vec<Vec<usize>> {
        self.buckets.chunks.clone()
    }

    /// Writes the cells with `values` (their bytes, in the order of the
    /// coordinates) into the chunks they touch and encodes each whole as
    /// `layout` (the whole array's: chunks and extent as bucketed) says: one
    /// in `existing` (payload, grid coordinates) starts from its stored
    /// cells, any other from `fill`. Returns (coordinates, payloads, None),
    /// ascending, or ([], [], (index, reason)) for the first stored chunk
    /// that cannot be decoded.
    fn scatter<'py>(
        &self,
        py: Python<'py>,
        values: numpy::PyReadonlyArray1<'py, u8>,
        layout: PyRef<'_, PyChunkLayout>,
        level: i32,
        fill: Vec<u8>,
        existing: StoredChunks<'py>,
    ) -> PyResult<Scattered<'py>> {
        use crate::chunks::Failure;
        let layout = &layout.layout;
        if layout.chunk != self.chunk_shape
            || layout.hi != self.extent
            || layout.lo.iter().any(|&l| l != 0)
        {
            return Err(PyValueError::new_err(format!(
                "the layout's chunks {:?} and box {:?}..{:?} are not the array's the cells \
                 were bucketed by (chunks {:?}, extent {:?})",
                layout.chunk, layout.lo, layout.hi, self.chunk_shape, self.extent
            )));
        }
        let values = values
            .as_slice()
            .map_err(|_| PyValueError::new_err("values must be a contiguous uint8 array"))?;
        let stored = chunk_parts(&existing)?;
        let written = py.detach(|| {
            crate::triples::scatter_chunks(layout, level, &fill, &self.buckets, values, &stored)
        });
        match written {
            Ok(chunks) => {
                let (coords, payloads): (Vec<_>, Vec<_>) = chunks
                    .into_iter()
                    .map(|(c, p)| (c, pyo3::types::PyBytes::new(py, &p)))
                    .unzip();
                Ok((coords, payloads, None))
            }
            Err(Failure::Chunk(index, reason)) => Ok((vec![], vec![], Some((index, reason)))),
            Err(failure) => Err(input_error(failure)),
        }
    }
}

/// numpy's dtype kind as the kernels' cell kind.
fn cell_kind(kind: &str) -> PyResult<crate::chunks::Kind> {
    use crate::chunks::Kind;
    match kind {
        "i" => Ok(Kind::Signed),
        "u" | "b" => Ok(Kind::Unsigned),
        "f" => Ok(Kind::Float),
        other => Err(PyValueError::new_err(format!(
            "unknown cell kind {other:?}; one of i, u, b, f"
        ))),
    }
}

type ChunkPartials<'py> = (Vec<Bound<'py, PyAny>>, Option<(usize, String)>);

/// Count, sum, min, max and NaN-seen of the non-NULL cells of each chunk's
/// part of the layout's box, without writing the cells anywhere. `kind` is
/// numpy's dtype kind ("i", "u", "b" or "f"), `null` the fill value's bytes
/// of a nullable attribute; without `extremes` min and max are not computed.
/// Returns (partials, None), or ([], (index, reason)) for the first chunk
/// that cannot be decoded.
#[pyfunction]
pub fn reduce_chunks<'py>(
    py: Python<'py>,
    chunks: StoredChunks<'py>,
    layout: PyRef<'_, PyChunkLayout>,
    kind: &str,
    null: Option<Vec<u8>>,
    extremes: bool,
) -> PyResult<ChunkPartials<'py>> {
    use crate::chunks::{self, Failure, Partial};
    let layout = &layout.layout;
    let kind = cell_kind(kind)?;
    let parts = chunk_parts(&chunks)?;
    let partials = match py
        .detach(|| chunks::reduce_chunks(layout, kind, null.as_deref(), extremes, &parts))
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

type Csr<'py> = (
    numpy::PyReadonlyArray1<'py, i64>,
    numpy::PyReadonlyArray1<'py, i64>,
    numpy::PyReadonlyArray1<'py, f64>,
);

/// The (indptr, indices, weights) slices of three axes' CSR weights.
/// One axis's CSR weights as (indptr, indices, weights) slices.
type CsrSlices<'a> = (&'a [i64], &'a [i64], &'a [f64]);

fn weight_slices<'a>(weights: &'a [Csr<'_>]) -> PyResult<Vec<CsrSlices<'a>>> {
    if weights.len() != 3 {
        return Err(PyValueError::new_err("a regrid needs weights for 3 axes"));
    }
    weights
        .iter()
        .map(|(p, i, w)| {
            Ok((
                p.as_slice()
                    .map_err(|_| PyValueError::new_err("indptr must be contiguous"))?,
                i.as_slice()
                    .map_err(|_| PyValueError::new_err("indices must be contiguous"))?,
                w.as_slice()
                    .map_err(|_| PyValueError::new_err("weights must be contiguous"))?,
            ))
        })
        .collect()
}

fn axis_weights<'a>(parts: &[CsrSlices<'a>]) -> Vec<crate::regrid::AxisWeights<'a>> {
    parts
        .iter()
        .map(|&(indptr, indices, weights)| crate::regrid::AxisWeights {
            indptr,
            indices,
            weights,
        })
        .collect()
}

type Regridded<'py> = (
    Option<Bound<'py, numpy::PyArray3<f64>>>,
    Option<(usize, String)>,
);

/// Area-weighted regrid (as `regrid_block`) of the layout's box of one
/// attribute read from its stored chunks, which must cover the box: each
/// chunk decoded and contracted in its thread, the box never materialised.
/// `kind` is numpy's dtype kind. Returns (result, None), or (None, (index,
/// reason)) for the first chunk that cannot be decoded.
#[pyfunction]
pub fn regrid_chunks<'py>(
    py: Python<'py>,
    chunks: StoredChunks<'py>,
    layout: PyRef<'_, PyChunkLayout>,
    kind: &str,
    weights: Vec<Csr<'py>>,
) -> PyResult<Regridded<'py>> {
    use crate::chunks::Failure;
    use numpy::PyArrayMethods;
    let layout = &layout.layout;
    let kind = cell_kind(kind)?;
    let parts = weight_slices(&weights)?;
    let axes = axis_weights(&parts);
    let out_shape = [axes[0].outputs(), axes[1].outputs(), axes[2].outputs()];
    let mut out = vec![0.0f64; out_shape.iter().product()];
    let stored = chunk_parts(&chunks)?;
    let axes_ref = [&axes[0], &axes[1], &axes[2]];
    match py.detach(|| crate::regrid::regrid_chunks(layout, kind, &stored, axes_ref, &mut out)) {
        Ok(()) => {
            let result = numpy::PyArray1::from_vec(py, out).reshape(out_shape)?;
            Ok((Some(result), None))
        }
        Err(Failure::Chunk(index, reason)) => Ok((None, Some((index, reason)))),
        Err(Failure::Input(reason)) => Err(PyValueError::new_err(reason)),
    }
}

/// Area-weighted regrid of a C-contiguous 3-D block (any integer or float
/// dtype) by one CSR weight matrix per axis (indptr, indices, weights):
/// float64 result of the matrices' output shape. Without NULL cells only.
#[pyfunction]
pub fn regrid_block<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    weights: Vec<Csr<'py>>,
) -> PyResult<Bound<'py, numpy::PyArray3<f64>>> {
    use crate::regrid::regrid3;
    use numpy::{PyArrayMethods, PyUntypedArrayMethods};

    let parts = weight_slices(&weights)?;
    let axes = axis_weights(&parts);
    let out_shape = [axes[0].outputs(), axes[1].outputs(), axes[2].outputs()];
    let mut out = vec![0.0f64; out_shape.iter().product()];
    macro_rules! run {
        ($($t:ty),*) => {{
            $(
                if let Ok(array) = input.cast::<numpy::PyArray3<$t>>() {
                    let readonly = array.readonly();
                    let shape = readonly.shape();
                    let shape = [shape[0], shape[1], shape[2]];
                    let values = readonly
                        .as_slice()
                        .map_err(|_| PyValueError::new_err("input must be C-contiguous"))?;
                    let axes_ref = [&axes[0], &axes[1], &axes[2]];
                    py.detach(|| crate::pool::install(|| regrid3(values, shape, axes_ref, &mut out)))
                        .map_err(PyValueError::new_err)?;
                    let result = numpy::PyArray1::from_vec(py, out);
                    return result.reshape(out_shape);
                }
            )*
        }};
    }
    run!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
    Err(PyValueError::new_err(
        "regrid_block takes a 3-D array of integers or floats",
    ))
}
