"""The quickstart that `make demo` runs completes, at a small size, and shows each data model."""

from __future__ import annotations

import pytest

from tesseradb import quickstart


@pytest.mark.slow
def test_quickstart_runs(capsys: pytest.CaptureFixture[str]) -> None:
    quickstart.main(["--rows", "20000"])
    out = capsys.readouterr().out
    for expected in (
        "same answer: True",
        "segments inspected",
        "trips in the box",
        "bright pixels",
        "image(s) then",
        "{'left': {'name': 'George Bluth'}, 'right': {'kids': ['Sally']}}",
        "ann and bob: [('ann', 'bob', 2.0)]",
        "to ann: [('cat', 'ann', 5.0), ('dan', 'ann', 4.0), ('eve', 'ann', 7.0)]; "
        "degree [('ann', 'degree', 3.0)]",
        "Done.",
    ):
        assert expected in out
    # step 7's join finds rows (a one-night window at this size used to find none)
    import re

    joined = re.search(r"(\d[\d,]*) rows \(same as without indexes: True\)", out)
    assert joined is not None and int(joined.group(1).replace(",", "")) > 0
