//! The hybrid mapping's object texts: each document's JSON text written from its
//! flattened leaves exactly as Python's `json.dumps(document, ensure_ascii=False)`
//! writes the document they rebuild into, and packed as one zstd frame.

use crate::jsonflat::{
    parse_key, Leaf, Scalar, Step, EMPTY_DOCUMENT_KEY, KIND_EMPTY_ARRAY, KIND_EMPTY_DOCUMENT,
    KIND_EMPTY_OBJECT, KIND_NULL,
};

/// The text Python's `json.dumps(document, ensure_ascii=False)` gives for the
/// document that `leaves` (one document's, in `ord` order, as `flatten_tree`
/// makes them) rebuild into. The hybrid mapping keeps this text beside the
/// shredded rows, so that a whole-object fetch reads one row and a SQL scan
/// hands the text on as it is: it must be, byte for byte, what the rebuild
/// followed by `json.dumps` gives. `None` for leaves no flattening makes.
/// Without `negative_zero`, -0.0 is written as 0.0, as a backend that stores
/// it so (SQLite, MariaDB) gives it back in the shredded rows.
pub fn document_text(leaves: &[Leaf], negative_zero: bool) -> Option<String> {
    struct Open {
        step: Step,
        array: bool,
        filled: bool,
    }
    fn member(out: &mut String, top: &mut Open, step: &Step) {
        if top.filled {
            out.push_str(", ");
        }
        top.filled = true;
        if let Step::Key(key) = step {
            push_json_string(out, key);
            out.push_str(": ");
        }
    }
    let mut out = String::with_capacity(leaves.len() * 24 + 2);
    out.push('{');
    // the root, then the containers open below it
    let mut open = vec![Open {
        step: Step::Key(String::new()),
        array: false,
        filled: false,
    }];
    for leaf in leaves {
        if leaf.key == EMPTY_DOCUMENT_KEY {
            // the one row of `{}`, and nothing else can have this key
            return matches!(leaf.value, Scalar::Kind(KIND_EMPTY_DOCUMENT)).then(|| "{}".into());
        }
        let steps = parse_key(&leaf.key)?;
        let (last, parents) = steps.split_last()?;
        let shared = open[1..]
            .iter()
            .zip(parents)
            .take_while(|(o, step)| o.step == **step)
            .count();
        while open.len() > shared + 1 {
            let closed = open.pop().expect("more than the root is open");
            out.push(if closed.array { ']' } else { '}' });
        }
        for (i, step) in parents.iter().enumerate().skip(shared) {
            let top = open.last_mut().expect("the root stays open");
            if top.array != matches!(step, Step::Index(_)) {
                return None;
            }
            member(&mut out, top, step);
            let array = matches!(parents.get(i + 1).unwrap_or(last), Step::Index(_));
            out.push(if array { '[' } else { '{' });
            open.push(Open {
                step: step.clone(),
                array,
                filled: false,
            });
        }
        let top = open.last_mut().expect("the root stays open");
        if top.array != matches!(last, Step::Index(_)) {
            return None;
        }
        member(&mut out, top, last);
        match &leaf.value {
            Scalar::Str(text) => push_json_string(&mut out, text),
            Scalar::Int(i) => out.push_str(&i.to_string()),
            Scalar::Float(x) if *x == 0.0 && !negative_zero => out.push_str("0.0"),
            Scalar::Float(x) => push_python_float(&mut out, *x),
            Scalar::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Scalar::Kind(KIND_NULL) => out.push_str("null"),
            Scalar::Kind(KIND_EMPTY_OBJECT) => out.push_str("{}"),
            Scalar::Kind(KIND_EMPTY_ARRAY) => out.push_str("[]"),
            Scalar::Kind(_) => return None,
        }
    }
    while let Some(closed) = open.pop() {
        out.push(if closed.array { ']' } else { '}' });
    }
    Some(out)
}

/// `text` as a JSON string the way Python's `json` writes it with
/// `ensure_ascii=False`: only `"`, `\` and the C0 controls are escaped.
fn push_json_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A finite double as Python's `repr` writes it: the shortest digits that read
/// back as the same double (the even one of two equally near, as serde_json's
/// formatter picks too; Rust's `{:e}` picks the upper), positional from 1e-4
/// up to (not including) 1e16 and with a `.0` when whole, otherwise
/// `d.ddde+XX`.
fn push_python_float(out: &mut String, x: f64) {
    if x.is_sign_negative() {
        out.push('-');
    }
    if x == 0.0 {
        out.push_str("0.0");
        return;
    }
    let written = serde_json::to_string(&x.abs()).expect("a finite double is written");
    let (mantissa, exponent) = written.split_once(['e', 'E']).unwrap_or((&written, "0"));
    let exponent: i32 = exponent.parse().expect("an exponent is an integer");
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    // the digits d1d2... with the value 0.d1d2... x 10^point
    let mut point = whole.len() as i32 + exponent;
    let all = format!("{whole}{fraction}");
    let leading = all.len() - all.trim_start_matches('0').len();
    point -= leading as i32;
    let digits = all[leading..].trim_end_matches('0');
    if !(-4 < point && point <= 16) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let shown = point - 1;
        out.push_str(&format!(
            "e{}{:02}",
            if shown < 0 { '-' } else { '+' },
            shown.abs()
        ));
    } else if point <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-point) as usize));
        out.push_str(digits);
    } else if point as usize >= digits.len() {
        out.push_str(digits);
        out.extend(std::iter::repeat_n('0', point as usize - digits.len()));
        out.push_str(".0");
    } else {
        out.push_str(&digits[..point as usize]);
        out.push('.');
        out.push_str(&digits[point as usize..]);
    }
}

/// The zstd level of a document's packed text. Level 1 keeps loads fast; NoBench
/// objects (1 KB of JSON each) pack to a little over a quarter (283 bytes).
const PACK_LEVEL: i32 = 1;
/// No packed document unpacks past this (the limits on a document keep real
/// ones far below): a damaged frame header cannot make the reader allocate more.
const UNPACKED_LIMIT: usize = 1 << 30;

thread_local! {
    /// Each thread's compressor, kept between documents (making a context per
    /// document cost 10 us of the 12 us an unpack took, in a release-build test).
    static PACKER: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { std::cell::RefCell::new(None) };
    /// Each thread's decompressor, kept between documents likewise.
    static UNPACKER: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// A document's JSON text as the hybrid mapping keeps it: one zstd frame that
/// records its size and a checksum of the text (so damage is found, not read).
pub fn pack_text(text: &str) -> Vec<u8> {
    PACKER.with(|cell| {
        let mut cell = cell.borrow_mut();
        let packer = cell.get_or_insert_with(|| {
            let mut made = zstd::bulk::Compressor::new(PACK_LEVEL).expect("a zstd level");
            made.include_checksum(true).expect("zstd checksums");
            made
        });
        packer
            .compress(text.as_bytes())
            .expect("zstd compresses any bytes")
    })
}

/// The text of a packed document (its readers check that it is JSON); an
/// error says what is wrong with it.
pub fn unpack_text(packed: &[u8]) -> Result<String, String> {
    let size = zstd::zstd_safe::get_frame_content_size(packed)
        .map_err(|_| "not a zstd frame".to_owned())?
        .ok_or_else(|| "a zstd frame without its size".to_owned())?;
    if size > UNPACKED_LIMIT as u64 {
        return Err(format!("a frame claiming {size} bytes"));
    }
    let bytes = UNPACKER
        .with(|cell| {
            let mut cell = cell.borrow_mut();
            let unpacker = match &mut *cell {
                Some(made) => made,
                empty => empty.insert(zstd::bulk::Decompressor::new().map_err(|e| e.to_string())?),
            };
            unpacker
                .decompress(packed, size as usize)
                .map_err(|e| e.to_string())
        })
        .map_err(|e| format!("zstd: {e}"))?;
    String::from_utf8(bytes).map_err(|_| "text that is not UTF-8".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonflat::{flatten, Limits};

    fn text_of(json: &str) -> String {
        document_text(&flatten(json.as_bytes(), &Limits::NONE).unwrap(), true).unwrap()
    }

    #[test]
    fn document_text_is_pythons_json_dumps() {
        assert_eq!(
            text_of(r#"{"a": {"b": 1, "c": [true, "x", {"d": []}]}, "e": null, "f": {}}"#),
            r#"{"a": {"b": 1, "c": [true, "x", {"d": []}]}, "e": null, "f": {}}"#
        );
        assert_eq!(text_of("{}"), "{}");
        let zero = flatten(br#"{"z": [-0.0, 0.0, -1.5]}"#, &Limits::NONE).unwrap();
        assert_eq!(
            document_text(&zero, false).unwrap(),
            r#"{"z": [0.0, 0.0, -1.5]}"#
        );
        assert_eq!(
            text_of(r#"{"a": [[1, 2], [3]], "b": [{"x": 1}, {"x": 2}]}"#),
            r#"{"a": [[1, 2], [3]], "b": [{"x": 1}, {"x": 2}]}"#
        );
        assert_eq!(
            text_of(r#"{"a.b": {"[c]": "q\"\\\n\u0001\u007f é"}}"#),
            "{\"a.b\": {\"[c]\": \"q\\\"\\\\\\n\\u0001\u{7f} é\"}}"
        );
        // floats as Python's repr writes them; a tie of two shortest forms goes to the even one
        assert_eq!(
            text_of(
                r#"{"f": [1.0, 1e16, 1e15, 0.0001, 0.00001, 1.5e-7, -0.0, 123.456, 1e300, 5e-324, 1013234071406396.25]}"#
            ),
            r#"{"f": [1.0, 1e+16, 1000000000000000.0, 0.0001, 1e-05, 1.5e-07, -0.0, 123.456, 1e+300, 5e-324, 1013234071406396.2]}"#
        );
    }

    #[test]
    fn packed_texts_unpack_and_damage_is_named() {
        let text = r#"{"a": "é", "b": [1, 2.5]}"#;
        let packed = pack_text(text);
        assert_eq!(unpack_text(&packed).unwrap(), text);
        assert!(unpack_text(b"{}").unwrap_err().contains("zstd"));
        let mut cut = packed.clone();
        cut.truncate(packed.len() - 2);
        assert!(unpack_text(&cut).is_err());
        let mut flipped = packed.clone();
        flipped[packed.len() / 2] ^= 0x10;
        assert!(unpack_text(&flipped).is_err()); // the checksum finds it
    }
}
