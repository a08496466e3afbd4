//! The global index of a record stream: an R*-tree (rstar) of segment bounding boxes.
//!
//! A segment's box spans, per indexing dimension, the smallest and largest key
//! of its records (keys as in `kdtree::key`: NaN above +inf). The R*-tree holds
//! boxes under a monotone, bounded transform of the keys (`sign(x) ln(1+|x|)`,
//! infinities at ±710, NaN at 711) so that its area heuristics never meet an
//! infinity or NaN; a monotone transform can only make more boxes intersect a
//! query, never fewer, so every answer is a superset of the overlapping
//! segments and the per-segment kd-tree search stays exact.

use rstar::primitives::{GeomWithData, Rectangle};
use rstar::{RTree, AABB};

/// The bounded, monotone image of a key in the R*-tree.
#[inline]
pub fn tree_coord(x: f64) -> f64 {
    if x.is_nan() {
        711.0
    } else if x.is_infinite() {
        710.0_f64.copysign(x)
    } else {
        (x.abs().ln_1p()).copysign(x) + 0.0
    }
}

macro_rules! dims_enum {
    ($($variant:ident => $n:literal),*) => {
        enum Tree {
            $($variant(RTree<GeomWithData<Rectangle<[f64; $n]>, u64>>),)*
        }

        impl Tree {
            fn new(dims: usize) -> Option<Tree> {
                match dims {
                    $($n => Some(Tree::$variant(RTree::new())),)*
                    _ => None,
                }
            }

            fn bulk(dims: usize, items: &[(u64, Vec<f64>, Vec<f64>)]) -> Option<Tree> {
                match dims {
                    $($n => Some(Tree::$variant(RTree::bulk_load(
                        items.iter().map(|(id, lo, hi)| GeomWithData::new(rect::<$n>(lo, hi), *id)).collect(),
                    ))),)*
                    _ => None,
                }
            }

            fn insert(&mut self, id: u64, lo: &[f64], hi: &[f64]) {
                match self {
                    $(Tree::$variant(t) => t.insert(GeomWithData::new(rect::<$n>(lo, hi), id)),)*
                }
            }

            fn remove(&mut self, id: u64, lo: &[f64], hi: &[f64]) -> bool {
                match self {
                    $(Tree::$variant(t) => t.remove(&GeomWithData::new(rect::<$n>(lo, hi), id)).is_some(),)*
                }
            }

            fn query(&self, lo: &[f64], hi: &[f64]) -> Vec<u64> {
                match self {
                    $(Tree::$variant(t) => {
                        let envelope = AABB::from_corners(corner::<$n>(lo), corner::<$n>(hi));
                        t.locate_in_envelope_intersecting(envelope).map(|g| g.data).collect()
                    })*
                }
            }

            fn len(&self) -> usize {
                match self {
                    $(Tree::$variant(t) => t.size(),)*
                }
            }
        }
    };
}

// rstar needs two dimensions at least: one-dimensional boxes get a second, constant 0.
dims_enum!(D2 => 2, D3 => 3, D4 => 4, D5 => 5, D6 => 6, D7 => 7, D8 => 8, D9 => 9);

fn corner<const N: usize>(values: &[f64]) -> [f64; N] {
    let mut out = [0.0; N];
    for (o, v) in out.iter_mut().zip(values) {
        *o = tree_coord(*v);
    }
    out
}

fn rect<const N: usize>(lo: &[f64], hi: &[f64]) -> Rectangle<[f64; N]> {
    Rectangle::from_corners(corner::<N>(lo), corner::<N>(hi))
}

fn storage_dims(dims: usize) -> Result<usize, String> {
    match dims {
        1 => Ok(2),
        2..=9 => Ok(dims),
        _ => Err(format!("an index has 1 to 9 dimensions, not {dims}")),
    }
}

/// Segment boxes of one stream, by segment id.
pub struct SegmentIndex {
    dims: usize,
    tree: Tree,
}

impl SegmentIndex {
    /// An empty index over `dims` indexing dimensions (1 to 9).
    pub fn new(dims: usize) -> Result<Self, String> {
        let tree = Tree::new(storage_dims(dims)?).expect("2 to 9 dimensions");
        Ok(SegmentIndex { dims, tree })
    }

    /// An index built at once from `(id, lo, hi)` boxes (when a stream is opened).
    pub fn bulk_load(dims: usize, boxes: &[(u64, Vec<f64>, Vec<f64>)]) -> Result<Self, String> {
        let tree = Tree::bulk(storage_dims(dims)?, boxes).expect("2 to 9 dimensions");
        Ok(SegmentIndex { dims, tree })
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    pub fn len(&self) -> usize {
        self.tree.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn insert(&mut self, id: u64, lo: &[f64], hi: &[f64]) {
        self.tree.insert(id, lo, hi);
    }

    pub fn remove(&mut self, id: u64, lo: &[f64], hi: &[f64]) -> bool {
        self.tree.remove(id, lo, hi)
    }

    /// Ids of the segments whose boxes may meet the query box (ascending).
    pub fn query(&self, lo: &[f64], hi: &[f64]) -> Vec<u64> {
        let mut ids = self.tree.query(lo, hi);
        ids.sort_unstable();
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overlaps(lo: &[f64], hi: &[f64], qlo: &[f64], qhi: &[f64]) -> bool {
        let key = crate::kdtree::key;
        (0..lo.len()).all(|d| {
            key(lo[d]).total_cmp(&key(qhi[d])).is_le() && key(qlo[d]).total_cmp(&key(hi[d])).is_le()
        })
    }

    use crate::testing::Rng;

    fn value(rng: &mut Rng) -> f64 {
        match rng.next() % 16 {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2 => f64::NEG_INFINITY,
            3 => 1e300,
            _ => (rng.next() % 1000) as f64 / 10.0 - 50.0,
        }
    }

    #[test]
    fn query_is_a_superset_of_the_overlapping_boxes_and_exact_for_finite_ones() {
        let mut rng = Rng(0xDEADBEEF12345);
        for dims in 1..=9 {
            let mut index = SegmentIndex::new(dims).unwrap();
            let mut boxes = Vec::new();
            for id in 0..300u64 {
                let (a, b): (Vec<f64>, Vec<f64>) = (0..dims)
                    .map(|_| (value(&mut rng), value(&mut rng)))
                    .unzip();
                let key = crate::kdtree::key;
                let (lo, hi): (Vec<f64>, Vec<f64>) = a
                    .iter()
                    .zip(&b)
                    .map(|(&x, &y)| {
                        if key(x).total_cmp(&key(y)).is_le() {
                            (x, y)
                        } else {
                            (y, x)
                        }
                    })
                    .unzip();
                index.insert(id, &lo, &hi);
                boxes.push((id, lo, hi));
            }
            let bulk = SegmentIndex::bulk_load(dims, &boxes).unwrap();
            for _ in 0..50 {
                let qlo: Vec<f64> = (0..dims)
                    .map(|_| (rng.next() % 600) as f64 / 10.0 - 50.0)
                    .collect();
                let qhi: Vec<f64> = qlo
                    .iter()
                    .map(|x| x + (rng.next() % 300) as f64 / 10.0)
                    .collect();
                let want: Vec<u64> = boxes
                    .iter()
                    .filter(|(_, lo, hi)| overlaps(lo, hi, &qlo, &qhi))
                    .map(|b| b.0)
                    .collect();
                for got in [index.query(&qlo, &qhi), bulk.query(&qlo, &qhi)] {
                    for id in &want {
                        assert!(got.contains(id), "dims {dims}: missing {id}");
                    }
                }
            }
            assert_eq!(index.len(), 300);
            let (id, lo, hi) = &boxes[7];
            assert!(index.remove(*id, lo, hi));
            assert_eq!(index.len(), 299);
        }
    }

    #[test]
    fn transform_is_monotone() {
        let xs = [
            f64::NEG_INFINITY,
            -1e308,
            -5.0,
            -0.0,
            0.0,
            1e-300,
            2.0,
            1e308,
            f64::INFINITY,
            f64::NAN,
        ];
        for w in xs.windows(2) {
            assert!(tree_coord(w[0]) <= tree_coord(w[1]), "{} {}", w[0], w[1]);
        }
    }

    #[test]
    fn dimensions_outside_one_to_nine_are_refused() {
        assert!(SegmentIndex::new(0).is_err());
        assert!(SegmentIndex::new(10).is_err());
    }
}
