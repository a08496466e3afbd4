//! Decoding an array attribute's stored Zarr chunks straight into a box, and
//! encoding a box's whole chunks for storing.
//!
//! zarr-python decodes every chunk a read touches into a fresh buffer of the
//! whole chunk, then copies the wanted part out. Here each chunk is decoded
//! into a buffer its thread reuses, only as far as the last cell the box
//! needs (a zstd frame is read as a stream and dropped there), and the rows
//! of the box are copied from it into the caller's array, chunks in parallel.
//! The stored bytes are plain Zarr v3: little-endian `bytes`, then optionally
//! `zstd`, then optionally `crc32c` (the checksum of the bytes before it).
//!
//! Writing is the mirror image: zarr-python encodes one chunk per task of its
//! event loop, with a copy of the chunk at each step; [`encode_chunks`]
//! gathers each chunk from the box and compresses it in parallel, so a
//! write is bound by zstd, not by the loop.

use rayon::prelude::*;
use std::cell::RefCell;
use std::collections::HashSet;
use zstd::zstd_safe::{DCtx, InBuffer, OutBuffer, ResetDirective};

mod reduce;
pub use reduce::{reduce_chunks, Kind, Partial, Totals};

/// How the array's chunks were encoded after the `bytes` codec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    Zstd,
    Raw,
}

/// The box to fill: `lo..hi` in cells of the whole array, chunked by `chunk`.
#[derive(Clone, Debug)]
pub struct Layout {
    pub chunk: Vec<usize>,
    pub lo: Vec<usize>,
    pub hi: Vec<usize>,
    pub itemsize: usize,
    pub codec: Codec,
    pub checksum: bool,
}

/// Why a decode failed: bad arguments, or chunk `index` of the input is damaged.
#[derive(Debug, PartialEq, Eq)]
pub enum Failure {
    Input(String),
    Chunk(usize, String),
}

impl Layout {
    fn ndim(&self) -> usize {
        self.chunk.len()
    }

    fn out_shape(&self) -> Vec<usize> {
        self.lo.iter().zip(&self.hi).map(|(l, h)| h - l).collect()
    }

    fn check(&self, out_len: usize) -> Result<(), Failure> {
        let n = self.ndim();
        if n == 0 || self.lo.len() != n || self.hi.len() != n {
            return Err(Failure::Input(
                "chunk shape, box start and box end need the same number (at least one) of dimensions"
                    .into(),
            ));
        }
        if self.itemsize == 0 || self.chunk.contains(&0) {
            return Err(Failure::Input(
                "chunk lengths and itemsize must be positive".into(),
            ));
        }
        if self.lo.iter().zip(&self.hi).any(|(l, h)| l > h) {
            return Err(Failure::Input("box start past its end".into()));
        }
        let cells: usize = self.out_shape().iter().product();
        if cells * self.itemsize != out_len {
            return Err(Failure::Input(format!(
                "the output holds {out_len} bytes, the box needs {}",
                cells * self.itemsize
            )));
        }
        Ok(())
    }
}

thread_local! {
    /// Each thread's decode buffer and zstd context, kept between chunks and
    /// calls: a fresh context allocates (and page-faults) its window buffer
    /// for every chunk, which costs as much as decoding a well-compressed one.
    static SCRATCH: RefCell<(Vec<u8>, Option<DCtx<'static>>)> = const { RefCell::new((Vec::new(), None)) };
}

/// The output array's base address, shared by the threads that write
/// disjoint parts of it.
#[derive(Clone, Copy)]
struct OutPtr(*mut u8);
// SAFETY: every chunk writes only its own part of the box, and the chunk
// coordinates are checked to be distinct, so no two threads write one byte.
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

/// Decodes `chunks` (payload, grid coordinates) into `out`, the box of
/// `layout` in C order. Cells of the box in no listed chunk are left as they
/// are. Chunks are decoded in parallel (one alone on the calling thread); the
/// failure reported is the one of the lowest chunk index.
pub fn decode_chunks(
    layout: &Layout,
    chunks: &[(&[u8], &[usize])],
    out: &mut [u8],
) -> Result<(), Failure> {
    layout.check(out.len())?;
    check_chunks(layout, chunks.iter().map(|(_, c)| *c), false)?;
    let base = OutPtr(out.as_mut_ptr());
    let results = crate::pool::map(chunks, 1, |index, (payload, coords)| {
        decode_one(layout, payload, coords, base).map_err(|message| Failure::Chunk(index, message))
    });
    results.into_iter().collect()
}

thread_local! {
    /// Each thread's gather buffer and zstd compressor (at its level), kept
    /// between chunks for the same reason as [`SCRATCH`].
    static GATHER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    static COMPRESSOR: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { RefCell::new(None) };
}

/// The stored payload of one whole chunk's bytes: compressed at zstd
/// `level` when the layout's codec is zstd, then its CRC-32C when the
/// layout has a checksum.
pub(crate) fn chunk_payload(layout: &Layout, level: i32, chunk: &[u8]) -> Result<Vec<u8>, String> {
    let mut payload = match layout.codec {
        Codec::Raw => chunk.to_vec(),
        Codec::Zstd => COMPRESSOR.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.as_ref().is_none_or(|(l, _)| *l != level) {
                let made = zstd::bulk::Compressor::new(level)
                    .map_err(|e| format!("zstd level {level}: {e}"))?;
                *slot = Some((level, made));
            }
            let (_, compressor) = slot.as_mut().expect("made above");
            compressor.compress(chunk).map_err(|e| format!("zstd: {e}"))
        })?,
    };
    if layout.checksum {
        let crc = crc32c::crc32c(&payload);
        payload.extend_from_slice(&crc.to_le_bytes());
    }
    Ok(payload)
}

/// The whole chunk at `coords` decoded from its stored `payload` (the
/// layout's codec, checksum and cell size; its box is not used).
pub(crate) fn decode_whole(
    layout: &Layout,
    payload: &[u8],
    coords: &[usize],
) -> Result<Vec<u8>, String> {
    let chunk = Layout {
        lo: coords
            .iter()
            .zip(&layout.chunk)
            .map(|(c, n)| c * n)
            .collect(),
        hi: coords
            .iter()
            .zip(&layout.chunk)
            .map(|(c, n)| (c + 1) * n)
            .collect(),
        ..layout.clone()
    };
    with_decoded(&chunk, payload, coords, |_, _, src| src.to_vec())
}

/// Encodes the chunks at `coords` from `values`, the box of `layout` in C
/// order: each chunk is gathered whole (its cells outside the box take
/// `fill`, the bytes of one cell), compressed at zstd `level` when the codec
/// is zstd, and followed by its CRC-32C when the layout has a checksum.
/// The payloads come back in the order of `coords`; chunks run in parallel.
pub fn encode_chunks(
    layout: &Layout,
    level: i32,
    fill: &[u8],
    values: &[u8],
    coords: &[&[usize]],
) -> Result<Vec<Vec<u8>>, Failure> {
    layout.check(values.len())?;
    if fill.len() != layout.itemsize {
        return Err(Failure::Input(format!(
            "the fill value has {} bytes, a cell {}",
            fill.len(),
            layout.itemsize
        )));
    }
    check_chunks(layout, coords.iter().copied(), true)?;
    crate::pool::install(|| {
        coords
            .par_iter()
            .enumerate()
            .map(|(index, c)| {
                encode_one(layout, level, fill, values, c)
                    .map_err(|message| Failure::Chunk(index, message))
            })
            .collect()
    })
}

fn encode_one(
    layout: &Layout,
    level: i32,
    fill: &[u8],
    values: &[u8],
    coords: &[usize],
) -> Result<Vec<u8>, String> {
    let (lo, hi) = chunk_part(layout, coords).expect("checked by encode_chunks");
    let full = layout.chunk.iter().product::<usize>() * layout.itemsize;
    let out_shape = layout.out_shape();
    let width = (hi[lo.len() - 1] - lo[lo.len() - 1]) * layout.itemsize;
    let whole = lo.iter().all(|&l| l == 0) && hi == layout.chunk;
    GATHER.with(|cell| {
        let chunk = &mut *cell.borrow_mut();
        chunk.clear();
        if whole {
            chunk.resize(full, 0);
        } else {
            // cells the box does not cover (past the array's end) hold the fill value
            chunk.reserve(full);
            for _ in 0..full / layout.itemsize {
                chunk.extend_from_slice(fill);
            }
        }
        let mut source = vec![0; lo.len()];
        for_each_row(layout, &lo, &hi, |index, to| {
            for d in 0..index.len() {
                source[d] = coords[d] * layout.chunk[d] + index[d] - layout.lo[d];
            }
            let from = linear(&source, &out_shape) * layout.itemsize;
            chunk[to..to + width].copy_from_slice(&values[from..from + width]);
        });
        chunk_payload(layout, level, chunk)
    })
}

/// Checks that each chunk's coordinates have the layout's dimensions and that
/// no chunk is listed twice; with `meeting`, also that each chunk meets the
/// box. Returns how many cells of the box the chunks hold (when `meeting`).
pub(crate) fn check_chunks<'a>(
    layout: &Layout,
    coords: impl Iterator<Item = &'a [usize]>,
    meeting: bool,
) -> Result<usize, Failure> {
    let mut seen = HashSet::new();
    let mut covered = 0usize;
    for c in coords {
        if c.len() != layout.ndim() {
            return Err(Failure::Input(format!(
                "chunk coordinates {c:?} do not have {} dimensions",
                layout.ndim()
            )));
        }
        if !seen.insert(c) {
            return Err(Failure::Input(format!("chunk {c:?} is listed twice")));
        }
        if meeting {
            let (lo, hi) = chunk_part(layout, c)
                .ok_or_else(|| Failure::Input(format!("chunk {c:?} does not meet the box")))?;
            covered += lo.iter().zip(&hi).map(|(l, h)| h - l).product::<usize>();
        }
    }
    Ok(covered)
}

/// The part of chunk `coords` inside the box, in the chunk's own cells, or
/// None when the chunk misses the box.
fn chunk_part(layout: &Layout, coords: &[usize]) -> Option<(Vec<usize>, Vec<usize>)> {
    let mut lo = Vec::with_capacity(coords.len());
    let mut hi = Vec::with_capacity(coords.len());
    for (d, &at) in coords.iter().enumerate() {
        let origin = at.checked_mul(layout.chunk[d])?;
        let start = layout.lo[d].max(origin);
        let end = layout.hi[d].min(origin.saturating_add(layout.chunk[d]));
        if start >= end {
            return None;
        }
        lo.push(start - origin);
        hi.push(end - origin);
    }
    Some((lo, hi))
}

fn decode_one(
    layout: &Layout,
    payload: &[u8],
    coords: &[usize],
    out: OutPtr,
) -> Result<(), String> {
    let out_shape = layout.out_shape();
    let row = |lo: &[usize], hi: &[usize]| (hi[lo.len() - 1] - lo[lo.len() - 1]) * layout.itemsize;
    with_decoded(layout, payload, coords, |lo, hi, src| {
        let width = row(lo, hi);
        let mut target = vec![0; lo.len()];
        for_each_row(layout, lo, hi, |index, from| {
            for d in 0..index.len() {
                target[d] = coords[d] * layout.chunk[d] + index[d] - layout.lo[d];
            }
            let to = linear(&target, &out_shape) * layout.itemsize;
            // SAFETY: `to..to + width` lies inside the box (the part is
            // clipped to it and `check` matched the output's length to the
            // box), and only this chunk's thread writes the cells of this chunk.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    src[from..from + width].as_ptr(),
                    out.0.add(to),
                    width,
                );
            }
        });
    })
}

/// Checks and decodes chunk `coords` as far as its part of the box, then
/// hands `consume` the part (`lo..hi` in the chunk's cells) and the decoded
/// bytes (the chunk in C order, at least up to the part's last cell).
pub(crate) fn with_decoded<R>(
    layout: &Layout,
    payload: &[u8],
    coords: &[usize],
    consume: impl FnOnce(&[usize], &[usize], &[u8]) -> R,
) -> Result<R, String> {
    let (lo, hi) = chunk_part(layout, coords)
        .ok_or_else(|| format!("chunk {coords:?} does not meet the box"))?;
    let chunk_cells: usize = layout.chunk.iter().product();
    let full = chunk_cells * layout.itemsize;
    let last: Vec<usize> = hi.iter().map(|h| h - 1).collect();
    let needed = (linear(&last, &layout.chunk) + 1) * layout.itemsize;
    let body = if layout.checksum {
        if payload.len() < 4 {
            return Err(format!(
                "{} bytes cannot hold a CRC-32C checksum",
                payload.len()
            ));
        }
        let (body, tail) = payload.split_at(payload.len() - 4);
        let stored = u32::from_le_bytes(tail.try_into().expect("four bytes"));
        let actual = crc32c::crc32c(body);
        if stored != actual {
            return Err(format!(
                "CRC-32C checksum mismatch (stored {stored:#010x}, computed {actual:#010x})"
            ));
        }
        body
    } else {
        payload
    };
    match layout.codec {
        Codec::Raw => {
            if body.len() != full {
                return Err(format!("{} bytes where a chunk has {full}", body.len()));
            }
            Ok(consume(&lo, &hi, body))
        }
        Codec::Zstd => SCRATCH.with(|cell| {
            let (scratch, context) = &mut *cell.borrow_mut();
            if scratch.len() < needed {
                scratch.resize(needed, 0);
            }
            let context = context.get_or_insert_with(DCtx::create);
            let buffer = &mut scratch[..needed];
            zstd_prefix(context, body, buffer, full)?;
            Ok(consume(&lo, &hi, buffer))
        }),
    }
}

/// Decodes the first `buffer.len()` bytes of the zstd frame `body` (which
/// must decode to `full` bytes); a frame read only in part is dropped there.
fn zstd_prefix(
    context: &mut DCtx<'static>,
    body: &[u8],
    buffer: &mut [u8],
    full: usize,
) -> Result<(), String> {
    let fail = |code: usize| format!("zstd: {}", zstd::zstd_safe::get_error_name(code));
    context.reset(ResetDirective::SessionOnly).map_err(fail)?;
    if buffer.len() == full {
        let size = context.decompress(buffer, body).map_err(fail)?;
        if size != full {
            return Err(format!("decodes to {size} bytes where a chunk has {full}"));
        }
        return Ok(());
    }
    let wanted = buffer.len();
    let mut output = OutBuffer::around(buffer);
    let mut input = InBuffer::around(body);
    while output.pos() < wanted {
        let before = (input.pos, output.pos());
        let left = context
            .decompress_stream(&mut output, &mut input)
            .map_err(fail)?;
        if left == 0 && output.pos() < wanted {
            return Err(format!("decodes to fewer than {wanted} bytes"));
        }
        if (input.pos, output.pos()) == before {
            return Err("the frame ends early".into());
        }
    }
    Ok(())
}

/// Row-major position of `index` in an array of `shape`.
fn linear(index: &[usize], shape: &[usize]) -> usize {
    index.iter().zip(shape).fold(0, |acc, (i, s)| acc * s + i)
}

/// Calls `visit` with the chunk index of the first cell of each row (last
/// dimension) of the part `lo..hi`, and that cell's byte offset in the chunk.
pub(super) fn for_each_row(
    layout: &Layout,
    lo: &[usize],
    hi: &[usize],
    mut visit: impl FnMut(&[usize], usize),
) {
    let n = lo.len();
    let mut index = lo.to_vec();
    loop {
        visit(&index, linear(&index, &layout.chunk) * layout.itemsize);
        // next row: count up the leading dimensions like an odometer
        let mut d = n - 1;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            index[d] += 1;
            if index[d] < hi[d] {
                break;
            }
            index[d] = lo[d];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Rng;

    /// A chunk of `shape` whose cell values (u16) count up from `start`, encoded.
    fn chunk(shape: &[usize], start: u16, codec: Codec, checksum: bool) -> (Vec<u16>, Vec<u8>) {
        let cells: usize = shape.iter().product();
        let values: Vec<u16> = (0..cells).map(|i| start.wrapping_add(i as u16)).collect();
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut encoded = match codec {
            Codec::Raw => raw,
            Codec::Zstd => zstd::bulk::compress(&raw, 3).unwrap(),
        };
        if checksum {
            let crc = crc32c::crc32c(&encoded);
            encoded.extend_from_slice(&crc.to_le_bytes());
        }
        (values, encoded)
    }

    /// Fills `lo..hi` of a 2-d array of 2x3-cell chunks on a 3x2 grid and
    /// compares every cell with the chunk it came from.
    fn check_box(lo: [usize; 2], hi: [usize; 2], codec: Codec, checksum: bool) {
        let chunk_shape = [2usize, 3];
        let mut chunks = Vec::new();
        let mut values = Vec::new();
        for gy in 0..3 {
            for gx in 0..2 {
                let (v, bytes) = chunk(&chunk_shape, (gy * 100 + gx * 10) as u16, codec, checksum);
                values.push(((gy, gx), v));
                chunks.push((bytes, vec![gy, gx]));
            }
        }
        let layout = Layout {
            chunk: chunk_shape.to_vec(),
            lo: lo.to_vec(),
            hi: hi.to_vec(),
            itemsize: 2,
            codec,
            checksum,
        };
        let wanted: Vec<(&[u8], &[usize])> = chunks
            .iter()
            .filter(|(_, c)| chunk_part(&layout, c).is_some())
            .map(|(b, c)| (b.as_slice(), c.as_slice()))
            .collect();
        let (h, w) = (hi[0] - lo[0], hi[1] - lo[1]);
        let mut out = vec![0u8; h * w * 2];
        decode_chunks(&layout, &wanted, &mut out).unwrap();
        for y in 0..h {
            for x in 0..w {
                let (ay, ax) = (lo[0] + y, lo[1] + x);
                let source = &values
                    .iter()
                    .find(|(g, _)| *g == (ay / 2, ax / 3))
                    .unwrap()
                    .1;
                let expect = source[(ay % 2) * 3 + ax % 3];
                let at = (y * w + x) * 2;
                assert_eq!(
                    u16::from_le_bytes([out[at], out[at + 1]]),
                    expect,
                    "cell {ay},{ax}"
                );
            }
        }
    }

    #[test]
    fn encoded_chunks_decode_to_the_box_with_fill_outside_it() {
        let mut rng = Rng(11);
        for _ in 0..100 {
            // a 2-d array of 5x7 cells in 2x3 chunks; the box covers some of it
            let (a, b) = ((rng.next() % 6) as usize, (rng.next() % 6) as usize);
            let (c, d) = ((rng.next() % 8) as usize, (rng.next() % 8) as usize);
            let (y0, y1, x0, x1) = (a.min(b), a.max(b).min(5), c.min(d), c.max(d).min(7));
            if y0 == y1 || x0 == x1 {
                continue;
            }
            let (h, w) = (y1 - y0, x1 - x0);
            let values: Vec<u16> = (0..h * w).map(|_| rng.next() as u16).collect();
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            for codec in [Codec::Zstd, Codec::Raw] {
                let checksum = rng.next().is_multiple_of(2);
                let layout = Layout {
                    chunk: vec![2, 3],
                    lo: vec![y0, x0],
                    hi: vec![y1, x1],
                    itemsize: 2,
                    codec,
                    checksum,
                };
                let grid: Vec<Vec<usize>> = (y0 / 2..y1.div_ceil(2))
                    .flat_map(|gy| (x0 / 3..x1.div_ceil(3)).map(move |gx| vec![gy, gx]))
                    .collect();
                let coords: Vec<&[usize]> = grid.iter().map(Vec::as_slice).collect();
                let fill = 0xBEEFu16.to_le_bytes();
                let payloads = encode_chunks(&layout, 3, &fill, &bytes, &coords).unwrap();
                for (g, payload) in grid.iter().zip(&payloads) {
                    // decode the whole chunk and compare each cell
                    let whole = Layout {
                        chunk: vec![2, 3],
                        lo: vec![g[0] * 2, g[1] * 3],
                        hi: vec![g[0] * 2 + 2, g[1] * 3 + 3],
                        itemsize: 2,
                        codec,
                        checksum,
                    };
                    let mut out = vec![0u8; 12];
                    decode_chunks(&whole, &[(payload.as_slice(), g.as_slice())], &mut out).unwrap();
                    for i in 0..6 {
                        let (y, x) = (g[0] * 2 + i / 3, g[1] * 3 + i % 3);
                        let inside = (y0..y1).contains(&y) && (x0..x1).contains(&x);
                        let expect = if inside {
                            values[(y - y0) * w + (x - x0)]
                        } else {
                            0xBEEF
                        };
                        assert_eq!(u16::from_le_bytes([out[2 * i], out[2 * i + 1]]), expect);
                    }
                }
            }
        }
    }

    #[test]
    fn encoding_refuses_chunks_off_the_box_or_listed_twice() {
        let layout = Layout {
            chunk: vec![2],
            lo: vec![0],
            hi: vec![4],
            itemsize: 1,
            codec: Codec::Raw,
            checksum: false,
        };
        let values = [1u8, 2, 3, 4];
        let off: Vec<&[usize]> = vec![&[2]];
        assert!(matches!(
            encode_chunks(&layout, 3, &[0], &values, &off),
            Err(Failure::Input(_))
        ));
        let twice: Vec<&[usize]> = vec![&[1], &[1]];
        assert!(matches!(
            encode_chunks(&layout, 3, &[0], &values, &twice),
            Err(Failure::Input(_))
        ));
        assert!(matches!(
            encode_chunks(&layout, 3, &[0, 0], &values, &[&[0]]),
            Err(Failure::Input(_))
        ));
    }

    #[test]
    fn every_box_of_a_small_grid_decodes_to_its_cells() {
        let mut rng = Rng(7);
        for _ in 0..200 {
            let (a, b) = ((rng.next() % 7) as usize, (rng.next() % 7) as usize);
            let (c, d) = ((rng.next() % 7) as usize, (rng.next() % 7) as usize);
            let (y0, y1) = (a.min(b), a.max(b));
            let (x0, x1) = (c.min(d), c.max(d));
            if y0 == y1 || x0 == x1 || y1 > 6 || x1 > 6 {
                continue;
            }
            for codec in [Codec::Zstd, Codec::Raw] {
                check_box([y0, x0], [y1, x1], codec, rng.next().is_multiple_of(2));
            }
        }
    }

    #[test]
    fn folding_a_box_equals_folding_its_decoded_cells() {
        let chunk_shape = [2usize, 3];
        let mut encoded = Vec::new();
        for gy in 0..3 {
            for gx in 0..2 {
                let (_, bytes) = chunk(&chunk_shape, (gy * 7 + gx * 3) as u16, Codec::Zstd, true);
                encoded.push((bytes, vec![gy, gx]));
            }
        }
        let parts: Vec<(&[u8], &[usize])> = encoded
            .iter()
            .map(|(b, c)| (b.as_slice(), c.as_slice()))
            .collect();
        let mut rng = Rng(11);
        for _ in 0..100 {
            let (y0, x0) = ((rng.next() % 6) as usize, (rng.next() % 6) as usize);
            let (y1, x1) = (
                y0 + 1 + (rng.next() % (6 - y0 as u64)) as usize,
                x0 + 1 + (rng.next() % (6 - x0 as u64)) as usize,
            );
            let layout = Layout {
                chunk: chunk_shape.to_vec(),
                lo: vec![y0, x0],
                hi: vec![y1, x1],
                itemsize: 2,
                codec: Codec::Zstd,
                checksum: true,
            };
            let wanted: Vec<(&[u8], &[usize])> = parts
                .iter()
                .copied()
                .filter(|(_, c)| chunk_part(&layout, c).is_some())
                .collect();
            let mut out = vec![0u8; (y1 - y0) * (x1 - x0) * 2];
            decode_chunks(&layout, &wanted, &mut out).unwrap();
            let cells: Vec<u64> = out
                .chunks_exact(2)
                .map(|b| u16::from_le_bytes([b[0], b[1]]) as u64)
                .collect();
            let null = rng.next().is_multiple_of(3).then(|| cells[0] as u16);
            let kept: Vec<u64> = cells
                .iter()
                .copied()
                .filter(|&v| null != Some(v as u16))
                .collect();
            let null_bytes = null.map(u16::to_le_bytes);
            for extremes in [false, true] {
                let partials = reduce_chunks(
                    &layout,
                    Kind::Unsigned,
                    null_bytes.as_ref().map(|b| &b[..]),
                    extremes,
                    &wanted,
                )
                .unwrap();
                let (mut count, mut sum, mut min, mut max) = (0, 0u128, u64::MAX, 0);
                for p in partials {
                    let Partial::Unsigned(Totals {
                        count: c,
                        sum: s,
                        min: lo,
                        max: hi,
                        ..
                    }) = p
                    else {
                        panic!("{p:?}")
                    };
                    count += c;
                    sum += s;
                    min = min.min(lo);
                    max = max.max(hi);
                }
                assert_eq!(count, kept.len() as u64);
                assert_eq!(sum, kept.iter().map(|&v| v as u128).sum::<u128>());
                if extremes && !kept.is_empty() {
                    assert_eq!(min, *kept.iter().min().unwrap());
                    assert_eq!(max, *kept.iter().max().unwrap());
                }
            }
        }
    }

    #[test]
    fn a_damaged_chunk_is_named_by_its_index() {
        let (_, good) = chunk(&[4], 0, Codec::Zstd, true);
        let (_, mut bad) = chunk(&[4], 0, Codec::Zstd, true);
        bad[3] ^= 0xff;
        let layout = Layout {
            chunk: vec![4],
            lo: vec![0],
            hi: vec![8],
            itemsize: 2,
            codec: Codec::Zstd,
            checksum: true,
        };
        let mut out = vec![0u8; 16];
        let err = decode_chunks(&layout, &[(&good, &[0]), (&bad, &[1])], &mut out).unwrap_err();
        assert!(
            matches!(err, Failure::Chunk(1, ref m) if m.contains("CRC-32C")),
            "{err:?}"
        );
        // without the checksum, zstd itself finds the damage
        let unchecked = Layout {
            checksum: false,
            ..layout
        };
        let (_, mut frame) = chunk(&[4], 0, Codec::Zstd, false);
        let cut = frame.len() - 3;
        frame.truncate(cut);
        let err = decode_chunks(&unchecked, &[(&frame, &[0])], &mut out[..8]).unwrap_err();
        assert!(matches!(err, Failure::Input(_)), "{err:?}"); // out is the wrong size
        let small = Layout {
            hi: vec![4],
            ..unchecked
        };
        let err = decode_chunks(&small, &[(&frame, &[0])], &mut out[..8]).unwrap_err();
        assert!(matches!(err, Failure::Chunk(0, _)), "{err:?}");
    }

    #[test]
    fn repeated_or_misshapen_chunks_are_refused() {
        let (_, raw) = chunk(&[4], 0, Codec::Raw, false);
        let layout = Layout {
            chunk: vec![4],
            lo: vec![0],
            hi: vec![4],
            itemsize: 2,
            codec: Codec::Raw,
            checksum: false,
        };
        let mut out = vec![0u8; 8];
        assert!(matches!(
            decode_chunks(&layout, &[(&raw, &[0]), (&raw, &[0])], &mut out),
            Err(Failure::Input(_))
        ));
        assert!(matches!(
            decode_chunks(&layout, &[(&raw[..6], &[0])], &mut out),
            Err(Failure::Chunk(0, _))
        ));
        assert!(matches!(
            decode_chunks(&layout, &[(&raw, &[0, 0])], &mut out),
            Err(Failure::Input(_))
        ));
    }
}
