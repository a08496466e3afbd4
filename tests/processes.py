"""A Python process running a snippet, for tests of readers and writers in other processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

__all__ = ["python_process"]


def python_process(code: str) -> subprocess.Popen[str]:
    """Start ``python -c code`` (dedented) with its stdout and stderr as text pipes."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
