//! Bindings of SS-DB's kernels: cooking (F1), grouping (F2) and the
//! geometry of its queries.

use numpy::{IntoPyArray, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Mutex;

use crate::ssdb;

fn slice<'a, T: numpy::Element>(a: &'a PyReadonlyArray1<'_, T>, what: &str) -> PyResult<&'a [T]> {
    a.as_slice()
        .map_err(|_| PyValueError::new_err(format!("{what} must be a contiguous array")))
}

/// F1 over a 2-D int32 image: observations as a dict of numpy columns
/// (`first_x, first_y, x, y, pixelsum, avgdist, npix, xmin, ymin, xmax, ymax`,
/// and the polygons as `poly_offsets`, `poly_x`, `poly_y`), in world
/// coordinates, in first-pixel raster order. `core` (x0, y0, x1, y1,
/// half-open, world) keeps only observations centered inside it.
#[pyfunction]
#[pyo3(signature = (pix, threshold, max_extent, max_vertices, origin, core=None))]
pub fn ssdb_cook<'py>(
    py: Python<'py>,
    pix: PyReadonlyArray2<'py, i32>,
    threshold: i32,
    max_extent: i64,
    max_vertices: usize,
    origin: (i64, i64),
    core: Option<(i64, i64, i64, i64)>,
) -> PyResult<Bound<'py, PyDict>> {
    let shape = pix.shape();
    let (height, width) = (shape[0], shape[1]);
    let values = pix
        .as_slice()
        .map_err(|_| PyValueError::new_err("pix must be a C-contiguous int32 array"))?;
    let params = ssdb::CookParams {
        threshold,
        max_extent,
        max_vertices,
        origin,
        core,
    };
    let columns = py.detach(|| {
        let obs = ssdb::cook(values, height, width, &params);
        let n = obs.len();
        let mut c: Vec<Vec<i64>> = (0..10).map(|_| Vec::with_capacity(n)).collect();
        let mut avgdist = Vec::with_capacity(n);
        let mut offsets = Vec::with_capacity(n + 1);
        let (mut px, mut py_) = (Vec::new(), Vec::new());
        offsets.push(0i64);
        for o in obs {
            for (k, v) in [
                o.first.0, o.first.1, o.center.0, o.center.1, o.pixelsum, o.npix, o.lo.0, o.lo.1,
                o.hi.0, o.hi.1,
            ]
            .into_iter()
            .enumerate()
            {
                c[k].push(v);
            }
            avgdist.push(o.avgdist);
            for (x, y) in o.polygon {
                px.push(x);
                py_.push(y);
            }
            offsets.push(px.len() as i64);
        }
        (c, avgdist, offsets, px, py_)
    });
    let (c, avgdist, offsets, px, py_) = columns;
    let out = PyDict::new(py);
    let names = [
        "first_x", "first_y", "x", "y", "pixelsum", "npix", "xmin", "ymin", "xmax", "ymax",
    ];
    for (name, column) in names.into_iter().zip(c) {
        out.set_item(name, column.into_pyarray(py))?;
    }
    out.set_item("avgdist", avgdist.into_pyarray(py))?;
    out.set_item("poly_offsets", offsets.into_pyarray(py))?;
    out.set_item("poly_x", px.into_pyarray(py))?;
    out.set_item("poly_y", py_.into_pyarray(py))?;
    Ok(out)
}

/// Grouping state kept across calls (one per benchmark run).
#[pyclass(name = "Grouper", module = "tesseradb._core", frozen)]
pub struct PyGrouper {
    inner: Mutex<ssdb::Grouper>,
}

#[pymethods]
impl PyGrouper {
    /// D3 = `num / den`; `cell` is the grid's cell width in world units.
    #[new]
    fn new(num: i64, den: i64, cell: i64) -> PyResult<Self> {
        let inner = ssdb::Grouper::new(num, den, cell).map_err(PyValueError::new_err)?;
        Ok(PyGrouper {
            inner: Mutex::new(inner),
        })
    }

    /// Adds observations (in time order) and returns their memberships as
    /// (position in this batch, group id) columns.
    fn add<'py>(
        &self,
        py: Python<'py>,
        images: PyReadonlyArray1<'py, i64>,
        xs: PyReadonlyArray1<'py, i64>,
        ys: PyReadonlyArray1<'py, i64>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let (images, xs, ys) = (
            slice(&images, "images")?,
            slice(&xs, "xs")?,
            slice(&ys, "ys")?,
        );
        if images.len() != xs.len() || xs.len() != ys.len() {
            return Err(PyValueError::new_err(
                "images, xs and ys must have the same length",
            ));
        }
        let result = py.detach(|| {
            let mut g = self.inner.lock().expect("grouper lock");
            let (mut which, mut groups) = (Vec::new(), Vec::new());
            for i in 0..images.len() {
                for group in g.add(images[i], xs[i], ys[i])? {
                    which.push(i as i64);
                    groups.push(group as i64);
                }
            }
            Ok::<_, String>((which, groups))
        });
        let (which, groups) = result.map_err(PyValueError::new_err)?;
        Ok((
            which.into_pyarray(py).into_any(),
            groups.into_pyarray(py).into_any(),
        ))
    }

    #[getter]
    fn observations(&self) -> usize {
        self.inner.lock().expect("grouper lock").observations()
    }

    #[getter]
    fn groups(&self) -> u32 {
        self.inner.lock().expect("grouper lock").groups()
    }
}

/// For each polygon (vertices `xs[offsets[i]..offsets[i+1]]`, `ys` alike),
/// whether it shares a point with the closed box `lo..=hi`.
#[pyfunction]
pub fn ssdb_polygons_overlap_box<'py>(
    py: Python<'py>,
    offsets: PyReadonlyArray1<'py, i64>,
    xs: PyReadonlyArray1<'py, i64>,
    ys: PyReadonlyArray1<'py, i64>,
    lo: (i64, i64),
    hi: (i64, i64),
) -> PyResult<Bound<'py, PyAny>> {
    let (offsets, xs, ys) = (
        slice(&offsets, "offsets")?,
        slice(&xs, "xs")?,
        slice(&ys, "ys")?,
    );
    if xs.len() != ys.len() || offsets.last().is_some_and(|&end| end as usize > xs.len()) {
        return Err(PyValueError::new_err(
            "polygon offsets must end within xs and ys of equal length",
        ));
    }
    let hits = py.detach(|| {
        offsets
            .windows(2)
            .map(|w| {
                let ring: Vec<(i64, i64)> = (w[0] as usize..w[1] as usize)
                    .map(|k| (xs[k], ys[k]))
                    .collect();
                ssdb::polygon_overlaps_box(&ring, lo, hi)
            })
            .collect::<Vec<bool>>()
    });
    Ok(hits.into_pyarray(py).into_any())
}

/// For each point, the points within `[x + lo, x + hi] x [y + lo, y + hi]`.
#[pyfunction]
pub fn ssdb_density_counts<'py>(
    py: Python<'py>,
    xs: PyReadonlyArray1<'py, i64>,
    ys: PyReadonlyArray1<'py, i64>,
    lo: i64,
    hi: i64,
) -> PyResult<Bound<'py, PyAny>> {
    let (xs, ys) = (slice(&xs, "xs")?, slice(&ys, "ys")?);
    if xs.len() != ys.len() {
        return Err(PyValueError::new_err("xs and ys must have the same length"));
    }
    let counts = py.detach(|| ssdb::density_counts(xs, ys, lo, hi));
    Ok(counts.into_pyarray(py).into_any())
}
