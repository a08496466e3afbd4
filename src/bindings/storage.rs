//! Checksums of stored files, for every data model that writes files of its own.

use numpy::PyReadonlyArray1;
use pyo3::prelude::*;

/// The CRC-32C (Castagnoli, hardware-accelerated) of a byte array, with the GIL
/// released: what a stored file's checksum is, so that a file can be verified
/// when it is first read without costing more than a fraction of reading it.
#[pyfunction]
pub fn crc32c_bytes(py: Python<'_>, data: PyReadonlyArray1<'_, u8>) -> PyResult<u32> {
    let bytes = data.as_slice()?;
    Ok(py.detach(|| crc32c::crc32c(bytes)))
}
