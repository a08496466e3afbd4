//! Packed binary records (MDDS's binary form) turned into columns.
//!
//! A record is its fields' bytes one after another, no padding; numbers are
//! little-endian, `char` fields are `width` bytes of UTF-8 padded with NULs.
//! Unpacking copies each field into its own column: fixed-width fields into a
//! buffer of `n * width` native-order bytes, `char` fields into Arrow's string
//! layout (offsets and data) with the trailing NULs dropped, as numpy's `S`
//! type reads them.

use rayon::prelude::*;

/// A field of the packed record: its width in bytes and whether it is `char` text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackedField {
    pub width: usize,
    pub text: bool,
}

/// One unpacked column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Column {
    /// `n * width` bytes, native byte order.
    Fixed(Vec<u8>),
    /// Arrow string layout: `n + 1` offsets into `data`.
    Text { offsets: Vec<i32>, data: Vec<u8> },
}

/// A `char` value that is not UTF-8 text: which record and which field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotText {
    pub record: usize,
    pub field: usize,
}

/// A text column's piece in Arrow's layout: offsets (from 0) and data.
type TextPart = (Vec<i32>, Vec<u8>);

/// Records unpacked per block, in parallel; blocks are then joined in order.
const BLOCK_RECORDS: usize = 16_384;

/// Columns of the records in `buffer` (whole records of the fields' total width).
///
/// Blocks of records are unpacked in parallel: fixed-width values straight into
/// their place in the output columns, text into per-block pieces joined after.
///
/// # Panics
/// If `buffer` is not a whole number of records, or the text of one call would
/// not fit Arrow's 32-bit offsets (callers unpack in pieces well below that).
pub fn unpack(buffer: &[u8], fields: &[PackedField]) -> Result<Vec<Column>, NotText> {
    let size: usize = fields.iter().map(|f| f.width).sum();
    assert!(
        size > 0 && buffer.len().is_multiple_of(size),
        "the buffer must hold whole records"
    );
    let n = buffer.len() / size;
    let starts: Vec<usize> = fields
        .iter()
        .scan(0, |at, f| {
            let start = *at;
            *at += f.width;
            Some(start)
        })
        .collect();
    let mut fixed: Vec<Vec<u8>> = fields
        .iter()
        .map(|f| vec![0u8; if f.text { 0 } else { n * f.width }])
        .collect();
    // per block, its share of every fixed column (text columns get none)
    let blocks = n.div_ceil(BLOCK_RECORDS);
    let mut shares: Vec<Vec<&mut [u8]>> = (0..blocks).map(|_| Vec::new()).collect();
    for (column, field) in fixed.iter_mut().zip(fields) {
        let mut pieces = column.chunks_mut((BLOCK_RECORDS * field.width).max(1));
        for share in shares.iter_mut() {
            share.push(if field.text || field.width == 0 {
                &mut []
            } else {
                pieces.next().expect("a piece per block")
            });
        }
    }
    let texts: Vec<Vec<TextPart>> = crate::pool::install(|| {
        buffer
            .par_chunks(BLOCK_RECORDS * size)
            .zip(shares.into_par_iter())
            .enumerate()
            .map(|(b, (block, mut share))| {
                unpack_block(block, size, fields, &starts, &mut share, b * BLOCK_RECORDS)
            })
            .collect::<Vec<_>>()
    })
    .into_iter()
    .collect::<Result<_, _>>()?; // the first block's error, whichever thread found one first
    let mut texts_by_field: Vec<Option<TextPart>> = fields
        .iter()
        .map(|f| f.text.then(|| (vec![0i32], Vec::new())))
        .collect();
    for block in texts {
        let mut parts = block.into_iter();
        for joined in texts_by_field.iter_mut().flatten() {
            let (o, d) = parts.next().expect("a text part per text field");
            let (offsets, data) = joined;
            let base = i32::try_from(data.len()).expect("text beyond 2 GiB in one call");
            offsets.extend(o[1..].iter().map(|&x| base + x));
            data.extend_from_slice(&d);
        }
    }
    Ok(fixed
        .into_iter()
        .zip(texts_by_field)
        .map(|(values, text)| match text {
            Some((offsets, data)) => Column::Text { offsets, data },
            None => Column::Fixed(values),
        })
        .collect())
}

/// Copies `W`-byte values out of records (a fixed width, so each copy is a move).
fn copy_values<const W: usize>(block: &[u8], size: usize, start: usize, out: &mut [u8]) {
    for (record, slot) in block.chunks_exact(size).zip(out.chunks_exact_mut(W)) {
        let value: [u8; W] = record[start..start + W].try_into().expect("W bytes");
        slot.copy_from_slice(&value);
    }
}

/// Unpacks one block: fixed values into `share`, text returned per text field.
fn unpack_block(
    block: &[u8],
    size: usize,
    fields: &[PackedField],
    starts: &[usize],
    share: &mut [&mut [u8]],
    first_record: usize,
) -> Result<Vec<TextPart>, NotText> {
    let n = block.len() / size;
    let mut texts = Vec::new();
    for (k, (field, &start)) in fields.iter().zip(starts).enumerate() {
        let width = field.width;
        if field.text {
            let mut offsets = Vec::with_capacity(n + 1);
            let mut data = Vec::with_capacity(n * width);
            offsets.push(0i32);
            for record in block.chunks_exact(size) {
                let text = without_trailing_nuls(&record[start..start + width]);
                if !text.is_ascii() && std::str::from_utf8(text).is_err() {
                    return Err(first_not_text(block, size, fields, starts, first_record));
                }
                data.extend_from_slice(text);
                offsets.push(data.len() as i32);
            }
            texts.push((offsets, data));
            continue;
        }
        let out = &mut *share[k];
        match width {
            1 => copy_values::<1>(block, size, start, out),
            2 => copy_values::<2>(block, size, start, out),
            4 => copy_values::<4>(block, size, start, out),
            8 => copy_values::<8>(block, size, start, out),
            _ => {
                for (record, slot) in block.chunks_exact(size).zip(out.chunks_exact_mut(width)) {
                    slot.copy_from_slice(&record[start..start + width]);
                }
            }
        }
        if cfg!(target_endian = "big") {
            out.chunks_exact_mut(width).for_each(<[u8]>::reverse); // the binary form is little-endian
        }
    }
    Ok(texts)
}

/// A `char` value without its NUL padding (a NUL inside the text stays, as in numpy).
fn without_trailing_nuls(value: &[u8]) -> &[u8] {
    let end = value.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
    &value[..end]
}

/// The first (record, then field) `char` value of a block that is not UTF-8 text.
fn first_not_text(
    block: &[u8],
    size: usize,
    fields: &[PackedField],
    starts: &[usize],
    first_record: usize,
) -> NotText {
    for (i, record) in block.chunks_exact(size).enumerate() {
        for (k, (field, &start)) in fields.iter().zip(starts).enumerate() {
            let value = without_trailing_nuls(&record[start..start + field.width]);
            if field.text && std::str::from_utf8(value).is_err() {
                return NotText {
                    record: first_record + i,
                    field: k,
                };
            }
        }
    }
    unreachable!("called for a block with a value that is not text")
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::Rng;

    fn fields() -> Vec<PackedField> {
        vec![
            PackedField {
                width: 3,
                text: true,
            },
            PackedField {
                width: 8,
                text: false,
            },
            PackedField {
                width: 2,
                text: false,
            },
        ]
    }

    #[test]
    fn columns_hold_each_field_and_text_loses_its_trailing_nuls() {
        let mut buffer = Vec::new();
        for (text, x, y) in [
            (b"ab\0", 7i64, 1u16),
            (b"\0\0\0", -1, 2),
            (b"a\0c", 3, 65535),
        ] {
            buffer.extend_from_slice(text);
            buffer.extend_from_slice(&x.to_le_bytes());
            buffer.extend_from_slice(&y.to_le_bytes());
        }
        let columns = unpack(&buffer, &fields()).unwrap();
        assert_eq!(
            columns[0],
            Column::Text {
                offsets: vec![0, 2, 2, 5],
                data: b"aba\0c".to_vec()
            }
        );
        let expected: Vec<u8> = [7i64, -1, 3].iter().flat_map(|x| x.to_ne_bytes()).collect();
        assert_eq!(columns[1], Column::Fixed(expected));
        let expected: Vec<u8> = [1u16, 2, 65535]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        assert_eq!(columns[2], Column::Fixed(expected));
    }

    #[test]
    fn blocks_join_in_order_and_bad_text_is_located() {
        let mut rng = Rng(0xFEED_5EED_1234_5678);
        let n = 3 * BLOCK_RECORDS + 17;
        let mut buffer = Vec::with_capacity(n * 13);
        let mut texts = Vec::new();
        for i in 0..n {
            let len = (rng.next() % 4) as usize;
            let text: Vec<u8> = (0..len.min(3))
                .map(|_| b'a' + (rng.next() % 26) as u8)
                .collect();
            let mut padded = text.clone();
            padded.resize(3, 0);
            buffer.extend_from_slice(&padded);
            buffer.extend_from_slice(&(i as i64).to_le_bytes());
            buffer.extend_from_slice(&(i as u16).to_le_bytes());
            texts.push(text);
        }
        let columns = unpack(&buffer, &fields()).unwrap();
        let Column::Text { offsets, data } = &columns[0] else {
            panic!("text column")
        };
        for (i, text) in texts.iter().enumerate() {
            assert_eq!(
                &data[offsets[i] as usize..offsets[i + 1] as usize],
                &text[..]
            );
        }
        let Column::Fixed(numbers) = &columns[1] else {
            panic!("fixed column")
        };
        assert!(numbers
            .chunks_exact(8)
            .enumerate()
            .all(|(i, b)| i64::from_ne_bytes(b.try_into().unwrap()) == i as i64));
        let bad = 2 * BLOCK_RECORDS + 5;
        buffer[bad * 13] = 0xFF;
        assert_eq!(
            unpack(&buffer, &fields()),
            Err(NotText {
                record: bad,
                field: 0
            })
        );
    }
}
