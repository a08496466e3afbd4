//! Area-weighted regridding of a dense 3-D block (SS-DB's Q3, `Array.regrid`).
//!
//! Each axis has its own weights (a CSR matrix: output cell k takes input
//! cell i with weight w, the share of i that k covers). Weights separate over
//! the axes, so without NULL cells the result is the input contracted with
//! each axis's matrix, divided by the product of the matrices' row sums.
//! Planes along the first axis are contracted in parallel.
//!
//! [`regrid_chunks`] does the same straight from an array's stored chunks:
//! each chunk is decoded into its thread's buffer and contracted there along
//! its last two axes into a small partial result (the contraction is linear,
//! so an output cell that straddles chunks is the sum of their partials).
//! The decoded box never exists: no memory for it, no page faults making it,
//! no second pass over it.

use crate::chunks::{check_chunks, with_decoded, Failure, Kind, Layout};
use rayon::prelude::*;

/// One axis's weights: output cell `k` takes `indices[indptr[k]..indptr[k+1]]`
/// with the matching `weights`.
pub struct AxisWeights<'a> {
    pub indptr: &'a [i64],
    pub indices: &'a [i64],
    pub weights: &'a [f64],
}

impl AxisWeights<'_> {
    pub fn outputs(&self) -> usize {
        self.indptr.len() - 1
    }

    fn row(&self, k: usize) -> impl Iterator<Item = (usize, f64)> + '_ {
        let (a, b) = (self.indptr[k] as usize, self.indptr[k + 1] as usize);
        self.indices[a..b]
            .iter()
            .zip(&self.weights[a..b])
            .map(|(&i, &w)| (i as usize, w))
    }

    fn row_sum(&self, k: usize) -> f64 {
        self.row(k).map(|(_, w)| w).sum()
    }

    fn check(&self, inputs: usize, axis: usize) -> Result<(), String> {
        if self.indptr.is_empty()
            || self.indptr[0] != 0
            || self.indices.len() != self.weights.len()
            || *self.indptr.last().unwrap() as usize != self.indices.len()
            || self.indptr.windows(2).any(|w| w[1] < w[0])
            || self.indices.iter().any(|&i| i < 0 || i as usize >= inputs)
        {
            return Err(format!(
                "axis {axis}: weights do not fit {inputs} input cells"
            ));
        }
        Ok(())
    }
}

/// Values a regrid reads: anything that converts to f64.
pub trait Cell: Copy + Send + Sync {
    fn value(self) -> f64;
}

macro_rules! cells {
    ($($t:ty),*) => { $(impl Cell for $t { fn value(self) -> f64 { self as f64 } })* };
}
cells!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

/// Regrid `input` of `shape` (C order) by the three axes' weights into `out`
/// (C order, the weights' output shape).
pub fn regrid3<T: Cell>(
    input: &[T],
    shape: [usize; 3],
    axes: [&AxisWeights<'_>; 3],
    out: &mut [f64],
) -> Result<(), String> {
    if input.len() != shape.iter().product::<usize>() {
        return Err("input size does not match its shape".into());
    }
    for (axis, w) in axes.iter().enumerate() {
        w.check(shape[axis], axis)?;
    }
    let [o0, o1, o2] = [axes[0].outputs(), axes[1].outputs(), axes[2].outputs()];
    if out.len() != o0 * o1 * o2 {
        return Err("output size does not match the weights".into());
    }
    let (n1, n2) = (shape[1], shape[2]);
    // every input plane contracted along axes 2 and 1, in parallel
    let planes: Vec<Vec<f64>> = input
        .par_chunks(n1 * n2)
        .map(|plane| {
            let mut rows = vec![0.0f64; n1 * o2];
            for r in 0..n1 {
                let line = &plane[r * n2..(r + 1) * n2];
                let target = &mut rows[r * o2..(r + 1) * o2];
                for (k, t) in target.iter_mut().enumerate() {
                    *t = axes[2].row(k).map(|(i, w)| w * line[i].value()).sum();
                }
            }
            let mut result = vec![0.0f64; o1 * o2];
            for k in 0..o1 {
                let target = &mut result[k * o2..(k + 1) * o2];
                for (j, w) in axes[1].row(k) {
                    let source = &rows[j * o2..(j + 1) * o2];
                    for (t, s) in target.iter_mut().zip(source) {
                        *t += w * s;
                    }
                }
            }
            result
        })
        .collect();
    combine(&planes, axes, out);
    Ok(())
}

/// Contracts the planes (each already contracted along axes 1 and 2, of
/// `o1 x o2` cells) along axis 0 into `out` and divides by the weights' sums.
fn combine(planes: &[Vec<f64>], axes: [&AxisWeights<'_>; 3], out: &mut [f64]) {
    let (o1, o2) = (axes[1].outputs(), axes[2].outputs());
    let sums2: Vec<f64> = (0..o2).map(|k| axes[2].row_sum(k)).collect();
    out.par_chunks_mut(o1 * o2)
        .enumerate()
        .for_each(|(k0, target)| {
            target.fill(0.0);
            for (i, w) in axes[0].row(k0) {
                for (t, s) in target.iter_mut().zip(&planes[i]) {
                    *t += w * s;
                }
            }
            let s0 = axes[0].row_sum(k0);
            for k1 in 0..o1 {
                let s01 = s0 * axes[1].row_sum(k1);
                for (t, s2) in target[k1 * o2..(k1 + 1) * o2].iter_mut().zip(&sums2) {
                    let den = s01 * s2;
                    *t = if den > 0.0 { *t / den } else { f64::NAN };
                }
            }
        });
}

/// One chunk's contribution: its planes (box positions along axis 0), the
/// output rows and columns it touches, and per plane the partial sums
/// (`rows.len() x cols.len()`).
struct ChunkPartial {
    planes: std::ops::Range<usize>,
    rows: Vec<usize>,
    cols: Vec<usize>,
    sums: Vec<f64>,
}

/// The outputs of `axis` whose inputs meet `lo..hi`, and each one's weights
/// restricted to those inputs, as (offset from `lo`, weight).
type Restricted = (Vec<usize>, Vec<Vec<(usize, f64)>>);

fn restricted(axis: &AxisWeights<'_>, lo: usize, hi: usize) -> Restricted {
    (0..axis.outputs())
        .filter_map(|k| {
            let weights: Vec<(usize, f64)> = axis
                .row(k)
                .filter(|(i, _)| (lo..hi).contains(i))
                .map(|(i, w)| (i - lo, w))
                .collect();
            (!weights.is_empty()).then_some((k, weights))
        })
        .unzip()
}

/// Reads `width`-byte little-endian cells of `kind` as f64 into `line`.
fn cells_as_f64(kind: Kind, width: usize, bytes: &[u8], line: &mut Vec<f64>) {
    macro_rules! read {
        ($t:ty) => {
            line.extend(
                bytes
                    .chunks_exact(width)
                    .map(|c| <$t>::from_le_bytes(c.try_into().expect("width")) as f64),
            )
        };
    }
    line.clear();
    match (kind, width) {
        (Kind::Signed, 1) => read!(i8),
        (Kind::Signed, 2) => read!(i16),
        (Kind::Signed, 4) => read!(i32),
        (Kind::Signed, _) => read!(i64),
        (Kind::Unsigned, 1) => read!(u8),
        (Kind::Unsigned, 2) => read!(u16),
        (Kind::Unsigned, 4) => read!(u32),
        (Kind::Unsigned, _) => read!(u64),
        (Kind::Float, 4) => read!(f32),
        (Kind::Float, _) => read!(f64),
    }
}

/// [`regrid3`] of the box of `layout` read from its stored `chunks`
/// (payload, grid coordinates), which must cover the box. Each chunk is
/// decoded and contracted in its own thread; chunks run in parallel.
pub fn regrid_chunks(
    layout: &Layout,
    kind: Kind,
    chunks: &[(&[u8], &[usize])],
    axes: [&AxisWeights<'_>; 3],
    out: &mut [f64],
) -> Result<(), Failure> {
    let width = layout.itemsize;
    let valid = match kind {
        Kind::Signed | Kind::Unsigned => matches!(width, 1 | 2 | 4 | 8),
        Kind::Float => matches!(width, 4 | 8),
    };
    if !valid || layout.chunk.len() != 3 || layout.lo.len() != 3 || layout.hi.len() != 3 {
        return Err(Failure::Input(format!(
            "regrid_chunks takes a 3-D box of integer or float cells, not {kind:?} cells of \
             {width} bytes in {} dimensions",
            layout.chunk.len()
        )));
    }
    let shape: Vec<usize> = (0..3).map(|d| layout.hi[d] - layout.lo[d]).collect();
    for (axis, w) in axes.iter().enumerate() {
        w.check(shape[axis], axis).map_err(Failure::Input)?;
    }
    let [o0, o1, o2] = [axes[0].outputs(), axes[1].outputs(), axes[2].outputs()];
    if out.len() != o0 * o1 * o2 {
        return Err(Failure::Input(
            "output size does not match the weights".into(),
        ));
    }
    // the chunks must tile the box: distinct, meeting it, and as many cells
    let covered = check_chunks(layout, chunks.iter().map(|(_, c)| *c), true)?;
    if covered != shape.iter().product::<usize>() {
        return Err(Failure::Input(
            "the chunks do not cover the box (an unwritten chunk?)".into(),
        ));
    }
    let partials: Vec<Result<ChunkPartial, Failure>> = crate::pool::install(|| {
        chunks
            .par_iter()
            .enumerate()
            .map(|(index, (payload, coords))| {
                with_decoded(layout, payload, coords, |lo, hi, src| {
                    contract_chunk(layout, kind, coords, lo, hi, src, axes)
                })
                .map_err(|message| Failure::Chunk(index, message))
            })
            .collect()
    });
    let mut planes = vec![vec![0.0f64; o1 * o2]; shape[0]];
    for partial in partials {
        let p = partial?;
        let cells = p.rows.len() * p.cols.len();
        for (n, plane) in p.planes.clone().enumerate() {
            let sums = &p.sums[n * cells..(n + 1) * cells];
            for (m, &k1) in p.rows.iter().enumerate() {
                let target = &mut planes[plane][k1 * o2..];
                for (j, &k2) in p.cols.iter().enumerate() {
                    target[k2] += sums[m * p.cols.len() + j];
                }
            }
        }
    }
    combine(&planes, axes, out);
    Ok(())
}

/// One decoded chunk's part `lo..hi` (chunk cells) contracted along axes 2 and 1.
fn contract_chunk(
    layout: &Layout,
    kind: Kind,
    coords: &[usize],
    lo: &[usize],
    hi: &[usize],
    src: &[u8],
    axes: [&AxisWeights<'_>; 3],
) -> ChunkPartial {
    let width = layout.itemsize;
    // the part in box positions
    let at = |d: usize, i: usize| coords[d] * layout.chunk[d] + i - layout.lo[d];
    let (p0, r0, c0) = (at(0, lo[0]), at(1, lo[1]), at(2, lo[2]));
    let (p1, r1, c1) = (at(0, hi[0]), at(1, hi[1]), at(2, hi[2]));
    let (rows, row_weights) = restricted(axes[1], r0, r1);
    let (cols, col_weights) = restricted(axes[2], c0, c1);
    let (nr, nc) = (r1 - r0, cols.len());
    let mut line = Vec::with_capacity(c1 - c0);
    let mut contracted = vec![0.0f64; nr * nc];
    let mut sums = vec![0.0f64; (p1 - p0) * rows.len() * nc];
    for (n, p) in (lo[0]..hi[0]).enumerate() {
        for (r, row) in (lo[1]..hi[1]).enumerate() {
            let from = ((p * layout.chunk[1] + row) * layout.chunk[2] + lo[2]) * width;
            cells_as_f64(kind, width, &src[from..from + (c1 - c0) * width], &mut line);
            let target = &mut contracted[r * nc..(r + 1) * nc];
            for (t, weights) in target.iter_mut().zip(&col_weights) {
                *t = weights.iter().map(|&(i, w)| w * line[i]).sum();
            }
        }
        let plane = &mut sums[n * rows.len() * nc..(n + 1) * rows.len() * nc];
        for (m, weights) in row_weights.iter().enumerate() {
            let target = &mut plane[m * nc..(m + 1) * nc];
            for &(r, w) in weights {
                for (t, s) in target.iter_mut().zip(&contracted[r * nc..(r + 1) * nc]) {
                    *t += w * s;
                }
            }
        }
    }
    ChunkPartial {
        planes: p0..p1,
        rows,
        cols,
        sums,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn halves(n: usize) -> (Vec<i64>, Vec<i64>, Vec<f64>) {
        // factor 2: output k covers inputs 2k and 2k+1
        let out = n.div_ceil(2);
        let mut indptr = vec![0i64];
        let (mut idx, mut w) = (vec![], vec![]);
        for k in 0..out {
            for i in 2 * k..(2 * k + 2).min(n) {
                idx.push(i as i64);
                w.push(1.0);
            }
            indptr.push(idx.len() as i64);
        }
        (indptr, idx, w)
    }

    #[test]
    fn block_means() {
        let identity = (vec![0i64, 1], vec![0i64], vec![1.0]);
        let a0 = AxisWeights {
            indptr: &identity.0,
            indices: &identity.1,
            weights: &identity.2,
        };
        let h = halves(3);
        let a = AxisWeights {
            indptr: &h.0,
            indices: &h.1,
            weights: &h.2,
        };
        let input: Vec<i32> = (0..9).collect();
        let mut out = vec![0.0; 4];
        regrid3(&input, [1, 3, 3], [&a0, &a, &a], &mut out).unwrap();
        assert_eq!(out, vec![2.0, 3.5, 6.5, 8.0]);
    }

    /// Weights of a fractional factor `num/den` over `n` inputs (as `_weights` in Python).
    fn fraction_weights(n: usize, num: usize, den: usize) -> (Vec<i64>, Vec<i64>, Vec<f64>) {
        // output k covers [k num/den, (k+1) num/den), all in units of 1/den
        let out = (n * den).div_ceil(num);
        let mut indptr = vec![0i64];
        let (mut idx, mut w) = (vec![], vec![]);
        for k in 0..out {
            let (lo, hi) = (k * num, ((k + 1) * num).min(n * den));
            for i in lo / den..hi.div_ceil(den) {
                let share = hi.min((i + 1) * den) as f64 - lo.max(i * den) as f64;
                if share > 0.0 {
                    idx.push(i as i64);
                    w.push(share / den as f64);
                }
            }
            indptr.push(idx.len() as i64);
        }
        (indptr, idx, w)
    }

    #[test]
    fn regridding_stored_chunks_equals_regridding_the_decoded_box() {
        use crate::chunks::{encode_chunks, Codec};
        use crate::testing::Rng;
        let mut rng = Rng(5);
        for case in 0..60 {
            // an array of 4 x 23 x 19 int32 cells in chunks of (1..3) x (2..9) x (2..9)
            let array = [4usize, 23, 19];
            let chunk = [
                1 + (rng.next() % 3) as usize,
                2 + (rng.next() % 8) as usize,
                2 + (rng.next() % 8) as usize,
            ];
            let mut lo = [0usize; 3];
            let mut hi = [0usize; 3];
            for d in 0..3 {
                let (a, b) = (
                    rng.next() as usize % array[d],
                    rng.next() as usize % array[d],
                );
                lo[d] = a.min(b);
                hi[d] = a.max(b) + 1;
            }
            let shape = [hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]];
            let values: Vec<i32> = (0..shape.iter().product::<usize>())
                .map(|_| (rng.next() % 70_000) as i32 - 5_000)
                .collect();
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            let layout = Layout {
                chunk: chunk.to_vec(),
                lo: lo.to_vec(),
                hi: hi.to_vec(),
                itemsize: 4,
                codec: if case % 2 == 0 {
                    Codec::Zstd
                } else {
                    Codec::Raw
                },
                checksum: case % 3 == 0,
            };
            let grid: Vec<Vec<usize>> = (lo[0] / chunk[0]..hi[0].div_ceil(chunk[0]))
                .flat_map(|a| {
                    (lo[1] / chunk[1]..hi[1].div_ceil(chunk[1])).flat_map(move |b| {
                        (lo[2] / chunk[2]..hi[2].div_ceil(chunk[2])).map(move |c| vec![a, b, c])
                    })
                })
                .collect();
            let coords: Vec<&[usize]> = grid.iter().map(Vec::as_slice).collect();
            let payloads = encode_chunks(&layout, 1, &[0; 4], &bytes, &coords).unwrap();
            let stored: Vec<(&[u8], &[usize])> = payloads
                .iter()
                .zip(&grid)
                .map(|(p, c)| (p.as_slice(), c.as_slice()))
                .collect();
            let w0 = fraction_weights(shape[0], 1 + case % 2, 1);
            let w1 = fraction_weights(shape[1], 10, 3);
            let w2 = fraction_weights(shape[2], 7, 4);
            let axes: Vec<AxisWeights<'_>> = [&w0, &w1, &w2]
                .iter()
                .map(|w| AxisWeights {
                    indptr: &w.0,
                    indices: &w.1,
                    weights: &w.2,
                })
                .collect();
            let axes = [&axes[0], &axes[1], &axes[2]];
            let size = axes.iter().map(|a| a.outputs()).product();
            let (mut plain, mut fused) = (vec![0.0; size], vec![0.0; size]);
            regrid3(&values, shape, axes, &mut plain).unwrap();
            regrid_chunks(&layout, Kind::Signed, &stored, axes, &mut fused).unwrap();
            for (a, b) in plain.iter().zip(&fused) {
                assert!((a - b).abs() <= 1e-9 * a.abs().max(1.0), "{a} vs {b}");
            }
            // a missing chunk is refused, not read as zeros
            if stored.len() > 1 {
                assert!(matches!(
                    regrid_chunks(&layout, Kind::Signed, &stored[1..], axes, &mut fused),
                    Err(Failure::Input(_))
                ));
            }
        }
    }
}
