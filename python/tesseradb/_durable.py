"""Durability helpers every room shares: fsync of a file or a directory.

A rename is durable only once its directory is fsynced, and a file's bytes
only once the file is: the rooms' atomic writes (temporary file, fsync,
rename, fsync of the directory) are built from these.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["fsync_path"]


def fsync_path(path: Path) -> None:
    """fsync a file or a directory by its path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
