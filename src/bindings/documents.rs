//! Bindings of the document kernels (Argo): flattening JSON objects into rows and
//! rebuilding objects from rows.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::borrow::Cow;

/// Rows of JSON documents flattened for one of Argo's mappings (see `_core.pyi`).
type DocumentRows<'py> = (Vec<Bound<'py, PyList>>, Vec<usize>);

/// The leaves of a Python dict, as `_keys.flatten_document` makes them.
///
/// Only the exact built-in types are walked (dict, list, tuple, str, int, float,
/// bool, None): a subclass may iterate or convert otherwise (an OrderedDict
/// keeps its own order), so it is refused and takes the Python path, as is
/// anything that path would reject (a key that is not a string, an integer
/// outside 64 bits, NaN, a lone surrogate).
fn flatten_object(
    doc: &Bound<'_, PyAny>,
    limits: &crate::jsonflat::Limits,
) -> Result<Vec<crate::jsonflat::Leaf>, crate::jsonflat::Refused> {
    use crate::jsonflat::{flatten_tree, Node, Refused, Scalar, KIND_NULL};
    use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString, PyTuple};

    fn members<'py>(map: &Bound<'py, PyDict>) -> Result<Vec<(String, Bound<'py, PyAny>)>, Refused> {
        map.iter()
            .map(|(key, value)| {
                if !key.is_exact_instance_of::<PyString>() {
                    return Err(Refused);
                }
                let text = key.cast::<PyString>().map_err(|_| Refused)?.to_str();
                Ok((text.map_err(|_| Refused)?.to_owned(), value))
            })
            .collect()
    }

    if !doc.is_exact_instance_of::<PyDict>() {
        return Err(Refused);
    }
    let root = members(doc.cast::<PyDict>().map_err(|_| Refused)?)?;
    flatten_tree(root, limits, |value: Bound<'_, PyAny>| {
        Ok(if value.is_exact_instance_of::<PyString>() {
            let text = value.cast::<PyString>().map_err(|_| Refused)?;
            Node::Leaf(Scalar::Str(text.to_str().map_err(|_| Refused)?.to_owned()))
        } else if value.is_exact_instance_of::<PyBool>() {
            Node::Leaf(Scalar::Bool(value.is_truthy().map_err(|_| Refused)?))
        } else if value.is_exact_instance_of::<PyInt>() {
            Node::Leaf(Scalar::Int(value.extract::<i64>().map_err(|_| Refused)?))
        } else if value.is_exact_instance_of::<PyFloat>() {
            let x = value.extract::<f64>().map_err(|_| Refused)?;
            if !x.is_finite() {
                return Err(Refused);
            }
            Node::Leaf(Scalar::Float(x))
        } else if value.is_none() {
            Node::Leaf(Scalar::Kind(KIND_NULL))
        } else if value.is_exact_instance_of::<PyDict>() {
            Node::Object(members(value.cast::<PyDict>().map_err(|_| Refused)?)?)
        } else if value.is_exact_instance_of::<PyList>() || value.is_exact_instance_of::<PyTuple>()
        {
            let items = value.try_iter().map_err(|_| Refused)?;
            Node::Array(items.collect::<PyResult<_>>().map_err(|_| Refused)?)
        } else {
            return Err(Refused);
        })
    })
}

/// Flattens JSON texts (bytes or str) and plain dicts into row tuples; objids
/// count from `first_objid`.
///
/// Returns the rows (`wide`: one list of Argo/1's 8-tuples; otherwise four lists,
/// one per Argo/3 table) and the positions of the documents it refused, which
/// the caller flattens on the Python path (where errors are named). Texts are
/// parsed in parallel without the GIL; dicts are walked with it. With `group`
/// above 1, each tuple holds the values of `group` rows one after another (the
/// last of a list maybe fewer), as one multi-row INSERT binds them. `limits`
/// is (depth, key characters, string bytes, key and string bytes or 0, leaves,
/// whether U+0000 is allowed):
/// a document past one is refused, so the Python path names the limit. With
/// `whole`, one more list follows the rows: `(objid, packed)` for each
/// document, its text as `jsonflat::document_text` writes it and
/// `jsonflat::pack_text` packs it (the hybrid mapping's object table), grouped
/// as the rows are; without `negative_zero` the text has 0.0 for -0.0 (for a
/// backend that stores it so).
#[pyfunction]
#[pyo3(signature = (texts, first_objid, wide, limits, group = 1, whole = false, negative_zero = true))]
#[allow(clippy::too_many_arguments)]
pub fn flatten_documents<'py>(
    py: Python<'py>,
    texts: &Bound<'py, PyList>,
    first_objid: i64,
    wide: bool,
    limits: (usize, usize, usize, usize, usize, bool),
    group: usize,
    whole: bool,
    negative_zero: bool,
) -> PyResult<DocumentRows<'py>> {
    use crate::jsonflat::{self, Scalar};
    let limits = jsonflat::Limits {
        depth: limits.0,
        key_chars: limits.1,
        string_bytes: limits.2,
        key_and_string_bytes: limits.3,
        leaves: limits.4,
        nul: limits.5,
    };
    use pyo3::types::{PyBytes, PyString, PyTuple};
    use rayon::prelude::*;
    use std::collections::HashMap;

    enum Input {
        Text(Vec<u8>),
        Flat(Vec<jsonflat::Leaf>),
        Refused,
    }
    // Texts are copied out so the parse can run without the GIL, in parallel.
    let inputs: Vec<Input> = texts
        .iter()
        .map(|item| {
            if let Ok(bytes) = item.cast::<PyBytes>() {
                Input::Text(bytes.as_bytes().to_vec())
            } else if let Ok(text) = item.cast::<PyString>() {
                match text.to_str() {
                    Ok(s) => Input::Text(s.as_bytes().to_vec()),
                    Err(_) => Input::Refused, // lone surrogates
                }
            } else {
                flatten_object(&item, &limits).map_or(Input::Refused, Input::Flat)
            }
        })
        .collect();
    type Flattened = Option<(Vec<jsonflat::Leaf>, Option<Vec<u8>>)>;
    let flattened: Vec<Flattened> = py.detach(|| {
        crate::pool::install(|| {
            inputs
                .into_par_iter()
                .map(|input| {
                    let leaves = match input {
                        Input::Text(text) => jsonflat::flatten(&text, &limits).ok()?,
                        Input::Flat(leaves) => leaves,
                        Input::Refused => return None,
                    };
                    if !whole {
                        return Some((leaves, None));
                    }
                    let text = jsonflat::document_text(&leaves, negative_zero)?;
                    Some((leaves, Some(jsonflat::pack_text(&text))))
                })
                .collect()
        })
    });

    if group == 0 {
        return Err(PyValueError::new_err("group must be at least 1 row"));
    }
    let _gc = GcPause::new(py);
    // values per row of each list, and the values of rows not yet in a tuple
    let widths: &[usize] = match (wide, whole) {
        (true, false) => &[8],
        (true, true) => &[8, 2],
        (false, false) => &[4, 5, 4, 4],
        (false, true) => &[4, 5, 4, 4, 2],
    };
    let mut pending: Vec<Vec<Bound<'py, PyAny>>> = widths
        .iter()
        .map(|w| Vec::with_capacity(w * group))
        .collect();
    let lists: Vec<Bound<'py, PyList>> = widths.iter().map(|_| PyList::empty(py)).collect();
    let none = py.None().into_bound(py);
    // Documents repeat their keys: one Python string per distinct key.
    let mut keys: HashMap<&str, Bound<'py, PyString>> = HashMap::new();
    let mut refused = Vec::new();
    for (position, flat) in flattened.iter().enumerate() {
        let Some((leaves, text)) = flat else {
            refused.push(position);
            continue;
        };
        let objid = (first_objid + position as i64)
            .into_pyobject(py)?
            .into_any();
        if let Some(packed) = text {
            let list = widths.len() - 1;
            pending[list].extend([objid.clone(), PyBytes::new(py, packed).into_any()]);
            if pending[list].len() >= group * widths[list] {
                lists[list].append(PyTuple::new(py, pending[list].drain(..))?)?;
            }
        }
        for leaf in leaves {
            let key = keys
                .entry(leaf.key.as_str())
                .or_insert_with(|| PyString::new(py, &leaf.key))
                .clone()
                .into_any();
            let ord = leaf.ord.into_pyobject(py)?.into_any();
            // the value columns: valstr, valnum, valint, valbool, valkind
            let mut values: [Bound<'py, PyAny>; 5] = std::array::from_fn(|_| none.clone());
            let table = match &leaf.value {
                Scalar::Str(s) => {
                    values[0] = PyString::new(py, s).into_any();
                    0
                }
                Scalar::Int(i) => {
                    values[1] = (*i as f64).into_pyobject(py)?.into_any();
                    values[2] = i.into_pyobject(py)?.into_any();
                    1
                }
                Scalar::Float(x) => {
                    values[1] = x.into_pyobject(py)?.into_any();
                    1
                }
                Scalar::Bool(b) => {
                    values[3] = b.into_pyobject(py)?.to_owned().into_any();
                    2
                }
                Scalar::Kind(k) => {
                    values[4] = k.into_pyobject(py)?.into_any();
                    3
                }
            };
            let [valstr, valnum, valint, valbool, valkind] = values;
            let objid = objid.clone();
            let list = if wide { 0 } else { table };
            let pending = &mut pending[list];
            match (wide, table) {
                (true, _) => {
                    pending.extend([objid, key, ord, valstr, valnum, valint, valbool, valkind])
                }
                (false, 0) => pending.extend([objid, key, ord, valstr]),
                (false, 1) => pending.extend([objid, key, ord, valnum, valint]),
                (false, 2) => pending.extend([objid, key, ord, valbool]),
                (false, _) => pending.extend([objid, key, ord, valkind]),
            }
            if pending.len() >= group * widths[list] {
                lists[list].append(PyTuple::new(py, pending.drain(..))?)?;
            }
        }
    }
    for (list, rest) in lists.iter().zip(pending) {
        if !rest.is_empty() {
            list.append(PyTuple::new(py, rest)?)?;
        }
    }
    Ok((lists, refused))
}

/// FNV-1a: the builder looks up a short key for every row, where the
/// standard library's DoS-resistant SipHash took 7% of a profiled rebuild.
/// The keys are the collection's own, so there is nothing to defend against.
struct FnvHasher(u64);

impl Default for FnvHasher {
    fn default() -> Self {
        FnvHasher(0xcbf2_9ce4_8422_2325) // the offset basis
    }
}

impl std::hash::Hasher for FnvHasher {
    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type FnvMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<FnvHasher>>;

/// Pauses Python's cyclic garbage collector while a kernel makes many fresh
/// containers (row tuples, documents' dicts and lists, none in a cycle), and
/// restores its previous state when dropped. Every collection those allocations
/// set off walks the objects made so far, and the older generations the whole
/// heap: 0.7-1.8 s of the 2-3 s rebuild of a 1M-object NoBench Q1.
struct GcPause {
    was_enabled: bool,
}

impl GcPause {
    fn new(_py: Python<'_>) -> Self {
        // SAFETY: the GIL is held (the token says so); PyGC_Disable has no other requirement.
        let was_enabled = unsafe { pyo3::ffi::PyGC_Disable() } != 0;
        GcPause { was_enabled }
    }
}

impl Drop for GcPause {
    fn drop(&mut self) {
        if self.was_enabled {
            // SAFETY: dropped where it was made, in a function holding the GIL.
            unsafe { pyo3::ffi::PyGC_Enable() };
        }
    }
}

/// Objects rebuilt from Argo rows given in (objid, ord) order, as the
/// reference `_keys.rebuild_documents` builds them.
struct DocumentBuilder<'py> {
    _gc: GcPause,
    py: Python<'py>,
    out: Bound<'py, PyList>,
    parsed: FnvMap<String, std::rc::Rc<Vec<PyStep<'py>>>>,
    current: Option<(i64, Bound<'py, pyo3::types::PyDict>)>,
    // Subscripts come back compacted (a projection of kids[3] is a one-element
    // array): a list's last element is reused only for the subscript it was made for.
    last_index: FnvMap<usize, i64>,
}

enum PyStep<'py> {
    Key(Bound<'py, pyo3::types::PyString>),
    Index(i64),
}

/// A row's value: a primitive, or what its `valkind` stands for.
enum RowValue<'py> {
    Value(Bound<'py, PyAny>),
    Kind(Option<i64>),
}

impl<'py> DocumentBuilder<'py> {
    fn new(py: Python<'py>) -> Self {
        DocumentBuilder {
            _gc: GcPause::new(py),
            py,
            out: PyList::empty(py),
            parsed: FnvMap::default(),
            current: None,
            last_index: FnvMap::default(),
        }
    }

    fn container(&self, following: &PyStep<'py>) -> Bound<'py, PyAny> {
        match following {
            PyStep::Index(_) => PyList::empty(self.py).into_any(),
            PyStep::Key(_) => pyo3::types::PyDict::new(self.py).into_any(),
        }
    }

    fn steps(&mut self, keystr: &str) -> PyResult<std::rc::Rc<Vec<PyStep<'py>>>> {
        use crate::jsonflat::{self, Step};
        if let Some(steps) = self.parsed.get(keystr) {
            return Ok(steps.clone());
        }
        let steps = jsonflat::parse_key(keystr)
            .ok_or_else(|| PyValueError::new_err(format!("{keystr:?} is not a flattened key")))?;
        let py = self.py;
        let steps: std::rc::Rc<Vec<PyStep<'py>>> = std::rc::Rc::new(
            steps
                .into_iter()
                .map(|s| match s {
                    Step::Key(k) => PyStep::Key(pyo3::types::PyString::new(py, &k)),
                    Step::Index(i) => PyStep::Index(i),
                })
                .collect(),
        );
        self.parsed.insert(keystr.to_owned(), steps.clone());
        Ok(steps)
    }

    /// Adds one row of object `objid` (rows of one object come together, in `ord` order).
    fn row(&mut self, objid: i64, keystr: &str, value: RowValue<'py>) -> PyResult<()> {
        use crate::jsonflat::{KIND_EMPTY_ARRAY, KIND_EMPTY_DOCUMENT, KIND_EMPTY_OBJECT};
        use pyo3::types::PyDict;
        let py = self.py;
        if self.current.as_ref().is_none_or(|(id, _)| *id != objid) {
            if let Some((id, doc)) = self.current.take() {
                self.out.append((id, doc))?;
            }
            self.current = Some((objid, PyDict::new(py)));
            self.last_index.clear();
        }
        let value = match value {
            RowValue::Value(value) => value,
            RowValue::Kind(Some(KIND_EMPTY_DOCUMENT)) => return Ok(()),
            RowValue::Kind(Some(KIND_EMPTY_OBJECT)) => PyDict::new(py).into_any(),
            RowValue::Kind(Some(KIND_EMPTY_ARRAY)) => PyList::empty(py).into_any(),
            RowValue::Kind(_) => py.None().into_bound(py),
        };
        let steps = self.steps(keystr)?;
        let (_, root) = self.current.as_ref().expect("a document is open");
        let mut node = root.clone().into_any();
        let mut value = Some(value);
        for (i, step) in steps.iter().enumerate() {
            let following = steps.get(i + 1);
            match step {
                PyStep::Key(key) => {
                    let dict = node.cast::<PyDict>()?.clone();
                    match following {
                        None => dict.set_item(key, value.take())?,
                        Some(next) => {
                            node = match dict.get_item(key)? {
                                Some(child) => child,
                                None => {
                                    let child = self.container(next);
                                    dict.set_item(key, &child)?;
                                    child
                                }
                            };
                        }
                    }
                }
                PyStep::Index(index) => {
                    let list = node.cast::<PyList>()?.clone();
                    let address = list.as_ptr() as usize;
                    match following {
                        None => {
                            list.append(value.take())?;
                            self.last_index.insert(address, *index);
                        }
                        Some(next) => {
                            let len = list.len();
                            node = if len > 0 && self.last_index.get(&address) == Some(index) {
                                list.get_item(len - 1)?
                            } else {
                                let child = self.container(next);
                                list.append(&child)?;
                                self.last_index.insert(address, *index);
                                child
                            };
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn finish(mut self) -> PyResult<Bound<'py, PyList>> {
        if let Some((id, doc)) = self.current.take() {
            self.out.append((id, doc))?;
        }
        Ok(self.out)
    }
}

/// Rebuilds documents from their rows (see `_core.pyi`): `(objid, document)` pairs.
///
/// Rows are `(objid, keystr, ord, valstr, valnum, valint, valbool, valkind)`,
/// grouped by objid and in `ord` order within it, as `_keys.rebuild_documents`
/// (the reference) takes them.
#[pyfunction]
pub fn rebuild_documents<'py>(
    py: Python<'py>,
    rows: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    use pyo3::types::{PyString, PyTuple};

    let mut builder = DocumentBuilder::new(py);
    for row in rows.try_iter()? {
        let row = row?;
        let row = row.cast::<PyTuple>()?;
        if row.len() != 8 {
            return Err(PyValueError::new_err(format!(
                "a document row has 8 columns, not {}",
                row.len()
            )));
        }
        let objid: i64 = row.get_item(0)?.extract()?;
        let (valstr, valnum, valint, valbool) = (
            row.get_item(3)?,
            row.get_item(4)?,
            row.get_item(5)?,
            row.get_item(6)?,
        );
        let value = if !valstr.is_none() {
            RowValue::Value(valstr)
        } else if !valint.is_none() {
            RowValue::Value(valint.extract::<i64>()?.into_pyobject(py)?.into_any())
        } else if !valnum.is_none() {
            RowValue::Value(valnum.extract::<f64>()?.into_pyobject(py)?.into_any())
        } else if !valbool.is_none() {
            RowValue::Value(
                valbool
                    .is_truthy()?
                    .into_pyobject(py)?
                    .to_owned()
                    .into_any(),
            )
        } else {
            RowValue::Kind(row.get_item(7)?.extract()?)
        };
        let keystr = row.get_item(1)?;
        builder.row(objid, keystr.cast::<PyString>()?.to_str()?, value)?;
    }
    builder.finish()
}

/// Rebuilds documents from packed row texts (see `_core.pyi`): `(objid, document)` pairs.
///
/// Each text is a JSON array of `jsonflat::PackedRow`s, one per table, in
/// any order; the texts are parsed and their rows put in (objid, ord) order
/// without the GIL.
#[pyfunction]
pub fn rebuild_packed_documents<'py>(
    py: Python<'py>,
    texts: Vec<Bound<'py, pyo3::types::PyString>>,
) -> PyResult<Bound<'py, PyList>> {
    use pyo3::types::PyString;

    // borrowed from the Python strings, which the call keeps alive (a Q1 at 1M
    // objects packs ~115 MB: no copy of it)
    let parts: Vec<&str> = texts.iter().map(|t| t.to_str()).collect::<PyResult<_>>()?;
    let rows = py
        .detach(|| crate::jsonflat::packed_rows(&parts))
        .map_err(PyValueError::new_err)?;
    let mut builder = DocumentBuilder::new(py);
    for row in rows {
        let value = if let Some(text) = row.valstr {
            RowValue::Value(PyString::new(py, &text).into_any())
        } else if let Some(int) = row.valint {
            RowValue::Value(int.into_pyobject(py)?.into_any())
        } else if let Some(text) = row.valnum {
            let number: f64 = text.parse().map_err(|_| {
                PyValueError::new_err(format!(
                    "{text:?} (at {:?} of object {}) is not a number",
                    row.keystr, row.objid
                ))
            })?;
            RowValue::Value(number.into_pyobject(py)?.into_any())
        } else if let Some(flag) = row.valbool {
            RowValue::Value((flag != 0).into_pyobject(py)?.to_owned().into_any())
        } else {
            RowValue::Kind(row.valkind)
        };
        builder.row(row.objid, &row.keystr, value)?;
    }
    builder.finish()
}

/// Packs JSON texts as the hybrid mapping keeps them (`jsonflat::pack_text`).
#[pyfunction]
pub fn pack_documents<'py>(
    py: Python<'py>,
    texts: Vec<String>,
) -> PyResult<Vec<Bound<'py, pyo3::types::PyBytes>>> {
    use rayon::prelude::*;
    let packed: Vec<Vec<u8>> = py.detach(|| {
        crate::pool::install(|| {
            texts
                .par_iter()
                .map(|t| crate::jsonflat::pack_text(t))
                .collect()
        })
    });
    Ok(packed
        .iter()
        .map(|p| pyo3::types::PyBytes::new(py, p))
        .collect())
}

/// The texts of packed documents (see `_core.pyi`), each checked to be JSON:
/// its callers hand the text on unparsed, so damage must be found here.
#[pyfunction]
pub fn unpack_texts(
    py: Python<'_>,
    packed: Vec<Bound<'_, pyo3::types::PyBytes>>,
) -> PyResult<Vec<String>> {
    use rayon::prelude::*;
    let parts: Vec<&[u8]> = packed.iter().map(|b| b.as_bytes()).collect();
    py.detach(|| {
        crate::pool::install(|| {
            parts
                .par_iter()
                .enumerate()
                .map(|(i, p)| {
                    let text = crate::jsonflat::unpack_text(p)
                        .map_err(|e| format!("packed document {i} is damaged: {e}"))?;
                    serde_json::from_str::<serde::de::IgnoredAny>(&text)
                        .map_err(|e| format!("packed document {i} is damaged: not JSON ({e})"))?;
                    Ok(text)
                })
                .collect::<Result<Vec<_>, String>>()
        })
    })
    .map_err(PyValueError::new_err)
}

/// The values of packed JSON texts, as Python's `json.loads` reads each (see
/// `_core.pyi`). Unpacked in parallel without the GIL; then each text is read
/// straight into Python objects (no intermediate tree), with one Python string
/// per distinct key across all of them: 1,000 NoBench objects took ~6.5 ms in
/// `json.loads`, which makes every key afresh in every text, and 8-14 ms going
/// through serde_json's values (a script).
#[pyfunction]
pub fn load_documents<'py>(
    py: Python<'py>,
    packed: Vec<Bound<'py, pyo3::types::PyBytes>>,
) -> PyResult<Bound<'py, PyList>> {
    use rayon::prelude::*;
    let parts: Vec<&[u8]> = packed.iter().map(|b| b.as_bytes()).collect();
    let texts: Vec<String> = py
        .detach(|| {
            crate::pool::install(|| {
                parts
                    .par_iter()
                    .enumerate()
                    .map(|(i, p)| {
                        crate::jsonflat::unpack_text(p)
                            .map_err(|e| format!("packed document {i} is damaged: {e}"))
                    })
                    .collect::<Result<Vec<_>, String>>()
            })
        })
        .map_err(PyValueError::new_err)?;
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
