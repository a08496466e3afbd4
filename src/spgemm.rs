//! The sparse matrix product of two associative arrays, `A @ B`, in the
//! canonical form an Assoc keeps: columns ascending within each row, no
//! stored zeros, no empty rows or columns.
//!
//! scipy's product leaves each row's columns in the order it met them, so an
//! Assoc then paid a second pass to sort them (a third of `A @ B`), another
//! to drop zeros and a column gather to drop empty columns. Here each row is
//! accumulated in a dense row of B's width (Gustavson's algorithm), its
//! touched columns sorted once and written out, blocks of rows in parallel;
//! the empty rows and columns are dropped on the way out.

use crate::pool::{scatter_by_partition, DisjointWrites};
use rayon::prelude::*;

/// A CSR matrix by its parts.
pub struct CsrRef<'a> {
    pub indptr: &'a [i64],
    pub indices: &'a [i64],
    pub data: &'a [f64],
}

impl CsrRef<'_> {
    fn rows(&self) -> usize {
        self.indptr.len().saturating_sub(1)
    }

    fn row(&self, r: usize) -> std::ops::Range<usize> {
        self.indptr[r] as usize..self.indptr[r + 1] as usize
    }
}

/// The product with its empty rows and columns dropped: `rows` and `cols`
/// are the places (in A's rows and B's columns) of those kept, and the CSR
/// parts index into them.
pub struct Product {
    pub rows: Vec<i64>,
    pub cols: Vec<i64>,
    pub indptr: Vec<i64>,
    pub indices: Vec<i64>,
    pub data: Vec<f64>,
}

/// Why a pair of matrices cannot be multiplied.
#[derive(Debug, PartialEq)]
pub enum ProductError {
    /// A column of A whose B row is outside B.
    Inner { column: usize, row: i64 },
    /// An entry of B whose column is outside `0..b_cols`.
    Column { entry: usize, column: i64 },
    /// Indptr or indices that do not describe a matrix.
    Malformed(&'static str),
}

/// One block of A's rows, multiplied: the length of each of its rows and their entries.
struct Block {
    lengths: Vec<usize>,
    indices: Vec<u32>,
    data: Vec<f64>,
}

/// `A @ B` where `inner[k]` is the row of B that A's column `k` meets, or -1
/// where it meets none (the keys A's columns and B's rows do not share).
/// B has `b_cols` columns, below 2^32.
pub fn multiply(
    a: &CsrRef<'_>,
    inner: &[i64],
    b: &CsrRef<'_>,
    b_cols: usize,
) -> Result<Product, ProductError> {
    check(a, inner.len())?;
    check(b, b_cols)?;
    if let Some(k) = inner.iter().position(|&r| r >= b.rows() as i64 || r < -1) {
        return Err(ProductError::Inner {
            column: k,
            row: inner[k],
        });
    }
    let blocks = blocks_by_work(a, inner, b);
    let multiplied: Vec<Block> = blocks
        .par_iter()
        .map_init(
            || Accumulator::new(b_cols),
            |acc, &(lo, hi)| multiply_rows(acc, a, inner, b, lo, hi),
        )
        .collect();
    Ok(gather(&multiplied, &blocks, b_cols))
}

fn check(m: &CsrRef<'_>, width: usize) -> Result<(), ProductError> {
    if m.indptr.is_empty() || m.indptr[0] != 0 {
        return Err(ProductError::Malformed("indptr must start at 0"));
    }
    if m.indptr.windows(2).any(|w| w[1] < w[0]) {
        return Err(ProductError::Malformed("indptr must not decrease"));
    }
    let nnz = *m.indptr.last().unwrap_or(&0) as usize;
    if nnz > m.indices.len() || nnz > m.data.len() {
        return Err(ProductError::Malformed("indptr runs past the entries"));
    }
    if width > u32::MAX as usize {
        return Err(ProductError::Malformed(
            "a matrix must have under 2^32 columns",
        ));
    }
    if let Some(e) = m.indices[..nnz]
        .iter()
        .position(|&c| c < 0 || c as usize >= width)
    {
        return Err(ProductError::Column {
            entry: e,
            column: m.indices[e],
        });
    }
    Ok(())
}

/// A's rows cut into blocks of about equal work (multiply-adds), several per
/// thread: rows of very different weight would otherwise leave one thread idle.
fn blocks_by_work(a: &CsrRef<'_>, inner: &[i64], b: &CsrRef<'_>) -> Vec<(usize, usize)> {
    let n = a.rows();
    let work: Vec<u64> = (0..n)
        .into_par_iter()
        .map(|r| {
            let mut w = 1u64; // a row costs something even when it meets nothing
            for e in a.row(r) {
                let k = inner[a.indices[e] as usize];
                if k >= 0 {
                    w += b.row(k as usize).len() as u64;
                }
            }
            w
        })
        .collect();
    let total: u64 = work.iter().sum();
    let per_block = total
        .div_ceil((crate::pool::threads().max(1) * 8) as u64)
        .max(1);
    let mut blocks = Vec::new();
    let (mut start, mut sum) = (0usize, 0u64);
    for (r, &w) in work.iter().enumerate() {
        sum += w;
        if sum >= per_block {
            blocks.push((start, r + 1));
            start = r + 1;
            sum = 0;
        }
    }
    if start < n || blocks.is_empty() {
        blocks.push((start, n));
    }
    blocks
}

/// One dense row of B's width, reused by the blocks a thread multiplies:
/// `seen[c]` is the stamp of the last row that touched column `c`, so the
/// row need not be cleared between rows.
struct Accumulator {
    sums: Vec<f64>,
    seen: Vec<u32>,
    stamp: u32,
    touched: Vec<u32>,
}

impl Accumulator {
    fn new(width: usize) -> Accumulator {
        Accumulator {
            sums: vec![0f64; width],
            seen: vec![0u32; width],
            stamp: 0,
            touched: Vec::new(),
        }
    }

    /// A stamp no column carries yet.
    fn next_row(&mut self) -> u32 {
        if self.stamp == u32::MAX {
            self.seen.iter_mut().for_each(|s| *s = 0);
            self.stamp = 0;
        }
        self.stamp += 1;
        self.touched.clear();
        self.stamp
    }
}

/// Rows `lo..hi` of the product, each accumulated in `acc`.
fn multiply_rows(
    acc: &mut Accumulator,
    a: &CsrRef<'_>,
    inner: &[i64],
    b: &CsrRef<'_>,
    lo: usize,
    hi: usize,
) -> Block {
    let mut out = Block {
        lengths: Vec::with_capacity(hi - lo),
        indices: Vec::new(),
        data: Vec::new(),
    };
    for r in lo..hi {
        let stamp = acc.next_row();
        let Accumulator {
            sums,
            seen,
            touched,
            ..
        } = acc;
        for e in a.row(r) {
            let k = inner[a.indices[e] as usize];
            if k < 0 {
                continue;
            }
            let va = a.data[e];
            for f in b.row(k as usize) {
                let c = b.indices[f] as usize;
                if seen[c] != stamp {
                    seen[c] = stamp;
                    sums[c] = va * b.data[f];
                    touched.push(c as u32);
                } else {
                    sums[c] += va * b.data[f];
                }
            }
        }
        touched.sort_unstable();
        let before = out.indices.len();
        for &c in touched.iter() {
            let v = sums[c as usize];
            if v != 0.0 {
                out.indices.push(c);
                out.data.push(v);
            }
        }
        out.lengths.push(out.indices.len() - before);
    }
    out
}

/// The blocks' rows put together, empty rows dropped and columns renumbered
/// among the columns some row uses.
fn gather(multiplied: &[Block], blocks: &[(usize, usize)], b_cols: usize) -> Product {
    // which columns are used: a bitmap per block, or-ed together
    let words = b_cols.div_ceil(64);
    let used = multiplied
        .par_iter()
        .map(|block| {
            let mut bits = vec![0u64; words];
            for &c in &block.indices {
                bits[c as usize / 64] |= 1 << (c % 64);
            }
            bits
        })
        .reduce(
            || vec![0u64; words],
            |mut x, y| {
                x.iter_mut().zip(&y).for_each(|(x, y)| *x |= y);
                x
            },
        );
    let mut renumber = vec![0u32; b_cols];
    let mut cols = Vec::new();
    for (c, place) in renumber.iter_mut().enumerate() {
        if used[c / 64] >> (c % 64) & 1 == 1 {
            *place = cols.len() as u32;
            cols.push(c as i64);
        }
    }
    let mut rows = Vec::new();
    let mut indptr = vec![0i64];
    for (block, &(lo, _)) in multiplied.iter().zip(blocks) {
        for (i, &len) in block.lengths.iter().enumerate() {
            if len > 0 {
                rows.push((lo + i) as i64);
                indptr.push(indptr[indptr.len() - 1] + len as i64);
            }
        }
    }
    // each block's entries follow the blocks' before it (one partition)
    let layout = scatter_by_partition(multiplied, 1, |block| vec![block.indices.len()]);
    let mut indices = vec![0i64; layout.total()];
    let mut data = vec![0f64; layout.total()];
    let (indices_out, data_out) = (
        DisjointWrites::new(&mut indices),
        DisjointWrites::new(&mut data),
    );
    layout.write(multiplied, |_, block, first| {
        for (k, (&c, &v)) in block.indices.iter().zip(&block.data).enumerate() {
            // SAFETY: the layout gives each block its own places, inside the total
            unsafe {
                *indices_out.base().add(first[0] + k) = renumber[c as usize] as i64;
                *data_out.base().add(first[0] + k) = v;
            }
        }
    });
    Product {
        rows,
        cols,
        indptr,
        indices,
        data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Rng;
    use std::collections::BTreeMap;

    struct Owned {
        indptr: Vec<i64>,
        indices: Vec<i64>,
        data: Vec<f64>,
    }

    impl Owned {
        fn view(&self) -> CsrRef<'_> {
            CsrRef {
                indptr: &self.indptr,
                indices: &self.indices,
                data: &self.data,
            }
        }
    }

    fn random(rng: &mut Rng, rows: usize, cols: usize, per_row: usize) -> Owned {
        let mut m = Owned {
            indptr: vec![0],
            indices: vec![],
            data: vec![],
        };
        for _ in 0..rows {
            let mut row: BTreeMap<i64, f64> = BTreeMap::new();
            for _ in 0..(rng.next() as usize % (per_row + 1)) {
                // values of -2..=2 so that some sums cancel to zero
                let v = (rng.next() % 5) as f64 - 2.0;
                row.insert((rng.next() as usize % cols) as i64, v);
            }
            for (c, v) in row {
                m.indices.push(c);
                m.data.push(v);
            }
            m.indptr.push(m.indices.len() as i64);
        }
        m
    }

    #[test]
    fn product_matches_a_map_of_sums() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..40 {
            let (n, k, m) = (1 + round % 7 * 5, 1 + round % 5 * 4, 1 + round % 9 * 3);
            let a = random(&mut rng, n, k, 4);
            let b = random(&mut rng, k, m, 4);
            let inner: Vec<i64> = (0..k as i64)
                .map(|c| if rng.next().is_multiple_of(4) { -1 } else { c })
                .collect();
            let mut want: BTreeMap<(i64, i64), f64> = BTreeMap::new();
            for r in 0..n {
                for e in a.indptr[r] as usize..a.indptr[r + 1] as usize {
                    let kk = inner[a.indices[e] as usize];
                    if kk < 0 {
                        continue;
                    }
                    let kk = kk as usize;
                    for f in b.indptr[kk] as usize..b.indptr[kk + 1] as usize {
                        *want.entry((r as i64, b.indices[f])).or_default() += a.data[e] * b.data[f];
                    }
                }
            }
            want.retain(|_, v| *v != 0.0);
            let p = crate::pool::install(|| multiply(&a.view(), &inner, &b.view(), m)).unwrap();
            let mut got = BTreeMap::new();
            for (i, &r) in p.rows.iter().enumerate() {
                let (s, e) = (p.indptr[i] as usize, p.indptr[i + 1] as usize);
                assert!(e > s, "an empty row was kept");
                assert!(p.indices[s..e].windows(2).all(|w| w[0] < w[1]));
                for x in s..e {
                    got.insert((r, p.cols[p.indices[x] as usize]), p.data[x]);
                }
            }
            assert_eq!(got, want);
            let mut used: Vec<i64> = want.keys().map(|&(_, c)| c).collect();
            used.sort_unstable();
            used.dedup();
            assert_eq!(p.cols, used);
        }
    }

    #[test]
    fn bad_parts_are_refused() {
        let a = Owned {
            indptr: vec![0, 1],
            indices: vec![0],
            data: vec![1.0],
        };
        let b = Owned {
            indptr: vec![0, 1],
            indices: vec![3],
            data: vec![1.0],
        };
        assert_eq!(
            multiply(&a.view(), &[0], &b.view(), 2).err(),
            Some(ProductError::Column {
                entry: 0,
                column: 3
            })
        );
        assert_eq!(
            multiply(&a.view(), &[1], &b.view(), 4).err(),
            Some(ProductError::Inner { column: 0, row: 1 })
        );
        let empty = crate::pool::install(|| multiply(&a.view(), &[-1], &b.view(), 4)).unwrap();
        assert!(empty.rows.is_empty() && empty.cols.is_empty() && empty.indptr == vec![0]);
    }
}
