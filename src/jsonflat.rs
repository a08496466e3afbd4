//! Argo's key flattening of JSON text (the documents model's bulk-load path),
//! and the parsing of flattened keys back into steps (its rebuild path).
//!
//! The reference is `tesseradb.documents._keys.flatten_document` over
//! Python's `json.loads`; this kernel must give exactly its rows for every
//! document it accepts. Whatever it is unsure of (numbers outside 64-bit
//! integers or doubles, text that is not a JSON object, malformed JSON) it
//! refuses, and the caller hands that document to the Python path, which
//! either accepts it the same way or raises the user-facing error. So the
//! kernel never needs error messages of its own.

use serde_json::{Map, Value};
use std::borrow::Cow;

/// `valkind` of leaves that carry no primitive value (as in `_keys.py`).
pub const KIND_NULL: i64 = 0;
pub const KIND_EMPTY_OBJECT: i64 = 1;
pub const KIND_EMPTY_ARRAY: i64 = 2;
pub const KIND_EMPTY_DOCUMENT: i64 = 3;
/// The key of the one row of a document with no keys.
pub const EMPTY_DOCUMENT_KEY: &str = "]";

/// The value of one leaf, in the column of its type.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// null, {} or [] (a `KIND_*`)
    Kind(i64),
}

/// One row of a flattened document: flattened key, depth-first position, value.
#[derive(Debug, Clone, PartialEq)]
pub struct Leaf {
    pub key: String,
    pub ord: u32,
    pub value: Scalar,
}

/// Why the kernel would not flatten a document (the Python path decides what to say).
#[derive(Debug, PartialEq, Eq)]
pub struct Refused;

/// The limits a document must keep to be stored (`_keys.DocumentLimits`):
/// a document past one is refused here and the Python path names the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// objects and arrays enclosing a value, the document itself counted
    pub depth: usize,
    /// characters of a flattened key (escapes counted)
    pub key_chars: usize,
    /// UTF-8 bytes of a string value
    pub string_bytes: usize,
    /// UTF-8 bytes of a flattened key and its string value together (0: no limit)
    pub key_and_string_bytes: usize,
    /// leaves (rows) of one document
    pub leaves: usize,
    /// whether keys and strings may hold U+0000 (PostgreSQL's text cannot)
    pub nul: bool,
}

impl Limits {
    /// No limits but what memory allows (for tests of the flattening itself).
    pub const NONE: Limits = Limits {
        depth: usize::MAX,
        key_chars: usize::MAX,
        string_bytes: usize::MAX,
        key_and_string_bytes: 0,
        leaves: usize::MAX,
        nul: true,
    };

    fn key(&self, key: &str) -> Result<(), Refused> {
        // a key of at most key_chars characters has at most 4 bytes per character
        if key.len() > self.key_chars && key.chars().count() > self.key_chars {
            return Err(Refused);
        }
        if !self.nul && key.contains('\0') {
            return Err(Refused);
        }
        Ok(())
    }

    fn string(&self, key: &str, value: &str) -> Result<(), Refused> {
        let paired =
            self.key_and_string_bytes != 0 && key.len() + value.len() > self.key_and_string_bytes;
        if value.len() > self.string_bytes || paired || (!self.nul && value.contains('\0')) {
            return Err(Refused);
        }
        Ok(())
    }
}

/// Appends `key` with `\ . [ ]` escaped by a backslash (`_keys.escape_key`).
fn push_escaped(out: &mut String, key: &str) {
    for c in key.chars() {
        if matches!(c, '\\' | '.' | '[' | ']') {
            out.push('\\');
        }
        out.push(c);
    }
}

/// A JSON number as Python's `json` reads it: an integer literal is an int
/// (kept only within 64 bits), anything with a fraction or exponent a double
/// (kept only when finite).
fn number(text: &str) -> Result<Scalar, Refused> {
    if text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) {
        let x: f64 = text.parse().map_err(|_| Refused)?;
        if x.is_finite() {
            Ok(Scalar::Float(x))
        } else {
            Err(Refused)
        }
    } else {
        text.parse::<i64>().map(Scalar::Int).map_err(|_| Refused)
    }
}

/// What the flattening sees of one value of a document tree (serde's or Python's).
pub enum Node<K, N> {
    Leaf(Scalar),
    /// an object's members in order, keys as written (not yet escaped)
    Object(Vec<(K, N)>),
    Array(Vec<N>),
}

/// The leaves of a document whose top-level members are `root`, in depth-first
/// order, the way `_keys.flatten_document` walks (its explicit stack, so `ord`
/// comes out alike); `classify` says what each value is, or refuses it. A
/// document past one of the `limits` is refused (so is a Python dict that
/// holds itself, which the depth limit stops).
pub fn flatten_tree<K: AsRef<str>, N>(
    root: Vec<(K, N)>,
    limits: &Limits,
    mut classify: impl FnMut(N) -> Result<Node<K, N>, Refused>,
) -> Result<Vec<Leaf>, Refused> {
    let mut leaves = Vec::new();
    if root.is_empty() {
        leaves.push(Leaf {
            key: EMPTY_DOCUMENT_KEY.to_owned(),
            ord: 0,
            value: Scalar::Kind(KIND_EMPTY_DOCUMENT),
        });
        return Ok(leaves);
    }
    // (flattened key, value, depth: the objects and arrays enclosing the value)
    let mut stack: Vec<(String, N, usize)> = Vec::new();
    for (key, value) in root.into_iter().rev() {
        let mut flat = String::with_capacity(key.as_ref().len());
        push_escaped(&mut flat, key.as_ref());
        limits.key(&flat)?;
        stack.push((flat, value, 1));
    }
    while let Some((key, value, depth)) = stack.pop() {
        let ord = leaves.len() as u32;
        if leaves.len() >= limits.leaves {
            return Err(Refused);
        }
        let scalar = match classify(value)? {
            Node::Leaf(Scalar::Str(text)) => {
                limits.string(&key, &text)?;
                Scalar::Str(text)
            }
            Node::Leaf(scalar) => scalar,
            Node::Object(members) if members.is_empty() => Scalar::Kind(KIND_EMPTY_OBJECT),
            Node::Object(members) => {
                if depth + 1 > limits.depth {
                    return Err(Refused);
                }
                for (child_key, child) in members.into_iter().rev() {
                    let child_key = child_key.as_ref();
                    let mut flat = String::with_capacity(key.len() + child_key.len() + 1);
                    flat.push_str(&key);
                    flat.push('.');
                    push_escaped(&mut flat, child_key);
                    limits.key(&flat)?;
                    stack.push((flat, child, depth + 1));
                }
                continue;
            }
            Node::Array(items) if items.is_empty() => Scalar::Kind(KIND_EMPTY_ARRAY),
            Node::Array(items) => {
                if depth + 1 > limits.depth {
                    return Err(Refused);
                }
                for (index, child) in items.into_iter().enumerate().rev() {
                    let flat = format!("{key}[{index}]");
                    limits.key(&flat)?;
                    stack.push((flat, child, depth + 1));
                }
                continue;
            }
        };
        leaves.push(Leaf {
            key,
            ord,
            value: scalar,
        });
    }
    Ok(leaves)
}

/// The leaves of one JSON text that must be an object, in depth-first order.
/// (serde_json refuses texts nested deeper than 128, past any depth limit.)
pub fn flatten(text: &[u8], limits: &Limits) -> Result<Vec<Leaf>, Refused> {
    let root: Map<String, Value> = match serde_json::from_slice(text) {
        Ok(Value::Object(map)) => map,
        _ => return Err(Refused),
    };
    flatten_tree(root.iter().collect(), limits, |value: &Value| {
        Ok(match value {
            Value::String(s) => Node::Leaf(Scalar::Str(s.clone())),
            Value::Bool(b) => Node::Leaf(Scalar::Bool(*b)),
            Value::Number(n) => Node::Leaf(number(n.as_str())?),
            Value::Null => Node::Leaf(Scalar::Kind(KIND_NULL)),
            Value::Object(map) => Node::Object(map.iter().collect()),
            Value::Array(items) => Node::Array(items.iter().collect()),
        })
    })
}

/// One step of a flattened key: an object key or an array subscript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Key(String),
    Index(i64),
}

/// The steps of a flattened key, the inverse of the flattening (`_keys.parse_key`).
///
/// `None` for a key the flattening cannot have made (an unclosed or
/// non-numeric subscript).
pub fn parse_key(key: &str) -> Option<Vec<Step>> {
    let mut steps = Vec::new();
    let mut current = String::new();
    let mut in_key = true; // a key step is open (the first step always is)
    let mut chars = key.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek().is_some() => current.push(chars.next()?),
            '.' => {
                if in_key {
                    steps.push(Step::Key(std::mem::take(&mut current)));
                }
                in_key = true;
            }
            '[' => {
                if in_key {
                    steps.push(Step::Key(std::mem::take(&mut current)));
                }
                let mut digits = String::new();
                loop {
                    match chars.next()? {
                        ']' => break,
                        d => digits.push(d),
                    }
                }
                steps.push(Step::Index(digits.parse().ok()?));
                in_key = false;
            }
            _ => current.push(c),
        }
    }
    if in_key {
        steps.push(Step::Key(current));
    }
    Some(steps)
}

/// One Argo row as a backend packs it into JSON text (see `packed_rows`):
/// `[objid, keystr, ord, valstr, valnum, valint, valbool, valkind]`, with
/// `valnum` as the exact decimal text of the double (JSON renderings of
/// doubles are not exact on every backend) and `valbool` as 0 or 1. Texts
/// without escapes are borrowed from the packed text.
#[derive(Debug, Clone, PartialEq)]
pub struct PackedRow<'a> {
    pub objid: i64,
    pub keystr: Cow<'a, str>,
    pub ord: i64,
    pub valstr: Option<Cow<'a, str>>,
    pub valnum: Option<Cow<'a, str>>,
    pub valint: Option<i64>,
    pub valbool: Option<i64>,
    pub valkind: Option<i64>,
}

/// A reader of one packed text: a JSON array of eight-element arrays whose
/// elements are null, integers or strings. Written for this one shape
/// because it borrows every string without escapes, which a general JSON
/// reader into owned rows cannot, and the strings are most of the work.
struct PackedReader<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> PackedReader<'a> {
    fn error(&self, what: &str) -> String {
        format!("packed document rows: {what} at byte {}", self.at)
    }

    fn peek(&mut self) -> Option<u8> {
        let bytes = self.text.as_bytes();
        while self.at < bytes.len() && bytes[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
        bytes.get(self.at).copied()
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected {:?}", byte as char)))
        }
    }

    fn string(&mut self) -> Result<Cow<'a, str>, String> {
        self.expect(b'"')?;
        let bytes = self.text.as_bytes();
        let start = self.at;
        let mut escaped = false;
        while self.at < bytes.len() {
            match bytes[self.at] {
                b'"' => {
                    self.at += 1;
                    if !escaped {
                        return Ok(Cow::Borrowed(&self.text[start..self.at - 1]));
                    }
                    let quoted = &self.text[start - 1..self.at];
                    return serde_json::from_str::<String>(quoted)
                        .map(Cow::Owned)
                        .map_err(|err| self.error(&err.to_string()));
                }
                b'\\' => {
                    escaped = true;
                    self.at += 2;
                }
                _ => self.at += 1,
            }
        }
        Err(self.error("unterminated string"))
    }

    fn integer(&mut self) -> Result<Option<i64>, String> {
        if self.null()? {
            return Ok(None);
        }
        let bytes = self.text.as_bytes();
        let start = self.at;
        if bytes.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        while self.at < bytes.len() && bytes[self.at].is_ascii_digit() {
            self.at += 1;
        }
        self.text[start..self.at]
            .parse()
            .map(Some)
            .map_err(|_| self.error("expected an integer"))
    }

    fn null(&mut self) -> Result<bool, String> {
        if self.peek() == Some(b'n') {
            if !self.text[self.at..].starts_with("null") {
                return Err(self.error("expected null"));
            }
            self.at += 4;
            return Ok(true);
        }
        Ok(false)
    }

    fn text(&mut self) -> Result<Option<Cow<'a, str>>, String> {
        if self.null()? {
            return Ok(None);
        }
        self.string().map(Some)
    }

    fn required(&mut self, what: &str) -> Result<i64, String> {
        self.integer()?
            .ok_or_else(|| self.error(&format!("{what} is null")))
    }

    fn row(&mut self) -> Result<PackedRow<'a>, String> {
        self.expect(b'[')?;
        let objid = self.required("objid")?;
        self.expect(b',')?;
        let keystr = self.string()?;
        self.expect(b',')?;
        let ord = self.required("ord")?;
        self.expect(b',')?;
        let valstr = self.text()?;
        self.expect(b',')?;
        let valnum = self.text()?;
        self.expect(b',')?;
        let valint = self.integer()?;
        self.expect(b',')?;
        let valbool = self.integer()?;
        self.expect(b',')?;
        let valkind = self.integer()?;
        self.expect(b']')?;
        Ok(PackedRow {
            objid,
            keystr,
            ord,
            valstr,
            valnum,
            valint,
            valbool,
            valkind,
        })
    }

    fn rows(mut self) -> Result<Vec<PackedRow<'a>>, String> {
        let mut rows = Vec::new();
        self.expect(b'[')?;
        if self.peek() == Some(b']') {
            self.at += 1;
        } else {
            loop {
                rows.push(self.row()?);
                match self.peek() {
                    Some(b',') => self.at += 1,
                    Some(b']') => {
                        self.at += 1;
                        break;
                    }
                    _ => return Err(self.error("expected ',' or ']'")),
                }
            }
        }
        if self.peek().is_some() {
            return Err(self.error("text after the rows"));
        }
        Ok(rows)
    }
}

/// Packed texts of more bytes than this are read and sorted on the rayon pool.
const PARALLEL_PACKED_BYTES: usize = 1 << 20;

/// The rows of several packed JSON texts (each one array of [`PackedRow`]s),
/// in (objid, ord) order, the order a rebuild takes them in, each once.
///
/// A backend packs each table's rows into one text in C, so a fetch of many
/// rows makes one Python string per table rather than a tuple of objects per
/// row; the tables' rows meet here, so no backend has to sort them. The
/// texts are read in parallel.
pub fn packed_rows<'a>(texts: &[&'a str]) -> Result<Vec<PackedRow<'a>>, String> {
    use rayon::prelude::*;
    let read = |text: &&'a str| PackedReader { text, at: 0 }.rows();
    // Waking the pool costs more than reading a few hundred kilobytes.
    let parallel = texts.iter().map(|t| t.len()).sum::<usize>() > PARALLEL_PACKED_BYTES;
    let parts: Vec<Vec<PackedRow<'a>>> = if parallel {
        crate::pool::install(|| texts.par_iter().map(read).collect::<Result<_, _>>())?
    } else {
        texts.iter().map(read).collect::<Result<_, _>>()?
    };
    let mut rows: Vec<Option<PackedRow<'a>>> = parts.into_iter().flatten().map(Some).collect();
    // Sorted as small keys, not as whole rows, which are ten times larger.
    let mut order: Vec<(i64, i64, usize)> = rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let row = row.as_ref().expect("every row is there");
            (row.objid, row.ord, i)
        })
        .collect();
    if parallel {
        crate::pool::install(|| order.par_sort_unstable());
    } else {
        order.sort_unstable();
    }
    // (objid, ord) is a leaf's position in its object's walk: a row selected
    // twice (by overlapping projections) is kept once
    order.dedup_by_key(|(objid, ord, _)| (*objid, *ord));
    Ok(order
        .into_iter()
        .map(|(_, _, i)| rows[i].take().expect("each row is taken once"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str) -> Vec<(String, u32, Scalar)> {
        flatten(text.as_bytes(), &Limits::NONE)
            .unwrap()
            .into_iter()
            .map(|l| (l.key, l.ord, l.value))
            .collect()
    }

    #[test]
    fn flattens_the_papers_example_in_order() {
        let got = keys(r#"{"a": {"b": 1, "c": [true, "x"]}, "d": null}"#);
        assert_eq!(
            got,
            vec![
                ("a.b".into(), 0, Scalar::Int(1)),
                ("a.c[0]".into(), 1, Scalar::Bool(true)),
                ("a.c[1]".into(), 2, Scalar::Str("x".into())),
                ("d".into(), 3, Scalar::Kind(KIND_NULL)),
            ]
        );
    }

    #[test]
    fn keeps_key_order_and_escapes_special_characters() {
        let got = keys(r#"{"z": 1, "a.b": 2, "[x]": 3, "back\\slash": 4, "": 5}"#);
        let names: Vec<_> = got.iter().map(|(k, _, _)| k.as_str()).collect();
        assert_eq!(names, vec!["z", "a\\.b", "\\[x\\]", "back\\\\slash", ""]);
    }

    #[test]
    fn empty_containers_and_documents_are_leaves() {
        assert_eq!(
            keys(r#"{"o": {}, "a": []}"#),
            vec![
                ("o".into(), 0, Scalar::Kind(KIND_EMPTY_OBJECT)),
                ("a".into(), 1, Scalar::Kind(KIND_EMPTY_ARRAY)),
            ]
        );
        assert_eq!(
            keys("{}"),
            vec![("]".into(), 0, Scalar::Kind(KIND_EMPTY_DOCUMENT))]
        );
    }

    #[test]
    fn numbers_keep_their_type_and_exact_value() {
        let got = keys(
            r#"{"i": 9223372036854775807, "n": -9223372036854775808, "f": 1.0, "e": 1e2, "z": -0.0}"#,
        );
        assert_eq!(got[0].2, Scalar::Int(i64::MAX));
        assert_eq!(got[1].2, Scalar::Int(i64::MIN));
        assert_eq!(got[2].2, Scalar::Float(1.0));
        assert_eq!(got[3].2, Scalar::Float(100.0));
        match got[4].2 {
            Scalar::Float(z) => assert!(z == 0.0 && z.is_sign_negative()),
            ref other => panic!("{other:?}"),
        }
    }

    #[test]
    fn duplicate_keys_keep_the_first_place_and_the_last_value() {
        // as a Python dict built by json.loads does
        assert_eq!(
            keys(r#"{"a": 1, "b": 2, "a": 3}"#),
            vec![
                ("a".into(), 0, Scalar::Int(3)),
                ("b".into(), 1, Scalar::Int(2))
            ]
        );
    }

    #[test]
    fn documents_past_a_limit_are_refused() {
        let limits = Limits {
            depth: 3,
            key_chars: 8,
            string_bytes: 4,
            key_and_string_bytes: 6,
            leaves: 3,
            nul: false,
        };
        let ok = |text: &str| flatten(text.as_bytes(), &limits).is_ok();
        // depth: the document is 1, each object or array inside it one more
        assert!(ok(r#"{"a": {"b": [1]}}"#));
        assert!(!ok(r#"{"a": {"b": [[1]]}}"#));
        // an empty array is a leaf, not a level
        assert!(ok(r#"{"a": {"b": [[]]}}"#));
        // key characters (escapes count), not bytes
        assert!(ok(r#"{"ééééééé": 1}"#));
        assert!(!ok(r#"{"abcd.efgh": 1}"#));
        // abcdefg[10] is 11 characters
        assert!(!ok(r#"{"abcdefg": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}"#));
        // string bytes, and key plus string bytes
        assert!(ok(r#"{"a": "xyz"}"#));
        assert!(!ok(r#"{"a": "xyzab"}"#));
        assert!(!ok(r#"{"abc": "wxyz"}"#));
        // leaves
        assert!(ok(r#"{"a": 1, "b": 2, "c": 3}"#));
        assert!(!ok(r#"{"a": 1, "b": 2, "c": 3, "d": 4}"#));
        // U+0000 where it is not allowed
        assert!(!ok(r#"{"a": "x\u0000"}"#));
        assert!(!ok(r#"{"a\u0000": 1}"#));
        assert!(flatten(
            br#"{"a": "x\u0000"}"#,
            &Limits {
                nul: true,
                ..limits
            }
        )
        .is_ok());
    }

    #[test]
    fn packed_rows_of_several_tables_meet_in_objid_and_ord_order() {
        let strings = r#"[[2,"b",1,"x\u0000y",null,null,null,null], [1, "a\\.b", 0, "é", null, null, null, null]]"#;
        let numbers = r#"[[2,"a",0,null,"0.30000000000000004",null,null,null],
                          [1,"n",1,null,"1.0",-1,null,null]]"#;
        let rows = packed_rows(&[strings, numbers, "[]", numbers]).unwrap();
        let order: Vec<(i64, i64)> = rows.iter().map(|r| (r.objid, r.ord)).collect();
        assert_eq!(order, vec![(1, 0), (1, 1), (2, 0), (2, 1)]);
        assert_eq!(rows[0].keystr, "a\\.b");
        assert!(matches!(rows[2].keystr, Cow::Borrowed("a")));
        assert_eq!(rows[3].valstr.as_deref(), Some("x\u{0}y"));
        assert_eq!(rows[1].valint, Some(-1));
        assert_eq!(rows[2].valnum.as_deref(), Some("0.30000000000000004"));
        for bad in [
            "[[1]]",
            "[[1,\"a\",0,null,null,null,null,null]",
            "[[1,\"a\",0,\"x,null,null,null,null]]",
            "[] x",
        ] {
            assert!(packed_rows(&[bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn keys_parse_back_into_steps() {
        use Step::{Index, Key};
        assert_eq!(
            parse_key("kids[3].kids[0]"),
            Some(vec![
                Key("kids".into()),
                Index(3),
                Key("kids".into()),
                Index(0)
            ])
        );
        assert_eq!(
            parse_key("a\\.b.\\[x\\]"),
            Some(vec![Key("a.b".into()), Key("[x]".into())])
        );
        assert_eq!(parse_key(""), Some(vec![Key("".into())]));
        assert_eq!(
            parse_key("a[1][2]"),
            Some(vec![Key("a".into()), Index(1), Index(2)])
        );
        assert_eq!(parse_key("a[x]"), None);
        assert_eq!(parse_key("a[1"), None);
        for text in [r#"{"a.b": {"[c]": [[1, {"\\": 2}]], "": 3}}"#] {
            for leaf in flatten(text.as_bytes(), &Limits::NONE).unwrap() {
                assert!(parse_key(&leaf.key).is_some(), "{}", leaf.key);
            }
        }
    }

    #[test]
    fn refuses_what_the_python_path_must_judge() {
        for text in [
            "[1]",
            "1",
            "{\"a\": 1",
            "{\"a\": NaN}",
            "{\"big\": 9223372036854775808}",
            "{\"inf\": 1e400}",
            "{\"s\": \"\\ud800\"}",
            "",
        ] {
            assert_eq!(
                flatten(text.as_bytes(), &Limits::NONE),
                Err(Refused),
                "{text}"
            );
        }
    }
}
