//! Bindings of the array kernels: decoding stored chunks and folding them into
//! aggregates.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

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

type Csr<'py> = (
    numpy::PyReadonlyArray1<'py, i64>,
    numpy::PyReadonlyArray1<'py, i64>,
    numpy::PyReadonlyArray1<'py, f64>,
);

/// Area-weighted regrid of a C-contiguous 3-D block (any integer or float
/// dtype) by one CSR weight matrix per axis (indptr, indices, weights):
/// float64 result of the matrices' output shape. Without NULL cells only.
#[pyfunction]
pub fn regrid_block<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    weights: Vec<Csr<'py>>,
) -> PyResult<Bound<'py, numpy::PyArray3<f64>>> {
    use crate::regrid::{regrid3, AxisWeights};
    use numpy::{PyArrayMethods, PyUntypedArrayMethods};

    if weights.len() != 3 {
        return Err(PyValueError::new_err(
            "regrid_block needs weights for 3 axes",
        ));
    }
    let parts: Vec<(&[i64], &[i64], &[f64])> = weights
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
        .collect::<PyResult<_>>()?;
    let axes: Vec<AxisWeights<'_>> = parts
        .iter()
        .map(|&(indptr, indices, weights)| AxisWeights {
            indptr,
            indices,
            weights,
        })
        .collect();
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
