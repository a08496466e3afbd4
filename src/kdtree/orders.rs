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

/// The nodes of a tree sorted by their keys on `dims`, first dimension first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyOrder {
    pub dims: Vec<usize>,
    pub nodes: Vec<u32>,
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
        KeyOrder {
            dims: dims.to_vec(),
            nodes,
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
        let dims = &self.dims[..used];
        let compare = |node: u32, bound: &[i64]| {
            dims.iter()
                .map(|&d| ordered(keys[node as usize * width + d]))
                .zip(bound)
                .map(|(v, b)| v.cmp(b))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        };
        let lower: Vec<i64> = dims.iter().map(|&d| lo[d]).collect();
        let upper: Vec<i64> = dims.iter().map(|&d| hi[d]).collect();
        let start = self
            .nodes
            .partition_point(|&n| compare(n, &lower) == Ordering::Less);
        let end = self
            .nodes
            .partition_point(|&n| compare(n, &upper) != Ordering::Greater);
        &self.nodes[start..end.max(start)]
    }

    /// Memory held, in bytes.
    pub fn nbytes(&self) -> usize {
        self.nodes.len() * 4
    }
}
