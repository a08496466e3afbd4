//! Packed kd-trees: the local index of one record segment (MDDS §V-B).
//!
//! A tree over `n` records with `d` indexing dimensions is an array of nodes,
//! each holding the position of its record in the segment and the array
//! positions of its left and right children (`-1`: none). Branching dimensions
//! follow round-robin from `initial_dimension`. Built by quickselect: at each
//! level the median record on that level's dimension becomes the node, smaller
//! or equal records go left, greater ones right.
//!
//! Values are compared in one total order that agrees with DuckDB's: `-0.0`
//! equals `0.0`, and NaN is one value above every other (so a range that is
//! unbounded above may include it).

/// A node of a packed kd-tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KdNode {
    /// Position of the node's record in the segment.
    pub record: u32,
    /// Index of the left child in the node array, or -1.
    pub left: i32,
    /// Index of the right child in the node array, or -1.
    pub right: i32,
}

/// A packed kd-tree: nodes in pre-order (the root first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedKdTree {
    pub initial_dimension: usize,
    pub dims: usize,
    pub nodes: Vec<KdNode>,
}

/// The comparison key of a value: -0.0 folded into 0.0, every NaN the same NaN.
#[inline]
pub fn key(x: f64) -> f64 {
    if x.is_nan() {
        f64::NAN
    } else {
        x + 0.0
    }
}

#[inline]
fn cmp(a: f64, b: f64) -> std::cmp::Ordering {
    key(a).total_cmp(&key(b))
}

/// Builds the packed kd-tree of `n = coords.len() / dims` records stored row-major.
///
/// # Panics
/// If `dims` is 0 or does not divide `coords.len()`, or there are more than
/// `i32::MAX` records (a segment is far smaller).
pub fn build(coords: &[f64], dims: usize, initial_dimension: usize) -> PackedKdTree {
    assert!(
        dims > 0 && coords.len().is_multiple_of(dims),
        "coords must hold n * dims values"
    );
    let n = coords.len() / dims;
    assert!(n < i32::MAX as usize, "too many records for one segment");
    let mut order: Vec<u32> = (0..n as u32).collect();
    let mut nodes = Vec::with_capacity(n);
    build_into(
        coords,
        dims,
        &mut order,
        initial_dimension % dims,
        &mut nodes,
    );
    PackedKdTree {
        initial_dimension: initial_dimension % dims,
        dims,
        nodes,
    }
}

fn build_into(
    coords: &[f64],
    dims: usize,
    part: &mut [u32],
    dim: usize,
    nodes: &mut Vec<KdNode>,
) -> i32 {
    if part.is_empty() {
        return -1;
    }
    let mid = part.len() / 2;
    let value = |r: u32| coords[r as usize * dims + dim];
    // quickselect: the median record at `mid`, smaller-or-equal before it, greater-or-equal after
    part.select_nth_unstable_by(mid, |&a, &b| cmp(value(a), value(b)));
    let pivot = value(part[mid]);
    // Records equal to the pivot may lie after `mid`: gather them right after it, then
    // put the node after them, so that the left subtree holds every record <= pivot
    // and a search sends only "greater than the pivot" to the right.
    let mut equal = 0;
    for i in mid + 1..part.len() {
        if cmp(value(part[i]), pivot) != std::cmp::Ordering::Greater {
            equal += 1;
            part.swap(mid + equal, i);
        }
    }
    part.swap(mid, mid + equal);
    let at = mid + equal;
    let record = part[at];
    let index = nodes.len();
    nodes.push(KdNode {
        record,
        left: -1,
        right: -1,
    });
    let next = (dim + 1) % dims;
    let (left, rest) = part.split_at_mut(at);
    let l = build_into(coords, dims, left, next, nodes);
    let r = build_into(coords, dims, &mut rest[1..], next, nodes);
    nodes[index].left = l;
    nodes[index].right = r;
    index as i32
}
/// A query box: per dimension an inclusive range of keys (`lo <= v <= hi` in the
/// total order; `f64::NAN` as `hi` takes NaN in, `f64::NEG_INFINITY` as `lo` opens it).
#[derive(Debug, Clone, PartialEq)]
pub struct QueryBox {
    pub lo: Vec<f64>,
    pub hi: Vec<f64>,
}

impl QueryBox {
    pub fn contains(&self, coords: &[f64], record: usize, dims: usize) -> bool {
        (0..dims).all(|d| {
            let v = coords[record * dims + d];
            cmp(v, self.lo[d]) != std::cmp::Ordering::Less
                && cmp(v, self.hi[d]) != std::cmp::Ordering::Greater
        })
    }
}

/// Positions of the records inside `query`, found through the tree (ascending order).
pub fn search(tree: &PackedKdTree, coords: &[f64], query: &QueryBox) -> Vec<u32> {
    let mut out = Vec::new();
    if tree.nodes.is_empty() {
        return out;
    }
    let dims = tree.dims;
    let mut stack: Vec<(i32, usize)> = vec![(0, tree.initial_dimension)];
    while let Some((index, dim)) = stack.pop() {
        let node = tree.nodes[index as usize];
        let record = node.record as usize;
        let pivot = coords[record * dims + dim];
        if query.contains(coords, record, dims) {
            out.push(node.record);
        }
        let next = (dim + 1) % dims;
        // left holds keys <= pivot, right keys > pivot
        if node.left >= 0 && cmp(query.lo[dim], pivot) != std::cmp::Ordering::Greater {
            stack.push((node.left, next));
        }
        if node.right >= 0 && cmp(query.hi[dim], pivot) == std::cmp::Ordering::Greater {
            stack.push((node.right, next));
        }
    }
    out.sort_unstable();
    out
}

/// Positions of the records inside `query`, by looking at every record (the sequential iterator).
pub fn scan(coords: &[f64], dims: usize, query: &QueryBox) -> Vec<u32> {
    let n = coords.len() / dims;
    (0..n)
        .filter(|&r| query.contains(coords, r, dims))
        .map(|r| r as u32)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::Rng;

    fn value(rng: &mut Rng) -> f64 {
        match rng.next() % 20 {
            0 => f64::NAN,
            1 => -0.0,
            2 => f64::INFINITY,
            3 => f64::NEG_INFINITY,
            _ => (rng.next() % 16) as f64 - 8.0, // many duplicates
        }
    }

    fn bound(rng: &mut Rng, upper: bool) -> f64 {
        match rng.next() % 8 {
            0 if upper => f64::NAN,
            0 => f64::NEG_INFINITY,
            1 => 0.0,
            _ => (rng.next() % 20) as f64 - 10.0,
        }
    }

    #[test]
    fn search_equals_scan_on_random_data() {
        let mut rng = Rng(0x9E3779B97F4A7C15);
        for case in 0..300 {
            let dims = 1 + case % 5;
            let n = (rng.next() % 200) as usize;
            let coords: Vec<f64> = (0..n * dims).map(|_| value(&mut rng)).collect();
            let tree = build(&coords, dims, case % 7);
            assert_eq!(tree.nodes.len(), n);
            for _ in 0..10 {
                let lo: Vec<f64> = (0..dims).map(|_| bound(&mut rng, false)).collect();
                let hi: Vec<f64> = (0..dims).map(|_| bound(&mut rng, true)).collect();
                let q = QueryBox { lo, hi };
                assert_eq!(
                    search(&tree, &coords, &q),
                    scan(&coords, dims, &q),
                    "case {case}"
                );
            }
        }
    }

    #[test]
    fn every_record_is_a_node_once() {
        let coords: Vec<f64> = (0..1000).map(|i| (i % 10) as f64).collect();
        let tree = build(&coords, 2, 1);
        let mut records: Vec<u32> = tree.nodes.iter().map(|n| n.record).collect();
        records.sort_unstable();
        assert_eq!(records, (0..500).collect::<Vec<u32>>());
        assert_eq!(tree.initial_dimension, 1);
    }

    #[test]
    fn nan_sorts_above_infinity_and_negative_zero_is_zero() {
        let coords = vec![f64::NAN, f64::INFINITY, -0.0, 0.0, 1.0];
        let tree = build(&coords, 1, 0);
        let all_above_inf = QueryBox {
            lo: vec![f64::INFINITY],
            hi: vec![f64::NAN],
        };
        assert_eq!(search(&tree, &coords, &all_above_inf), vec![0, 1]);
        let zero = QueryBox {
            lo: vec![0.0],
            hi: vec![0.0],
        };
        assert_eq!(search(&tree, &coords, &zero), vec![2, 3]);
        let below_inf = QueryBox {
            lo: vec![f64::NEG_INFINITY],
            hi: vec![f64::INFINITY],
        };
        assert_eq!(search(&tree, &coords, &below_inf), vec![1, 2, 3, 4]);
    }

    #[test]
    fn empty_tree_finds_nothing() {
        let tree = build(&[], 3, 0);
        assert!(tree.nodes.is_empty());
        let q = QueryBox {
            lo: vec![0.0; 3],
            hi: vec![1.0; 3],
        };
        assert!(search(&tree, &[], &q).is_empty());
    }
}
