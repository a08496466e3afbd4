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
use crate::pool::DisjointWrites;
use rayon::prelude::*;
use std::collections::HashMap;

/// Division by a fixed positive divisor through its reciprocal, corrected to
/// the exact quotient (for dividends below 2^52, far past any array extent).
struct Divider {
    divisor: usize,
    inverse: f64,
}

impl Divider {
    fn new(divisor: usize) -> Self {
        Divider {
            divisor,
            inverse: 1.0 / divisor as f64,
        }
    }

    fn divide(&self, x: usize) -> usize {
        let mut q = (x as f64 * self.inverse) as usize;
        if q * self.divisor > x {
            q -= 1;
        } else if (q + 1) * self.divisor <= x {
            q += 1;
        }
        q
    }
}

/// Cells bucketed by chunk: the touched chunks' grid coordinates (ascending
/// in C order), and for chunk `k` the cells `order[starts[k]..starts[k + 1]]`
/// with, at the same places of `offsets`, each cell's place in its chunk (C
/// order), so that filling a chunk never goes back to the positions.
pub struct Buckets {
    pub chunks: Vec<Vec<usize>>,
    pub starts: Vec<usize>,
    pub order: Vec<usize>,
    pub offsets: Vec<usize>,
}

/// Buckets `positions` (`n x ndim` cell positions, C order) by the chunks of
/// `layout` (its `hi` is the array's extent, its `lo` zeros). Runs in the
/// caller's rayon pool: call it inside [`crate::pool::install`].
pub fn bucket(layout: &Layout, positions: &[i64]) -> Result<Buckets, Failure> {
    let ndim = layout.chunk.len();
    if ndim == 0 || layout.hi.len() != ndim || layout.chunk.contains(&0) {
        return Err(Failure::Input(
            "the chunk shape and the extent need the same number (at least one) of dimensions"
                .into(),
        ));
    }
    if !positions.len().is_multiple_of(ndim) {
        return Err(Failure::Input(format!(
            "{} position values are not rows of {ndim}",
            positions.len()
        )));
    }
    let grid: Vec<usize> = (0..ndim)
        .map(|d| layout.hi[d].div_ceil(layout.chunk[d]))
        .collect();
    let total = grid
        .iter()
        .try_fold(1usize, |acc, &g| acc.checked_mul(g))
        .ok_or_else(|| Failure::Input("the chunk grid has more than 2^64 chunks".into()))?;
    let n = positions.len() / ndim;
    if n >= u32::MAX as usize {
        return Err(Failure::Input(format!(
            "{n} cells in one call; at most {} (split the call)",
            u32::MAX - 1
        )));
    }
    // each cell's chunk (its linear number in the grid), blocks of cells in parallel;
    // dividing by the chunk lengths is most of the work, so by reciprocals
    let dividers: Vec<Divider> = layout.chunk.iter().map(|&c| Divider::new(c)).collect();
    const BLOCK: usize = 1 << 16;
    let mut cids = vec![0usize; n];
    let mut cell_offsets = vec![0usize; n];
    let outside = cids
        .par_chunks_mut(BLOCK)
        .zip(cell_offsets.par_chunks_mut(BLOCK))
        .zip(positions.par_chunks(BLOCK * ndim))
        .enumerate()
        .filter_map(|(b, ((out, offsets), block))| {
            let mut first_bad = None;
            let cells = out.iter_mut().zip(offsets.iter_mut());
            for (k, ((cid, offset), p)) in cells.zip(block.chunks_exact(ndim)).enumerate() {
                let (mut c, mut o) = (0usize, 0usize);
                for d in 0..ndim {
                    let at = p[d];
                    if at < 0 || at as usize >= layout.hi[d] {
                        first_bad.get_or_insert(b * BLOCK + k);
                    }
                    let at = at.max(0) as usize;
                    let q = dividers[d].divide(at);
                    c = c * grid[d] + q;
                    o = o * layout.chunk[d] + (at - q * layout.chunk[d]);
                }
                *cid = c;
                *offset = o;
            }
            first_bad
        })
        .min();
    if let Some(t) = outside {
        return Err(Failure::Input(format!(
            "cell {t} at position {:?} is outside the array's extent {:?}",
            &positions[t * ndim..(t + 1) * ndim],
            layout.hi
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
    let blocks: Vec<&[u32]> = slots.chunks(BLOCK.max(n.div_ceil(64))).collect();
    let counts: Vec<Vec<usize>> = blocks
        .par_iter()
        .map(|block| {
            let mut count = vec![0usize; m];
            for &s in *block {
                count[s as usize] += 1;
            }
            count
        })
        .collect();
    let mut starts = vec![0usize; m + 1];
    for count in &counts {
        for (k, c) in count.iter().enumerate() {
            starts[k + 1] += c;
        }
    }
    for k in 0..m {
        starts[k + 1] += starts[k];
    }
    let mut cursors = Vec::with_capacity(blocks.len());
    let mut running = starts[..m].to_vec();
    for count in &counts {
        cursors.push(running.clone());
        for (r, c) in running.iter_mut().zip(count) {
            *r += c;
        }
    }
    let mut order = vec![0usize; n];
    let mut offsets = vec![0usize; n];
    let (to_order, to_offsets) = (
        DisjointWrites::new(&mut order),
        DisjointWrites::new(&mut offsets),
    );
    blocks
        .par_iter()
        .zip(cursors.par_iter_mut())
        .enumerate()
        .for_each(|(b, (block, cursor))| {
            let first = b * BLOCK.max(n.div_ceil(64));
            for (k, &s) in block.iter().enumerate() {
                let at = &mut cursor[s as usize];
                // SAFETY: each block writes its own disjoint range of every
                // chunk's run (its cursor starts where the blocks before it end)
                unsafe {
                    *to_order.base().add(*at) = first + k;
                    *to_offsets.base().add(*at) = cell_offsets[first + k];
                }
                *at += 1;
            }
        });
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

/// Writes the cells at `positions` (`n x ndim`) with `values` (`n` cells of
/// the layout's itemsize) into the chunks they touch and encodes each whole:
/// a chunk in `existing` (payload, grid coordinates) starts from its stored
/// cells, any other from `fill`. Returns the touched chunks' coordinates and
/// payloads, ascending.
pub fn scatter_chunks(
    layout: &Layout,
    level: i32,
    fill: &[u8],
    positions: &[i64],
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
    let ndim = layout.chunk.len().max(1);
    let n = positions.len() / ndim;
    if values.len() != n * width {
        return Err(Failure::Input(format!(
            "{} value bytes for {n} cells of {width} bytes",
            values.len()
        )));
    }
    let buckets = crate::pool::install(|| bucket(layout, positions))?;
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
                for (&t, &offset) in buckets.order[run.clone()].iter().zip(&buckets.offsets[run]) {
                    let at = offset * width;
                    chunk[at..at + width].copy_from_slice(&values[t * width..(t + 1) * width]);
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
            let written = scatter_chunks(
                &layout,
                1,
                &7u16.to_le_bytes(),
                &positions,
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
        let buckets = crate::pool::install(|| bucket(&layout, &positions)).unwrap();
        assert_eq!(buckets.chunks, vec![vec![0], vec![1], vec![2], vec![3]]);
        for k in 0..4 {
            let run = &buckets.order[buckets.starts[k]..buckets.starts[k + 1]];
            assert!(
                run.windows(2).all(|w| w[0] < w[1]),
                "chunk {k} in input order"
            );
            assert!(run.iter().all(|&t| positions[t] as usize / 3 == k));
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
            assert!(matches!(
                scatter_chunks(&layout, 1, &[0], &[1, bad], &[1, 2], &[]),
                Err(Failure::Input(_))
            ));
        }
    }
}
