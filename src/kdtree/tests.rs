//! The packed kd-tree against a plain scan, and its partitioning against the whole tree's.

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
            let ordered = NodeOrderedTree::new(tree.clone(), &coords);
            let expected = scan(&coords, dims, &q);
            assert_eq!(ordered.search(&q, false), expected, "case {case}");
            assert_eq!(ordered.search(&q, true), expected, "case {case}");
            // a probe is held when a found record has the value (NaN = NaN, -0.0 = 0.0)
            let found = ordered.search_nodes(&q, rng.next().is_multiple_of(2));
            let dim = (rng.next() as usize) % dims;
            let probe = value(&mut rng);
            let same = |v: f64| v == probe || (v.is_nan() && probe.is_nan());
            let want = expected
                .iter()
                .any(|&r| same(coords[r as usize * dims + dim]));
            assert_eq!(ordered.holds(&found, dim, probe), want, "case {case}");
        }
    }
}

#[test]
fn built_segments_group_by_label_and_answer_like_a_scan() {
    let mut rng = Rng(0x0DDB_A11C_0FFE_E123);
    for case in 0..100 {
        let dims = 1 + case % 4;
        let count = 1 + case % 6;
        let n = (rng.next() % 300) as usize;
        let coords: Vec<f64> = (0..n * dims).map(|_| value(&mut rng)).collect();
        let labels: Vec<u32> = (0..n).map(|_| (rng.next() % count as u64) as u32).collect();
        let initial: Vec<usize> = (0..count).map(|s| s % dims).collect();
        let (order, bounds, segments) = build_segments(&coords, dims, &labels, &initial, &[]);
        assert_eq!(bounds.len(), count + 1);
        assert_eq!(bounds[count], n);
        for (s, seg) in segments.iter().enumerate() {
            let rows = &order[bounds[s]..bounds[s + 1]];
            assert!(rows.windows(2).all(|w| w[0] < w[1]), "stable: chunk order");
            assert!(rows.iter().all(|&r| labels[r as usize] == s as u32));
            let own: Vec<f64> = rows
                .iter()
                .flat_map(|&r| coords[r as usize * dims..(r as usize + 1) * dims].to_vec())
                .collect();
            assert_eq!(seg.tree.tree.initial_dimension, initial[s]);
            for _ in 0..5 {
                let lo: Vec<f64> = (0..dims).map(|_| bound(&mut rng, false)).collect();
                let hi: Vec<f64> = (0..dims).map(|_| bound(&mut rng, true)).collect();
                let q = QueryBox { lo, hi };
                assert_eq!(
                    seg.tree.search(&q, false),
                    scan(&own, dims, &q),
                    "case {case}"
                );
            }
            if !rows.is_empty() {
                // the box contains every record of the segment
                let q = QueryBox {
                    lo: seg
                        .lo
                        .iter()
                        .map(|&v| if v.is_nan() { f64::NEG_INFINITY } else { v })
                        .collect(),
                    hi: seg.hi.clone(),
                };
                assert_eq!(seg.tree.search(&q, true).len(), rows.len());
            }
        }
    }
}

#[test]
fn bounding_box_puts_nan_on_top_and_folds_negative_zero() {
    let bounding_box = |coords: &[f64], dims: usize| {
        NodeOrderedTree::new(build(coords, dims, 0), coords).bounding_box()
    };
    let coords = vec![-0.0, f64::NAN, 2.0, 1.0, f64::NEG_INFINITY, 3.0];
    let (lo, hi) = bounding_box(&coords, 2);
    assert_eq!(lo[0].to_bits(), f64::NEG_INFINITY.to_bits());
    assert_eq!(hi[0], 2.0);
    assert_eq!(lo[1], 1.0);
    assert!(hi[1].is_nan());
    let (lo, hi) = bounding_box(&[f64::NAN, -0.0], 2);
    assert!(lo[0].is_nan() && hi[0].is_nan());
    assert_eq!(lo[1].to_bits(), 0.0f64.to_bits());
    assert_eq!(hi[1].to_bits(), 0.0f64.to_bits());
    let (lo, hi) = bounding_box(&[], 2);
    assert!(lo.iter().chain(&hi).all(|v| v.is_nan()));
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
    let ordered = NodeOrderedTree::new(build(&coords, 1, 0), &coords);
    let all_above_inf = QueryBox {
        lo: vec![f64::INFINITY],
        hi: vec![f64::NAN],
    };
    assert_eq!(ordered.search(&all_above_inf, false), vec![0, 1]);
    let zero = QueryBox {
        lo: vec![0.0],
        hi: vec![0.0],
    };
    assert_eq!(ordered.search(&zero, false), vec![2, 3]);
    let below_inf = QueryBox {
        lo: vec![f64::NEG_INFINITY],
        hi: vec![f64::INFINITY],
    };
    assert_eq!(ordered.search(&below_inf, false), vec![1, 2, 3, 4]);
}

/// Partitioning by the whole tree, as MDDS describes it: the reference the
/// partial build of [`partition`] must agree with.
fn partition_of_full_tree(tree: &PackedKdTree, max_records: usize) -> (Vec<u32>, Vec<u32>) {
    let n = tree.nodes.len();
    let mut count = vec![0usize; n];
    for i in (0..n).rev() {
        let node = tree.nodes[i];
        count[i] = 1 + [node.left, node.right]
            .iter()
            .filter(|&&c| c >= 0)
            .map(|&c| count[c as usize])
            .sum::<usize>();
    }
    let mut label = vec![0u32; n];
    let mut detached = vec![false; n];
    let mut roots = Vec::new();
    fn emit(
        tree: &PackedKdTree,
        node: usize,
        depth: u32,
        label: &mut [u32],
        detached: &mut [bool],
        count: &mut [usize],
        roots: &mut Vec<u32>,
    ) {
        let segment = roots.len() as u32;
        roots.push(depth);
        let mut stack = vec![node];
        while let Some(i) = stack.pop() {
            label[i] = segment;
            detached[i] = true;
            let n = tree.nodes[i];
            for c in [n.left, n.right] {
                if c >= 0 && !detached[c as usize] {
                    stack.push(c as usize);
                }
            }
        }
        count[node] = 0;
    }
    #[allow(clippy::too_many_arguments)]
    fn visit(
        tree: &PackedKdTree,
        node: usize,
        depth: u32,
        max: usize,
        label: &mut [u32],
        detached: &mut [bool],
        count: &mut [usize],
        roots: &mut Vec<u32>,
    ) {
        if count[node] <= max {
            emit(tree, node, depth, label, detached, count, roots);
            return;
        }
        let n = tree.nodes[node];
        let live = |c: i32, d: &[bool]| (c >= 0 && !d[c as usize]).then_some(c as usize);
        let size = |c: Option<usize>, count: &[usize]| c.map_or(0, |c| count[c]);
        let (l, r) = (live(n.left, detached), live(n.right, detached));
        let (first, second) = if size(r, count) > size(l, count) {
            (r, l)
        } else {
            (l, r)
        };
        for child in [first, second].into_iter().flatten() {
            visit(tree, child, depth + 1, max, label, detached, count, roots);
            count[node] =
                1 + size(live(n.left, detached), count) + size(live(n.right, detached), count);
            if count[node] <= max {
                break;
            }
        }
        emit(tree, node, depth, label, detached, count, roots);
    }
    if n > 0 {
        visit(
            tree,
            0,
            0,
            max_records,
            &mut label,
            &mut detached,
            &mut count,
            &mut roots,
        );
    }
    let mut by_record = vec![0u32; n];
    for (i, node) in tree.nodes.iter().enumerate() {
        by_record[node.record as usize] = label[i];
    }
    (by_record, roots)
}

#[test]
fn partition_agrees_with_partitioning_the_whole_tree() {
    let mut rng = Rng(0x5EED_F00D_7EE5);
    for case in 0..300 {
        let dims = 1 + case % 4;
        let n = (rng.next() % 700) as usize;
        // few distinct values in some cases: ties at the pivots
        let coords: Vec<f64> = (0..n * dims)
            .map(|_| {
                if case % 3 == 0 {
                    (rng.next() % 4) as f64
                } else {
                    value(&mut rng)
                }
            })
            .collect();
        let max = 1 + (rng.next() % 80) as usize;
        assert_eq!(
            partition(&coords, dims, max),
            partition_of_full_tree(&build(&coords, dims, 0), max),
            "case {case}"
        );
    }
}

#[test]
fn auto_iterator_chooses_by_the_top_levels_and_finds_what_a_scan_finds() {
    let mut rng = Rng(0xA070_17E5_0000_0001);
    let (n, dims) = (4000, 6);
    // dimension 0 takes 10 values (an element id); the others are spread
    let coords: Vec<f64> = (0..n * dims)
        .map(|i| {
            if i % dims == 0 {
                (rng.next() % 10) as f64
            } else {
                (rng.next() % 1_000_000) as f64
            }
        })
        .collect();
    let ordered = NodeOrderedTree::new(build(&coords, dims, 0), &coords);
    let unbounded = |d: usize, lo: f64, hi: f64| {
        let mut q = QueryBox {
            lo: vec![f64::NEG_INFINITY; dims],
            hi: vec![f64::NAN; dims],
        };
        q.lo[d] = lo;
        q.hi[d] = hi;
        q
    };
    // half the range of one of six dimensions: the descent would enter half the
    // subtrees at depth 8, pruning only at the levels that split dimension 2
    let half = unbounded(2, 0.0, 500_000.0);
    let way = |tree: &NodeOrderedTree, q: &QueryBox| tree.search_chosen(q).1;
    assert_eq!(way(&ordered, &half), Searched::Sequential);
    // a narrow range on every dimension: it enters few
    let narrow = QueryBox {
        lo: vec![3.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        hi: vec![3.0, 300_000.0, 300_000.0, 300_000.0, 300_000.0, 300_000.0],
    };
    assert_eq!(way(&ordered, &narrow), Searched::Tree);
    for q in [half, narrow, unbounded(0, 3.0, 3.0)] {
        let expected = scan(&coords, dims, &q);
        let (found, how) = ordered.search_chosen(&q);
        assert_eq!(ordered.records(&found), expected);
        let sequential = how == Searched::Sequential;
        assert_eq!(ordered.search(&q, sequential), expected);
        assert_eq!(ordered.search(&q, !sequential), expected);
    }
    // a small tree is always descended
    let small = NodeOrderedTree::new(build(&coords[..100 * dims], dims, 0), &coords[..100 * dims]);
    assert_eq!(way(&small, &unbounded(0, 3.0, 3.0)), Searched::Tree);
}

#[test]
fn partition_covers_every_record_once_within_the_limit() {
    let mut rng = Rng(0x1234_5678_9ABC_DEF1);
    for case in 0..200 {
        let dims = 1 + case % 4;
        let n = (rng.next() % 500) as usize;
        let coords: Vec<f64> = (0..n * dims).map(|_| value(&mut rng)).collect();
        let max = 1 + (rng.next() % 64) as usize;
        let (labels, roots) = partition(&coords, dims, max);
        assert_eq!(labels.len(), n);
        let mut sizes = vec![0usize; roots.len()];
        for &l in &labels {
            sizes[l as usize] += 1;
        }
        assert!(
            sizes.iter().all(|&s| (1..=max).contains(&s)),
            "case {case}: {sizes:?} > {max}"
        );
    }
}

#[test]
fn partition_of_distinct_values_gives_disjoint_ranges() {
    // what the scheme is for: segments that overlap little (here: not at all)
    let mut rng = Rng(42);
    let mut values: Vec<f64> = (0..2000).map(|i| i as f64).collect();
    for i in (1..values.len()).rev() {
        values.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    let (labels, roots) = partition(&values, 1, 100);
    let mut ranges = vec![(f64::INFINITY, f64::NEG_INFINITY); roots.len()];
    for (r, &l) in labels.iter().enumerate() {
        let range = &mut ranges[l as usize];
        *range = (range.0.min(values[r]), range.1.max(values[r]));
    }
    ranges.sort_by(|a, b| a.0.total_cmp(&b.0));
    for pair in ranges.windows(2) {
        assert!(pair[0].1 < pair[1].0, "{pair:?} overlap");
    }
}

#[test]
fn partition_of_a_small_chunk_is_one_segment() {
    let coords: Vec<f64> = (0..40).map(|i| i as f64).collect();
    let (labels, roots) = partition(&coords, 2, 100);
    assert!(labels.iter().all(|&l| l == 0));
    assert_eq!(roots, vec![0]);
}

#[test]
fn empty_tree_finds_nothing() {
    let tree = build(&[], 3, 0);
    assert!(tree.nodes.is_empty());
    let q = QueryBox {
        lo: vec![0.0; 3],
        hi: vec![1.0; 3],
    };
    let ordered = NodeOrderedTree::new(tree, &[]);
    assert!(ordered.search(&q, false).is_empty() && ordered.search(&q, true).is_empty());
}

/// A point of one of the data's values on some dimensions (so that a key order's
/// leading dimensions are pinned), a random range on others, none on the rest.
fn pinning_box(rng: &mut Rng, coords: &[f64], dims: usize) -> QueryBox {
    let n = coords.len() / dims;
    let mut lo = vec![f64::NEG_INFINITY; dims];
    let mut hi = vec![f64::NAN; dims];
    for d in 0..dims {
        match rng.next() % 3 {
            0 if n > 0 => {
                let v = coords[(rng.next() as usize % n) * dims + d];
                lo[d] = v;
                hi[d] = v;
            }
            1 => {
                lo[d] = bound(rng, false);
                hi[d] = bound(rng, true);
            }
            _ => {}
        }
    }
    QueryBox { lo, hi }
}

#[test]
fn key_orders_answer_like_a_scan() {
    let mut rng = Rng(0x51DE_C0DE_0DD5_EED5);
    for case in 0..60 {
        let dims = 1 + case % 5;
        // past 2 x 2^PROBE_DEPTH nodes, so that the search weighs its orders
        let n = 600 + (rng.next() % 1500) as usize;
        let coords: Vec<f64> = (0..n * dims).map(|_| value(&mut rng)).collect();
        // orders of one to all dimensions, in a random sequence
        let orders: Vec<Vec<usize>> = (0..1 + rng.next() % 3)
            .map(|_| {
                let mut all: Vec<usize> = (0..dims).collect();
                for i in (1..dims).rev() {
                    all.swap(i, rng.next() as usize % (i + 1));
                }
                all.truncate(1 + rng.next() as usize % dims);
                all
            })
            .collect();
        let tree =
            NodeOrderedTree::new(build(&coords, dims, case % 3), &coords).with_orders(&orders);
        for _ in 0..40 {
            let q = pinning_box(&mut rng, &coords, dims);
            let expected = scan(&coords, dims, &q);
            let chosen = tree.records(&tree.search_chosen(&q).0);
            assert_eq!(
                chosen, expected,
                "case {case}: {q:?} over orders {orders:?}"
            );
            // every order's run holds every record in the box
            let (lo, hi) = Bounds::ordered(&q);
            let bounds = Bounds::new(&q);
            for order in &tree.orders {
                let run: Vec<u32> = order
                    .run(&tree.keys, dims, &lo, &hi)
                    .iter()
                    .copied()
                    .filter(|&i| bounds.inside(&tree.keys, dims, i as usize))
                    .collect();
                assert_eq!(
                    tree.records(&run),
                    expected,
                    "case {case}: order {:?}",
                    order.dims
                );
            }
        }
    }
}

#[test]
fn a_key_order_finds_a_pinned_and_bounded_query_in_one_run() {
    // GHCN's `element_id = x AND element_value > v` over six dimensions: the run of
    // an (element_id, element_value) order is exactly the records found
    let mut rng = Rng(0xFEED_FACE_CAFE_BEEF);
    let (n, dims) = (20_000, 6);
    let coords: Vec<f64> = (0..n * dims)
        .map(|i| match i % dims {
            0 => (rng.next() % 10) as f64,
            _ => (rng.next() % 1000) as f64,
        })
        .collect();
    let tree = NodeOrderedTree::new(build(&coords, dims, 0), &coords).with_orders(&[vec![0, 4]]);
    let mut q = QueryBox {
        lo: vec![f64::NEG_INFINITY; dims],
        hi: vec![f64::NAN; dims],
    };
    (q.lo[0], q.hi[0], q.lo[4]) = (3.0, 3.0, 990.0);
    let expected = scan(&coords, dims, &q);
    let (lo, hi) = Bounds::ordered(&q);
    assert_eq!(
        tree.orders[0].run(&tree.keys, dims, &lo, &hi).len(),
        expected.len()
    );
    // and the search takes it: a descent would visit far more than that
    let share = tree.entered_share(&q).unwrap();
    assert!((expected.len() as f64) < share * n as f64 / 10.0);
    let (found, how) = tree.search_chosen(&q);
    assert_eq!((tree.records(&found), how), (expected, Searched::Order(0)));
}

/// The records of `trees` inside `q` that `top` must keep: those at or before the
/// `count`-th key (distinct: `count`-th distinct key) on `dim` in the order.
fn top_by_sorting(
    trees: &[&NodeOrderedTree],
    q: &QueryBox,
    dim: usize,
    descending: bool,
    count: usize,
    distinct: bool,
) -> Vec<Vec<u32>> {
    let rank = |t: &NodeOrderedTree, node: u32| {
        let k = ordered(t.keys[node as usize * t.tree.dims + dim]);
        if descending {
            k
        } else {
            !k
        }
    };
    let inside: Vec<Vec<u32>> = trees.iter().map(|t| t.search_nodes(q, true)).collect();
    let mut ranks: Vec<i64> = trees
        .iter()
        .zip(&inside)
        .flat_map(|(t, nodes)| nodes.iter().map(|&n| rank(t, n)))
        .collect();
    ranks.sort_unstable_by(|a, b| b.cmp(a));
    if distinct {
        ranks.dedup();
    }
    let threshold = ranks.get(count - 1).copied();
    trees
        .iter()
        .zip(inside)
        .map(|(t, nodes)| {
            let kept: Vec<u32> = nodes
                .into_iter()
                .filter(|&n| threshold.is_none_or(|th| rank(t, n) >= th))
                .collect();
            t.records(&kept)
        })
        .collect()
}

#[test]
fn top_keeps_the_first_records_of_a_box_in_order() {
    let mut rng = Rng(0x7070_5EED_0F70_9999);
    for case in 0..200 {
        let dims = 1 + case % 4;
        let mut order: Vec<usize> = (0..dims).collect();
        for i in (1..dims).rev() {
            order.swap(i, rng.next() as usize % (i + 1));
        }
        order.truncate(1 + rng.next() as usize % dims);
        let at = rng.next() as usize % order.len();
        let dim = order[at];
        let coords: Vec<Vec<f64>> = (0..1 + rng.next() % 5)
            .map(|_| {
                let n = rng.next() as usize % 300;
                (0..n * dims).map(|_| value(&mut rng)).collect()
            })
            .collect();
        let trees: Vec<NodeOrderedTree> = coords
            .iter()
            .map(|c| NodeOrderedTree::new(build(c, dims, 0), c).with_orders(&[order.clone()]))
            .collect();
        let refs: Vec<&NodeOrderedTree> = trees.iter().collect();
        let all: Vec<f64> = coords.concat();
        for _ in 0..20 {
            let mut q = pinning_box(&mut rng, &all, dims);
            // the order's dimensions before `dim` pinned, to a value some record has
            let n = all.len() / dims;
            for &d in &order[..at] {
                let v = if n > 0 {
                    all[(rng.next() as usize % n) * dims + d]
                } else {
                    1.0
                };
                (q.lo[d], q.hi[d]) = (v, v);
            }
            let descending = rng.next().is_multiple_of(2);
            let distinct = rng.next().is_multiple_of(2);
            let count = 1 + rng.next() as usize % 6;
            let (nodes, ways) = top(&refs, &q, dim, descending, count, distinct)
                .expect("the order is sorted on dim under a pinning box");
            let found: Vec<Vec<u32>> = refs.iter().zip(&nodes).map(|(t, f)| t.records(f)).collect();
            let expected = top_by_sorting(&refs, &q, dim, descending, count, distinct);
            assert_eq!(
                found, expected,
                "case {case}: {q:?} on {dim} of {order:?}, desc {descending}, \
                 count {count}, distinct {distinct}"
            );
            assert!(ways.iter().all(|&w| w.is_none_or(|k| k == 0)));
        }
        // a box that leaves a dimension before `dim` unpinned has no sorted run
        if at > 0 && !trees.is_empty() {
            let open = QueryBox {
                lo: vec![f64::NEG_INFINITY; dims],
                hi: vec![f64::NAN; dims],
            };
            assert!(top(&refs, &open, dim, true, 3, false).is_none());
        }
    }
}
