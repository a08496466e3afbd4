//! Python bindings of the kernels, one module per data model as in the Python
//! package: numpy in, numpy out, the GIL released for the work.

pub mod arrays;
pub mod assoc;
pub mod documents;
pub mod packed_documents;
pub mod records;
pub mod sql_values;
pub mod ssdb;
pub mod storage;
