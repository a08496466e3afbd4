//! Reducing an array attribute's stored chunks to partial aggregates (count,
//! sum, min, max, whether a NaN was seen) without writing the box anywhere:
//! each chunk is decoded into its thread's buffer and folded there, chunks
//! in parallel. The SQL aggregate shortcut over arrays combines the partials.

use rayon::prelude::*;

use super::{for_each_row, with_decoded, Failure, Layout};

/// How an attribute's cells are read for [`reduce_chunks`]; the width is the layout's itemsize.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Signed,
    Unsigned,
    Float,
}

/// One chunk's count, sum, min and max of the non-NULL cells of its part of
/// the box. Integer sums are exact: they are kept in 128 bits (`S`), which
/// no chunk can overflow (2^64 cells of 2^64 each), as SQL's `sum` widens
/// to HUGEINT. Floats: `min`/`max` skip NaN (+inf/-inf when none is left)
/// and `nan` tells whether a NaN was seen; an empty part has count 0 and
/// min > max.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Totals<T, S = T> {
    pub count: u64,
    pub sum: S,
    pub min: T,
    pub max: T,
    pub nan: bool,
}

impl<T, S> Totals<T, S> {
    fn empty(sum: S, min: T, max: T) -> Self {
        Totals {
            count: 0,
            sum,
            min,
            max,
            nan: false,
        }
    }
}

/// [`Totals`] of signed, unsigned or float cells.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Partial {
    Signed(Totals<i64, i128>),
    Unsigned(Totals<u64, u128>),
    Float(Totals<f64>),
}

/// Reduces each chunk's part of the box without writing it anywhere: the
/// chunk is decoded into its thread's buffer and folded there. `null` is the
/// fill value's bytes of a nullable attribute (cells equal to it are NULL;
/// for floats a NaN fill makes every NaN NULL). Without `extremes` min and
/// max (and NaN-seen) are not computed and keep their start values. Chunks
/// run in parallel.
pub fn reduce_chunks(
    layout: &Layout,
    kind: Kind,
    null: Option<&[u8]>,
    extremes: bool,
    chunks: &[(&[u8], &[usize])],
) -> Result<Vec<Partial>, Failure> {
    let width = layout.itemsize;
    let valid_width = match kind {
        Kind::Signed | Kind::Unsigned => matches!(width, 1 | 2 | 4 | 8),
        Kind::Float => matches!(width, 4 | 8),
    };
    if !valid_width || null.is_some_and(|n| n.len() != width) {
        return Err(Failure::Input(format!(
            "cannot reduce {kind:?} cells of {width} bytes (NULL value of {:?} bytes)",
            null.map(<[u8]>::len)
        )));
    }
    let cells: usize = layout.out_shape().iter().product();
    layout.check(cells * width)?;
    for (_, coords) in chunks {
        if coords.len() != layout.ndim() {
            return Err(Failure::Input(format!(
                "chunk coordinates {coords:?} do not have {} dimensions",
                layout.ndim()
            )));
        }
    }
    crate::pool::install(|| {
        chunks
            .par_iter()
            .enumerate()
            .map(|(index, (payload, coords))| {
                with_decoded(layout, payload, coords, |lo, hi, src| {
                    let row = (hi[lo.len() - 1] - lo[lo.len() - 1]) * width;
                    let mut fold = Fold::new(kind, width, null, extremes);
                    for_each_row(layout, lo, hi, |_, from| fold.add(&src[from..from + row]));
                    fold.partial
                })
                .map_err(|message| Failure::Chunk(index, message))
            })
            .collect()
    })
}

struct Fold<'a> {
    width: usize,
    /// whether min and max are wanted (else they stay at their start values)
    extremes: bool,
    null: Option<&'a [u8]>,
    partial: Partial,
}

fn float_of(b: &[u8]) -> f64 {
    match b.len() {
        4 => f32::from_le_bytes(b.try_into().expect("4 bytes")) as f64,
        _ => f64::from_le_bytes(b.try_into().expect("8 bytes")),
    }
}

/// Folds one row of `T` cells (little-endian bytes) into the running values;
/// one loop per cell type and case, so the compiler can vectorise the
/// common ones (no NULL value; a sum and count without min and max).
/// A row is summed in `$row_sum` (64 bits for cells of up to 32 bits, where
/// a row of fewer than 2^31 cells cannot overflow it; 128 bits for 64-bit
/// cells) and added to the chunk's 128-bit sum.
macro_rules! fold_row {
    ($fold:expr, $row:expr, $t:ty, $wide:ty, $row_sum:ty, $acc:ty, $p:expr) => {{
        let p = $p;
        let null: Option<$t> = $fold
            .null
            .map(|b: &[u8]| <$t>::from_le_bytes(b.try_into().expect("width")));
        let cells = $row
            .chunks_exact(std::mem::size_of::<$t>())
            .map(|cell| <$t>::from_le_bytes(cell.try_into().expect("width")));
        let mut row_sum: $row_sum = 0;
        match (null, $fold.extremes) {
            (None, false) => {
                p.count += cells.len() as u64;
                row_sum = cells.fold(row_sum, |s, v| s + v as $row_sum);
            }
            (None, true) => {
                p.count += cells.len() as u64;
                for v in cells {
                    let w = v as $wide;
                    row_sum += v as $row_sum;
                    p.min = p.min.min(w);
                    p.max = p.max.max(w);
                }
            }
            (Some(null), _) => {
                for v in cells.filter(|v| *v != null) {
                    let w = v as $wide;
                    p.count += 1;
                    row_sum += v as $row_sum;
                    p.min = p.min.min(w);
                    p.max = p.max.max(w);
                }
            }
        }
        p.sum += row_sum as $acc;
    }};
}

/// The float version of [`fold_row`]: NaN counts and poisons the sum, as in
/// numpy, but is kept out of min and max (the caller puts it back).
macro_rules! fold_floats {
    ($fold:expr, $row:expr, $t:ty, $null:expr, $p:expr) => {{
        let p = $p;
        let cells = $row.chunks_exact(std::mem::size_of::<$t>());
        if $null.is_none() && !$fold.extremes {
            p.count += cells.len() as u64;
            p.sum = cells.fold(p.sum, |s, cell| {
                s + <$t>::from_le_bytes(cell.try_into().expect("width")) as f64
            });
        } else {
            for cell in cells {
                let v = <$t>::from_le_bytes(cell.try_into().expect("width")) as f64;
                if let Some(fill) = $null {
                    if v == fill || (fill.is_nan() && v.is_nan()) {
                        continue;
                    }
                }
                p.count += 1;
                p.sum += v;
                if v.is_nan() {
                    p.nan = true;
                } else {
                    p.min = p.min.min(v);
                    p.max = p.max.max(v);
                }
            }
        }
    }};
}

impl<'a> Fold<'a> {
    fn new(kind: Kind, width: usize, null: Option<&'a [u8]>, extremes: bool) -> Self {
        let partial = match kind {
            Kind::Signed => Partial::Signed(Totals::empty(0, i64::MAX, i64::MIN)),
            Kind::Unsigned => Partial::Unsigned(Totals::empty(0, u64::MAX, 0)),
            Kind::Float => Partial::Float(Totals::empty(0.0, f64::INFINITY, f64::NEG_INFINITY)),
        };
        Fold {
            width,
            extremes,
            null,
            partial,
        }
    }

    fn add(&mut self, row: &[u8]) {
        match &mut self.partial {
            Partial::Signed(p) => match self.width {
                1 => fold_row!(self, row, i8, i64, i64, i128, p),
                2 => fold_row!(self, row, i16, i64, i64, i128, p),
                4 => fold_row!(self, row, i32, i64, i64, i128, p),
                _ => fold_row!(self, row, i64, i64, i128, i128, p),
            },
            Partial::Unsigned(p) => match self.width {
                1 => fold_row!(self, row, u8, u64, u64, u128, p),
                2 => fold_row!(self, row, u16, u64, u64, u128, p),
                4 => fold_row!(self, row, u32, u64, u64, u128, p),
                _ => fold_row!(self, row, u64, u64, u128, u128, p),
            },
            Partial::Float(p) => {
                let null = self.null.map(float_of);
                if self.width == 4 {
                    fold_floats!(self, row, f32, null, p)
                } else {
                    fold_floats!(self, row, f64, null, p)
                }
            }
        }
    }
}
