"""Records: high-velocity multidimensional record streams (MDDS).

So far: record descriptors (this package) and the kernels in
``tesseradb._core`` (packed kd-trees, the segment R*-tree). Ingest, segment
files, the cache and SQL over streams are still to come.
"""

from __future__ import annotations

from tesseradb.records._descriptor import DescriptorError, Field, RecordDescriptor

__all__ = ["DescriptorError", "Field", "RecordDescriptor"]
