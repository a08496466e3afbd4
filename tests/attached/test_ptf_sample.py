"""Every query on the real PTF sample equals the answer computed from its CSV copies."""

from __future__ import annotations

import lzma
import math
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest

import tesseradb

QUERIES = [
    "SELECT count(*) FROM ptf.candidate",
    "SELECT count(*) FROM ptf.rb_classifier",
    "SELECT count(*), min(ujd), max(ujd) FROM ptf.subtraction",
    "SELECT id, mag, fwhm FROM ptf.candidate WHERE mag BETWEEN 17.05 AND 18.95 AND fwhm < 3.05 ORDER BY id",
    "SELECT nmask, count(*), avg(mag) FROM ptf.candidate GROUP BY nmask ORDER BY nmask",
    "SELECT c.id, c.mag, r.realbogus FROM ptf.rb_classifier r JOIN ptf.candidate c ON r.candidate_id = c.id ORDER BY c.id",
    "SELECT filename, ujd FROM ptf.subtraction WHERE ujd BETWEEN 2455000.5 AND 2455100.5 ORDER BY ujd, filename",
    "SELECT s.id, count(c.id) FROM ptf.subtraction s LEFT JOIN ptf.candidate c ON c.sub_id = s.id "
    "WHERE s.ujd < 2455000.5 GROUP BY s.id ORDER BY s.id",
    # the benchmark's three-way join, with thresholds the sample can satisfy
    "SELECT s.id, s.ujd, c.id, c.mag, c.fwhm, r.realbogus FROM ptf.subtraction s "
    "JOIN ptf.candidate c ON c.sub_id = s.id JOIN ptf.rb_classifier r ON r.candidate_id = c.id "
    "WHERE s.ujd BETWEEN 2454900.5 AND 2455500.5 AND c.mag < 20.05 AND c.fwhm < 10.05 AND r.realbogus > 0.0005 ORDER BY c.id",
    "SELECT c.id, r.sub_id FROM ptf.candidate c JOIN ptf.rb_classifier r ON r.candidate_id = c.id AND r.sub_id = c.sub_id ORDER BY 1",
]


@pytest.fixture(scope="module")
def sample(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ptf")
    with (
        lzma.open(shared_data / "ptf_small.h5.xz") as src,
        open(folder / "ptf_small.h5", "wb") as dst,
    ):
        shutil.copyfileobj(src, dst)
    for table in ("candidate", "rb_classifier", "subtraction"):
        with (
            lzma.open(shared_data / f"{table}.csv.xz") as src,
            open(folder / f"{table}.csv", "wb") as dst,
        ):
            shutil.copyfileobj(src, dst)
    return folder


@pytest.fixture(scope="module")
def reference(sample: Path) -> Any:
    con = duckdb.connect()
    con.execute("CREATE SCHEMA ptf")
    for table in ("candidate", "rb_classifier", "subtraction"):
        con.execute(
            f"CREATE TABLE ptf.{table} AS SELECT * FROM read_csv_auto(?)",
            [str(sample / f"{table}.csv")],
        )
    yield con
    con.close()


def close_enough(got: list[tuple[Any, ...]], expected: list[tuple[Any, ...]]) -> bool:
    """Row by row; floats to single precision (the HDF5 file stores float32)."""
    if len(got) != len(expected):
        return False
    for a, b in zip(got, expected, strict=True):
        for x, y in zip(a, b, strict=True):
            if isinstance(x, float) or isinstance(y, float):
                if not math.isclose(float(x), float(y), rel_tol=2e-6, abs_tol=1e-9):
                    return False
            elif x != y:
                return False
    return True


@pytest.mark.parametrize("indexed", [False, True], ids=["no-index", "bitmap-indexes"])
@pytest.mark.parametrize("threads", [1, 2])
def test_queries_equal_the_csv_answers(
    sample: Path, reference: Any, tmp_path: Path, indexed: bool, threads: int
) -> None:
    with tesseradb.connect(tmp_path / "db") as db:
        db.attach(sample / "ptf_small.h5", name="ptf", threads=threads)
        if indexed:
            db.create_index("ptf.candidate", ["mag", "fwhm", "sub_id", "id", "nmask"])
            db.create_index("ptf.rb_classifier", ["realbogus", "candidate_id"])
            db.create_index("ptf.subtraction", ["ujd", "id"], precision=3)
        for sql in QUERIES:
            expected = reference.execute(sql).fetchall()
            got = db.sql(sql).fetchall()
            assert close_enough(got, expected), (sql, got[:5], expected[:5])


def test_the_sample_maps_as_the_paper_describes(sample: Path, tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "db") as db:
        ptf = db.attach(sample / "ptf_small.h5", name="ptf")
        assert ptf.tables() == ["candidate", "rb_classifier", "subtraction"]
        assert len(db.schema("ptf.candidate")) == 48
        assert len(db.schema("ptf.rb_classifier")) == 9
        assert len(db.schema("ptf.subtraction")) == 51
        assert str(db.schema("ptf.subtraction").field("filename").type) == "string"
        explained = db.explain("SELECT avg(mag) FROM ptf.candidate WHERE fwhm < 2")
        rel = explained.relation("ptf.candidate")
        assert rel.columns == ["fwhm", "mag"]  # only the columns the query uses are read
        assert "full scan of 999 rows, 2 of 48 columns" in str(explained)
