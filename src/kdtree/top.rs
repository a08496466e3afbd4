//! The first records of a box in one dimension's order, across many segments: what
//! `ORDER BY d [DESC] LIMIT k` (or `SELECT DISTINCT ... ORDER BY d LIMIT k`) needs
//! of them, read from the segments' key orders instead of every record in the box.
//!
//! A B-tree on `(a, d)` answers `WHERE a = x ORDER BY d DESC LIMIT 3` by reading
//! backwards from the end of `a = x`; a key order on `(a, d)` is that B-tree's
//! sorted leaf level, so each segment's run for the box is read from its far end
//! in the same way. Across segments, a threshold (the `count`-th value met so far)
//! stops each walk at the first record below it.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use super::{ordered, Bounds, KeyOrder, NodeOrderedTree, QueryBox};

/// The order of `tree` whose run for a box is sorted on `dim`: its dimensions before
/// `dim` are all pinned by the box (one value each), so that within the run they are
/// constant and the run is sorted on `dim` next.
fn sorted_on<'a>(
    tree: &'a NodeOrderedTree,
    bounds: &Bounds,
    dim: usize,
) -> Option<(usize, &'a KeyOrder)> {
    tree.orders.iter().enumerate().find(|(_, order)| {
        match order.dims.iter().position(|&d| d == dim) {
            Some(at) => order.dims[..at]
                .iter()
                .all(|&d| bounds.lo[d] == bounds.hi[d]),
            None => false,
        }
    })
}

/// The ranks of the first `count` records (or of the first `count` distinct values)
/// met so far, where a larger rank comes earlier in the order.
enum Leaders {
    Rows(BinaryHeap<Reverse<i64>>),
    Values(BTreeSet<i64>),
}

impl Leaders {
    /// The rank a record needs to be among the leaders (ties included), once there
    /// are `count` of them.
    fn threshold(&self, count: usize) -> Option<i64> {
        match self {
            Leaders::Rows(heap) if heap.len() >= count => heap.peek().map(|r| r.0),
            Leaders::Values(set) if set.len() >= count => set.first().copied(),
            _ => None,
        }
    }

    fn add(&mut self, rank: i64, count: usize) {
        match self {
            Leaders::Rows(heap) => {
                heap.push(Reverse(rank));
                if heap.len() > count {
                    heap.pop();
                }
            }
            Leaders::Values(set) => {
                set.insert(rank);
                if set.len() > count {
                    set.pop_first();
                }
            }
        }
    }
}

/// Per tree, the position of the key order read, or None for a tree not read.
pub type Ways = Vec<Option<usize>>;

/// Per tree, the node indices of its records inside `query` that may be among the
/// first `count` in `dim`'s order (descending or ascending) over all `trees`: every
/// record inside the box whose key on `dim` is at or before the `count`-th key of
/// the box's records in that order (`distinct`: the `count`-th distinct key), so
/// that ties with it are all kept. Also per tree the position of the key order
/// read, or None for a tree skipped (its keys on `dim` all fall behind).
///
/// None when some tree has no key order sorted on `dim` under the box (its
/// dimensions before `dim` pinned), or `count` is 0.
pub fn top(
    trees: &[&NodeOrderedTree],
    query: &QueryBox,
    dim: usize,
    descending: bool,
    count: usize,
    distinct: bool,
) -> Option<(Vec<Vec<u32>>, Ways)> {
    if count == 0 {
        return None;
    }
    let bounds = Bounds::new(query);
    let orders: Vec<(usize, &KeyOrder)> = trees
        .iter()
        .map(|t| sorted_on(t, &bounds, dim))
        .collect::<Option<_>>()?;
    // ranks: the ordered key, reversed for an ascending order (`!` is monotone
    // decreasing on i64 and, unlike negation, cannot overflow)
    let rank = |k: i64| if descending { k } else { !k };
    // trees best first by the best key they hold on `dim` (no record ranks above it):
    // once one's best falls behind the threshold, so do all the rest
    let mut visit: Vec<(i64, usize)> = trees
        .iter()
        .enumerate()
        .map(|(t, tree)| {
            let best = if descending {
                tree.highest[dim]
            } else {
                tree.lowest[dim]
            };
            (rank(best), t)
        })
        .collect();
    visit.sort_unstable_by_key(|&(best, _)| Reverse(best));
    let mut leaders = if distinct {
        Leaders::Values(BTreeSet::new())
    } else {
        Leaders::Rows(BinaryHeap::with_capacity(count + 1))
    };
    let mut found: Vec<Vec<(u32, i64)>> = vec![Vec::new(); trees.len()];
    let mut ways = vec![None; trees.len()];
    for (best, t) in visit {
        if leaders.threshold(count).is_some_and(|th| best < th) {
            break;
        }
        let tree = trees[t];
        let dims = tree.tree.dims;
        let (k, order) = orders[t];
        ways[t] = Some(k);
        let run = order.run(&tree.keys, dims, &bounds.lo, &bounds.hi);
        let walk: Box<dyn Iterator<Item = &u32>> = if descending {
            Box::new(run.iter().rev())
        } else {
            Box::new(run.iter())
        };
        for &node in walk {
            let node = node as usize;
            let r = rank(ordered(tree.keys[node * dims + dim]));
            if leaders.threshold(count).is_some_and(|th| r < th) {
                break;
            }
            if bounds.inside(&tree.keys, dims, node) {
                leaders.add(r, count);
                found[t].push((node as u32, r));
            }
        }
    }
    let threshold = leaders.threshold(count);
    let kept = found
        .into_iter()
        .map(|nodes| {
            nodes
                .into_iter()
                .filter(|&(_, r)| threshold.is_none_or(|th| r >= th))
                .map(|(node, _)| node)
                .collect()
        })
        .collect();
    Some((kept, ways))
}
