"""Counts a test module keeps of what it tried, printed at the end of the run.

``COUNTS = tally("fuzz")`` gives a Counter; the ``pytest_terminal_summary`` hook in
conftest.py prints every non-empty one, so the figures a closing note quotes come from
any run that includes the module, and no test exists only to print.
"""

from __future__ import annotations

from collections import Counter

__all__ = ["TALLIES", "tally"]

TALLIES: dict[str, Counter[str]] = {}


def tally(label: str) -> Counter[str]:
    """The Counter printed under ``label`` at the end of the run."""
    return TALLIES.setdefault(label, Counter())
