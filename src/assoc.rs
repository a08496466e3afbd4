//! Kernels of D4M associative arrays: key interning and the sparse matrix
//! built from triples with an aggregate.
//!
//! Interning turns a column of keys (strings or numbers) into its sorted
//! unique keys and, for each input key, its id in that sorted list. It hashes
//! each key once and sorts only the unique keys, where `np.unique` sorts all
//! of them (with Python's string comparison for object arrays). Building the
//! matrix is a counting sort of the triples by row, then a stable sort of each
//! row's triples by column in which colliding triples are combined.

use crate::pool::{scatter_by_partition, DisjointWrites};
use rayon::prelude::*;

/// A column of keys as the kernels see it.
pub enum Keys {
    /// Strings: key `i` is `data[offsets[i]..offsets[i + 1]]`, UTF-8.
    Text { data: Vec<u8>, offsets: Vec<usize> },
    /// Numbers, none NaN (negative zero is taken as zero).
    Numbers(Vec<f64>),
}

impl Keys {
    pub fn len(&self) -> usize {
        match self {
            Keys::Text { offsets, .. } => offsets.len().saturating_sub(1),
            Keys::Numbers(values) => values.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Splits a D4M key string on its delimiter (its last character): `"a,b,"`
    /// holds `a` and `b`; `"a,,b,"` holds an empty key between them.
    pub fn delimited(text: &str) -> Keys {
        let mut data = Vec::with_capacity(text.len());
        let mut offsets = vec![0usize];
        if let Some(delimiter) = text.chars().last() {
            let body = &text[..text.len() - delimiter.len_utf8()];
            for key in body.split(delimiter) {
                data.extend_from_slice(key.as_bytes());
                offsets.push(data.len());
            }
        }
        Keys::Text { data, offsets }
    }

    /// Strings held as numpy's fixed-width UCS4 (`width` code points each,
    /// NUL-padded at the end). Returns the index of the first item that is
    /// not Unicode text.
    pub fn from_ucs4(codes: &[u32], width: usize) -> Result<Keys, usize> {
        let n = codes.len().checked_div(width).unwrap_or(0);
        let mut data = Vec::with_capacity(codes.len());
        let mut offsets = Vec::with_capacity(n + 1);
        offsets.push(0);
        for i in 0..n {
            let item = &codes[i * width..(i + 1) * width];
            let end = item.iter().rposition(|&c| c != 0).map_or(0, |p| p + 1);
            for &code in &item[..end] {
                let c = char::from_u32(code).ok_or(i)?;
                let mut buf = [0u8; 4];
                data.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
            offsets.push(data.len());
        }
        Ok(Keys::Text { data, offsets })
    }
}

/// Sorted unique keys and, for each input key, its place among them.
pub struct Interned {
    /// For each unique key in ascending order, the index of an input key
    /// equal to it (the caller reads the keys themselves from its input).
    pub unique: Vec<usize>,
    pub ids: Vec<i64>,
}

/// Interns one column of keys: hashing, then one sort of the unique keys.
pub fn intern(keys: &Keys) -> Interned {
    let (found, mut order) = match keys {
        Keys::Text { data, offsets } => {
            let item = |i: usize| &data[offsets[i]..offsets[i + 1]];
            // sorted by the first 16 bytes (big-endian, so integer order is
            // byte order) and only ties compared in full: the sort then
            // mostly reads one contiguous array instead of the scattered keys
            // (8 bytes left keys such as "r00000012" tied in tens, and the
            // ties' full comparisons, three cache misses each, were a third
            // of interning them)
            let mut found = distinct(keys.len(), item, prefix);
            let mut order = found.order();
            let firsts = &found.firsts;
            order.par_sort_unstable_by(|a, b| {
                a.0.cmp(&b.0)
                    .then_with(|| item(firsts[a.1 as usize]).cmp(item(firsts[b.1 as usize])))
            });
            (found, order)
        }
        Keys::Numbers(values) => {
            // -0.0 folded into 0.0, then bit patterns hash exactly
            let bits: Vec<[u8; 8]> = values.iter().map(|&v| (v + 0.0).to_le_bytes()).collect();
            let mut found = distinct(
                bits.len(),
                |i| &bits[i][..],
                |b| ordered_bits(f64::from_le_bytes(b.try_into().expect("8 bytes"))) as u128,
            );
            let mut order = found.order();
            order.par_sort_unstable();
            (found, order)
        }
    };
    let ids = found.ids(&ranks(&order));
    for entry in order.iter_mut() {
        entry.0 = found.firsts[entry.1 as usize] as u128;
    }
    Interned {
        unique: order.into_iter().map(|(i, _)| i as usize).collect(),
        ids,
    }
}

impl Keys {
    /// The keys at `picks`, in that order, as one contiguous column: read
    /// in parallel, since each pick is a cache miss in a large input.
    pub fn gather(&self, picks: &[usize]) -> Keys {
        match self {
            Keys::Text { data, offsets } => {
                let parts: Vec<(Vec<u8>, Vec<usize>)> = picks
                    .par_chunks(64 * 1024)
                    .map(|chunk| {
                        let mut bytes = Vec::new();
                        let mut ends = Vec::with_capacity(chunk.len());
                        for &i in chunk {
                            bytes.extend_from_slice(&data[offsets[i]..offsets[i + 1]]);
                            ends.push(bytes.len());
                        }
                        (bytes, ends)
                    })
                    .collect();
                let mut out = Vec::with_capacity(parts.iter().map(|p| p.0.len()).sum());
                let mut out_offsets = Vec::with_capacity(picks.len() + 1);
                out_offsets.push(0);
                for (bytes, ends) in parts {
                    let base = out.len();
                    out.extend_from_slice(&bytes);
                    out_offsets.extend(ends.iter().map(|e| base + e));
                }
                Keys::Text {
                    data: out,
                    offsets: out_offsets,
                }
            }
            Keys::Numbers(values) => {
                Keys::Numbers(picks.iter().map(|&i| values[i] + 0.0).collect())
            }
        }
    }
}

/// The first 16 bytes of a key as a big-endian integer (zero-padded).
fn prefix(key: &[u8]) -> u128 {
    let mut head = [0u8; 16];
    let n = key.len().min(16);
    head[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(head)
}

/// A float's bits as an integer ordered as the floats are (no NaN here).
fn ordered_bits(v: f64) -> u64 {
    let bits = v.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// Hash partitions of [`distinct`]: 256 keeps each partition's table in cache
/// for a million distinct keys.
const PARTITION_BITS: u32 = 8;

fn partition_of(hash: u64) -> usize {
    (hash.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - PARTITION_BITS)) as usize
}

fn hash_key(key: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut hasher = rustc_hash::FxHasher::default();
    hasher.write(key);
    hasher.write_usize(key.len());
    hasher.finish()
}

/// A key's place in its partition: its hash, input index and length (its
/// bytes follow the previous key's in the partition's bytes).
#[derive(Clone, Copy, Default)]
struct Placed {
    hash: u64,
    member: u32,
    len: u32,
}

/// Distinct keys of `key(0..n)`.
///
/// Keys are hashed, then copied with their hashes into partitions by hash,
/// and each partition is interned on its own with a small table: every pass
/// then reads and writes memory in order. One big table missed memory twice
/// per key (3.3 s for 10M keys on this machine); visiting each partition's
/// keys in place missed it twice as well (1.8 s).
///
/// Each distinct key's `sort_key` is taken from its bytes there too, while
/// they are in cache: taken later from the input, each cost cache misses.
fn distinct<'a>(
    n: usize,
    key: impl Fn(usize) -> &'a [u8] + Sync,
    sort_key: impl Fn(&[u8]) -> u128 + Sync,
) -> Distinct {
    let parts = 1usize << PARTITION_BITS;
    let partition = partition_of;
    let hashes: Vec<u64> = (0..n).into_par_iter().map(|i| hash_key(key(i))).collect();
    // input blocks scatter keys and their bytes into partitions in parallel
    let blocks = crate::pool::input_blocks(n);
    let layout = scatter_by_partition(&blocks, parts, |&(lo, hi)| {
        let mut count = vec![(0usize, 0usize); parts];
        for i in lo..hi {
            let c = &mut count[partition(hashes[i])];
            c.0 += 1;
            c.1 += key(i).len();
        }
        count
    });
    let mut placed = vec![Placed::default(); n];
    let mut bytes = vec![0u8; layout.total().1];
    let (placed_out, bytes_out) = (
        DisjointWrites::new(&mut placed),
        DisjointWrites::new(&mut bytes),
    );
    layout.write(&blocks, |_, &(lo, hi), first| {
        let mut fill = first.to_vec();
        for (i, &h) in hashes.iter().enumerate().take(hi).skip(lo) {
            let k = key(i);
            let f = &mut fill[partition(h)];
            // SAFETY: the layout gives each block its own places and bytes in
            // each partition, inside the buffers (sized by its totals)
            unsafe {
                *placed_out.base().add(f.0) = Placed {
                    hash: h,
                    member: i as u32,
                    len: k.len() as u32,
                };
                std::ptr::copy_nonoverlapping(k.as_ptr(), bytes_out.base().add(f.1), k.len());
            }
            f.0 += 1;
            f.1 += k.len();
        }
    });
    let starts = layout.starts;
    let block_places: Vec<Vec<usize>> = layout
        .firsts
        .iter()
        .map(|first| first.iter().map(|f| f.0).collect())
        .collect();
    // each partition interned with its own table, whose entries are ids of
    // the distinct keys; a key's local id is written over its length
    let mut pieces = Vec::with_capacity(parts);
    let mut rest: &mut [Placed] = &mut placed;
    for p in 0..parts {
        let (piece, tail) = rest.split_at_mut(starts[p + 1].0 - starts[p].0);
        pieces.push(piece);
        rest = tail;
    }
    let firsts: Vec<Vec<(usize, u128)>> = pieces
        .into_par_iter()
        .enumerate()
        .map(|(p, piece)| {
            let mut table: hashbrown::HashTable<(u64, u32)> = hashbrown::HashTable::new();
            // (byte start, length, input index) of each distinct key
            let mut distinct: Vec<(usize, usize, usize)> = Vec::new();
            let mut cursor = starts[p].1;
            for entry in piece.iter_mut() {
                let (h, len) = (entry.hash, entry.len as usize);
                let k = &bytes[cursor..cursor + len];
                let found = table.find(h, |&(hh, id)| {
                    let (s, l, _) = distinct[id as usize];
                    hh == h && &bytes[s..s + l] == k
                });
                entry.len = match found {
                    Some(&(_, id)) => id,
                    None => {
                        let id = distinct.len() as u32;
                        distinct.push((cursor, len, entry.member as usize));
                        table.insert_unique(h, (h, id), |&(hh, _)| hh);
                        id
                    }
                };
                cursor += len;
            }
            distinct
                .into_iter()
                .map(|(s, l, i)| (i, sort_key(&bytes[s..s + l])))
                .collect()
        })
        .collect();
    let mut offsets = vec![0usize; parts];
    for p in 1..parts {
        offsets[p] = offsets[p - 1] + firsts[p - 1].len();
    }
    let (firsts, sort_keys) = firsts.into_iter().flatten().unzip();
    Distinct {
        firsts,
        sort_keys,
        hashes,
        blocks,
        block_places,
        placed,
        offsets,
    }
}

/// The distinct keys found by [`distinct`]: `firsts[d]` is the first input
/// index of distinct key `d` and `sort_keys[d]` its sort key; each
/// partition's keys carry their local ids, and each input block's keys start
/// at `block_places[b][p]` in partition `p`.
struct Distinct {
    firsts: Vec<usize>,
    sort_keys: Vec<u128>,
    hashes: Vec<u64>,
    blocks: Vec<(usize, usize)>,
    block_places: Vec<Vec<usize>>,
    placed: Vec<Placed>,
    offsets: Vec<usize>,
}

impl Distinct {
    /// (sort key, distinct key) of each distinct key, to be sorted; the
    /// sort keys are handed over, not kept.
    fn order(&mut self) -> Vec<(u128, u32)> {
        std::mem::take(&mut self.sort_keys)
            .into_iter()
            .enumerate()
            .map(|(d, k)| (k, d as u32))
            .collect()
    }

    /// Each input key's id, given the rank of each distinct key: read back
    /// in input order, each block walking the partitions as it filled them.
    fn ids(&self, rank: &[u32]) -> Vec<i64> {
        let mut ids = vec![0i64; self.placed.len()];
        let mut pieces = Vec::with_capacity(self.blocks.len());
        let mut rest: &mut [i64] = &mut ids;
        for &(lo, hi) in &self.blocks {
            let (piece, tail) = rest.split_at_mut(hi - lo);
            pieces.push(piece);
            rest = tail;
        }
        pieces
            .into_par_iter()
            .zip(self.blocks.par_iter().zip(self.block_places.par_iter()))
            .for_each(|(piece, (&(lo, _), places))| {
                let mut cursor = places.clone();
                for (slot, id) in piece.iter_mut().enumerate() {
                    let p = partition_of(self.hashes[lo + slot]);
                    *id = rank[self.offsets[p] + self.placed[cursor[p]].len as usize] as i64;
                    cursor[p] += 1;
                }
            });
        ids
    }
}

/// The rank of each distinct key: `order[r].1` is the distinct key ranked `r`.
fn ranks(order: &[(u128, u32)]) -> Vec<u32> {
    let mut rank = vec![0u32; order.len()];
    for (r, &(_, d)) in order.iter().enumerate() {
        rank[d as usize] = r as u32;
    }
    rank
}

/// Places in the union of two sorted unique key lists: for each key of `a`
/// and of `b`, its place in the sorted union, and the union's length. A
/// linear merge, where aligning two arrays through Python comparisons or a
/// re-interning costs a sort.
pub fn merge_sorted<T: ?Sized + PartialOrd>(a: &[&T], b: &[&T]) -> (Vec<i64>, Vec<i64>, usize) {
    let (mut a_at, mut b_at) = (Vec::with_capacity(a.len()), Vec::with_capacity(b.len()));
    let (mut i, mut j, mut n) = (0usize, 0usize, 0i64);
    while i < a.len() || j < b.len() {
        if j == b.len() || (i < a.len() && a[i] < b[j]) {
            a_at.push(n);
            i += 1;
        } else if i == a.len() || b[j] < a[i] {
            b_at.push(n);
            j += 1;
        } else {
            a_at.push(n);
            b_at.push(n);
            i += 1;
            j += 1;
        }
        n += 1;
    }
    (a_at, b_at, n as usize)
}

/// Where `probe` goes in sorted strings (key `i` is
/// `data[offsets[i]..offsets[i + 1]]`): the first place whose key is not
/// below it (`right`: not at or below it), as numpy's `searchsorted`.
/// None if an offset the search reads does not describe a string of `data`
/// (only the offsets on the search's path are read, not all of them).
pub fn search_sorted(offsets: &[i64], data: &[u8], probe: &[u8], right: bool) -> Option<usize> {
    let n = offsets.len().saturating_sub(1);
    let (mut lo, mut hi) = (0usize, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let (a, b) = (
            usize::try_from(offsets[mid]).ok()?,
            usize::try_from(offsets[mid + 1]).ok()?,
        );
        let key = data.get(a..b)?;
        let before = if right { key <= probe } else { key < probe };
        if before {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Some(lo)
}

/// How colliding triples (same row and column) are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregate {
    Min,
    Max,
    Sum,
    First,
    Last,
}

impl Aggregate {
    pub fn parse(name: &str) -> Option<Aggregate> {
        Some(match name {
            "min" => Aggregate::Min,
            "max" => Aggregate::Max,
            "sum" => Aggregate::Sum,
            "first" => Aggregate::First,
            "last" => Aggregate::Last,
            _ => return None,
        })
    }

    fn combine(self, kept: f64, next: f64) -> f64 {
        match self {
            Aggregate::Min => kept.min(next),
            Aggregate::Max => kept.max(next),
            Aggregate::Sum => kept + next,
            Aggregate::First => kept,
            Aggregate::Last => next,
        }
    }
}

/// A compressed sparse row matrix.
#[derive(Debug, PartialEq)]
pub struct Csr {
    pub indptr: Vec<i64>,
    pub indices: Vec<i64>,
    pub data: Vec<f64>,
}

/// The matrix of `nrows` rows holding the triples (row ids, column ids,
/// values), colliding triples combined by `aggregate` in input order, entries
/// that come to zero dropped, columns ascending within a row. Ids must be
/// below `nrows` (rows) and non-negative (the caller interned them).
///
/// The triples are first scattered into up to 256 bands of consecutive rows
/// (sequential streams, by blocks of the input in parallel), then each band
/// is counting-sorted by row in cache and its rows sorted by column: one
/// counting sort over all rows at once missed memory on every triple (1.1 s
/// of 1.4 s for 10M triples).
pub fn build_csr(
    rows: &[i64],
    cols: &[i64],
    vals: &[f64],
    nrows: usize,
    aggregate: Aggregate,
) -> Csr {
    let n = rows.len();
    let row_bits = usize::BITS - nrows.saturating_sub(1).leading_zeros();
    let shift = row_bits.saturating_sub(BAND_BITS);
    let bands = if nrows == 0 {
        0
    } else {
        ((nrows - 1) >> shift) + 1
    };
    let band_of = |r: i64| (r as usize) >> shift;
    // blocks of the input count their triples per band, then scatter them
    let blocks = crate::pool::input_blocks(n);
    let layout = scatter_by_partition(&blocks, bands, |&(lo, hi)| {
        let mut count = vec![0usize; bands];
        for &r in &rows[lo..hi] {
            count[band_of(r)] += 1;
        }
        count
    });
    let mut banded = vec![(0i64, 0i64, 0f64); n];
    let out = DisjointWrites::new(&mut banded);
    layout.write(&blocks, |_, &(lo, hi), first| {
        let mut fill = first.to_vec();
        for i in lo..hi {
            let f = &mut fill[band_of(rows[i])];
            // SAFETY: the layout gives each block its own places in each band
            unsafe { *out.base().add(*f) = (rows[i], cols[i], vals[i]) };
            *f += 1;
        }
    });
    let band_starts = layout.starts;
    // each band: counting sort by row, then each row sorted by column
    // (stably, so input order survives for first/last) and combined
    let mut entries = vec![(0i64, 0f64); n];
    let mut pieces = Vec::with_capacity(bands);
    let mut rest: &mut [(i64, f64)] = &mut entries;
    for b in 0..bands {
        let (piece, tail) = rest.split_at_mut(band_starts[b + 1] - band_starts[b]);
        pieces.push(piece);
        rest = tail;
    }
    let kept: Vec<Vec<usize>> = pieces
        .into_par_iter()
        .enumerate()
        .map(|(b, piece)| {
            let first_row = b << shift;
            let band_rows = ((b + 1) << shift).min(nrows) - first_row;
            let band = &banded[band_starts[b]..band_starts[b + 1]];
            let mut starts = vec![0usize; band_rows + 1];
            for &(r, _, _) in band {
                starts[r as usize - first_row + 1] += 1;
            }
            for r in 0..band_rows {
                starts[r + 1] += starts[r];
            }
            let mut fill = starts.clone();
            for &(r, c, v) in band {
                let f = &mut fill[r as usize - first_row];
                piece[*f] = (c, v);
                *f += 1;
            }
            // each row combined in place, its kept entries moved down to
            // the band's cursor, so that the band's entries end up together
            let mut lengths = Vec::with_capacity(band_rows);
            let mut cursor = 0usize;
            for r in 0..band_rows {
                let kept = combine_row(&mut piece[starts[r]..starts[r + 1]], aggregate);
                piece.copy_within(starts[r]..starts[r] + kept, cursor);
                cursor += kept;
                lengths.push(kept);
            }
            lengths
        })
        .collect();
    drop(banded);
    // the kept entries of each band, gathered into the CSR arrays in parallel
    let band_totals: Vec<usize> = kept.iter().map(|lengths| lengths.iter().sum()).collect();
    let mut out_starts = vec![0usize; bands + 1];
    for b in 0..bands {
        out_starts[b + 1] = out_starts[b] + band_totals[b];
    }
    let total = out_starts[bands];
    let mut indices = vec![0i64; total];
    let mut data = vec![0f64; total];
    let (indices_out, data_out) = (
        DisjointWrites::new(&mut indices),
        DisjointWrites::new(&mut data),
    );
    (0..bands).into_par_iter().for_each(|b| {
        let from = &entries[band_starts[b]..band_starts[b] + band_totals[b]];
        for (k, &(c, v)) in from.iter().enumerate() {
            // SAFETY: band b alone writes [out_starts[b], out_starts[b + 1])
            unsafe {
                *indices_out.base().add(out_starts[b] + k) = c;
                *data_out.base().add(out_starts[b] + k) = v;
            }
        }
    });
    let mut indptr = Vec::with_capacity(nrows + 1);
    indptr.push(0i64);
    let mut end = 0i64;
    for &len in kept.iter().flatten() {
        end += len as i64;
        indptr.push(end);
    }
    Csr {
        indptr,
        indices,
        data,
    }
}

/// Sorts one row's (column, value) entries by column, stably, combines the
/// entries of a column with `aggregate` and drops those that come to zero.
/// Returns how many are kept, at the start of `row`.
fn combine_row(row: &mut [(i64, f64)], aggregate: Aggregate) -> usize {
    row.sort_by_key(|e| e.0);
    let mut out = 0usize;
    let mut i = 0usize;
    while i < row.len() {
        let (col, mut value) = row[i];
        i += 1;
        while i < row.len() && row[i].0 == col {
            value = aggregate.combine(value, row[i].1);
            i += 1;
        }
        if value != 0.0 {
            row[out] = (col, value);
            out += 1;
        }
    }
    out
}

/// Bands of rows in [`build_csr`]: up to 2^8.
const BAND_BITS: u32 = 8;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Rng;
    use std::collections::BTreeMap;

    fn texts(keys: &Keys) -> Vec<String> {
        match keys {
            Keys::Text { data, offsets } => offsets
                .windows(2)
                .map(|w| String::from_utf8(data[w[0]..w[1]].to_vec()).unwrap())
                .collect(),
            Keys::Numbers(_) => panic!("numbers"),
        }
    }

    #[test]
    fn delimited_keys_split_on_the_last_character() {
        assert_eq!(texts(&Keys::delimited("a,b,c,")), ["a", "b", "c"]);
        assert_eq!(texts(&Keys::delimited("a,,b,")), ["a", "", "b"]);
        assert_eq!(texts(&Keys::delimited("x;y;")), ["x", "y"]);
        assert_eq!(texts(&Keys::delimited("é→ü→")), ["é", "ü"]);
        assert!(Keys::delimited("").is_empty());
    }

    #[test]
    fn ucs4_items_lose_their_padding() {
        let codes = [97, 98, 0, 0xe9, 0, 0];
        assert_eq!(texts(&Keys::from_ucs4(&codes, 3).unwrap()), ["ab", "é"]);
        assert_eq!(Keys::from_ucs4(&[0xD800, 0], 2).err(), Some(0));
    }

    #[test]
    fn interned_strings_are_sorted_unique_with_ids() {
        let keys = Keys::delimited("b,a,c,a,b,ab,");
        let out = intern(&keys);
        let all = texts(&keys);
        let unique: Vec<&str> = out.unique.iter().map(|&i| all[i].as_str()).collect();
        assert_eq!(unique, ["a", "ab", "b", "c"]);
        assert_eq!(out.ids, [2, 0, 3, 0, 2, 1]);
    }

    #[test]
    fn interning_agrees_with_sorting_on_many_keys() {
        let mut rng = Rng(11);
        // half the keys share a 16-byte stem, so that the sort's prefixes
        // tie and the full comparison decides
        let words: Vec<String> = (0..20_000)
            .map(|_| {
                let stem = if rng.next().is_multiple_of(2) {
                    "0123456789abcdef"
                } else {
                    ""
                };
                let len = (rng.next() % 12) as usize;
                let tail: String = (0..len)
                    .map(|_| (b'a' + (rng.next() % 3) as u8) as char)
                    .collect();
                format!("{stem}{tail}")
            })
            .collect();
        let mut text = words.join("\u{1}");
        text.push('\u{1}');
        let out = intern(&Keys::delimited(&text));
        let mut sorted = words.clone();
        sorted.sort();
        sorted.dedup();
        let unique: Vec<&String> = out.unique.iter().map(|&i| &words[i]).collect();
        assert_eq!(unique, sorted.iter().collect::<Vec<_>>());
        for (i, w) in words.iter().enumerate() {
            assert_eq!(&sorted[out.ids[i] as usize], w);
        }
    }

    #[test]
    fn interned_numbers_fold_negative_zero() {
        let values = vec![2.5, -0.0, 0.0, -1.0, 2.5, -3e300];
        let out = intern(&Keys::Numbers(values.clone()));
        let unique: Vec<f64> = out.unique.iter().map(|&i| values[i]).collect();
        assert_eq!(unique, [-3e300, -1.0, 0.0, 2.5]);
        assert_eq!(out.ids, [3, 2, 2, 1, 3, 0]);
    }

    #[test]
    fn csr_matches_a_map_of_triples() {
        for aggregate in [
            Aggregate::Min,
            Aggregate::Max,
            Aggregate::Sum,
            Aggregate::First,
            Aggregate::Last,
        ] {
            let mut rng = Rng(7);
            let (nrows, ncols, n) = (37usize, 11usize, 2000usize);
            let rows: Vec<i64> = (0..n).map(|_| (rng.next() % nrows as u64) as i64).collect();
            let cols: Vec<i64> = (0..n).map(|_| (rng.next() % ncols as u64) as i64).collect();
            let vals: Vec<f64> = (0..n).map(|_| (rng.next() % 5) as f64 - 2.0).collect();
            let mut model: BTreeMap<(i64, i64), f64> = BTreeMap::new();
            for i in 0..n {
                model
                    .entry((rows[i], cols[i]))
                    .and_modify(|v| *v = aggregate.combine(*v, vals[i]))
                    .or_insert(vals[i]);
            }
            let csr = build_csr(&rows, &cols, &vals, nrows, aggregate);
            let mut got = BTreeMap::new();
            for r in 0..nrows {
                for k in csr.indptr[r] as usize..csr.indptr[r + 1] as usize {
                    got.insert((r as i64, csr.indices[k]), csr.data[k]);
                }
            }
            model.retain(|_, v| *v != 0.0);
            assert_eq!(got, model, "{aggregate:?}");
        }
    }

    #[test]
    fn merged_places_name_the_union() {
        let a = ["a", "c", "d"];
        let b = ["b", "c", "e", "f"];
        let (a_at, b_at, n) = merge_sorted(&a.map(|s| s), &b.map(|s| s));
        assert_eq!((a_at, b_at, n), (vec![0, 2, 3], vec![1, 2, 4, 5], 6));
        let (a_at, b_at, n) = merge_sorted::<str>(&[], &["x"]);
        assert_eq!((a_at, b_at, n), (vec![], vec![0], 1));
    }

    #[test]
    fn search_sorted_is_numpy_searchsorted() {
        let keys = ["a", "b", "b", "c"];
        let mut data = Vec::new();
        let mut offsets = vec![0i64];
        for k in keys {
            data.extend_from_slice(k.as_bytes());
            offsets.push(data.len() as i64);
        }
        let at = |p: &str, right| search_sorted(&offsets, &data, p.as_bytes(), right).unwrap();
        assert_eq!((at("b", false), at("b", true)), (1, 3));
        assert_eq!((at("", false), at("z", false), at("bb", false)), (0, 4, 3));
        assert_eq!(search_sorted(&[0, 9], &data, b"a", false), None);
    }

    #[test]
    fn empty_input_gives_empty_rows() {
        let csr = build_csr(&[], &[], &[], 3, Aggregate::Min);
        assert_eq!(csr.indptr, [0, 0, 0, 0]);
        assert!(csr.indices.is_empty());
    }
}
