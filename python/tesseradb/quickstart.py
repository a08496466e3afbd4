"""The quickstart that ``make demo`` runs: a tour of what TesseraDB does today.

It creates a database in a temporary folder, uses every data model that has
landed (the SQL front end over in-memory relations and plain tables,
attached HDF5 files, record streams and arrays),
and prints what each step did and how long it took.

Run it with ``python -m tesseradb.quickstart [--rows N] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def step(title: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    elapsed = time.perf_counter() - start
    print(f"  [{elapsed * 1000:9.1f} ms] {title}")


def show(rows: list[tuple[object, ...]], indent: str = "               ") -> None:
    for row in rows:
        print(indent + "  ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row))


def median_ms(fn: Callable[[], object], runs: int = 5) -> float:
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def run(rows: int, directory: Path) -> None:
    import numpy as np
    import pyarrow as pa

    import tesseradb
    from tesseradb.sql import ArrowRelation

    path = directory / "quickstart.tdb"
    print(f"TesseraDB {tesseradb.__version__} quickstart, database at {path}\n")

    print("1. A database is a directory; connect() creates it.")
    with step("connect (creates catalog.sqlite, takes the writer lock)"):
        db = tesseradb.connect(path)

    print(f"\n2. Any Arrow data is a relation: {rows:,} generated sensor readings, time-ordered.")
    with step(f"generate {rows:,} readings with numpy"):
        rng = np.random.default_rng(7)
        readings = pa.table(
            {
                "t": np.arange(rows, dtype=np.int64),
                "station": rng.integers(0, 50, rows, dtype=np.int32),
                "temperature": np.round(rng.normal(12.0, 6.0, rows), 2),
                "humidity": rng.uniform(20, 100, rows),
            }
        )
    with step("register it as a relation (no copy)"):
        db.register("readings", ArrowRelation("readings", readings))

    print("\n3. Plain tables created with SQL persist in the database's own DuckDB file.")
    with step("CREATE TABLE stations AS ... (50 stations on 5 sites)"):
        db.sql(
            "CREATE TABLE stations AS SELECT range::INTEGER AS station, "
            "['north', 'south', 'east', 'west', 'summit'][1 + range % 5] AS site, "
            "100 + 37 * range AS elevation FROM range(50)"
        )

    print("\n4. One SQL over both: joins, aggregates, windows; values bound as parameters.")
    query = """
        SELECT site, count(*) AS n, avg(temperature) AS mean_t,
               rank() OVER (ORDER BY avg(temperature) DESC) AS warmest
        FROM readings JOIN stations USING (station)
        WHERE t BETWEEN ? AND ? AND humidity > ?
        GROUP BY site ORDER BY warmest"""
    window = [rows // 2, rows // 2 + rows // 100, 50.0]
    with step("a 1% time window joined with stations, grouped by site"):
        result = db.sql(query, window)
    show(result.fetchall())

    print("\n5. explain() shows what each relation was asked for: the predicate and the columns.")
    with step("explain the same query"):
        explained = db.explain(query, window)
    for line in str(explained).splitlines():
        print("               " + line)
    scan = result.scan_stats["readings"]
    print(f"               the scan handed DuckDB {scan.rows:,} of {rows:,} rows")

    print("\n6. Pushdown only ever narrows the scan; DuckDB re-applies every filter, so answers")
    print("   are the same as without it. The same selective query both ways (median of 5 runs,")
    print("   after a first run that builds the relation's zone maps):")
    import duckdb

    con = duckdb.connect()
    con.register("readings", readings)
    selective = "SELECT count(*), avg(temperature) FROM readings WHERE t BETWEEN ? AND ?"
    ours = median_ms(lambda: db.sql(selective, window[:2]).fetchall())
    theirs = median_ms(lambda: con.execute(selective, window[:2]).fetchall())
    same = db.sql(selective, window[:2]).fetchall() == con.execute(selective, window[:2]).fetchall()
    con.close()
    print(f"  [{ours:9.1f} ms] tessera: db.sql over the relation (zone maps skip batches)")
    print(f"  [{theirs:9.1f} ms] duckdb: the same SQL over the same Arrow table")
    print(f"               same answer: {same}")

    print("\n7. Attached files: SQL over an HDF5 file in place, no loading step (SDS/Q).")
    from tesseradb.bench.ptf import QUERY
    from tesseradb.datasets import ptf_file

    h5 = directory / "ptf.h5"
    with step("generate a PTF-shaped HDF5 file (200,000 candidates, 3 groups, 108 datasets)"):
        windows = ptf_file(h5, 200_000)
    with step("attach it: nothing copied, every group is a table"):
        ptf = db.attach(h5, name="ptf")
    print(
        f"               tables: {', '.join(f'ptf.{t}' for t in ptf.tables())}; file {h5.stat().st_size / 2**20:.0f} MiB"
    )
    # one week (the paper's Q3): at this size a single night holds about one
    # subtraction, and often none
    with step("first answer: the paper's three-way join over one week, no index"):
        first = db.sql(QUERY, windows["q3"]).fetchall()
    with step("build bitmap indexes on the join keys and filtered columns (sidecar files)"):
        db.create_index("ptf.subtraction", ["ujd", "id"])
        db.create_index("ptf.candidate", ["sub_id", "mag", "fwhm"])
        db.create_index("ptf.rb_classifier", ["candidate_id", "realbogus"])
    before = ptf.bytes_read
    with step("the same query with indexes: semi-joins read only the rows that can join"):
        again = db.sql(QUERY, windows["q3"]).fetchall()
    print(
        f"               {len(again)} rows (same as without indexes: {again == first}); read "
        f"{ptf.bytes_read - before:,} of {ptf.file_bytes:,} bytes"
    )
    for line in str(db.explain(QUERY, windows["q3"])).splitlines():
        if "semi-join" in line or "index read" in line:
            print("               " + line.strip()[:110])

    print("\n8. Record streams (MDDS): taxi trips ingested into segments with packed kd-trees")
    print("   under an R*-tree, queryable at once, written to disk in the background.")
    from tesseradb.bench.mdds import TAXI_QUERIES
    from tesseradb.datasets import TAXI_DESCRIPTOR, taxi

    trips_n = max(rows // 2, 10_000)
    with step(f"generate {trips_n:,} taxi trips (the paper's Listing 1 fields)"):
        trips = taxi(trips_n, seed=7)
    with step("create the stream from the paper's XML record descriptor"):
        stream = db.create_stream("mdds_table", TAXI_DESCRIPTOR)
    with step(f"ingest {trips_n:,} trips from Arrow (queryable when ingest returns)"):
        stream.ingest(trips)
    print(
        f"               {stream.num_segments} segments, {stream.unwritten_segments} not yet on disk"
    )
    with step("flush: every segment written, fsynced and renamed into place"):
        stream.flush()
    print(f"               {stream.bytes_on_disk:,} bytes on disk")
    # results print after their step's line (a step prints its label when done)
    with step("the paper's taxi query 6 in SQL: a 1 km box over eleven months"):
        taxi_rows = db.sql(TAXI_QUERIES[5]).fetchall()
    show(taxi_rows)
    for line in str(db.explain(TAXI_QUERIES[5])).splitlines():
        if "segments inspected" in line:
            print("               " + line.strip())
    with step("the same box in Python: stream.range(...) returns an Arrow table"):
        box = stream.range(
            ["passenger_count"],
            pickup_latitude=(40.7766603868, 40.7856435434),
            pickup_longitude=(-73.9849723371, -73.9759755461),
        )
    print(f"               {box.num_rows:,} trips in the box")

    print("\n9. Arrays (SciDB's model on Zarr v3 / Icechunk): raw sky images with 11")
    print("   attributes, versioned writes, halos for per-chunk work, SQL over the cells.")
    import numpy as np

    from tesseradb.datasets import IMAGE_ATTRS, sky_image

    side = 500 if rows < 1_000_000 else 1500
    with step(f"create array raw <v1..v11:int32>[t=0:*,1; y=0:{side},250,5; x=0:{side},250,5]"):
        raw = db.create_array(
            "raw",
            [
                {"name": "t", "end": None, "chunk": 1},
                {"name": "y", "end": side, "chunk": 250, "overlap": 5},
                {"name": "x", "end": side, "chunk": 250, "overlap": 5},
            ],
            dict.fromkeys(IMAGE_ATTRS, "int32"),
            origin=(0, 40_000, 12_000),
        )
    for t in range(3):
        image = sky_image(side, seed=t)
        with step(f"write image {t} ({side} x {side} x 11 attributes): one commit, one version"):
            raw[t, :, :] = image
    print(f"               {len(raw.versions())} versions; {raw.bytes_on_disk:,} bytes on disk")
    with step("count bright pixels per chunk in parallel threads, each chunk with its halo"):
        bright = raw.map_chunks(
            lambda view: int((view.core_data()["v1"] > 1200).sum()), attrs="v1", workers=2
        )
    print(f"               {sum(bright):,} bright pixels in {len(bright)} chunks")
    box_sql = (
        "SELECT t, avg(v1), max(v1) FROM raw WHERE y BETWEEN 40100 AND 40299 "
        "AND x BETWEEN 12000 AND 12399 GROUP BY t ORDER BY t"
    )
    with step("SQL over the array: a box of every image, aggregated natively from the chunks"):
        box_rows = db.sql(box_sql).fetchall()
    show(box_rows)
    with step("regrid image 0 by SS-DB's 10:3 (area-weighted block means)"):
        small = raw.regrid([1, "10:3", "10:3"], attrs="v1", box=(0, slice(None), slice(None)))
    print(f"               {small['v1'].shape} cells, mean {float(np.mean(small['v1'])):.1f}")
    from tesseradb import ssdb

    at = ssdb.placement(ssdb.config("tiny"), 0)
    with step("SS-DB's F1: cook a 1000 x 1000 star field into observations (Rust kernel)"):
        observations = ssdb.cook(ssdb.image_pixels(1000, at), origin=(at.x0, at.y0))
    brightest = max(observations.to_pylist(), key=lambda o: o["pixelsum"])
    print(
        f"               {observations.num_rows:,} observations; the brightest at "
        f"({brightest['x']:,}, {brightest['y']:,}), {brightest['npix']} pixels, "
        f"a polygon of {len(brightest['polygon'])} vertices"
    )
    first = raw.versions()[-2]
    with step("time travel: open the array as it was after its first write"):
        past = db.array("raw", version=first.id)
    print(f"               {past.shape[0]} image(s) then, {raw.shape[0]} now")

    print("\n10. Documents: JSON objects on a relational backend (Argo), queried with Argo/SQL.")
    with step("INSERT INTO people OBJECT {...}: the collection is created on first insert"):
        db.argo(
            'INSERT INTO people OBJECT {"name": "George Bluth", "age": 58, "indicted": true, '
            '"kids": ["Gob", "Lindsay", "Buster", {"name": "Michael", "age": 38}], '
            '"rival": "Stan Sitwell"}, '
            '{"name": "Stan Sitwell", "age": "middle-aged", "charity_giving": 250120.5, '
            '"kids": ["Sally"]}'
        )
    with step("bulk-load 5,000 more objects (one transaction)"):
        db.collection("people").insert_many(
            {"name": f"visitor {i}", "age": i % 90, "kids": []} for i in range(5000)
        )
    with step("SELECT name FROM people WHERE 'Lindsay' = ANY kids"):
        lindsay = db.argo("SELECT name FROM people WHERE 'Lindsay' = ANY kids")
    print(f"               {lindsay}")
    with step("SELECT age FROM people WHERE age >= 88 OR age = 'middle-aged' LIMIT 3"):
        found = db.argo("SELECT age FROM people WHERE age >= 88 OR age = 'middle-aged' LIMIT 3")
    print(f"               {found} (a number matches numbers, a string strings)")
    with step("the paper's join: SELECT left.name, right.kids ... ON (left.rival = right.name)"):
        joined = db.argo(
            "SELECT left.name, right.kids FROM people AS left "
            "INNER JOIN people AS right ON (left.rival = right.name)"
        )
    print(f"               {joined}")
    with step("documents in SQL: people is a relation (objid, doc JSON)"):
        visitors = db.sql(
            "SELECT count(*), avg((doc->>'age')::INT) FROM people WHERE doc->>'name' LIKE 'visitor%'"
        ).fetchall()
    show(visitors)

    print("\n11. Associative arrays (D4M): string-keyed sparse matrices and their algebra, and")
    print("   persistent tables in D4M 2.0's schema (row order, column order, degrees).")
    from tesseradb.assoc import Assoc

    with step("Assoc from a small edge list: who wrote to whom (keys interned in Rust)"):
        edges = Assoc(
            "ann,ann,bob,cat,cat,dan,", "bob,cat,cat,ann,dan,ann,", [3, 1, 2, 5, 1, 4], sum
        )
    print("               " + repr(edges).replace("\n", "\n               "))
    with step("A @ A.T: senders who wrote to the same people (summed products of counts)"):
        shared = edges @ edges.T
    print(f"               ann and bob: {shared['ann,', 'bob,'].triples()} (both wrote to cat)")
    with step("put it into a persistent table (one transaction, fsynced)"):
        tedge = db.create_assoc_table("Tedge")
        tedge.put(edges)
        tedge.put_triples("eve,", "ann,", 7)
    with step("a column lookup (TedgeT) and the degree of that column (TedgeDeg)"):
        to_ann = tedge[:, "ann,"]
        degree = tedge.deg["ann,", :]
    print(f"               to ann: {to_ann.triples()}; degree {degree.triples()}")
    with step("the same table in SQL: row = ... is pushed down to the row order"):
        from_cat = db.sql("SELECT col, val FROM Tedge WHERE row = 'cat' ORDER BY col").fetchall()
    show(from_cat)

    print("\n12. Close, reopen read-only (any number of readers may open a database).")
    with step("close and reopen read-only"):
        db.close()
        db = tesseradb.connect(path, read_only=True)
    with step("query the persisted table"):
        stations = db.sql(
            "SELECT site, max(elevation) FROM stations GROUP BY site ORDER BY site"
        ).fetchall()
    show(stations)
    for obj in db.info().objects:
        size = f"{obj.rows:,} rows" if obj.rows is not None else f"{obj.bytes:,} bytes"
        print(f"               object {obj.name}: {obj.kind}, {size}")
    db.close()
    print('\nDone. The same from the shell: tessera sql DIR "SELECT ...", tessera shell DIR.')


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tesseradb.quickstart", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--rows", type=int, default=2_000_000, help="generated readings (default 2,000,000)"
    )
    parser.add_argument(
        "--keep", type=Path, help="build the database in this directory and keep it"
    )
    args = parser.parse_args(argv)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        run(args.rows, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="tessera-quickstart-") as tmp:
            run(args.rows, Path(tmp))


if __name__ == "__main__":
    main()
