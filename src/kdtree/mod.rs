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
    // keys folded once (-0.0 to 0.0, one NaN), so that comparisons are plain total_cmp
    let keys: Vec<f64> = coords.iter().map(|&v| key(v)).collect();
    let mut order: Vec<u32> = (0..n as u32).collect();
    let mut nodes = Vec::with_capacity(n);
    let mut scratch = Vec::with_capacity(n);
    build_into(
        &keys,
        dims,
        &mut order,
        initial_dimension % dims,
        &mut nodes,
        &mut scratch,
    );
    PackedKdTree {
        initial_dimension: initial_dimension % dims,
        dims,
        nodes,
    }
}

fn build_into(
    keys: &[f64],
    dims: usize,
    part: &mut [u32],
    dim: usize,
    nodes: &mut Vec<KdNode>,
    scratch: &mut Vec<(f64, u32)>,
) -> i32 {
    if part.is_empty() {
        return -1;
    }
    let at = split(keys, dims, part, dim, scratch);
    let record = part[at];
    let index = nodes.len();
    nodes.push(KdNode {
        record,
        left: -1,
        right: -1,
    });
    let next = (dim + 1) % dims;
    let (left, rest) = part.split_at_mut(at);
    let l = build_into(keys, dims, left, next, nodes, scratch);
    let r = build_into(keys, dims, &mut rest[1..], next, nodes, scratch);
    nodes[index].left = l;
    nodes[index].right = r;
    index as i32
}

/// One level of the build: reorders the non-empty `part` so that the node's record
/// (the median on `dim`) is at the returned position, every record before it has a
/// key `<=` the node's and every record after it a greater one.
fn split(
    keys: &[f64],
    dims: usize,
    part: &mut [u32],
    dim: usize,
    scratch: &mut Vec<(f64, u32)>,
) -> usize {
    let mid = part.len() / 2;
    // quickselect on (key, record) pairs copied side by side: the selection then
    // reads memory in order instead of jumping through record positions
    scratch.clear();
    scratch.extend(part.iter().map(|&r| (keys[r as usize * dims + dim], r)));
    scratch.select_nth_unstable_by(mid, |a, b| a.0.total_cmp(&b.0));
    let pivot = scratch[mid].0;
    // Records equal to the pivot may lie after `mid`: gather them right after it, then
    // put the node after them, so that the left subtree holds every record <= pivot
    // and a search sends only "greater than the pivot" to the right.
    let mut equal = 0;
    for i in mid + 1..scratch.len() {
        if scratch[i].0.total_cmp(&pivot) != std::cmp::Ordering::Greater {
            equal += 1;
            scratch.swap(mid + equal, i);
        }
    }
    scratch.swap(mid, mid + equal);
    for (slot, &(_, r)) in part.iter_mut().zip(scratch.iter()) {
        *slot = r;
    }
    mid + equal
}

/// One segment built from a chunk: its kd-tree (over its records in segment order)
/// and its bounding box.
pub struct BuiltSegment {
    pub tree: NodeOrderedTree,
    pub lo: Vec<f64>,
    pub hi: Vec<f64>,
}

/// The segments of a chunk whose records are labelled `labels[r] < initial.len()`.
///
/// Returns the chunk's record positions grouped by segment (a stable counting
/// sort: within a segment in chunk order), where each segment's group starts
/// (`bounds`, one more entry than segments), and each segment built in parallel:
/// its packed kd-tree, starting from dimension `initial[s]`, with a key order
/// on each of `orders`, and its box.
///
/// # Panics
/// If a label is not below `initial.len()` or `coords` is not `labels.len() * dims` values.
pub fn build_segments(
    coords: &[f64],
    dims: usize,
    labels: &[u32],
    initial: &[usize],
    orders: &[Vec<usize>],
) -> (Vec<u32>, Vec<usize>, Vec<BuiltSegment>) {
    use rayon::prelude::*;
    assert_eq!(
        coords.len(),
        labels.len() * dims,
        "coords must hold n * dims values"
    );
    let count = initial.len();
    let mut bounds = vec![0usize; count + 1];
    for &l in labels {
        bounds[l as usize + 1] += 1;
    }
    for s in 0..count {
        bounds[s + 1] += bounds[s];
    }
    let mut next = bounds.clone();
    let mut order = vec![0u32; labels.len()];
    for (r, &l) in labels.iter().enumerate() {
        order[next[l as usize]] = r as u32;
        next[l as usize] += 1;
    }
    let segments = crate::pool::install(|| {
        (0..count)
            .into_par_iter()
            .map(|s| {
                let rows = &order[bounds[s]..bounds[s + 1]];
                let mut own = Vec::with_capacity(rows.len() * dims);
                for &r in rows {
                    own.extend_from_slice(&coords[r as usize * dims..(r as usize + 1) * dims]);
                }
                let tree =
                    NodeOrderedTree::new(build(&own, dims, initial[s]), &own).with_orders(orders);
                let (lo, hi) = tree.bounding_box();
                BuiltSegment { tree, lo, hi }
            })
            .collect()
    });
    (order, bounds, segments)
}
/// Kd-tree partitioning (MDDS §IV-B): divide the records of row-major `coords`
/// into segments of at most `max_records` by the node counts of the chunk's kd-tree
/// (built as [`build`] builds it, from dimension 0).
///
/// From the root, in pre-order, the larger child is visited first (ties: the left
/// one); a subtree whose remaining node count fits becomes a segment and is
/// detached, and what is left of a node's subtree (the node and its other child's
/// subtree) becomes a segment once it fits. Returns, per record, its segment
/// number, and per segment the depth of its root (the dimension to start its own
/// kd-tree from).
///
/// Only the levels above the segments are built: a subtree that fits is never
/// split further, as its records go to one segment whatever its shape. A node
/// with its records of a subtree lies next to them in the build's order, so every
/// segment is one run of that order. The labels are those of partitioning the
/// whole tree (a test checks that against the full build).
///
/// # Panics
/// If `max_records` is 0, or `dims` is 0 or does not divide `coords.len()`.
pub fn partition(coords: &[f64], dims: usize, max_records: usize) -> (Vec<u32>, Vec<u32>) {
    assert!(max_records > 0, "a segment holds at least one record");
    assert!(
        dims > 0 && coords.len().is_multiple_of(dims),
        "coords must hold n * dims values"
    );
    let n = coords.len() / dims;
    let keys: Vec<f64> = coords.iter().map(|&v| key(v)).collect();
    let mut order: Vec<u32> = (0..n as u32).collect();
    let mut state = Partition {
        keys: &keys,
        dims,
        max_records,
        scratch: Vec::new(),
        labels: vec![0u32; n],
        roots: Vec::new(),
    };
    if n > 0 {
        state.visit(&mut order, 0, 0);
    }
    (state.labels, state.roots)
}

struct Partition<'a> {
    keys: &'a [f64],
    dims: usize,
    max_records: usize,
    scratch: Vec<(f64, u32)>,
    labels: Vec<u32>, // per record
    roots: Vec<u32>,  // per segment: the depth of its root
}

impl Partition<'_> {
    fn visit(&mut self, part: &mut [u32], dim: usize, depth: u32) {
        if part.len() <= self.max_records {
            self.emit(part, depth);
            return;
        }
        let at = split(self.keys, self.dims, part, dim, &mut self.scratch);
        let next = (dim + 1) % self.dims;
        let right_larger = part.len() - at - 1 > at;
        if right_larger {
            self.visit(&mut part[at + 1..], next, depth + 1);
            if at < self.max_records {
                // the node and the whole left subtree: part[..=at]
                self.emit(&part[..=at], depth);
                return;
            }
            self.visit(&mut part[..at], next, depth + 1);
        } else {
            self.visit(&mut part[..at], next, depth + 1);
            if part.len() - at - 1 < self.max_records {
                // the node and the whole right subtree: part[at..]
                self.emit(&part[at..], depth);
                return;
            }
            self.visit(&mut part[at + 1..], next, depth + 1);
        }
        self.emit(&part[at..=at], depth);
    }

    fn emit(&mut self, records: &[u32], depth: u32) {
        let segment = self.roots.len() as u32;
        self.roots.push(depth);
        for &r in records {
            self.labels[r as usize] = segment;
        }
    }
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

/// The depth down to which the `auto` iterator walks a tree to choose how to search it.
pub const PROBE_DEPTH: u32 = 8;
/// A key order's run of at most this many nodes is searched without weighing the
/// tree: reading it costs less than the walk of the tree's top levels that would
/// weigh it (which visits up to 2^[`PROBE_DEPTH`] nodes).
pub const TINY_RUN: usize = 64;

/// The `auto` iterator looks at every node when a descent would enter at least
/// 1 / this of the subtrees at [`PROBE_DEPTH`] (chosen by measuring the MDDS queries).
pub const SEQUENTIAL_SHARE_DENOMINATOR: usize = 3;

/// A packed kd-tree with each node's keys copied next to each other in node order.
///
/// `search` reads `keys[node * dims + dim]` instead of going through the
/// record position to the segment's rows: a descent touches memory in the
/// order it was laid out, and only the dimensions the query bounds are
/// checked. The answers are those of [`scan`] over the rows.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeOrderedTree {
    pub tree: PackedKdTree,
    pub keys: Vec<f64>,
    /// The segment's key orders (its stream's `indexes`), searched instead of the
    /// tree where they find a query's records among fewer nodes.
    pub orders: Vec<KeyOrder>,
    /// Per dimension the smallest and the largest key, as ordered integers ([`ordered`]):
    /// what a search for the first records in a dimension's order skips a tree by.
    pub lowest: Vec<i64>,
    pub highest: Vec<i64>,
}

impl NodeOrderedTree {
    /// The tree over `coords` (row-major, `dims` per record) with its keys in node order.
    pub fn new(tree: PackedKdTree, coords: &[f64]) -> Self {
        let dims = tree.dims;
        let mut keys = Vec::with_capacity(tree.nodes.len() * dims);
        for node in &tree.nodes {
            let at = node.record as usize * dims;
            keys.extend(coords[at..at + dims].iter().map(|&v| key(v)));
        }
        let mut lowest = vec![i64::MAX; dims];
        let mut highest = vec![i64::MIN; dims];
        for row in keys.chunks_exact(dims.max(1)) {
            for d in 0..dims {
                let k = ordered(row[d]);
                lowest[d] = lowest[d].min(k);
                highest[d] = highest[d].max(k);
            }
        }
        NodeOrderedTree {
            tree,
            keys,
            orders: Vec::new(),
            lowest,
            highest,
        }
    }

    /// This tree with key orders on each of `orders` (lists of its dimensions).
    ///
    /// # Panics
    /// If an order is empty or names a dimension the tree does not have.
    pub fn with_orders(mut self, orders: &[Vec<usize>]) -> Self {
        let dims = self.tree.dims;
        self.orders = orders
            .iter()
            .map(|o| KeyOrder::build(&self.keys, dims, o))
            .collect();
        self
    }

    /// Per dimension the smallest and the largest key (a segment's box): NaN, if
    /// present, is the largest (a dimension of only NaN has NaN as both); -0.0 is 0.0.
    /// An empty tree's box is NaN on both sides.
    pub fn bounding_box(&self) -> (Vec<f64>, Vec<f64>) {
        if self.tree.nodes.is_empty() {
            let nan = vec![f64::NAN; self.tree.dims];
            return (nan.clone(), nan);
        }
        let unordered = |k: &i64| f64::from_bits(ordered_bits(*k) as u64);
        (
            self.lowest.iter().map(unordered).collect(),
            self.highest.iter().map(unordered).collect(),
        )
    }

    /// Memory held by the key orders, in bytes.
    pub fn orders_nbytes(&self) -> usize {
        self.orders.iter().map(KeyOrder::nbytes).sum()
    }

    /// Positions of the records inside `query` (ascending): through the tree, or by
    /// looking at every node when `sequential` (MDDS's sequential iterator).
    pub fn search(&self, query: &QueryBox, sequential: bool) -> Vec<u32> {
        self.records(&self.search_nodes(query, sequential))
    }

    /// The record positions of nodes `found`, ascending.
    pub fn records(&self, found: &[u32]) -> Vec<u32> {
        let nodes = &self.tree.nodes;
        let n = nodes.len();
        if found.len() < n / 32 {
            let mut out: Vec<u32> = found.iter().map(|&i| nodes[i as usize].record).collect();
            out.sort_unstable();
            return out;
        }
        // many found: mark them in a bitmap and read it in order, O(n / 64 + found)
        // where sorting is O(found log found)
        let mut marks = vec![0u64; n.div_ceil(64)];
        for &i in found {
            let r = nodes[i as usize].record as usize;
            marks[r / 64] |= 1 << (r % 64);
        }
        let mut out = Vec::with_capacity(found.len());
        for (w, &word) in marks.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                out.push((w * 64) as u32 + bits.trailing_zeros());
                bits &= bits - 1;
            }
        }
        out
    }

    /// The share of the subtrees at depth [`PROBE_DEPTH`] a descent for `query`
    /// would enter (walking the tree down to that depth only): about the share of
    /// the nodes it would visit. None for a tree too small to tell.
    pub fn entered_share(&self, query: &QueryBox) -> Option<f64> {
        let nodes = &self.tree.nodes;
        let cells = 1usize << PROBE_DEPTH;
        if nodes.len() < 2 * cells {
            return None; // a small tree: its descent is cheap whatever it enters
        }
        let dims = self.tree.dims;
        let mut entered = 0usize;
        let mut stack: Vec<(i32, usize, u32)> = vec![(0, self.tree.initial_dimension, 0)];
        while let Some((index, dim, depth)) = stack.pop() {
            if depth == PROBE_DEPTH {
                entered += 1;
                continue;
            }
            let node = nodes[index as usize];
            let pivot = self.keys[index as usize * dims + dim];
            let next = (dim + 1) % dims;
            if node.left >= 0 && cmp(query.lo[dim], pivot) != std::cmp::Ordering::Greater {
                stack.push((node.left, next, depth + 1));
            }
            if node.right >= 0 && cmp(query.hi[dim], pivot) == std::cmp::Ordering::Greater {
                stack.push((node.right, next, depth + 1));
            }
        }
        Some(entered as f64 / cells as f64)
    }

    /// Node indices of the records inside `query` by the cheapest way this tree
    /// estimates (the `auto` iterator), and which way that was.
    ///
    /// - A key order's run of at most [`TINY_RUN`] nodes is taken at once.
    /// - Else the tree's top levels tell how much of it a descent would visit
    ///   ([`Self::entered_share`]). A descent costs more per node than the pass over
    ///   every node, which reads them in order; so the pass wins from a share of
    ///   1 / [`SEQUENTIAL_SHARE_DENOMINATOR`] (a query that keeps many records, or
    ///   bounds few of the fields: a descent prunes only at the levels splitting
    ///   those). A run's nodes are read out of order, as a descent's are: the
    ///   shortest run is taken when it is shorter than both.
    pub fn search_chosen(&self, query: &QueryBox) -> (Vec<u32>, Searched) {
        let dims = self.tree.dims;
        let bounds = Bounds::new(query);
        // the shortest run of an order whose first field the box bounds (the others'
        // runs are the whole tree); a tiny one ends the looking
        let mut shortest: Option<(usize, &[u32])> = None;
        for (k, order) in self.orders.iter().enumerate() {
            if !bounds.restricts(order.dims[0]) {
                continue;
            }
            let run = order.run(&self.keys, dims, &bounds.lo, &bounds.hi);
            if shortest.is_none_or(|(_, best)| run.len() < best.len()) {
                shortest = Some((k, run));
            }
            if run.len() <= TINY_RUN {
                break;
            }
        }
        let tiny = shortest.is_some_and(|(_, run)| run.len() <= TINY_RUN);
        // (the walk that weighs the tree is skipped for a tiny run: it may cost more)
        let share = if tiny {
            None
        } else {
            self.entered_share(query)
        };
        let n = self.tree.nodes.len() as f64;
        let pass = n / SEQUENTIAL_SHARE_DENOMINATOR as f64; // in node visits
        if let Some((k, run)) = shortest {
            let cheaper = share.is_some_and(|share| (run.len() as f64) < (share * n).min(pass));
            if tiny || cheaper {
                let found = run
                    .iter()
                    .copied()
                    .filter(|&i| bounds.inside(&self.keys, dims, i as usize))
                    .collect();
                return (found, Searched::Order(k));
            }
        }
        if share.is_some_and(|share| share * n >= pass) {
            (self.search_nodes(query, true), Searched::Sequential)
        } else {
            (self.search_nodes(query, false), Searched::Tree)
        }
    }

    /// Whether one of `found` (node indices from [`Self::search_nodes`]) has the
    /// key of `value` on dimension `dim` (-0.0 and 0.0 are one key, NaN is one key,
    /// as DuckDB compares them).
    pub fn holds(&self, found: &[u32], dim: usize, value: f64) -> bool {
        let dims = self.tree.dims;
        let wanted = key(value);
        found
            .iter()
            .any(|&i| cmp(self.keys[i as usize * dims + dim], wanted) == std::cmp::Ordering::Equal)
    }

    /// Node indices of the records inside `query`, in the order they were met.
    pub fn search_nodes(&self, query: &QueryBox, sequential: bool) -> Vec<u32> {
        let dims = self.tree.dims;
        let nodes = &self.tree.nodes;
        let bounds = Bounds::new(query);
        let (lo, hi) = (&bounds.lo, &bounds.hi);
        let inside = |node: usize| bounds.inside(&self.keys, dims, node);
        let mut out = Vec::new();
        if sequential {
            out.extend((0..nodes.len()).filter(|&i| inside(i)).map(|i| i as u32));
        } else if !nodes.is_empty() {
            let mut stack: Vec<(i32, usize)> = vec![(0, self.tree.initial_dimension)];
            while let Some((index, dim)) = stack.pop() {
                let index = index as usize;
                let node = nodes[index];
                if inside(index) {
                    out.push(index as u32);
                }
                let pivot = ordered(self.keys[index * dims + dim]);
                let next = (dim + 1) % dims;
                // left holds keys <= pivot, right keys > pivot
                if node.left >= 0 && lo[dim] <= pivot {
                    stack.push((node.left, next));
                }
                if node.right >= 0 && hi[dim] > pivot {
                    stack.push((node.right, next));
                }
            }
        }
        out
    }
}

/// How [`NodeOrderedTree::search_chosen`] searched a tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Searched {
    Tree,
    Sequential,
    /// through its key order of this position
    Order(usize),
}

/// A query box's bounds compared as integers in the total order ([`ordered`]): the
/// keys are folded already, the bounds are folded once here, and each comparison
/// is then two integer compares instead of two folds and a `total_cmp`.
struct Bounds {
    lo: Vec<i64>,
    hi: Vec<i64>,
    /// the dimensions the box restricts, with their bounds: the others need no check
    bounded: Vec<(usize, i64, i64)>,
}

impl Bounds {
    fn new(query: &QueryBox) -> Self {
        let (lo, hi) = Self::ordered(query);
        let bounded = (0..lo.len())
            .filter(|&d| query.lo[d] != f64::NEG_INFINITY || !query.hi[d].is_nan())
            .map(|d| (d, lo[d], hi[d]))
            .collect();
        Bounds { lo, hi, bounded }
    }

    /// Whether the box restricts dimension `d` at all.
    fn restricts(&self, d: usize) -> bool {
        self.bounded.iter().any(|&(b, _, _)| b == d)
    }

    fn ordered(query: &QueryBox) -> (Vec<i64>, Vec<i64>) {
        let lo = query.lo.iter().map(|&v| ordered(key(v))).collect();
        let hi = query.hi.iter().map(|&v| ordered(key(v))).collect();
        (lo, hi)
    }

    /// Whether node `node`'s keys (row `node` of `keys`, `dims` wide) lie in the box.
    #[inline]
    fn inside(&self, keys: &[f64], dims: usize, node: usize) -> bool {
        let row = &keys[node * dims..node * dims + dims];
        self.bounded.iter().all(|&(d, l, h)| {
            let v = ordered(row[d]);
            l <= v && v <= h
        })
    }
}

/// A folded key as an integer in the same order as `total_cmp` (NaN, folded to one
/// positive NaN, above +inf): the sign bit flips the rest for negative values.
#[inline]
fn ordered(folded: f64) -> i64 {
    ordered_bits(folded.to_bits() as i64)
}

/// The flip [`ordered`] makes of a key's bits; it is its own inverse (the sign bit,
/// which decides it, stays), so it also turns an ordered integer back into the bits.
#[inline]
fn ordered_bits(bits: i64) -> i64 {
    bits ^ ((((bits >> 63) as u64) >> 1) as i64)
}

/// Positions of the records inside `query`, by looking at every record (the sequential iterator).
pub fn scan(coords: &[f64], dims: usize, query: &QueryBox) -> Vec<u32> {
    let n = coords.len() / dims;
    (0..n)
        .filter(|&r| query.contains(coords, r, dims))
        .map(|r| r as u32)
        .collect()
}

mod orders;
mod top;
pub use orders::KeyOrder;
pub use top::top;

#[cfg(test)]
mod tests;
