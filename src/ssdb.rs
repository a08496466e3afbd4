//! SS-DB's user-defined functions (papers/ssdb-benchmark.txt, appendix):
//! cooking an image into observations (F1), grouping observations over time
//! (F2), and the geometry its queries need.
//!
//! Everything is computed in world coordinates with integer sums where the
//! reference uses doubles, so that cooking a window of an image (a chunk with
//! its halo) gives bit for bit the observations cooking the whole image gives.

use std::collections::HashMap;

/// One observation: a connected set of pixels at or above the threshold.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    /// World (x, y) of the object's first pixel in raster order.
    pub first: (i64, i64),
    /// Pixel-weighted mean position, truncated toward zero.
    pub center: (i64, i64),
    pub pixelsum: i64,
    /// Pixel-weighted mean distance of the pixels to the (untruncated) centroid.
    pub avgdist: f64,
    pub npix: i64,
    /// Bounding box, inclusive, world coordinates.
    pub lo: (i64, i64),
    pub hi: (i64, i64),
    /// Boundary pixels traced clockwise (the reference's polygonizer).
    pub polygon: Vec<(i64, i64)>,
}

/// What to cook and which observations to keep.
#[derive(Clone, Debug)]
pub struct CookParams {
    pub threshold: i32,
    /// Largest width or height of an observation's bounding box (D1).
    pub max_extent: i64,
    /// Most vertices a kept polygon may have (D2).
    pub max_vertices: usize,
    /// World coordinate of pixel [0, 0].
    pub origin: (i64, i64),
    /// Keep only observations whose center lies in this world box
    /// (x0, y0, x1, y1), half-open; None keeps all.
    pub core: Option<(i64, i64, i64, i64)>,
}

/// Union-find over provisional labels; a root is always its set's lowest
/// label, so the root of an object is the label of its first pixel.
fn find(parent: &mut [u32], mut a: u32) -> u32 {
    while parent[a as usize] != a {
        let up = parent[parent[a as usize] as usize];
        parent[a as usize] = up;
        a = up;
    }
    a
}

fn union(parent: &mut [u32], a: u32, b: u32) -> u32 {
    let ra = find(parent, a);
    let rb = find(parent, b);
    let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
    parent[hi as usize] = lo;
    lo
}

#[derive(Clone, Default)]
struct Sums {
    pixelsum: i64,
    wx: i128,
    wy: i128,
    npix: i64,
    lo: (i64, i64),
    hi: (i64, i64),
    first: (i64, i64),
    /// Least x, then least y: where the trace starts.
    start: (i64, i64),
    dist: f64,
}

/// F1 on a `height` x `width` image of `pix` values in row-major order: the
/// observations in the order their first pixel is met in raster order.
///
/// 8-connectivity: a pixel joins its left, upper-left, upper and upper-right
/// neighbours. Observations wider or taller than `max_extent`, or whose
/// polygon has more than `max_vertices` vertices, are dropped.
pub fn cook(pix: &[i32], height: usize, width: usize, p: &CookParams) -> Vec<Observation> {
    assert_eq!(
        pix.len(),
        height * width,
        "pixel count must be height * width"
    );
    let mut labels = vec![0u32; pix.len()];
    let mut parent: Vec<u32> = vec![0]; // label 0 is the background
    for row in 0..height {
        let base = row * width;
        for col in 0..width {
            if pix[base + col] < p.threshold {
                continue;
            }
            let mut label = 0u32;
            let mut join = |other: u32, parent: &mut Vec<u32>| {
                if other == 0 {
                    return;
                }
                label = if label == 0 {
                    find(parent, other)
                } else {
                    union(parent, label, other)
                };
            };
            if col > 0 {
                join(labels[base + col - 1], &mut parent);
            }
            if row > 0 {
                let up = base - width;
                if col > 0 {
                    join(labels[up + col - 1], &mut parent);
                }
                join(labels[up + col], &mut parent);
                if col + 1 < width {
                    join(labels[up + col + 1], &mut parent);
                }
            }
            if label == 0 {
                label = parent.len() as u32;
                parent.push(label);
            }
            labels[base + col] = label;
        }
    }
    // Roots in increasing order are the objects in first-pixel order.
    let mut object_of = vec![u32::MAX; parent.len()];
    let mut objects = 0u32;
    for label in 1..parent.len() as u32 {
        let root = find(&mut parent, label);
        if root == label {
            object_of[label as usize] = objects;
            objects += 1;
        }
    }
    for label in 1..parent.len() {
        let root = find(&mut parent, label as u32);
        object_of[label] = object_of[root as usize];
    }
    let (ox, oy) = p.origin;
    let mut sums = vec![Sums::default(); objects as usize];
    for row in 0..height {
        for col in 0..width {
            let label = labels[row * width + col];
            if label == 0 {
                continue;
            }
            let object = object_of[label as usize] as usize;
            labels[row * width + col] = object as u32 + 1;
            let s = &mut sums[object];
            let v = pix[row * width + col] as i64;
            let (x, y) = (ox + col as i64, oy + row as i64);
            if s.npix == 0 {
                s.first = (x, y);
                s.lo = (x, y);
                s.hi = (x, y);
                s.start = (x, y);
            }
            if x < s.start.0 || (x == s.start.0 && y < s.start.1) {
                s.start = (x, y);
            }
            s.npix += 1;
            s.pixelsum += v;
            s.wx += v as i128 * x as i128;
            s.wy += v as i128 * y as i128;
            s.lo = (s.lo.0.min(x), s.lo.1.min(y));
            s.hi = (s.hi.0.max(x), s.hi.1.max(y));
        }
    }
    let keep: Vec<bool> = sums
        .iter()
        .map(|s| {
            if s.hi.0 - s.lo.0 + 1 > p.max_extent || s.hi.1 - s.lo.1 + 1 > p.max_extent {
                return false;
            }
            match p.core {
                None => true,
                Some((x0, y0, x1, y1)) => {
                    let (cx, cy) = centroid(s);
                    let (cx, cy) = (cx.trunc() as i64, cy.trunc() as i64);
                    x0 <= cx && cx < x1 && y0 <= cy && cy < y1
                }
            }
        })
        .collect();
    // Second pass: distances to the centroid, in raster order like the first.
    for row in 0..height {
        for col in 0..width {
            let label = labels[row * width + col];
            if label == 0 || !keep[label as usize - 1] {
                continue;
            }
            let s = &mut sums[label as usize - 1];
            let (cx, cy) = centroid(s);
            let dx = (ox + col as i64) as f64 - cx;
            let dy = (oy + row as i64) as f64 - cy;
            s.dist += pix[row * width + col] as f64 * (dx * dx + dy * dy).sqrt();
        }
    }
    let mut out = Vec::new();
    for (object, s) in sums.iter().enumerate() {
        if !keep[object] {
            continue;
        }
        let polygon = trace_object(&labels, width, object as u32 + 1, s, p.origin);
        if polygon.len() > p.max_vertices {
            continue;
        }
        let (cx, cy) = centroid(s);
        out.push(Observation {
            first: s.first,
            center: (cx.trunc() as i64, cy.trunc() as i64),
            pixelsum: s.pixelsum,
            avgdist: if s.pixelsum == 0 {
                0.0
            } else {
                s.dist / s.pixelsum as f64
            },
            npix: s.npix,
            lo: s.lo,
            hi: s.hi,
            polygon,
        });
    }
    out
}

fn centroid(s: &Sums) -> (f64, f64) {
    if s.pixelsum == 0 {
        // only with a threshold at or below zero: fall back to the plain mean
        return (s.lo.0 as f64, s.lo.1 as f64);
    }
    (
        s.wx as f64 / s.pixelsum as f64,
        s.wy as f64 / s.pixelsum as f64,
    )
}

/// The pixels of object `mark` (its value in `labels`) as a padded bitmap of
/// its bounding box, then traced.
fn trace_object(
    labels: &[u32],
    width: usize,
    mark: u32,
    s: &Sums,
    origin: (i64, i64),
) -> Vec<(i64, i64)> {
    let (bw, bh) = (
        (s.hi.0 - s.lo.0 + 3) as usize,
        (s.hi.1 - s.lo.1 + 3) as usize,
    );
    let mut bitmap = vec![false; bw * bh];
    for y in s.lo.1..=s.hi.1 {
        let row = (y - origin.1) as usize;
        for x in s.lo.0..=s.hi.0 {
            let col = (x - origin.0) as usize;
            if labels[row * width + col] == mark {
                bitmap[(y - s.lo.1 + 1) as usize * bw + (x - s.lo.0 + 1) as usize] = true;
            }
        }
    }
    let inside = |x: i64, y: i64| -> bool {
        let (bx, by) = (x - s.lo.0 + 1, y - s.lo.1 + 1);
        bx >= 0
            && by >= 0
            && (bx as usize) < bw
            && (by as usize) < bh
            && bitmap[by as usize * bw + bx as usize]
    };
    trace(s.start, s.npix as usize, inside)
}

/// Clockwise from up, as (dx, dy) with y growing downwards; twice round, then
/// a safety stop on the pixel itself.
const DIRECTIONS: [(i64, i64); 17] = [
    (0, -1),
    (1, -1),
    (1, 0),
    (1, 1),
    (0, 1),
    (-1, 1),
    (-1, 0),
    (-1, -1),
    (0, -1),
    (1, -1),
    (1, 0),
    (1, 1),
    (0, 1),
    (-1, 1),
    (-1, 0),
    (-1, -1),
    (0, 0),
];

/// The reference polygonizer's curve trace: start at the left-most, then
/// top-most pixel heading up-left, at each step look from at most 90 degrees
/// left of the heading clockwise for the next pixel, until the start pixel is
/// reached again with the starting heading. Vertices are boundary pixels, a
/// pixel may appear twice where the object is one pixel thin.
/// `start` must be the object's left-most, then top-most pixel.
pub fn trace(start: (i64, i64), npix: usize, inside: impl Fn(i64, i64) -> bool) -> Vec<(i64, i64)> {
    if npix <= 1 {
        return vec![start];
    }
    let next_of = |loc: (i64, i64), dir: (i64, i64)| -> ((i64, i64), (i64, i64)) {
        let left_turn = if dir.0 * dir.0 + dir.1 * dir.1 == 2 {
            2
        } else {
            1
        };
        let mut index = left_turn;
        while DIRECTIONS[index] != dir {
            index += 1;
        }
        index -= left_turn;
        loop {
            let d = DIRECTIONS[index];
            let prospect = (loc.0 + d.0, loc.1 + d.1);
            if inside(prospect.0, prospect.1) {
                return (prospect, d);
            }
            index += 1;
        }
    };
    let mut vertices = Vec::new();
    let (mut next, init_dir) = next_of(start, (-1, -1));
    let mut dir = init_dir;
    let mut current = start;
    loop {
        vertices.push(current);
        current = next;
        let (n, d) = next_of(current, dir);
        next = n;
        if vertices.len() > 2 + 2 * npix {
            break; // the reference's guard against a trace that never closes
        }
        dir = d;
        if current == start && dir == init_dir {
            break;
        }
    }
    vertices
}

/// F2 applied to observations as they arrive in time order: a new
/// observation joins every group holding an earlier observation B with
/// `d^2 < D3 * (its image - B's image)`; one that joins none starts a group.
/// D3 is the exact fraction `num / den`, so the comparison is in integers.
/// Candidates come from a grid over the centers, never from all pairs.
pub struct Grouper {
    num: i64,
    den: i64,
    cell: i64,
    grid: HashMap<(i64, i64), Vec<u32>>,
    image: Vec<i64>,
    x: Vec<i64>,
    y: Vec<i64>,
    groups_of: Vec<Vec<u32>>,
    groups: u32,
    first_image: Option<i64>,
}

impl Grouper {
    pub fn new(num: i64, den: i64, cell: i64) -> Result<Grouper, String> {
        if num < 0 || den <= 0 || cell <= 0 {
            return Err(format!(
                "grouping needs D3 = num/den >= 0 and a positive cell, got {num}/{den}, cell {cell}"
            ));
        }
        Ok(Grouper {
            num,
            den,
            cell,
            grid: HashMap::new(),
            image: Vec::new(),
            x: Vec::new(),
            y: Vec::new(),
            groups_of: Vec::new(),
            groups: 0,
            first_image: None,
        })
    }

    pub fn observations(&self) -> usize {
        self.image.len()
    }

    pub fn groups(&self) -> u32 {
        self.groups
    }

    fn cell_of(&self, v: i64) -> i64 {
        v.div_euclid(self.cell)
    }

    /// Adds one observation; returns the groups it joined, ascending.
    pub fn add(&mut self, image: i64, x: i64, y: i64) -> Result<Vec<u32>, String> {
        if let Some(&last) = self.image.last() {
            if image < last {
                return Err(format!(
                    "observations must come in time order: image {image} after image {last}"
                ));
            }
        }
        let first = *self.first_image.get_or_insert(image);
        let span = image - first;
        // the farthest an earlier center can be: d^2 < num * span / den
        let reach = ((self.num as f64 * span as f64 / self.den as f64).sqrt()).ceil() as i64 + 1;
        let mut joined: Vec<u32> = Vec::new();
        if span > 0 {
            for cx in self.cell_of(x - reach)..=self.cell_of(x + reach) {
                for cy in self.cell_of(y - reach)..=self.cell_of(y + reach) {
                    let Some(members) = self.grid.get(&(cx, cy)) else {
                        continue;
                    };
                    for &b in members {
                        let b = b as usize;
                        let dt = image - self.image[b];
                        let (dx, dy) = (x - self.x[b], y - self.y[b]);
                        let d2 = (dx * dx + dy * dy) as i128;
                        if dt > 0 && d2 * (self.den as i128) < (self.num as i128) * (dt as i128) {
                            joined.extend_from_slice(&self.groups_of[b]);
                        }
                    }
                }
            }
        }
        joined.sort_unstable();
        joined.dedup();
        if joined.is_empty() {
            joined.push(self.groups);
            self.groups += 1;
        }
        let index = self.image.len() as u32;
        self.image.push(image);
        self.x.push(x);
        self.y.push(y);
        self.groups_of.push(joined.clone());
        let key = (self.cell_of(x), self.cell_of(y));
        self.grid.entry(key).or_default().push(index);
        Ok(joined)
    }
}

fn cross(o: (i64, i64), a: (i64, i64), b: (i64, i64)) -> i128 {
    (a.0 - o.0) as i128 * (b.1 - o.1) as i128 - (a.1 - o.1) as i128 * (b.0 - o.0) as i128
}

fn on_segment(p: (i64, i64), q: (i64, i64), r: (i64, i64)) -> bool {
    // r collinear with p-q: is it between them?
    r.0 >= p.0.min(q.0) && r.0 <= p.0.max(q.0) && r.1 >= p.1.min(q.1) && r.1 <= p.1.max(q.1)
}

/// Whether closed segments p1-p2 and q1-q2 share a point (exact, integers).
pub fn segments_intersect(p1: (i64, i64), p2: (i64, i64), q1: (i64, i64), q2: (i64, i64)) -> bool {
    let d1 = cross(q1, q2, p1).signum();
    let d2 = cross(q1, q2, p2).signum();
    let d3 = cross(p1, p2, q1).signum();
    let d4 = cross(p1, p2, q2).signum();
    if d1 * d2 < 0 && d3 * d4 < 0 {
        return true;
    }
    (d1 == 0 && on_segment(q1, q2, p1))
        || (d2 == 0 && on_segment(q1, q2, p2))
        || (d3 == 0 && on_segment(p1, p2, q1))
        || (d4 == 0 && on_segment(p1, p2, q2))
}

/// Whether `pt` lies strictly inside the ring (even-odd rule, exact).
fn inside_ring(ring: &[(i64, i64)], pt: (i64, i64)) -> bool {
    let mut inside = false;
    let n = ring.len();
    for i in 0..n {
        let a = ring[i];
        let b = ring[(i + 1) % n];
        if (a.1 > pt.1) != (b.1 > pt.1) {
            // pt.x < a.x + (pt.y - a.y) * (b.x - a.x) / (b.y - a.y), multiplied out
            let lhs = (pt.0 - a.0) as i128 * (b.1 - a.1) as i128;
            let rhs = (pt.1 - a.1) as i128 * (b.0 - a.0) as i128;
            if (b.1 > a.1 && lhs < rhs) || (b.1 < a.1 && lhs > rhs) {
                inside = !inside;
            }
        }
    }
    inside
}

/// Whether the closed polygon (a ring through `ring`; one vertex is a point,
/// two a segment) shares a point with the closed box `lo..=hi`.
pub fn polygon_overlaps_box(ring: &[(i64, i64)], lo: (i64, i64), hi: (i64, i64)) -> bool {
    if ring.is_empty() {
        return false;
    }
    let in_box = |p: (i64, i64)| p.0 >= lo.0 && p.0 <= hi.0 && p.1 >= lo.1 && p.1 <= hi.1;
    if ring.iter().any(|&p| in_box(p)) {
        return true;
    }
    let corners = [lo, (hi.0, lo.1), hi, (lo.0, hi.1)];
    let n = ring.len();
    for i in 0..n {
        let (a, b) = (ring[i], ring[(i + 1) % n]);
        for k in 0..4 {
            if segments_intersect(a, b, corners[k], corners[(k + 1) % 4]) {
                return true;
            }
        }
    }
    n >= 3 && inside_ring(ring, lo)
}

/// For each point, how many points (itself included) lie in the box
/// `[x + lo, x + hi] x [y + lo, y + hi]` around it.
pub fn density_counts(xs: &[i64], ys: &[i64], lo: i64, hi: i64) -> Vec<i64> {
    let mut order: Vec<usize> = (0..xs.len()).collect();
    order.sort_unstable_by_key(|&i| xs[i]);
    let sorted_x: Vec<i64> = order.iter().map(|&i| xs[i]).collect();
    let mut counts = vec![0i64; xs.len()];
    for i in 0..xs.len() {
        let from = sorted_x.partition_point(|&v| v < xs[i] + lo);
        let to = sorted_x.partition_point(|&v| v <= xs[i] + hi);
        counts[i] = order[from..to]
            .iter()
            .filter(|&&j| ys[j] >= ys[i] + lo && ys[j] <= ys[i] + hi)
            .count() as i64;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(threshold: i32) -> CookParams {
        CookParams {
            threshold,
            max_extent: 1000,
            max_vertices: 1000,
            origin: (0, 0),
            core: None,
        }
    }

    #[test]
    fn two_objects_in_first_pixel_order() {
        #[rustfmt::skip]
        let img = [
            0, 5, 0, 0, 0,
            0, 5, 0, 0, 7,
            0, 0, 0, 7, 0,
            3, 0, 0, 0, 0,
        ];
        let obs = cook(&img, 4, 5, &params(4));
        assert_eq!(obs.len(), 2);
        assert_eq!(obs[0].first, (1, 0));
        assert_eq!(obs[0].npix, 2);
        assert_eq!(obs[0].pixelsum, 10);
        assert_eq!(obs[1].first, (4, 1));
        assert_eq!(obs[1].npix, 2); // joined diagonally (upper-right neighbour)
        assert_eq!(obs[1].lo, (3, 1));
        assert_eq!(obs[1].hi, (4, 2));
    }

    #[test]
    fn u_shape_merges_into_lower_label() {
        #[rustfmt::skip]
        let img = [
            9, 0, 9,
            9, 0, 9,
            9, 9, 9,
        ];
        let obs = cook(&img, 3, 3, &params(1));
        assert_eq!(obs.len(), 1);
        assert_eq!(obs[0].npix, 7);
        assert_eq!(obs[0].center, (1, 1));
    }

    #[test]
    fn square_traces_clockwise_through_boundary() {
        let img = [1; 9];
        let obs = cook(&img, 3, 3, &params(1));
        assert_eq!(
            obs[0].polygon,
            vec![
                (0, 0),
                (1, 0),
                (2, 0),
                (2, 1),
                (2, 2),
                (1, 2),
                (0, 2),
                (0, 1)
            ]
        );
    }

    #[test]
    fn single_pixel_is_one_vertex() {
        let obs = cook(&[0, 9, 0], 1, 3, &params(1));
        assert_eq!(obs[0].polygon, vec![(1, 0)]);
        assert_eq!(obs[0].avgdist, 0.0);
    }

    #[test]
    fn extent_and_vertex_limits_drop() {
        let img = [1; 12];
        let mut p = params(1);
        p.max_extent = 3;
        assert!(cook(&img, 3, 4, &p).is_empty());
        p.max_extent = 4;
        p.max_vertices = 9;
        assert!(cook(&img, 3, 4, &p).is_empty());
        p.max_vertices = 10;
        assert_eq!(cook(&img, 3, 4, &p).len(), 1);
    }

    #[test]
    fn grouper_follows_the_velocity_bound() {
        let mut g = Grouper::new(1, 10, 16).unwrap();
        assert_eq!(g.add(0, 100, 100).unwrap(), vec![0]);
        // one image later: d^2 < 0.1 only at distance 0
        assert_eq!(g.add(1, 100, 100).unwrap(), vec![0]);
        assert_eq!(g.add(1, 101, 100).unwrap(), vec![1]);
        // ten images after the first: 1 < 0.1 * 10 is false, 1 < 0.1 * 11 is true
        assert_eq!(g.add(10, 100, 101).unwrap(), vec![2]);
        // eleven after: 1 < 1.1 joins group 0, and 0 < 0.1 group 2
        assert_eq!(g.add(11, 100, 101).unwrap(), vec![0, 2]);
        assert!(g.add(9, 0, 0).is_err());
    }

    #[test]
    fn overlap_cases() {
        let square = [(0, 0), (10, 0), (10, 10), (0, 10)];
        assert!(polygon_overlaps_box(&square, (4, 4), (5, 5))); // box inside
        assert!(polygon_overlaps_box(&square, (10, 10), (20, 20))); // corner touch
        assert!(!polygon_overlaps_box(&square, (11, 0), (20, 20)));
        assert!(polygon_overlaps_box(&[(0, 5), (20, 5)], (8, 0), (9, 10))); // edge crosses
        assert!(!polygon_overlaps_box(&[(3, 3)], (4, 4), (5, 5)));
    }

    #[test]
    fn density_counts_boxes() {
        let xs = [0, 1, 5, 100];
        let ys = [0, 1, 5, 100];
        assert_eq!(density_counts(&xs, &ys, -2, 2), vec![2, 2, 1, 1]);
        assert_eq!(density_counts(&xs, &ys, -5, 5), vec![3, 3, 3, 1]);
    }
}
