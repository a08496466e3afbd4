//! Key orders: a segment's records sorted on a few indexing dimensions, the
//! composite index a B-tree would give (`CREATE INDEX ... (element_id, element_value)`).
//!
//! A kd-tree prunes only at the levels that split a dimension the query bounds,
//! so a query that pins one dimension and bounds one more of six (GHCN's
//! `element_id = x AND element_value > v`) still visits a large share of it.
//! In a key order such a query is one contiguous run, found by two binary
//! searches. A segment keeps its orders as lists of node indices of its tree,
//! so that they compare the tree's folded keys and their answers go through
//! the same record mapping as the tree's.

use std::cmp::Ordering;

use super::ordered;

/// Entries per fence: every this many entries of an order, its keys are kept beside
/// it, so that a binary search reads a small array and then one block of entries.
const FENCE: usize = 64;

/// The nodes of a tree sorted by their keys on `dims`, first dimension first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyOrder {
    pub dims: Vec<usize>,
    pub nodes: Vec<u32>,
    /// The keys (as ordered integers) on `dims` of every [`FENCE`]th node of `nodes`,
    /// `dims.len()` per fence. A search through `nodes` alone reads a node's keys
    /// far from the last at each step (a cache miss each, ~4 µs a segment of 58,000
    /// records in a cold cache); through the fences it misses in one block only.
    fences: Vec<i64>,
}

impl KeyOrder {
    /// The order of the `keys.len() / width` nodes (keys row-major, `width` per node,
    /// folded) on `dims`.
    ///
    /// # Panics
    /// If `dims` is empty or names a dimension not below `width`.
    pub fn build(keys: &[f64], width: usize, dims: &[usize]) -> KeyOrder {
        assert!(
            !dims.is_empty() && dims.iter().all(|&d| d < width),
            "an order's dimensions must be some of the tree's"
        );
        let n = keys.len() / width;
        let at = |node: usize, d: usize| ordered(keys[node * width + d]);
        // the first two dimensions' keys sorted beside each node (cache-friendly);
        // ties on them, if the order has more, settled by looking the rest up
        // (both as one u128, its halves the keys with the sign bit flipped, so that
        // unsigned order is theirs: one comparison instead of two)
        let second = dims.get(1).copied();
        let flip = |v: i64| (v as u64 ^ (1 << 63)) as u128;
        let mut packed: Vec<(u128, u32)> = (0..n)
            .map(|i| {
                let low = second.map_or(0, |d| flip(at(i, d)));
                ((flip(at(i, dims[0])) << 64) | low, i as u32)
            })
            .collect();
        packed.sort_unstable_by_key(|p| p.0);
        let mut nodes: Vec<u32> = packed.iter().map(|p| p.1).collect();
        if dims.len() > 2 {
            let rest = &dims[2..];
            let mut start = 0;
            while start < n {
                let mut end = start + 1;
                while end < n && packed[end].0 == packed[start].0 {
                    end += 1;
                }
                if end - start > 1 {
                    nodes[start..end].sort_unstable_by(|&a, &b| {
                        rest.iter()
                            .map(|&d| at(a as usize, d).cmp(&at(b as usize, d)))
                            .find(|o| o.is_ne())
                            .unwrap_or(Ordering::Equal)
                    });
                }
                start = end;
            }
        }
        let fences = (0..n)
            .step_by(FENCE)
            .flat_map(|p| dims.iter().map(move |&d| (p, d)))
            .map(|(p, d)| at(nodes[p] as usize, d))
            .collect();
        KeyOrder {
            dims: dims.to_vec(),
            nodes,
            fences,
        }
    }

    /// The run of `nodes` that may lie in the box `[lo, hi]` (bounds as ordered
    /// integers): the order's leading dimensions the box pins to one value, then
    /// the first it does not pin, taken as a range. Every node inside the box is
    /// in the run; the run may hold others (the box's other dimensions).
    pub fn run(&self, keys: &[f64], width: usize, lo: &[i64], hi: &[i64]) -> &[u32] {
        let mut used = 0;
        for &d in &self.dims {
            used += 1;
            if lo[d] != hi[d] {
                break;
            }
        }
        let lower: Vec<i64> = self.dims[..used].iter().map(|&d| lo[d]).collect();
        let upper: Vec<i64> = self.dims[..used].iter().map(|&d| hi[d]).collect();
        let start = self.count(keys, width, &lower, |o| o == Ordering::Less);
        let end = self.count(keys, width, &upper, |o| o != Ordering::Greater);
        &self.nodes[start..end.max(start)]
    }

    /// How many leading entries' keys compare with `bound` (on the first
    /// `bound.len()` dimensions) as `before` says: `before` holds for a prefix of
    /// the order. The fences narrow it to one block, searched through the keys.
    fn count(
        &self,
        keys: &[f64],
        width: usize,
        bound: &[i64],
        before: impl Fn(Ordering) -> bool,
    ) -> usize {
        let compare = |key: &dyn Fn(usize) -> i64| {
            bound
                .iter()
                .enumerate()
                .map(|(i, b)| key(i).cmp(b))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        };
        let k = self.dims.len();
        // fences passing: [0, blocks) is split at `passed`
        let (mut a, mut b) = (0, self.fences.len() / k);
        while a < b {
            let mid = (a + b) / 2;
            if before(compare(&|i| self.fences[mid * k + i])) {
                a = mid + 1;
            } else {
                b = mid;
            }
        }
        if a == 0 {
            return 0; // the first entry does not pass
        }
        // the entry at fence a - 1 passes, the one at fence a (if any) does not
        let from = (a - 1) * FENCE;
        let to = (a * FENCE).min(self.nodes.len());
        from + self.nodes[from..to].partition_point(|&node| {
            let row = node as usize * width;
            before(compare(&|i| ordered(keys[row + self.dims[i]])))
        })
    }

    /// Memory held, in bytes.
    pub fn nbytes(&self) -> usize {
        self.nodes.len() * 4 + self.fences.len() * 8
    }
}
