"""Every example in README.md and docs/ runs as written.

Python blocks of a file run in order in one namespace (a page is one session);
``sh`` blocks run line by line, each ``tessera ...`` line as a command. A block
fenced ``python schematic`` is a listing (a protocol, a file format), and one
fenced ``sh schematic`` a developer's command run from a checkout (a long
test run); neither is run. The files an example names as the user's own input
(an HDF5 night, a descriptor, a CSV file) are made beforehand by ``INPUTS``.
Each page runs once (examples that create objects drop them first, so a user can
run them again; a second pass per page cost a minute of every test run).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```", re.S | re.M)
TESSERA = Path(sys.executable).with_name("tessera")
# set-up commands of a fresh machine, run by CI itself, not by this test
NOT_RUN_HERE = ("make ",)


def blocks(page: Path) -> list[tuple[str, str, int]]:
    """(language, code, line) of each runnable block of ``page``; ``script`` for a block
    that is a whole program, run as a file (multiprocessing needs an importable main)."""
    text = page.read_text()
    found = []
    for match in BLOCK.finditer(text):
        language, info, code = match.group(1), match.group(2), match.group(3)
        if language in ("python", "sh") and "schematic" not in info:
            kind = "script" if language == "python" and "script" in info else language
            found.append((kind, code, text[: match.start()].count("\n") + 1))
    return found


def _example_data(folder: Path) -> None:
    """What `tessera example-data DIR` writes: every input file the pages name."""
    from tesseradb.datasets import example_data

    example_data(folder)


# The pages whose examples load the user's own files: made as a user makes them.
INPUTS: dict[str, Callable[[Path], None]] = {
    page: _example_data
    for page in (
        "README.md",
        "load-export.md",
        "attached.md",
        "cli.md",
        "records.md",
        "documents.md",
    )
}


def run_python(code: str, namespace: dict[str, object], where: str) -> None:
    try:
        exec(compile(code, where, "exec"), namespace)
    except Exception as err:
        raise AssertionError(f"{where}: {type(err).__name__}: {err}") from err


def run_script(code: str, path: Path, where: str) -> None:
    path.write_text(code)
    run = subprocess.run([sys.executable, path.name], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"{where}\n{run.stdout}\n{run.stderr}"


def run_sh(code: str, where: str) -> None:
    for line in code.splitlines():
        command = line.split("  #")[0].strip()
        if not command or command.startswith(NOT_RUN_HERE):
            continue
        assert command.startswith("tessera "), f"{where}: not a tessera command: {line}"
        path = f"{TESSERA.parent}{os.pathsep}{os.environ.get('PATH', '')}"
        run = subprocess.run(
            ["bash", "-c", command],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PATH": path},
        )
        assert run.returncode == 0, f"{where}: {command}\n{run.stdout}\n{run.stderr}"
        assert "Traceback" not in run.stderr, f"{where}: {command}\n{run.stderr}"


def _bucket_for(page: Path, folder: Path, request: pytest.FixtureRequest) -> None:
    """storage.md's bucket, as a user's lab would have it: an S3 endpoint named by the
    standard AWS environment, holding the nights' HDF5 files under ptf/."""
    from tesseradb.storage import Location, resolve_credentials

    endpoint = request.getfixturevalue("s3_server")
    monkeypatch = request.getfixturevalue("monkeypatch")
    for variable, value in endpoint.environment().items():
        monkeypatch.setenv(variable, value)
    bucket = endpoint.create_bucket("my-lab-archive")
    ptf = Location(f"{bucket}/ptf", resolve_credentials(None, "the docs' bucket"))
    _example_data(folder)
    for night in sorted((folder / "nights").glob("night_*.h5")):
        ptf.write(night.name, night.read_bytes())


# The pages whose examples read a bucket: an S3 server on loopback, set up beforehand.
BUCKETS = {"storage.md": _bucket_for}


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p)], ids=lambda p: p.name)
def test_every_example_runs(page: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    make_inputs = INPUTS.get(page.name)
    if make_inputs is not None:
        make_inputs(tmp_path)
    if page.name in BUCKETS:
        BUCKETS[page.name](page, tmp_path, request)
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        namespace: dict[str, object] = {"__name__": "__doc_example__"}
        for language, code, line in blocks(page):
            where = f"{page.name}:{line}"
            if language == "python":
                run_python(code, namespace, where)
            elif language == "script":
                run_script(code, tmp_path / f"example_{line}.py", where)
            else:
                run_sh(code, where)
    finally:
        os.chdir(here)
