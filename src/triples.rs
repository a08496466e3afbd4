//! Triple ingest into an array (D4M's putTriple): scattered cells bucketed by
//! chunk, each touched chunk patched and encoded in parallel.
//!
//! The cells are bucketed with a counting sort over the touched chunks (no
//! comparison sort of the cells), in input order within a chunk so that the
//! last of repeated coordinates wins, as in numpy. A touched chunk starts
//! from its stored cells (decoded) or from the fill value, takes its cells
//! and is encoded as [`crate::chunks::encode_chunks`] encodes, so a whole
//! ingest is bound by compression, not by Python.

use crate::chunks::{chunk_payload, decode_whole, Failure, Layout};
use crate::pool::{scatter_by_partition, DisjointWrites};
use rayon::prelude::*;
use std::collections::HashMap;

/// Division by a fixed positive divisor through its reciprocal, corrected to
/// the exact quotient (for dividends below 2^52, far past any array extent).
struct Divider {
    divisor: usize,
    inverse: f64,
    /// log2 of a power-of-two divisor (chunk lengths mostly are): a shift
    shift: Option<u32>,
}

impl Divider {
    fn new(divisor: usize) -> Self {
        Divider {
            divisor,
            inverse: 1.0 / divisor as f64,
            shift: divisor.is_power_of_two().then(|| divisor.trailing_zeros()),
        }
    }

    #[inline(always)]
    fn divide(&self, x: usize) -> usize {
        if let Some(shift) = self.shift {
            return x >> shift;
        }
        let mut q = (x as f64 * self.inverse) as usize;
        if q * self.divisor > x {
            q -= 1;
        } else if (q + 1) * self.divisor <= x {
            q += 1;
        }
        q
    }
}

/// One coordinate of every cell: a column of integers, or one integer for all
/// cells (the slice number of a slice's triples, say).
#[derive(Clone, Copy)]
pub enum Column<'a> {
    I32(&'a [i32]),
    I64(&'a [i64]),
    Scalar(i64),
}

impl Column<'_> {
    /// The number of cells, or None for a scalar (any number).
    pub fn cells(&self) -> Option<usize> {
        match self {
            Column::I32(v) => Some(v.len()),
            Column::I64(v) => Some(v.len()),
            Column::Scalar(_) => None,
        }
    }

    /// Folds this dimension into the chunk numbers `cid` and places in the
    /// chunk `offset` of the cells from `first` on (see [`fold_dimension`]).
    fn fold(&self, first: usize, cid: &mut [usize], offset: &mut [u32], d: &DimFold) -> bool {
        if d.first {
            self.fold_as::<true>(first, cid, offset, d)
        } else {
            self.fold_as::<false>(first, cid, offset, d)
        }
    }

    fn fold_as<const FIRST: bool>(
        &self,
        first: usize,
        cid: &mut [usize],
        offset: &mut [u32],
        d: &DimFold,
    ) -> bool {
        let range = first..first + cid.len();
        match self {
            Column::I32(v) => {
                fold_dimension::<FIRST>(v[range].iter().map(|&x| x as i64), cid, offset, d)
            }
            Column::I64(v) => fold_dimension::<FIRST>(v[range].iter().copied(), cid, offset, d),
            Column::Scalar(x) => {
                fold_dimension::<FIRST>(std::iter::repeat_n(*x, range.len()), cid, offset, d)
            }
        }
    }

    /// The smallest and largest value, None for an empty column.
    pub fn bounds(&self) -> Option<(i64, i64)> {
        fn fold<T: Copy + Into<i64> + Ord + Send + Sync>(v: &[T]) -> Option<(i64, i64)> {
            v.par_chunks(1 << 16)
                .map(|block| {
                    let (lo, hi) = block
                        .iter()
                        .fold((block[0], block[0]), |(lo, hi), &x| (lo.min(x), hi.max(x)));
                    (lo.into(), hi.into())
                })
                .reduce_with(|a, b| (a.0.min(b.0), a.1.max(b.1)))
        }
        match self {
            Column::I32(v) => fold(v),
            Column::I64(v) => fold(v),
            Column::Scalar(x) => Some((*x, *x)),
        }
    }
}

/// One dimension of the chunk grid, as [`fold_dimension`] needs it.
struct DimFold {
    /// the first dimension, which sets `cid` and `offset` rather than folds into them
    first: bool,
    origin: i64,
    extent: usize,
    chunk: usize,
    grid: usize,
    divider: Divider,
}

/// For each cell, `cid = cid * grid + position / chunk` and `offset = offset *
/// chunk + position % chunk`, position = coordinate - origin. Returns whether
/// a position falls outside the extent (clamped meanwhile, found again later).
/// The `FIRST` dimension only writes `cid` and `offset`: reading fresh zeroed
/// pages before writing them costs a copy-on-write fault and a TLB shootdown
/// per page (it was most of the time).
#[inline(always)]
fn fold_dimension<const FIRST: bool>(
    coordinates: impl Iterator<Item = i64>,
    cid: &mut [usize],
    offset: &mut [u32],
    d: &DimFold,
) -> bool {
    let mut outside = false;
    for ((c, o), x) in cid.iter_mut().zip(offset.iter_mut()).zip(coordinates) {
        let at = x.wrapping_sub(d.origin);
        // one unsigned comparison catches negative positions too
        outside |= at as u64 >= d.extent as u64;
        let at = at.clamp(0, d.extent as i64 - 1) as usize;
        let q = d.divider.divide(at);
        let r = (at - q * d.chunk) as u32;
        if FIRST {
            (*c, *o) = (q, r);
        } else {
            (*c, *o) = (*c * d.grid + q, *o * d.chunk as u32 + r);
        }
    }
    outside
}

/// Cell `t`'s coordinate in `column`.
fn value_at(column: &Column, t: usize) -> i64 {
    match column {
        Column::I32(v) => v[t] as i64,
        Column::I64(v) => v[t],
        Column::Scalar(x) => *x,
    }
}

/// The number of cells the columns describe: the length of the first
/// column that is not a scalar (1 if all are), the others checked against it.
pub fn cell_count(columns: &[Column]) -> Result<usize, Failure> {
    let mut n = None;
    for (d, column) in columns.iter().enumerate() {
        if let Some(len) = column.cells() {
            match n {
                None => n = Some(len),
                Some(m) if m != len => {
                    return Err(Failure::Input(format!(
                        "coordinate {d} has {len} values, the ones before it {m}"
                    )))
                }
                _ => {}
            }
        }
    }
    Ok(n.unwrap_or(1))
}

/// Cells bucketed by chunk: the touched chunks' grid coordinates (ascending
/// in C order), and for chunk `k` the cells `order[starts[k]..starts[k + 1]]`
/// with, at the same places of `offsets`, each cell's place in its chunk (C
/// order), so that filling a chunk never goes back to the coordinates.
pub struct Buckets {
    pub chunks: Vec<Vec<usize>>,
    pub starts: Vec<usize>,
    pub order: Vec<u32>,
    pub offsets: Vec<u32>,
}

/// Buckets the cells whose coordinates are `columns` (one per dimension; a
/// cell's position is its coordinate minus `origin`) by the chunks of
/// `layout` (its `hi` is the array's extent, its `lo` zeros). Runs in the
/// caller's rayon pool: call it inside [`crate::pool::install`].
pub fn bucket(layout: &Layout, columns: &[Column], origin: &[i64]) -> Result<Buckets, Failure> {
    let ndim = layout.chunk.len();
    if ndim == 0
        || layout.hi.len() != ndim
        || columns.len() != ndim
        || origin.len() != ndim
        || layout.chunk.contains(&0)
    {
        return Err(Failure::Input(format!(
            "{} coordinates for an array of {ndim} dimensions (at least one)",
            columns.len()
        )));
    }
    let n = cell_count(columns)?;
    let grid: Vec<usize> = (0..ndim)
        .map(|d| layout.hi[d].div_ceil(layout.chunk[d]))
        .collect();
    let total = grid
        .iter()
        .try_fold(1usize, |acc, &g| acc.checked_mul(g))
        .ok_or_else(|| Failure::Input("the chunk grid has more than 2^64 chunks".into()))?;
    if layout
        .chunk
        .iter()
        .try_fold(1usize, |acc, &c| acc.checked_mul(c))
        .is_none_or(|cells| cells > u32::MAX as usize)
    {
        return Err(Failure::Input(format!(
            "chunks of {:?} cells hold more than 2^32 cells; triple ingest needs smaller chunks",
            layout.chunk
        )));
    }
    if n >= u32::MAX as usize {
        return Err(Failure::Input(format!(
            "{n} cells in one call; at most {} (split the call)",
            u32::MAX - 1
        )));
    }
    // each cell's chunk (its linear number in the grid) and place in it, a
    // dimension at a time over blocks of cells in parallel (a tight loop per
    // column type); dividing by the chunk lengths is most of the work, so by
    // reciprocals
    let dims: Vec<DimFold> = (0..ndim)
        .map(|d| DimFold {
            first: d == 0,
            origin: origin[d],
            extent: layout.hi[d],
            chunk: layout.chunk[d],
            grid: grid[d],
            divider: Divider::new(layout.chunk[d]),
        })
        .collect();
    const BLOCK: usize = 1 << 14;
    let mut cids = vec![0usize; n];
    let mut cell_offsets = vec![0u32; n];
    let any_outside = cids
        .par_chunks_mut(BLOCK)
        .zip(cell_offsets.par_chunks_mut(BLOCK))
        .enumerate()
        .map(|(b, (cid, offset))| {
            let mut outside = false;
            for (column, dim) in columns.iter().zip(&dims) {
                outside |= column.fold(b * BLOCK, cid, offset, dim);
            }
            outside
        })
        .reduce(|| false, |a, b| a | b);
    let outside = if any_outside {
        (0..n).find(|&t| {
            columns.iter().zip(&dims).any(|(column, dim)| {
                let at = value_at(column, t).wrapping_sub(dim.origin);
                at as u64 >= dim.extent as u64
            })
        })
    } else {
        None
    };
    if let Some(t) = outside {
        let at: Vec<i64> = columns.iter().map(|column| value_at(column, t)).collect();
        let ends: Vec<i64> = (0..ndim).map(|d| origin[d] + layout.hi[d] as i64).collect();
        return Err(Failure::Input(format!(
            "cell {t} at {at:?} is outside the array, which spans {origin:?} to {ends:?} (exclusive)"
        )));
    }
    // each touched chunk's rank: from a flag per chunk of the grid when the
    // grid is small beside the cells, else from the touched chunks alone
    let (touched, slots): (Vec<usize>, Vec<u32>) = if total <= (4 * n).max(1 << 20) {
        let mut seen = vec![false; total];
        for &c in &cids {
            seen[c] = true;
        }
        let touched: Vec<usize> = (0..total).filter(|&c| seen[c]).collect();
        let mut ranks = vec![0u32; total];
        for (k, &c) in touched.iter().enumerate() {
            ranks[c] = k as u32;
        }
        let slots = cids.par_iter().map(|&c| ranks[c]).collect();
        (touched, slots)
    } else {
        let mut touched: Vec<usize> = cids.clone();
        touched.par_sort_unstable();
        touched.dedup();
        let ranks: HashMap<usize, u32> = touched
            .iter()
            .enumerate()
            .map(|(k, &c)| (c, k as u32))
            .collect();
        let slots = cids.par_iter().map(|c| ranks[c]).collect();
        (touched, slots)
    };
    drop(cids);
    // the counting sort, cells in input order within each chunk: blocks of
    // cells count their chunks in parallel, then each writes its cells from
    // where the blocks before it end
    let m = touched.len();
    let span = (1usize << 16).max(n.div_ceil(64));
    let blocks: Vec<&[u32]> = slots.chunks(span).collect();
    let layout = scatter_by_partition(&blocks, m, |block| {
        // by runs of one chunk: incrementing one counter per cell chains each
        // increment on the last through memory, cells of a row mostly share a chunk
        let mut count = vec![0usize; m];
        for run in block.chunk_by(|a, b| a == b) {
            count[run[0] as usize] += run.len();
        }
        count
    });
    let mut order = vec![0u32; n];
    let mut offsets = vec![0u32; n];
    let (to_order, to_offsets) = (
        DisjointWrites::new(&mut order),
        DisjointWrites::new(&mut offsets),
    );
    layout.write(&blocks, |b, block, first| {
        let mut cursor = first.to_vec();
        let mut k = b * span;
        for run in block.chunk_by(|a, b| a == b) {
            let at = &mut cursor[run[0] as usize];
            // SAFETY: the layout gives each block its own disjoint range of
            // every chunk's run
            unsafe {
                let order = to_order.base().add(*at);
                let offsets = to_offsets.base().add(*at);
                for j in 0..run.len() {
                    *order.add(j) = (k + j) as u32;
                    *offsets.add(j) = cell_offsets[k + j];
                }
            }
            *at += run.len();
            k += run.len();
        }
    });
    let starts = layout.starts;
    let chunks = touched
        .iter()
        .map(|&c| {
            let mut coords = vec![0usize; ndim];
            let mut rest = c;
            for d in (0..ndim).rev() {
                coords[d] = rest % grid[d];
                rest /= grid[d];
            }
            coords
        })
        .collect();
    Ok(Buckets {
        chunks,
        starts,
        order,
        offsets,
    })
}

/// A chunk's grid coordinates and its stored payload.
pub type EncodedChunk = (Vec<usize>, Vec<u8>);

/// Copies cell `order[i]` of `values` to place `offsets[i]` of `chunk`, cells
/// of `W` bytes (a fixed width, so the copy is one load and one store).
fn place<const W: usize>(chunk: &mut [u8], values: &[u8], order: &[u32], offsets: &[u32]) {
    let (cells, _) = values.as_chunks::<W>();
    let (slots, _) = chunk.as_chunks_mut::<W>();
    for (&t, &offset) in order.iter().zip(offsets) {
        slots[offset as usize] = cells[t as usize];
    }
}

/// Writes the cells bucketed in `buckets` with `values` (one per cell, of the
/// layout's itemsize, in the order of the coordinates bucketed) into the
/// chunks they touch and encodes each whole: a chunk in `existing` (payload,
/// grid coordinates) starts from its stored cells, any other from `fill`.
/// Returns the touched chunks' coordinates and payloads, ascending.
pub fn scatter_chunks(
    layout: &Layout,
    level: i32,
    fill: &[u8],
    buckets: &Buckets,
    values: &[u8],
    existing: &[(&[u8], &[usize])],
) -> Result<Vec<EncodedChunk>, Failure> {
    let width = layout.itemsize;
    if width == 0 || fill.len() != width {
        return Err(Failure::Input(format!(
            "the fill value has {} bytes, a cell {width}",
            fill.len()
        )));
    }
    let n = buckets.order.len();
    if values.len() != n * width {
        return Err(Failure::Input(format!(
            "{} value bytes for {n} cells of {width} bytes",
            values.len()
        )));
    }
    let stored: HashMap<&[usize], (usize, &[u8])> = existing
        .iter()
        .enumerate()
        .map(|(i, (payload, coords))| (*coords, (i, *payload)))
        .collect();
    let cells: usize = layout.chunk.iter().product();
    crate::pool::install(|| {
        buckets
            .chunks
            .par_iter()
            .enumerate()
            .map(|(k, coords)| {
                let mut chunk = match stored.get(coords.as_slice()) {
                    Some(&(index, payload)) => decode_whole(layout, payload, coords)
                        .map_err(|message| Failure::Chunk(index, message))?,
                    None => fill.repeat(cells),
                };
                let run = buckets.starts[k]..buckets.starts[k + 1];
                let (order, offsets) = (&buckets.order[run.clone()], &buckets.offsets[run]);
                match width {
                    1 => place::<1>(&mut chunk, values, order, offsets),
                    2 => place::<2>(&mut chunk, values, order, offsets),
                    4 => place::<4>(&mut chunk, values, order, offsets),
                    8 => place::<8>(&mut chunk, values, order, offsets),
                    _ => {
                        for (&t, &offset) in order.iter().zip(offsets) {
                            let (at, t) = (offset as usize * width, t as usize * width);
                            chunk[at..at + width].copy_from_slice(&values[t..t + width]);
                        }
                    }
                }
                let payload = chunk_payload(layout, level, &chunk)
                    .map_err(|message| Failure::Input(format!("chunk {coords:?}: {message}")))?;
                Ok((coords.clone(), payload))
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunks::{decode_chunks, Codec};
    use crate::testing::Rng;

    #[test]
    fn scattered_cells_land_in_their_chunks_and_the_last_repeat_wins() {
        let mut rng = Rng(3);
        for case in 0..40 {
            let extent = [
                1 + (rng.next() % 9) as usize,
                1 + (rng.next() % 11) as usize,
            ];
            let chunk = vec![1 + (rng.next() % 4) as usize, 1 + (rng.next() % 5) as usize];
            let layout = Layout {
                chunk: chunk.clone(),
                lo: vec![0, 0],
                hi: extent.to_vec(),
                itemsize: 2,
                codec: if case % 2 == 0 {
                    Codec::Zstd
                } else {
                    Codec::Raw
                },
                checksum: case % 3 == 0,
            };
            // the model: a dense array, half its chunks stored before
            let mut model = vec![7u16; extent[0] * extent[1]];
            let before: Vec<u16> = (0..model.len()).map(|_| rng.next() as u16).collect();
            let grid = [extent[0].div_ceil(chunk[0]), extent[1].div_ceil(chunk[1])];
            let mut existing = Vec::new();
            for gy in 0..grid[0] {
                for gx in 0..grid[1] {
                    if rng.next().is_multiple_of(2) {
                        continue;
                    }
                    let mut bytes = Vec::new();
                    for y in 0..chunk[0] {
                        for x in 0..chunk[1] {
                            let (ay, ax) = (gy * chunk[0] + y, gx * chunk[1] + x);
                            let v = if ay < extent[0] && ax < extent[1] {
                                model[ay * extent[1] + ax] = before[ay * extent[1] + ax];
                                before[ay * extent[1] + ax]
                            } else {
                                7
                            };
                            bytes.extend_from_slice(&v.to_le_bytes());
                        }
                    }
                    let coords = vec![gy, gx];
                    existing.push((chunk_payload(&layout, 1, &bytes).unwrap(), coords));
                }
            }
            let n = (rng.next() % 40) as usize;
            let mut positions = Vec::new();
            let mut values = Vec::new();
            for _ in 0..n {
                let (y, x) = (
                    (rng.next() as usize) % extent[0],
                    (rng.next() as usize) % extent[1],
                );
                let v = rng.next() as u16;
                positions.extend_from_slice(&[y as i64, x as i64]);
                values.extend_from_slice(&v.to_le_bytes());
                model[y * extent[1] + x] = v;
            }
            let borrowed: Vec<(&[u8], &[usize])> = existing
                .iter()
                .map(|(p, c)| (p.as_slice(), c.as_slice()))
                .collect();
            let (ys, xs): (Vec<i64>, Vec<i64>) =
                positions.chunks_exact(2).map(|p| (p[0], p[1])).unzip();
            let columns = [
                Column::I64(&ys),
                Column::I32(&xs.iter().map(|&x| x as i32).collect::<Vec<_>>()),
            ];
            let buckets = crate::pool::install(|| bucket(&layout, &columns, &[0, 0])).unwrap();
            let written = scatter_chunks(
                &layout,
                1,
                &7u16.to_le_bytes(),
                &buckets,
                &values,
                &borrowed,
            )
            .unwrap();
            // every touched chunk, and only those, comes back, ascending
            let mut touched: Vec<Vec<usize>> = (0..n)
                .map(|t| {
                    vec![
                        positions[2 * t] as usize / chunk[0],
                        positions[2 * t + 1] as usize / chunk[1],
                    ]
                })
                .collect();
            touched.sort();
            touched.dedup();
            assert_eq!(
                written.iter().map(|(c, _)| c.clone()).collect::<Vec<_>>(),
                touched
            );
            // each decodes to the model's cells
            for (coords, payload) in &written {
                let box_layout = Layout {
                    lo: vec![coords[0] * chunk[0], coords[1] * chunk[1]],
                    hi: vec![
                        ((coords[0] + 1) * chunk[0]).min(extent[0]),
                        ((coords[1] + 1) * chunk[1]).min(extent[1]),
                    ],
                    ..layout.clone()
                };
                let (h, w) = (
                    box_layout.hi[0] - box_layout.lo[0],
                    box_layout.hi[1] - box_layout.lo[1],
                );
                let mut out = vec![0u8; h * w * 2];
                decode_chunks(&box_layout, &[(payload, coords)], &mut out).unwrap();
                for y in 0..h {
                    for x in 0..w {
                        let (ay, ax) = (box_layout.lo[0] + y, box_layout.lo[1] + x);
                        let got =
                            u16::from_le_bytes([out[2 * (y * w + x)], out[2 * (y * w + x) + 1]]);
                        assert_eq!(got, model[ay * extent[1] + ax], "cell {ay},{ax}");
                    }
                }
            }
        }
    }

    #[test]
    fn dividing_by_reciprocals_is_exact() {
        let mut rng = Rng(9);
        for divisor in [1usize, 2, 3, 7, 100, 534, 1000, 4096, 99_991] {
            let d = Divider::new(divisor);
            for _ in 0..20_000 {
                let x = (rng.next() >> (rng.next() % 40)) as usize % (1 << 50);
                assert_eq!(d.divide(x), x / divisor, "{x} / {divisor}");
            }
            for x in (0..5 * divisor).chain([divisor - 1, divisor, divisor + 1]) {
                assert_eq!(d.divide(x), x / divisor);
            }
        }
    }

    #[test]
    fn many_cells_keep_their_input_order_within_a_chunk() {
        // more cells than one block, so several blocks share chunks
        let layout = Layout {
            chunk: vec![3],
            lo: vec![0],
            hi: vec![10],
            itemsize: 1,
            codec: Codec::Raw,
            checksum: false,
        };
        let n = 300_000;
        let positions: Vec<i64> = (0..n).map(|t| (t * 7 % 10) as i64).collect();
        let buckets =
            crate::pool::install(|| bucket(&layout, &[Column::I64(&positions)], &[0])).unwrap();
        assert_eq!(buckets.chunks, vec![vec![0], vec![1], vec![2], vec![3]]);
        for k in 0..4 {
            let run = &buckets.order[buckets.starts[k]..buckets.starts[k + 1]];
            assert!(
                run.windows(2).all(|w| w[0] < w[1]),
                "chunk {k} in input order"
            );
            assert!(run.iter().all(|&t| positions[t as usize] as usize / 3 == k));
        }
        assert_eq!(buckets.starts[4], n);
    }

    #[test]
    fn a_cell_outside_the_extent_is_refused() {
        let layout = Layout {
            chunk: vec![2],
            lo: vec![0],
            hi: vec![5],
            itemsize: 1,
            codec: Codec::Raw,
            checksum: false,
        };
        for bad in [5i64, -1] {
            let cells = [1, bad];
            assert!(matches!(
                crate::pool::install(|| bucket(&layout, &[Column::I64(&cells)], &[0])),
                Err(Failure::Input(_))
            ));
        }
        // coordinates past an origin: 3 is position 1, 2 is outside
        let cells = [3i32, 6];
        let buckets =
            crate::pool::install(|| bucket(&layout, &[Column::I32(&cells)], &[2])).unwrap();
        assert_eq!(buckets.chunks, vec![vec![0], vec![2]]);
        assert!(crate::pool::install(|| bucket(&layout, &[Column::I32(&[1])], &[2])).is_err());
    }

    #[test]
    fn a_scalar_coordinate_serves_every_cell_and_columns_must_agree() {
        let layout = Layout {
            chunk: vec![2, 2],
            lo: vec![0, 0],
            hi: vec![4, 4],
            itemsize: 1,
            codec: Codec::Raw,
            checksum: false,
        };
        let xs = [0i64, 3, 1];
        let buckets = crate::pool::install(|| {
            bucket(&layout, &[Column::Scalar(2), Column::I64(&xs)], &[0, 0])
        })
        .unwrap();
        assert_eq!(buckets.chunks, vec![vec![1, 0], vec![1, 1]]);
        assert_eq!(buckets.offsets, vec![0, 1, 1]); // (2,0) (2,1) in chunk (1,0); (2,3) in (1,1)
        let short = [0i32];
        assert!(matches!(
            cell_count(&[Column::I64(&xs), Column::I32(&short)]),
            Err(Failure::Input(_))
        ));
        assert_eq!(Column::I64(&xs).bounds(), Some((0, 3)));
        assert_eq!(Column::I32(&[]).bounds(), None);
    }
}
