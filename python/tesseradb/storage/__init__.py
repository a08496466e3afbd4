"""Where bulk data lives: the database directory, or an S3-compatible object store.

:class:`Storage` is an open database's default location and credentials;
:class:`Location` one place in a store (``s3://bucket/prefix``), handed to Icechunk
for arrays and used through ``obstore`` for everything else. Credentials come from
``storage_options=`` and the standard AWS environment and profiles, and never enter
the catalog, a log or an error message.
"""

from __future__ import annotations

from tesseradb.storage._credentials import OPTION_NAMES, Credentials, resolve_credentials
from tesseradb.storage._location import (
    Location,
    StoredObject,
    explain,
    is_url,
    parse_url,
    storage_error,
    transport_failure,
)
from tesseradb.storage._placement import Storage

__all__ = [
    "OPTION_NAMES",
    "Credentials",
    "Location",
    "Storage",
    "StoredObject",
    "explain",
    "is_url",
    "parse_url",
    "resolve_credentials",
    "storage_error",
    "transport_failure",
]
