//! Bindings of the hybrid mapping's packed object texts (`crate::jsontext`):
//! packing, unpacking, and reading them straight into Python objects.

use crate::bindings::documents::{FnvMap, GcPause};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use std::borrow::Cow;

/// Packs JSON texts as the hybrid mapping keeps them (`jsontext::pack_text`).
#[pyfunction]
pub fn pack_documents<'py>(
    py: Python<'py>,
    texts: Vec<String>,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    use rayon::prelude::*;
    let packed: Vec<Vec<u8>> = py.detach(|| {
        crate::pool::install(|| {
            texts
                .par_iter()
                .map(|t| crate::jsontext::pack_text(t))
                .collect()
        })
    });
    Ok(packed.iter().map(|p| PyBytes::new(py, p)).collect())
}

/// The texts of packed documents (see `_core.pyi`), each checked to be JSON:
/// its callers hand the text on unparsed, so damage must be found here.
#[pyfunction]
pub fn unpack_texts(py: Python<'_>, packed: Vec<Bound<'_, PyBytes>>) -> PyResult<Vec<String>> {
    unpacked(py, &packed, true)
}

/// The texts of packed documents, unpacked in parallel without the GIL (and,
/// with `check_json`, checked to be JSON); a damaged one is a `ValueError`
/// naming its position.
fn unpacked(
    py: Python<'_>,
    packed: &[Bound<'_, PyBytes>],
    check_json: bool,
) -> PyResult<Vec<String>> {
    let parts: Vec<&[u8]> = packed.iter().map(|b| b.as_bytes()).collect();
    let one = |i: usize, p: &&[u8]| -> Result<String, String> {
        let text = crate::jsontext::unpack_text(p)
            .map_err(|e| format!("packed document {i} is damaged: {e}"))?;
        if check_json {
            serde_json::from_str::<serde::de::IgnoredAny>(&text)
                .map_err(|e| format!("packed document {i} is damaged: not JSON ({e})"))?;
        }
        Ok(text)
    };
    // (up to SERIAL_TEXTS objects, a point query's, on this thread: load_documents of
    // NoBench objects, through the pool against here, 1 object 20.4 against 5.5 us,
    // 16: 111 against 71 us, 128: the same, 256: 1.01 against 1.08 ms, a script)
    py.detach(|| {
        crate::pool::map(&parts, SERIAL_TEXTS, one)
            .into_iter()
            .collect::<Result<Vec<_>, String>>()
    })
    .map_err(PyValueError::new_err)
}

/// At most this many packed texts are unpacked without the thread pool.
const SERIAL_TEXTS: usize = 128;

/// The values of packed JSON texts, as Python's `json.loads` reads each (see
/// `_core.pyi`). Unpacked in parallel without the GIL; then each text is read
/// straight into Python objects (no intermediate tree), with one Python string
/// per distinct key across all of them: 1,000 NoBench objects took ~6.5 ms in
/// `json.loads`, which makes every key afresh in every text, and 8-14 ms going
/// through serde_json's values (a script).
#[pyfunction]
pub fn load_documents<'py>(
    py: Python<'py>,
    packed: Vec<Bound<'py, PyBytes>>,
) -> PyResult<Bound<'py, PyList>> {
    // (each text is checked as it is read)
    let texts = unpacked(py, &packed, false)?;
    let _gc = GcPause::new(py);
    let mut keys: FnvMap<String, Bound<'py, pyo3::types::PyString>> = FnvMap::default();
    let out = PyList::empty(py);
    for (i, text) in texts.iter().enumerate() {
        let mut reader = PyJsonReader {
            py,
            text: text.as_bytes(),
            at: 0,
            keys: &mut keys,
        };
        let value = reader.document().map_err(|e| {
            PyValueError::new_err(format!("packed document {i} is damaged: not JSON ({e})"))
        })?;
        out.append(value)?;
    }
    Ok(out)
}

/// A JSON reader that makes Python objects as it goes, for `load_documents`.
/// It reads what RFC 8259 allows, as Python's `json` does, and refuses the
/// rest (its callers read texts this kernel or `json.dumps` wrote).
struct PyJsonReader<'a, 'py> {
    py: Python<'py>,
    text: &'a [u8],
    at: usize,
    keys: &'a mut FnvMap<String, Bound<'py, pyo3::types::PyString>>,
}

/// Objects and arrays a packed text may nest: past the documents' own depth
/// limit (100), so only damage reaches it.
const LOAD_DEPTH: usize = 512;

impl<'a, 'py> PyJsonReader<'a, 'py> {
    fn fail<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at byte {}", self.at))
    }

    fn skip_space(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.text.get(self.at) {
            self.at += 1;
        }
    }

    fn document(&mut self) -> Result<Bound<'py, PyAny>, String> {
        let value = self.value(0)?;
        self.skip_space();
        if self.at != self.text.len() {
            return self.fail("text after the value");
        }
        Ok(value)
    }

    fn value(&mut self, depth: usize) -> Result<Bound<'py, PyAny>, String> {
        use pyo3::types::{PyBool, PyDict, PyString};
        let py = self.py;
        let error = |e: PyErr| e.to_string();
        if depth > LOAD_DEPTH {
            return self.fail("nesting too deep");
        }
        self.skip_space();
        match self.text.get(self.at) {
            Some(b'{') => {
                self.at += 1;
                let dict = PyDict::new(py);
                self.skip_space();
                if self.text.get(self.at) == Some(&b'}') {
                    self.at += 1;
                    return Ok(dict.into_any());
                }
                loop {
                    self.skip_space();
                    if self.text.get(self.at) != Some(&b'"') {
                        return self.fail("a key expected");
                    }
                    let key = self.string()?;
                    let key = match self.keys.get(key.as_ref()) {
                        Some(made) => made.clone(),
                        None => {
                            let made = PyString::new(py, &key);
                            self.keys.insert(key.into_owned(), made.clone());
                            made
                        }
                    };
                    self.skip_space();
                    if self.text.get(self.at) != Some(&b':') {
                        return self.fail("':' expected");
                    }
                    self.at += 1;
                    let item = self.value(depth + 1)?;
                    dict.set_item(key, item).map_err(error)?;
                    self.skip_space();
                    match self.text.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b'}') => {
                            self.at += 1;
                            return Ok(dict.into_any());
                        }
                        _ => return self.fail("',' or '}' expected"),
                    }
                }
            }
            Some(b'[') => {
                self.at += 1;
                let list = PyList::empty(py);
                self.skip_space();
                if self.text.get(self.at) == Some(&b']') {
                    self.at += 1;
                    return Ok(list.into_any());
                }
                loop {
                    list.append(self.value(depth + 1)?).map_err(error)?;
                    self.skip_space();
                    match self.text.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b']') => {
                            self.at += 1;
                            return Ok(list.into_any());
                        }
                        _ => return self.fail("',' or ']' expected"),
                    }
                }
            }
            Some(b'"') => {
                let text = self.string()?;
                Ok(PyString::new(py, &text).into_any())
            }
            Some(b't') => self.word("true", PyBool::new(py, true).to_owned().into_any()),
            Some(b'f') => self.word("false", PyBool::new(py, false).to_owned().into_any()),
            Some(b'n') => self.word("null", py.None().into_bound(py)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => self.fail("a value expected"),
        }
    }

    fn word(&mut self, word: &str, value: Bound<'py, PyAny>) -> Result<Bound<'py, PyAny>, String> {
        if self.text[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(value)
        } else {
            self.fail("a value expected")
        }
    }

    /// A number as `json.loads` reads it: an int without fraction or exponent
    /// (of any length), otherwise a float.
    fn number(&mut self) -> Result<Bound<'py, PyAny>, String> {
        let py = self.py;
        let start = self.at;
        let digits = |r: &mut Self| {
            let from = r.at;
            while let Some(b'0'..=b'9') = r.text.get(r.at) {
                r.at += 1;
            }
            r.at > from
        };
        if self.text.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        let leading_zero = self.text.get(self.at) == Some(&b'0');
        if !digits(self)
            || (leading_zero && self.at - start > 1 + usize::from(self.text[start] == b'-'))
        {
            return self.fail("a number expected");
        }
        let mut float = false;
        if self.text.get(self.at) == Some(&b'.') {
            self.at += 1;
            float = true;
            if !digits(self) {
                return self.fail("digits expected after '.'");
            }
        }
        if let Some(b'e' | b'E') = self.text.get(self.at) {
            self.at += 1;
            float = true;
            if let Some(b'+' | b'-') = self.text.get(self.at) {
                self.at += 1;
            }
            if !digits(self) {
                return self.fail("digits expected in the exponent");
            }
        }
        let literal = std::str::from_utf8(&self.text[start..self.at]).expect("ASCII digits");
        if float {
            let x: f64 = literal
                .parse()
                .map_err(|_| format!("{literal:?} is not a number"))?;
            Ok(pyo3::types::PyFloat::new(py, x).into_any())
        } else if let Ok(i) = literal.parse::<i64>() {
            Ok(i.into_pyobject(py)
                .unwrap_or_else(|never| match never {})
                .into_any())
        } else {
            // beyond 64 bits: Python's int reads any length, as json.loads does
            py.get_type::<pyo3::types::PyInt>()
                .call1((literal,))
                .map_err(|e| e.to_string())
        }
    }

    /// A string's text (`at` on its opening quote), borrowed where it has no escapes.
    fn string(&mut self) -> Result<Cow<'a, str>, String> {
        let text: &'a [u8] = self.text;
        self.at += 1;
        let start = self.at;
        loop {
            match self.text.get(self.at) {
                None => return self.fail("an unclosed string"),
                Some(b'"') => {
                    let raw = std::str::from_utf8(&text[start..self.at])
                        .map_err(|_| "text that is not UTF-8".to_owned())?;
                    self.at += 1;
                    return Ok(Cow::Borrowed(raw));
                }
                Some(b'\\') => break,
                Some(c) if *c < 0x20 => return self.fail("a control character in a string"),
                Some(_) => self.at += 1,
            }
        }
        // escapes: copy what came before, then decode as we go
        let mut out = String::from(
            std::str::from_utf8(&self.text[start..self.at])
                .map_err(|_| "text that is not UTF-8".to_owned())?,
        );
        loop {
            let run = self.at;
            while let Some(c) = self.text.get(self.at) {
                if matches!(c, b'"' | b'\\') || *c < 0x20 {
                    break;
                }
                self.at += 1;
            }
            out.push_str(
                std::str::from_utf8(&self.text[run..self.at])
                    .map_err(|_| "text that is not UTF-8".to_owned())?,
            );
            match self.text.get(self.at) {
                Some(b'"') => {
                    self.at += 1;
                    return Ok(Cow::Owned(out));
                }
                Some(b'\\') => {
                    self.at += 1;
                    let escaped = self.text.get(self.at).copied();
                    self.at += 1;
                    match escaped {
                        Some(b'"') => out.push('"'),
                        Some(b'\\') => out.push('\\'),
                        Some(b'/') => out.push('/'),
                        Some(b'b') => out.push('\u{08}'),
                        Some(b'f') => out.push('\u{0c}'),
                        Some(b'n') => out.push('\n'),
                        Some(b'r') => out.push('\r'),
                        Some(b't') => out.push('\t'),
                        Some(b'u') => {
                            let unit = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&unit)
                                && self.text[self.at..].starts_with(b"\\u")
                            {
                                self.at += 2;
                                let low = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&low) {
                                    return self.fail("a lone surrogate");
                                }
                                0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                            } else {
                                unit
                            };
                            // (a lone surrogate cannot be a Rust char: refused as damage)
                            out.push(char::from_u32(code).ok_or("a lone surrogate")?);
                        }
                        _ => return self.fail("an unknown escape"),
                    }
                }
                _ => return self.fail("an unclosed string"),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .text
            .get(self.at..self.at + 4)
            .filter(|d| d.iter().all(u8::is_ascii_hexdigit)) // (from_str_radix takes a '+')
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| u32::from_str_radix(d, 16).ok());
        match digits {
            Some(unit) => {
                self.at += 4;
                Ok(unit)
            }
            None => self.fail("four hex digits expected"),
        }
    }
}
