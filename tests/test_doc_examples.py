"""Every example in README.md and docs/ runs as written, twice in the same directory.

Python blocks of a file run in order in one namespace (a page is one session);
``sh`` blocks run line by line, each ``tessera ...`` line as a command. A block
fenced ``python schematic`` is a listing (a protocol, a file format), and one
fenced ``sh schematic`` a developer's command run from a checkout (a long
test run); neither is run. The files an example names as the user's own input
(an HDF5 night, a descriptor, a CSV file) are made beforehand by ``INPUTS``.
Running everything a second time in the same directory checks that the
examples are scripts a user can run again.
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


def _ptf_nights(folder: Path, pattern: str, count: int) -> None:
    from tesseradb.datasets import ptf_file

    folder.mkdir(parents=True, exist_ok=True)
    for night in range(count):
        ptf_file(folder / pattern.format(night), candidates=300, seed=night)


def _taxi_inputs(folder: Path) -> None:
    import numpy as np

    # taxi.xml is the descriptor the page prints right after its example
    page = (ROOT / "docs" / "records.md").read_text()
    after = page[page.index("with `taxi.xml`") :]
    (folder / "taxi.xml").write_text(after.split("```xml\n", 1)[1].split("```", 1)[0])
    rng = np.random.default_rng(0)
    lines = ["medallion,pickup_datetime,passenger_count,pickup_latitude,pickup_longitude"]
    for i in range(2000):
        lines.append(
            f"M{i % 37:04d},{1357000000 + i * 60},{rng.integers(1, 5)},"
            f"{40.70 + rng.random() * 0.1:.6f},{-73.95 + rng.random() * 0.1:.6f}"
        )
    (folder / "trips-2013-01.csv").write_text("\n".join(lines) + "\n")


def _more_jsonl(folder: Path) -> None:
    (folder / "more.jsonl").write_text(
        '{"name": "Lucille Bluth", "age": 70}\n{"name": "Buster Bluth", "age": 32}\n'
    )


def _load_inputs(folder: Path) -> None:
    """The files docs/load-export.md (and the README's load lines) load: FITS images, a
    NetCDF grid and its parts, a TIFF stack, an .npy volume, readings as Parquet and CSV,
    people as JSON lines and as a JSON array."""
    import json

    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq
    import tifffile
    import xarray as xr
    from astropy.io import fits

    rng = np.random.default_rng(0)
    (folder / "images").mkdir(exist_ok=True)
    for night in range(4):
        hdu = fits.PrimaryHDU(rng.integers(0, 1000, size=(64, 64), dtype=np.uint16))
        hdu.header.update({"CRPIX1": 1.0, "CRVAL1": 1000.0, "CRPIX2": 1.0, "CRVAL2": -32.0})
        hdu.header["OBJECT"] = "M31"
        hdu.writeto(folder / "images" / f"night_{night:02d}.fits", overwrite=True)

    def grid(times: np.ndarray) -> xr.Dataset:
        shape = (len(times), 4, 6)
        ds = xr.Dataset(
            {
                "temperature": (("time", "lat", "lon"), rng.normal(280, 5, shape).astype("f4")),
                "pressure": (("time", "lat", "lon"), rng.normal(1000, 9, shape).astype("f8")),
            },
            coords={"time": times, "lat": np.linspace(-60, 60, 4), "lon": np.arange(6) * 60.0},
        )
        ds["temperature"].attrs["units"] = "K"
        return ds

    grid(np.arange(5)).to_netcdf(folder / "grid.nc", engine="h5netcdf")
    (folder / "parts").mkdir(exist_ok=True)
    for part in range(3):
        times = np.arange(4 * part, 4 * part + 4)
        grid(times).to_netcdf(folder / "parts" / f"part_{part}.nc", engine="h5netcdf")
    tifffile.imwrite(folder / "stack.tif", rng.integers(0, 255, (5, 32, 32), dtype=np.uint8))
    np.save(folder / "volume.npy", rng.random((16, 64, 64), dtype=np.float32))
    n = 5000
    readings = pa.table(
        {
            "t": np.arange(1_700_000_000, 1_700_000_000 + n, dtype=np.int64),
            "lat": rng.uniform(-30, 30, n),
            "lon": rng.uniform(0, 90, n),
            "site": [f"site-{i % 11}" for i in range(n)],
        }
    )
    pq.write_table(readings, folder / "readings.parquet")
    pacsv.write_csv(readings, folder / "readings.csv")
    people = [{"name": f"person {i}", "age": 20 + i % 50} for i in range(40)]
    (folder / "objects.jsonl").write_text("\n".join(json.dumps(p) for p in people) + "\n")
    (folder / "objects.json").write_text(json.dumps(people[:5]))


def _readme_inputs(folder: Path) -> None:
    _ptf_nights(folder, "ptf_night_{}.h5", 2)
    _load_inputs(folder)


# The user's own input files that the examples of a page name.
INPUTS: dict[str, Callable[[Path], None]] = {
    "README.md": _readme_inputs,
    "load-export.md": _load_inputs,
    "attached.md": lambda d: _ptf_nights(d, "ptf_small.h5", 1),
    "cli.md": lambda d: _ptf_nights(d / "nights", "night_{}.h5", 2),
    "records.md": _taxi_inputs,
    "documents.md": _more_jsonl,
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


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p)], ids=lambda p: p.name)
def test_every_example_runs_twice(page: Path, tmp_path: Path) -> None:
    make_inputs = INPUTS.get(page.name)
    if make_inputs is not None:
        make_inputs(tmp_path)
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        for attempt in (1, 2):
            namespace: dict[str, object] = {"__name__": "__doc_example__"}
            for language, code, line in blocks(page):
                where = f"{page.name}:{line} (run {attempt})"
                if language == "python":
                    run_python(code, namespace, where)
                elif language == "script":
                    run_script(code, tmp_path / f"example_{line}.py", where)
                else:
                    run_sh(code, where)
    finally:
        os.chdir(here)
