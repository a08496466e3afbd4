//! Area-weighted regridding of a dense 3-D block (SS-DB's Q3, `Array.regrid`).
//!
//! Each axis has its own weights (a CSR matrix: output cell k takes input
//! cell i with weight w, the share of i that k covers). Weights separate over
//! the axes, so without NULL cells the result is the input contracted with
//! each axis's matrix, divided by the product of the matrices' row sums.
//! Planes along the first axis are contracted in parallel.

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
    Ok(())
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
}
