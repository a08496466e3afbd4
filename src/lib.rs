//! Rust kernels behind `tesseradb._core`.
//!
//! The `#[pymodule]` below only registers names; kernel code lives in plain
//! Rust modules with their own `cargo test`s, callable without Python.

use pyo3::prelude::*;
use pyo3::types::PyDict;

#[cfg(target_os = "linux")]
pub mod alloc;
pub mod assoc;
pub mod bindings;
pub mod chunks;
pub mod columns;
pub mod info;
pub mod jsonflat;
pub mod jsontext;
pub mod kdtree;
pub mod packed;
pub mod pool;
pub mod regrid;
pub mod rtree;
pub mod spgemm;
pub mod ssdb;
pub mod triples;

/// Large kernel buffers on transparent huge pages (see `alloc`).
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: alloc::KernelAlloc = alloc::KernelAlloc;

/// Test helpers shared by the kernels' tests.
#[cfg(test)]
pub(crate) mod testing {
    /// A small deterministic generator (xorshift), so tests need no extra crate.
    pub struct Rng(pub u64);

    impl Rng {
        pub fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }
}

/// Facts about this build of the extension: crate version, Rust profile,
/// target and the size of the rayon thread pool kernels run on.
#[pyfunction]
fn build_info(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let facts = info::BuildInfo::current();
    let dict = PyDict::new(py);
    dict.set_item("version", facts.version)?;
    dict.set_item("profile", facts.profile)?;
    dict.set_item("target_arch", facts.target_arch)?;
    dict.set_item("target_os", facts.target_os)?;
    dict.set_item("threads", facts.threads)?;
    Ok(dict)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(build_info, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::storage::crc32c_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::records::kdtree_partition, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::assoc::intern_keys, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::assoc::triples_csr, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::assoc::merge_keys, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::assoc::search_text, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::assoc::sparse_product, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::records::search_segments, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::records::top_segments, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::records::gather_strings, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::records::build_segments, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::records::unpack_records, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::records::gather, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::arrays::decode_chunks, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::arrays::encode_chunks, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::arrays::reduce_chunks, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::arrays::regrid_block, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::arrays::regrid_chunks, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::arrays::triple_bounds, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::records::pad_strings, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::records::encode_columns, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::records::decode_column, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::documents::flatten_documents, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::documents::rebuild_documents, m)?)?;
    m.add_function(wrap_pyfunction!(
        bindings::sql_values::sql_insert_values,
        m
    )?)?;
    m.add_function(wrap_pyfunction!(
        bindings::packed_documents::pack_documents,
        m
    )?)?;
    m.add_function(wrap_pyfunction!(
        bindings::packed_documents::load_documents,
        m
    )?)?;
    m.add_function(wrap_pyfunction!(
        bindings::packed_documents::unpack_texts,
        m
    )?)?;
    m.add_function(wrap_pyfunction!(
        bindings::documents::rebuild_packed_documents,
        m
    )?)?;
    m.add_function(wrap_pyfunction!(bindings::ssdb::ssdb_cook, m)?)?;
    m.add_function(wrap_pyfunction!(
        bindings::ssdb::ssdb_polygons_overlap_box,
        m
    )?)?;
    m.add_function(wrap_pyfunction!(bindings::ssdb::ssdb_density_counts, m)?)?;
    m.add_class::<bindings::ssdb::PyGrouper>()?;
    m.add_class::<bindings::records::PyKdTree>()?;
    m.add_class::<bindings::arrays::PyTripleCells>()?;
    m.add_class::<bindings::arrays::PyChunkLayout>()?;
    m.add_class::<bindings::records::PySegmentTree>()?;
    Ok(())
}
