"""The server's HTTP API and the remote client, on a real uvicorn server on loopback: every
endpoint answers as the database in-process does, and bad requests get clear errors and
change nothing (issue 22)."""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from PIL import Image

import tesseradb
from tesseradb.errors import AccessDeniedError, CancelledError, UnknownTableError
from tesseradb.server import Users
from tesseradb.server._client import ipc_bytes
from tesseradb.server._openapi import OPENAPI

from .conftest import Served

ARROW = "application/vnd.apache.arrow.stream"


def test_health_needs_no_token_and_everything_else_does(
    served: Served, tokens: dict[str, str]
) -> None:
    anon = served.client()
    assert anon.get("/health").json()["status"] == "ok"
    assert anon.get("/").status_code == 200  # the console's login page
    assert "TesseraDB" in anon.get("/").text
    for method, path in [
        ("GET", "/catalog"),
        ("POST", "/sql"),
        ("GET", "/arrays/img/slab"),
        ("GET", "/openapi.json"),
        ("GET", "/queries"),
    ]:
        response = anon.request(method, path)
        assert response.status_code == 401, path
        assert response.json()["type"] == "Unauthorized"
    wrong = served.client("tdb_not-a-token")
    response = wrong.get("/catalog")
    assert response.status_code == 401
    assert "tdb_not-a-token" not in response.text  # a token never comes back


def test_sql_in_every_format_equals_the_answer_in_process(
    served: Served, tokens: dict[str, str]
) -> None:
    db = served.db
    client = served.client(tokens["reader"])
    text = "SELECT sensor, count(*) AS n, sum(value) AS s FROM readings GROUP BY sensor ORDER BY sensor"
    expected = db.sql(text).arrow()
    body = {"sql": text}
    got = pa.ipc.open_stream(client.post("/sql", json=body, headers={"Accept": ARROW}).content)
    assert got.read_all().equals(expected)
    answer = client.post("/sql", json=body, headers={"Accept": "application/json"}).json()
    assert answer["columns"] == expected.column_names
    assert answer["rows"] == [list(r.values()) for r in expected.to_pylist()]
    assert answer["more"] is False
    csv = client.post("/sql?format=csv", json=body).content
    assert pacsv.read_csv(io.BytesIO(csv)).num_rows == expected.num_rows
    # parameters are bound, never pasted
    params = {"sql": "SELECT count(*) AS n FROM plain WHERE i < ? AND f >= ?", "params": [100, 10]}
    rows = client.post("/sql", json=params, headers={"Accept": "application/json"}).json()["rows"]
    assert rows == [[db.sql("SELECT count(*) FROM plain WHERE i < 100 AND f >= 10").scalar()]]


def test_json_pages_are_slices_of_the_result(served: Served, tokens: dict[str, str]) -> None:
    client = served.client(tokens["reader"])
    whole = [list(r) for r in served.db.sql("SELECT i, f FROM plain ORDER BY i").fetchall()]
    pages = []
    offset = 0
    while True:
        body = {"sql": "SELECT i, f FROM plain ORDER BY i", "offset": offset, "limit": 300}
        page = client.post("/sql", json=body, headers={"Accept": "application/json"}).json()
        pages.extend(page["rows"])
        offset += 300
        if not page["more"]:
            break
    assert pages == [[i, float(f)] for i, f in whole]
    assert offset == 1200


def test_a_statement_without_rows_and_a_write_through_sql(
    served: Served, tokens: dict[str, str]
) -> None:
    client = served.client(tokens["writer"])
    made = client.post("/sql", json={"sql": "CREATE TABLE t2 AS SELECT 1 AS a"})
    assert made.status_code == 200
    client.post("/sql", json={"sql": "INSERT INTO t2 VALUES (2), (3)"})
    assert served.db.sql("SELECT sum(a) FROM t2").scalar() == 6


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "words"),
    [
        ("POST", "/sql", {"content": b"{not json", "headers": {"Content-Type": "application/json"}}, 400, "not JSON"),
        ("POST", "/sql", {"json": {"query": "SELECT 1"}}, 400, "no 'sql'"),
        ("POST", "/sql", {"json": {"sql": 42}}, 400, "'sql' is a str"),
        ("POST", "/sql", {"json": {"sql": "SELECT 1", "params": "x"}}, 400, "params are a list"),
        ("POST", "/sql", {"json": {"sql": "SELECT 1", "limit": -1}}, 400, "not negative"),
        ("POST", "/sql", {"content": b"SELECT 1", "headers": {"Content-Type": "text/plain"}}, 415, "application/json"),
        ("POST", "/sql", {"json": {"sql": "SELECT * FROM nosuch"}}, 404, "nosuch"),
        ("POST", "/sql", {"json": {"sql": "SELEC 1"}}, 400, "syntax"),
        ("GET", "/objects/nosuch", {}, 404, "no object 'nosuch'"),
        ("GET", "/arrays/nosuch/slab", {}, 404, "no object 'nosuch'"),
        ("GET", "/arrays/readings/slab", {}, 400, "is a stream, not a array"),
        ("GET", "/arrays/img/slab", {"params": {"box": "0:4,x"}}, 400, "'x' is not lo:hi"),
        ("GET", "/arrays/img/slab", {"params": {"box": "0:4,0:4,0:4"}}, 400, "has 3 parts"),
        ("GET", "/arrays/img/slab", {"params": {"attr": "nope", "format": "npy"}}, 400, "no attribute nope"),
        ("GET", "/arrays/img/slab", {"params": {"format": "npy"}}, 400, "one attribute"),
        ("GET", "/arrays/img/slab", {"params": {"format": "gif"}}, 400, "format is one of"),
        ("GET", "/arrays/img/slab", {"params": {"attr": "v", "format": "png", "cmap": "rainbow"}}, 400, "cmap is one of"),
        ("GET", "/arrays/img/slab", {"params": {"attr": "v", "format": "png", "vmin": "nan"}}, 400, "finite"),
        ("GET", "/arrays/img/cell", {"params": {"at": "1"}}, 400, "2 dimensions"),
        ("GET", "/streams/readings/range", {"params": {"t": "5"}}, 400, "lo:hi"),
        ("GET", "/streams/readings/plot", {"params": {"x": "nope"}}, 400, "no field 'nope'"),
        ("POST", "/queries/nope/cancel", {}, 404, "no running query"),
    ],
)  # fmt: skip
def test_bad_requests_get_clear_errors(
    served: Served,
    tokens: dict[str, str],
    method: str,
    path: str,
    kwargs: dict[str, Any],
    status: int,
    words: str,
) -> None:
    response = served.client(tokens["admin"]).request(method, path, **kwargs)
    assert response.status_code == status, response.text
    body = response.json()
    assert words.lower() in body["error"].lower(), body
    assert tokens["admin"] not in response.text


def test_bad_writes_change_nothing(served: Served, tokens: dict[str, str]) -> None:
    db = served.db
    client = served.client(tokens["writer"])
    before = (db.stream("readings").num_records, db.collection("docs").count())
    bad = [
        ("/streams/readings/ingest", {"content": b"not arrow", "headers": {"Content-Type": ARROW}}),
        ("/streams/readings/ingest", {"json": {"t": [1]}}),  # wrong content type
        ("/collections/docs/insert", {"json": [{"k": 1}, 5]}),
        ("/collections/docs/load", {"content": b'{"k": 1}\n{oops\n', "headers": {"Content-Type": "application/x-ndjson"}}),
    ]  # fmt: skip
    for path, kwargs in bad:
        response = client.post(path, **kwargs)
        assert response.status_code in (400, 415), (path, response.text)
    wrong = pa.table({"t": [1.0], "sensor": ["not a number"], "value": [0.5]})
    body = ipc_bytes(wrong)
    response = client.post(
        "/streams/readings/ingest", content=body, headers={"Content-Type": ARROW}
    )
    assert response.status_code == 400
    assert (db.stream("readings").num_records, db.collection("docs").count()) == before


def test_values_no_write_path_can_keep_are_refused_over_http(
    served: Served, tokens: dict[str, str]
) -> None:
    """The value domain at every write endpoint (issue 40): out of range, signedness,
    NaN into an integer, past a collection's integers, NUL in a char field."""
    db = served.db
    client = served.client(tokens["writer"])
    before = (
        db.stream("readings").num_records,
        db.collection("docs").count(),
        db.sql("SELECT count(*) FROM plain").scalar(),
    )
    sensor_values = [
        pa.array([2**31], pa.int64()),  # past int32
        pa.array([2**63], pa.uint64()),  # past int64 too
        pa.array([float("nan")], pa.float64()),  # NaN into an integer field
        pa.array([1.5], pa.float64()),
    ]
    for sensor in sensor_values:
        table = pa.table({"t": [1.0], "sensor": sensor, "value": [0.5]})
        response = client.post(
            "/streams/readings/ingest", content=ipc_bytes(table), headers={"Content-Type": ARROW}
        )
        assert response.status_code == 400, (sensor, response.text)
        assert response.json()["type"] != "InternalError"
    for document in [{"k": 2**64}, {"k": -(2**63) - 1}]:
        response = client.post("/collections/docs/insert", json=document)
        assert response.status_code == 400, (document, response.text)
    for params in [[2**64, 1.0], [-(2**63) - 1, 1.0]]:
        response = client.post(
            "/sql", json={"sql": "INSERT INTO plain VALUES (?, ?)", "params": params}
        )
        assert response.status_code == 400, (params, response.text)
    assert (
        db.stream("readings").num_records,
        db.collection("docs").count(),
        db.sql("SELECT count(*) FROM plain").scalar(),
    ) == before


def test_huge_bodies_and_slabs_are_refused(
    database: tesseradb.Database, tokens: dict[str, str]
) -> None:
    server = Served(database, max_body_bytes=1000, max_slab_cells=100)
    try:
        client = server.client(tokens["admin"])
        response = client.post("/sql", json={"sql": "SELECT 1", "pad": "x" * 5000})
        assert response.status_code == 413
        assert "1000" in response.json()["error"]
        response = client.get("/arrays/img/slab", params={"box": "0:20,0:20", "format": "json"})
        assert response.status_code == 413
        assert "400 cells" in response.json()["error"]
        assert (
            client.get("/arrays/img/slab", params={"box": "0:10,0:10", "attr": "v"}).status_code
            == 200
        )
    finally:
        server.stop()


def test_a_read_only_user_writes_nothing(served: Served, tokens: dict[str, str]) -> None:
    db = served.db
    client = served.client(tokens["reader"])
    before = (
        db.stream("readings").num_records,
        db.collection("docs").count(),
        db.sql("SELECT count(*) FROM plain").scalar(),
    )
    table = pa.table({"t": [1e6], "sensor": pa.array([1], pa.int32()), "value": [0.5]})
    body = ipc_bytes(table)
    attempts = [
        client.post("/sql", json={"sql": "INSERT INTO plain VALUES (5000, 1.0)"}),
        client.post("/sql", json={"sql": "DROP TABLE plain"}),
        client.post("/sql", json={"sql": "CREATE TABLE x AS SELECT 1"}),
        client.post("/streams/readings/ingest", content=body, headers={"Content-Type": ARROW}),
        client.post("/collections/docs/insert", json={"k": 99}),
        client.post("/argo", json={"statement": 'INSERT INTO docs VALUES {"k": 100}'}),
    ]  # fmt: skip
    for response in attempts:
        assert response.status_code == 403, response.text
    after = (
        db.stream("readings").num_records,
        db.collection("docs").count(),
        db.sql("SELECT count(*) FROM plain").scalar(),
    )
    assert after == before
    assert "x" not in db.tables()


def test_rights_per_kind_limit_what_a_user_sees_and_reads(
    served: Served, tokens: dict[str, str]
) -> None:
    client = served.client(tokens["arrays"])
    kinds = {o["kind"] for o in client.get("/catalog").json()["objects"]}
    assert kinds == {"array"}
    assert client.get("/arrays/img/slab", params={"box": "0:2,0:2"}).status_code == 200
    assert client.get("/objects/readings").status_code == 403
    assert client.get("/streams/readings/range").status_code == 403
    assert client.post("/sql", json={"sql": "SELECT count(*) FROM plain"}).status_code == 403
    assert client.post("/sql", json={"sql": "SELECT count(*) FROM img"}).status_code == 200


def test_a_revoked_token_stops_working_at_once(served: Served, tokens: dict[str, str]) -> None:
    client = served.client(tokens["reader"])
    assert client.get("/catalog").status_code == 200
    Users(served.db.path).revoke("reader")
    assert client.get("/catalog").status_code == 401


def test_a_read_only_server_refuses_every_write(
    database: tesseradb.Database, tokens: dict[str, str]
) -> None:
    server = Served(database, read_only=True)
    try:
        client = server.client(tokens["admin"])
        response = client.post("/sql", json={"sql": "CREATE TABLE y AS SELECT 1"})
        assert response.status_code == 403
        assert client.post("/collections/docs/insert", json={"k": 1}).status_code == 403
        assert "y" not in database.tables()
    finally:
        server.stop()


def test_the_remote_client_answers_as_the_database_in_process(
    served: Served, tokens: dict[str, str]
) -> None:
    db = served.db
    with tesseradb.connect(served.url, token=tokens["writer"]) as remote:
        text = "SELECT sensor, avg(value) AS a FROM readings WHERE t BETWEEN ? AND ? GROUP BY 1 ORDER BY 1"
        assert remote.sql(text, [100, 900]).arrow().equals(db.sql(text, [100, 900]).arrow())
        assert remote.argo("SELECT name FROM docs WHERE k < 3") == db.argo(
            "SELECT name FROM docs WHERE k < 3"
        )
        assert "predicate" in remote.explain("SELECT * FROM readings WHERE t < 5")
        assert {o.name for o in remote.info()} == {"img", "readings", "docs", "plain"}
        assert remote.schema("plain") == db.schema("plain")
        local = db.array("img")[3:9, 2:7]
        got = remote.array("img")[3:9, 2:7]
        for attr in ("v", "w"):
            np.testing.assert_array_equal(got[attr], local[attr])
        assert remote.array("img").cell(3, 4) == {"v": 148.0, "w": 4}
        assert (
            remote.stream("readings")
            .range(t=(10, 20))
            .equals(db.stream("readings").range(t=(10, 20)))
        )
        extra = pa.table(
            {"t": [9000.0, 9001.0], "sensor": pa.array([1, 2], pa.int32()), "value": [1.0, 2.0]}
        )
        assert remote.stream("readings").ingest(extra) == 2
        assert db.sql("SELECT count(*) FROM readings WHERE t >= 9000").scalar() == 2
        ids = remote.collection("docs").insert_many([{"k": 100}, {"k": 101}])
        assert len(ids) == 2 and db.collection("docs").count() == 32
        assert remote.collection("docs").load_jsonl(['{"k": 102}', '{"k": 103}']) == 2
        with pytest.raises(UnknownTableError, match="nosuch"):
            remote.sql("SELECT * FROM nosuch")
    with pytest.raises(AccessDeniedError):
        tesseradb.connect(served.url, token="tdb_wrong")


def test_an_array_slice_renders_with_the_expected_pixels(
    served: Served, tokens: dict[str, str]
) -> None:
    with tesseradb.connect(served.url, token=tokens["reader"]) as remote:
        png = remote.array("img").image((slice(0, 64), slice(0, 48)), "v", cmap="gray")
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))
    assert pixels.shape == (64, 48, 4)
    values = served.db.array("img")[0:64, 0:48]["v"].astype(float)
    expected = ((values - values.min()) / (values.max() - values.min()) * 255).astype(np.uint8)
    np.testing.assert_array_equal(pixels[..., 0], expected)
    assert (pixels[..., 3] == 255).all()
    client = served.client(tokens["reader"])
    small = client.get(
        "/arrays/img/slab",
        params={"box": "0:64,0:48", "attr": "v", "format": "png", "max_side": "16", "vmin": "0", "vmax": "100"},
    )  # fmt: skip
    image = Image.open(io.BytesIO(small.content))
    assert image.size == (12, 16)  # every 4th cell
    assert np.asarray(image.convert("L"))[0, :3].tolist() == [0, 10, 20]  # 0, 4, 8 of 100
    plot = client.get("/streams/readings/plot", params={"x": "t", "y": "value", "t": "0:1000"})
    assert Image.open(io.BytesIO(plot.content)).size == (800, 400)


def test_time_travel_reads_an_older_version(served: Served, tokens: dict[str, str]) -> None:
    img = served.db.array("img")
    old = img.versions()[0].id
    img[0:2, 0:2] = {"v": np.full((2, 2), -1, "f4"), "w": np.zeros((2, 2), "i2")}
    client = served.client(tokens["reader"])
    now = client.get("/arrays/img/cell", params={"at": "0,0"}).json()["values"]["v"]
    then = client.get("/arrays/img/cell", params={"at": "0,0", "version": old}).json()["values"][
        "v"
    ]
    assert (now, then) == (-1.0, 0.0)
    versions = client.get("/objects/img").json()["versions"]
    assert versions[1]["id"] == old


LONG = "SELECT count(*) FROM range(20000000000) r WHERE r.range % 7 = 1"


def test_a_long_statement_is_cancelled_from_another_request(
    served: Served, tokens: dict[str, str]
) -> None:
    client = served.client(tokens["reader"])
    answer: dict[str, Any] = {}

    def run() -> None:
        answer["response"] = client.post("/sql", json={"sql": LONG, "query_id": "q-long"})

    thread = threading.Thread(target=run)
    thread.start()
    other = served.client(tokens["reader"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        listed = other.get("/queries").json()["queries"]
        if any(q["id"] == "q-long" for q in listed):
            break
        time.sleep(0.05)
    assert other.get("/queries/q-long").json()["sql"] == LONG
    assert other.post("/queries/q-long/cancel").status_code == 200
    thread.join(30)
    response = answer["response"]
    assert response.status_code == 409
    assert "cancelled" in response.json()["error"]
    assert other.get("/queries").json()["queries"] == []


def test_the_time_limit_stops_a_statement(served: Served, tokens: dict[str, str]) -> None:
    # the fixture's server allows 5 s a statement
    started = time.monotonic()
    response = served.client(tokens["reader"]).post("/sql", json={"sql": LONG})
    assert response.status_code == 408
    assert "time limit of 5 s" in response.json()["error"]
    assert time.monotonic() - started < 30


def test_the_remote_client_cancels(served: Served, tokens: dict[str, str]) -> None:
    from tesseradb.progress import Cancel

    cancel = Cancel()
    threading.Timer(0.5, cancel.cancel).start()
    with tesseradb.connect(served.url, token=tokens["reader"]) as remote:
        with pytest.raises(CancelledError):
            remote.sql(LONG, cancel=cancel)
        assert remote.sql("SELECT 1").scalar() == 1


def test_the_openapi_schema_lists_every_route(served: Served, tokens: dict[str, str]) -> None:
    from starlette.routing import Route

    client = served.client(tokens["reader"])
    schema = client.get("/openapi.json").json()
    assert schema["openapi"].startswith("3.")
    routes = {r.path for r in served.server.config.app.routes if isinstance(r, Route)} - {
        "/",
        "/console",
        "/openapi.json",
    }
    assert routes <= set(schema["paths"]), routes - set(schema["paths"])
    assert set(schema["paths"]) == set(OPENAPI["paths"])
    json.dumps(schema)


def test_an_admin_loads_a_server_file_with_progress(
    served: Served, tokens: dict[str, str], tmp_path: Path
) -> None:
    source = tmp_path / "slices.npy"
    np.save(source, np.arange(2 * 64 * 64, dtype="f4").reshape(2, 64, 64))
    body = {"source": str(source), "into": "slices"}
    refused = served.client(tokens["writer"]).post("/load", json=body)
    assert refused.status_code == 403
    assert served.db.catalog.get("slices") is None
    done = served.client(tokens["admin"]).post("/load", json=body)
    assert done.status_code == 200, done.text
    assert done.json()["kind"] == "array" and done.json()["items"] == 2 * 64 * 64
    bad = served.client(tokens["admin"]).post("/load", json={"source": str(tmp_path / "none.npy")})
    assert bad.status_code in (400, 404)
    assert "none.npy" in bad.json()["error"]


def test_a_missing_object_is_object_not_found_for_the_remote_client(
    served: Served, tokens: dict[str, str]
) -> None:
    from tesseradb.errors import ObjectNotFoundError

    with tesseradb.connect(served.url, token=tokens["reader"]) as remote:
        with pytest.raises(ObjectNotFoundError, match="no object 'nosuch'"):
            remote.array("nosuch")[0:1, 0:1]
        with pytest.raises(ObjectNotFoundError):
            remote.describe("nosuch")


def test_a_statement_failing_mid_answer_is_an_error_not_a_short_answer(
    served: Served, tokens: dict[str, str]
) -> None:
    import httpx

    from tesseradb.errors import ServerError

    # the first 2M rows (16 MB) stream out before the row that fails
    text = (
        "SELECT CASE WHEN range < 2000000 THEN range ELSE error('boom') END AS v "
        "FROM range(3000000)"
    )
    with tesseradb.connect(served.url, token=tokens["admin"]) as remote:
        with pytest.raises(ServerError):
            remote.sql(text)
        assert remote.sql("SELECT 1").scalar() == 1  # the server goes on
    client = served.client(tokens["admin"])
    with pytest.raises(httpx.RemoteProtocolError):
        client.post("/sql", json={"sql": text}, headers={"Accept": ARROW}).read()


def test_every_error_is_json_naming_what(served: Served, tokens: dict[str, str]) -> None:
    """Issue 40, item 9: unknown paths and methods, a body nested too deeply, an unknown
    stream field, impossible PNG options: JSON errors, never plain text or a wrong answer."""
    client = served.client(tokens["reader"])
    for method, path, kwargs, status in [
        ("GET", "/no/such/path", {}, 404),
        ("DELETE", "/catalog", {}, 405),
        ("POST", "/sql", {"content": b"[" * 100000 + b"]" * 100000, "headers": {"Content-Type": "application/json"}}, 400),
        ("GET", "/streams/readings/range?zz=1:2", {}, 400),
        ("GET", "/streams/readings/range?t=0:10&limit=-1", {}, 400),
        ("GET", "/arrays/img/slab?box=0:8,0:8&format=png&vmin=5&vmax=1", {}, 400),
        ("GET", "/arrays/img/slab?box=0:8,0:8&format=png&max_side=0", {}, 400),
    ]:  # fmt: skip
        response = client.request(method, path, **kwargs)
        assert response.status_code == status, (path, response.status_code, response.text)
        body = response.json()
        assert body["error"] and body["type"], body
    assert "zz" in client.get("/streams/readings/range?zz=1:2").json()["error"]
