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

/// The leaves of one JSON text that must be an object, in depth-first order.
pub fn flatten(text: &[u8]) -> Result<Vec<Leaf>, Refused> {
    let root: Map<String, Value> = match serde_json::from_slice(text) {
        Ok(Value::Object(map)) => map,
        _ => return Err(Refused),
    };
    let mut leaves = Vec::new();
    if root.is_empty() {
        leaves.push(Leaf {
            key: EMPTY_DOCUMENT_KEY.to_owned(),
            ord: 0,
            value: Scalar::Kind(KIND_EMPTY_DOCUMENT),
        });
        return Ok(leaves);
    }
    // The same explicit stack as the Python walk, so `ord` comes out alike.
    let mut stack: Vec<(String, &Value)> = Vec::new();
    for (key, value) in root.iter().rev() {
        let mut flat = String::with_capacity(key.len());
        push_escaped(&mut flat, key);
        stack.push((flat, value));
    }
    while let Some((key, value)) = stack.pop() {
        let ord = leaves.len() as u32;
        let scalar = match value {
            Value::String(s) => Scalar::Str(s.clone()),
            Value::Bool(b) => Scalar::Bool(*b),
            Value::Number(n) => number(n.as_str())?,
            Value::Null => Scalar::Kind(KIND_NULL),
            Value::Object(map) => {
                if map.is_empty() {
                    Scalar::Kind(KIND_EMPTY_OBJECT)
                } else {
                    for (child_key, child) in map.iter().rev() {
                        let mut flat = String::with_capacity(key.len() + child_key.len() + 1);
                        flat.push_str(&key);
                        flat.push('.');
                        push_escaped(&mut flat, child_key);
                        stack.push((flat, child));
                    }
                    continue;
                }
            }
            Value::Array(items) => {
                if items.is_empty() {
                    Scalar::Kind(KIND_EMPTY_ARRAY)
                } else {
                    for (index, child) in items.iter().enumerate().rev() {
                        stack.push((format!("{key}[{index}]"), child));
                    }
                    continue;
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str) -> Vec<(String, u32, Scalar)> {
        flatten(text.as_bytes())
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
            for leaf in flatten(text.as_bytes()).unwrap() {
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
            assert_eq!(flatten(text.as_bytes()), Err(Refused), "{text}");
        }
    }
}
