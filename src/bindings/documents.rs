//! Bindings of the document kernels (Argo): flattening JSON objects into rows and
//! rebuilding objects from rows.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;

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
/// document, its text as `jsontext::document_text` writes it and
/// `jsontext::pack_text` packs it (the hybrid mapping's object table), grouped
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
                    let text = crate::jsontext::document_text(&leaves, negative_zero)?;
                    Some((leaves, Some(crate::jsontext::pack_text(&text))))
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
pub(crate) struct FnvHasher(u64);

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

pub(crate) type FnvMap<K, V> =
    std::collections::HashMap<K, V, std::hash::BuildHasherDefault<FnvHasher>>;

/// Pauses Python's cyclic garbage collector while a kernel makes many fresh
/// containers (row tuples, documents' dicts and lists, none in a cycle), and
/// restores its previous state when dropped. Every collection those allocations
/// set off walks the objects made so far, and the older generations the whole
/// heap: 0.7-1.8 s of the 2-3 s rebuild of a 1M-object NoBench Q1.
pub(crate) struct GcPause {
    was_enabled: bool,
}

impl GcPause {
    pub(crate) fn new(_py: Python<'_>) -> Self {
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
