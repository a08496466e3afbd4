"""Loads into streams, collections and plain tables, and row exports, with their round trips."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tesseradb
from tesseradb.errors import DocumentError, ExportError, LoadError

SENSOR = pa.table(
    {
        "t": pa.array(np.arange(1000, dtype=np.int64)),
        "lat": pa.array(np.linspace(-10, 10, 1000)),
        "lon": pa.array(np.linspace(100, 120, 1000), pa.float32()),
        "site": pa.array([f"s{i % 7}" for i in range(1000)]),
    }
)


@pytest.mark.parametrize("suffix", ["parquet", "arrow", "csv"])
def test_stream_loads_infer_the_descriptor_and_round_trip(
    db: tesseradb.Database, tmp_path: Path, suffix: str
) -> None:
    path = tmp_path / f"sensor.{suffix}"
    if suffix == "parquet":
        pq.write_table(SENSOR, path)
    elif suffix == "arrow":
        with pa.OSFile(str(path), "wb") as out, pa.ipc.new_file(out, SENSOR.schema) as w:
            w.write_table(SENSOR)
    else:
        import pyarrow.csv as pacsv

        pacsv.write_csv(SENSOR, path)
    loaded = db.load(str(path), kind="stream")
    assert (loaded.name, loaded.kind, loaded.items) == ("sensor", "stream", 1000)
    stream = db.stream("sensor")
    assert list(stream.descriptor.index) == ["t", "lat", "lon"]
    db.load(str(path), into="sensor")  # appends
    assert stream.num_records == 2000
    db.export("sensor", str(tmp_path / "out.parquet"))
    back = pq.read_table(tmp_path / "out.parquet")
    assert back.num_rows == 2000
    expected = pa.concat_tables([SENSOR, SENSOR]).select(back.column_names).cast(back.schema)

    def rows(table: pa.Table) -> list[tuple[object, ...]]:
        # (CSV holds lon's float32 values as their shortest decimal text)
        return sorted(
            (r["t"], r["lat"], float(np.float32(r["lon"])), r["site"]) for r in table.to_pylist()
        )

    assert rows(back) == rows(expected)
    # and the export loads back into a stream with the same records
    db.load(str(tmp_path / "out.parquet"), into="again", kind="stream")
    assert rows(db.sql("SELECT * FROM again").arrow()) == rows(expected)
    assert db.sql("SELECT sum(t), count(DISTINCT site) FROM sensor").fetchall() == [
        (2 * sum(range(1000)), 7)
    ]


def test_packed_binary_records_need_their_descriptor(
    db: tesseradb.Database, tmp_path: Path
) -> None:
    descriptor = {
        "fields": [{"name": "x", "type": "int32"}, {"name": "y", "type": "double"}],
        "index": ["x"],
    }
    records = np.zeros(50, dtype=[("x", "<i4"), ("y", "<f8")])
    records["x"] = np.arange(50)
    records["y"] = np.arange(50) / 2
    (tmp_path / "r.bin").write_bytes(records.tobytes())
    with pytest.raises(LoadError, match=r"r\.bin: packed binary records need their descriptor"):
        db.load(str(tmp_path / "r.bin"))
    assert db.streams() == []
    db.load(str(tmp_path / "r.bin"), descriptor=descriptor)
    assert db.sql("SELECT sum(x), sum(y) FROM r").fetchall() == [(1225, 612.5)]


def test_a_bad_stream_file_changes_nothing(db: tesseradb.Database, tmp_path: Path) -> None:
    pq.write_table(SENSOR, tmp_path / "good.parquet")
    db.load(str(tmp_path / "good.parquet"), into="s", kind="stream")
    (tmp_path / "bad.csv").write_text("t,lat,lon,site\n1,2,3,a\nx,2,3,b\n")
    with pytest.raises(tesseradb.TesseraError, match=r"bad\.csv, line 3"):
        db.load(str(tmp_path / "bad.csv"), into="s")
    assert db.stream("s").num_records == 1000


def test_collections_load_json_arrays_objects_and_lines(
    db: tesseradb.Database, tmp_path: Path
) -> None:
    objects = [
        {"id": i, "name": f"n{i}", "tags": ["a", "b"][: i % 3], "nested": {"v": i / 2}}
        for i in range(20)
    ]
    (tmp_path / "all.json").write_text(json.dumps(objects))
    (tmp_path / "one.json").write_text(json.dumps({"id": 99, "name": "single"}))
    (tmp_path / "lines.jsonl").write_text("\n".join(json.dumps(o) for o in objects) + "\n")
    assert db.load(str(tmp_path / "all.json"), into="docs").items == 20
    assert db.load(str(tmp_path / "one.json"), into="docs").items == 1
    assert db.load(str(tmp_path / "lines.jsonl"), into="docs").items == 20
    docs = db.collection("docs")
    assert docs.count() == 41
    db.export("docs", str(tmp_path / "out.jsonl"))
    back = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert back == [*objects, {"id": 99, "name": "single"}, *objects]
    db.load(str(tmp_path / "out.jsonl"), into="again")
    assert db.collection("again").find() == docs.find()


def test_a_bad_json_line_names_its_file_and_line_and_changes_nothing(
    db: tesseradb.Database, tmp_path: Path
) -> None:
    (tmp_path / "p1.jsonl").write_text('{"a": 1}\n{"a": 2}\n')
    (tmp_path / "p2.jsonl").write_text('{"a": 3}\n{"a": \n')
    with pytest.raises(DocumentError, match=r"p2\.jsonl, line 2"):
        db.load(str(tmp_path / "p*.jsonl"), into="docs")
    assert db.collections() == []
    (tmp_path / "arr.json").write_text('[{"a": 1}, 7]')
    with pytest.raises(LoadError, match=r"arr\.json: item 2 of the array is a int"):
        db.load(str(tmp_path / "arr.json"))
    assert db.collections() == []


@pytest.mark.parametrize("suffix", ["csv", "parquet", "json", "jsonl", "arrow"])
def test_tables_load_through_duckdb_and_export_every_type(
    db: tesseradb.Database, tmp_path: Path, suffix: str
) -> None:
    db.sql(
        """CREATE TABLE src AS SELECT range AS id, 'name ' || range AS name, range / 4 AS q,
           [range, range + 1] AS pair, {'k': range, 's': 'x'} AS rec, DATE '2024-01-01' + range::INT AS day
           FROM range(50)"""
    )
    target = tmp_path / f"src.{suffix}"
    exported = db.export("src", str(target))
    assert exported.items == 50
    db.load(str(target), into="copy", kind="table")
    same = db.sql(
        """SELECT count(*) FROM src JOIN copy USING (id)
           WHERE src.name = copy.name AND src.q = copy.q AND src.day = copy.day::DATE"""
    ).scalar()
    assert same == 50
    if suffix in ("parquet", "arrow", "json", "jsonl"):  # nested values keep their form
        assert db.sql("SELECT pair[2], rec.k FROM copy WHERE id = 7").fetchall() == [(8, 7)]


def test_query_exports_stream_and_refuse_to_overwrite(
    db: tesseradb.Database, tmp_path: Path
) -> None:
    db.sql("CREATE TABLE big AS SELECT range AS i FROM range(300000)")
    done = db.export("SELECT i * 2 AS j FROM big WHERE i % 3 = 0", str(tmp_path / "q.parquet"))
    assert done.items == 100000
    assert pq.read_table(tmp_path / "q.parquet").column("j").to_pylist()[:3] == [0, 6, 12]
    with pytest.raises(ExportError, match=r"q\.parquet exists"):
        db.export("big", str(tmp_path / "q.parquet"))
    db.export("big", str(tmp_path / "q.parquet"), overwrite=True)
    assert pq.read_table(tmp_path / "q.parquet").num_rows == 300000
    with pytest.raises(ExportError, match="exports to"):
        db.export("big", str(tmp_path / "x.fits"))
    with pytest.raises(tesseradb.TesseraError):
        db.export("SELECT * FROM nowhere", str(tmp_path / "n.csv"))
    assert not (tmp_path / "n.csv").exists()
    assert not list(tmp_path.glob("*.partial"))


def test_result_writes_parquet_csv_and_polars(db: tesseradb.Database, tmp_path: Path) -> None:
    result = db.sql("SELECT range AS i, [range] AS l, {'a': range} AS s FROM range(5)")
    result.to_parquet(tmp_path / "r.parquet")
    result.to_csv(tmp_path / "r.csv")
    assert pq.read_table(tmp_path / "r.parquet").column("l").to_pylist()[3] == [3]
    assert (tmp_path / "r.csv").read_text().splitlines()[0] == "i,l,s"
    frame = result.to_polars()
    assert frame.shape == (5, 3)
    assert frame["i"].to_list() == [0, 1, 2, 3, 4]


def test_an_attachment_exports_table_by_table(db: tesseradb.Database, tmp_path: Path) -> None:
    from tesseradb.datasets import ptf_file

    ptf_file(tmp_path / "night.h5", candidates=200, seed=3)
    db.attach(str(tmp_path / "night.h5"), name="ptf")
    with pytest.raises(ExportError, match=r"attached 'ptf' holds several tables; .*ptf\.<table>"):
        db.export("ptf", str(tmp_path / "ptf.parquet"))
    done = db.export("ptf.candidate", str(tmp_path / "candidates.parquet"))
    assert done.items == pq.read_table(tmp_path / "candidates.parquet").num_rows == 200
