"""Durability helpers every room shares: fsync of a file or a directory, a file's checksum.

A rename is durable only once its directory is fsynced, and a file's bytes
only once the file is: the rooms' atomic writes (temporary file, fsync,
rename, fsync of the directory) are built from these.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["file_checksum", "fsync_path"]


def fsync_path(path: Path) -> None:
    """fsync a file or a directory by its path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def file_checksum(path: Path) -> int:
    """The CRC-32C of a file's bytes (what a stored file without a checksum of its own
    carries in its manifest), read through a memory map."""
    import mmap

    import numpy as np

    from tesseradb import _core

    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return 0
        with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as view:
            data = np.frombuffer(view, dtype=np.uint8)
            try:
                return int(_core.crc32c_bytes(data))
            finally:
                del data  # (the map closes only once no array points into it)
