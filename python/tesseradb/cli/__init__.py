"""The ``tessera`` command: a thin layer over the Python API."""

from __future__ import annotations

from tesseradb.cli.app import app, main

__all__ = ["app", "main"]
