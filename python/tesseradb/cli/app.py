"""``tessera`` commands: init, sql, shell, info, bench. Heavy modules load inside commands."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console

    import tesseradb

app = typer.Typer(
    name="tessera",
    help="TesseraDB: arrays, record streams, documents, associative arrays and attached HDF5 files under one SQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# the arguments most commands share
DatabaseDir = Annotated[Path, typer.Argument(help="The database directory.")]
ReadOnlyFlag = Annotated[bool, typer.Option("--read-only", help="Open the database read-only.")]
CreateFlag = Annotated[
    bool, typer.Option("--create", help="Create the database when PATH is not one yet.")
]


class OutputFormat(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def _fail(message: str) -> None:
    _console(stderr=True).print(f"[bold red]error:[/] {message}", markup=True, soft_wrap=True)
    raise typer.Exit(1)


def _open(
    path: Path,
    read_only: bool = False,
    fallback_read_only: bool = True,
    create: bool = False,
    storage: str | None = None,
) -> tesseradb.Database:
    """Open a database; when another process writes it, fall back to reading.

    A path that is not a database yet is refused unless ``create``: a
    mistyped path must not quietly become a new, empty database.
    """
    import tesseradb
    from tesseradb.catalog import CATALOG_FILE
    from tesseradb.errors import DatabaseLockedError, TesseraError

    if not create and not (path / CATALOG_FILE).is_file():
        what = "does not exist" if not path.exists() else "is not a TesseraDB database"
        _fail(f"{path} {what}; `tessera init {path}` or --create makes one")
    try:
        return tesseradb.connect(path, read_only=read_only, storage=storage)
    except DatabaseLockedError as err:
        if not fallback_read_only:
            _fail(str(err))
        _console(stderr=True).print(f"note: {err}; opened read-only")
        return tesseradb.connect(path, read_only=True)
    except TesseraError as err:
        _fail(str(err))
        raise  # unreachable: _fail exits


@contextmanager
def _database(
    path: Path, read_only: bool = False, fallback_read_only: bool = True, create: bool = False
) -> Iterator[tesseradb.Database]:
    """The database open for one command (see :func:`_open`): a refusal inside the block
    becomes one line on standard error and exit status 1; the database is closed
    whatever happens."""
    from tesseradb.errors import TesseraError

    db = _open(path, read_only, fallback_read_only, create)
    try:
        yield db
    except TesseraError as err:
        _fail(str(err))
    finally:
        db.close()


def _version(value: bool) -> None:
    if value:
        from tesseradb._core import __version__

        typer.echo(f"tessera {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """TesseraDB's command line."""


@app.command()
def init(
    path: Annotated[Path, typer.Argument(help="Directory of the new database.")],
    storage: Annotated[
        str | None,
        typer.Option(
            help="Keep the bulk data of new arrays in this s3://bucket/prefix (credentials "
            "from the AWS environment; docs/storage.md)."
        ),
    ] = None,
) -> None:
    """Create an empty database at PATH (an existing database is left as it is)."""
    db = _open(path, fallback_read_only=False, create=True, storage=storage)
    try:
        typer.echo(f"database ready at {db.path} (format version {db.format_version})")
    finally:
        db.close()


@app.command("example-data")
def example_data(
    folder: Annotated[Path, typer.Argument(help="Directory to write the files into.")],
) -> None:
    """Write the input files the README's and docs/' examples load into FOLDER (FITS
    nights, NetCDF grids, readings, JSON people, PTF nights as HDF5, the taxi stream)."""
    from tesseradb.datasets import example_data as write

    if folder.exists() and not folder.is_dir():
        _fail(f"{folder} is a file, not a directory")
    try:
        written = write(folder)
    except OSError as err:
        _fail(f"cannot write into {folder}: {err}")
    typer.echo(f"wrote {len(written)} files into {folder}")


def _parse_params(values: list[str]) -> list[Any] | dict[str, Any] | None:
    """``--param 5 --param abc`` binds ``?``s in order; ``--param name=value`` binds ``$name``."""
    import json

    if not values:
        return None

    def value_of(text: str) -> Any:
        try:
            return json.loads(text)
        except ValueError:
            return text

    named = [v for v in values if "=" in v and v.split("=", 1)[0].isidentifier()]
    if named and len(named) == len(values):
        return {k: value_of(v) for k, v in (item.split("=", 1) for item in values)}
    return [value_of(v) for v in values]


@app.command()
def sql(
    path: DatabaseDir,
    query: Annotated[
        str,
        typer.Argument(
            help="SQL text (DuckDB dialect); several statements may be separated by ';'."
        ),
    ],
    output_format: Annotated[
        OutputFormat, typer.Option("--format", "-f", help="How to print the rows.")
    ] = OutputFormat.table,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write rows to this file instead of standard output."),
    ] = None,
    param: Annotated[
        list[str],
        typer.Option(
            "--param", "-p", help="A parameter: VALUE for ?, NAME=VALUE for $NAME (JSON values)."
        ),
    ] = [],  # noqa: B006
    read_only: ReadOnlyFlag = False,
    create: CreateFlag = False,
    max_rows: Annotated[int, typer.Option(help="Rows shown by --format table.")] = 100,
) -> None:
    """Run QUERY against the database at PATH and print the result."""
    from tesseradb.cli.output import write_result

    with _database(path, read_only=read_only, create=create) as db:
        with (
            _console(stderr=True).status("running", spinner="dots")
            if sys.stderr.isatty()
            else _null()
        ):
            result = db.sql(query, _parse_params(param), progress=sys.stderr.isatty())
        write_result(result, output_format.value, output, max_rows, _console())


@app.command()
def argo(
    path: DatabaseDir,
    statement: Annotated[
        str, typer.Argument(help="One Argo/SQL statement (SELECT, INSERT, DELETE, UPDATE).")
    ],
    param: Annotated[
        list[str],
        typer.Option(
            "--param", "-p", help="A parameter: VALUE for ?, NAME=VALUE for :NAME (JSON values)."
        ),
    ] = [],  # noqa: B006
    read_only: ReadOnlyFlag = False,
    create: CreateFlag = False,
) -> None:
    """Run an Argo/SQL STATEMENT on the JSON collections at PATH; print the objects as JSON lines."""
    import json

    with _database(path, read_only=read_only, create=create) as db:
        for obj in db.argo(statement, _parse_params(param)):
            sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


@app.command()
def shell(
    path: DatabaseDir,
    read_only: ReadOnlyFlag = False,
    create: CreateFlag = False,
) -> None:
    """An interactive SQL shell: statements end with ';'; type .help for the dot commands."""
    from tesseradb.cli.shell import Shell

    db = _open(path, read_only=read_only, create=create)
    try:
        session = Shell(db, _console())
        session.run()
    finally:
        db.close()
    if session.failed and not session.interactive:
        raise typer.Exit(1)  # a script stops at its first error, and says so


@app.command()
def info(
    path: DatabaseDir,
    name: Annotated[
        str | None, typer.Argument(help="An object to describe (its kind, columns and more).")
    ] = None,
) -> None:
    """List the objects of the database with their kinds and sizes, or describe one."""
    from rich.table import Table

    if name is not None:
        with _database(path, read_only=True) as db:
            described = db.describe(name)
        _console().print_json(data=described, default=str)
        return
    with _database(path, read_only=True) as db:
        facts = db.info()
    console = _console()
    console.print(
        f"database {facts.path}  (format version {facts.format_version}, {_size(facts.bytes)} on disk)"
    )
    table = Table("name", "kind", "rows", "size", "modified")
    for obj in facts.objects:
        table.add_row(
            obj.name,
            obj.kind,
            "" if obj.rows is None else f"{obj.rows:,}",
            "" if obj.bytes is None else _size(obj.bytes),
            obj.modified or "",
        )
    if facts.objects:
        console.print(table)
    else:
        console.print("no objects yet")


@app.command()
def check(
    path: DatabaseDir,
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="Set aside what cannot be read (moved to quarantine, or dropped in a new "
            "array version) so the rest stays queryable; says what was lost.",
        ),
    ] = False,
) -> None:
    """Verify every object's files (checksums, catalog, indexes); exit 1 if damage is left."""
    # a plain check only reads: it runs beside a writer in another process
    with _database(path, read_only=not repair, fallback_read_only=False) as db:
        report = db.check(repair=repair)
    typer.echo(str(report))
    if not report.ok:
        raise typer.Exit(1)


@app.command()
def attach(
    path: DatabaseDir,
    files: Annotated[
        str, typer.Argument(help="An HDF5/NetCDF4 file, or a glob of files with the same layout.")
    ],
    name: Annotated[
        str | None, typer.Option(help="Name of the attachment (default: from the file name).")
    ] = None,
    threads: Annotated[
        int | None, typer.Option(help="Threads per scan (default: all cores).")
    ] = None,
    create: CreateFlag = False,
) -> None:
    """Attach HDF5 files in place: each table in them becomes NAME.TABLE."""
    with _database(path, fallback_read_only=False, create=create) as db:
        attached = db.attach(files, name=name, threads=threads)
        console = _console()
        console.print(f"attached {len(attached.files)} file(s) as {attached.name}:")
        for table in attached.tables():
            console.print(
                f"  {attached.name}.{table}: {len(db.schema(f'{attached.name}.{table}'))} columns"
            )
        for where, why in attached.skipped:
            console.print(f"  skipped {where}: {why}", markup=False)


def _list(text: str | None) -> list[str] | None:
    return None if text is None else [part.strip() for part in text.split(",") if part.strip()]


@app.command()
def load(
    path: DatabaseDir,
    source: Annotated[
        str, typer.Argument(help="A file, a Zarr store, or a glob of files (quote it).")
    ],
    into: Annotated[
        str | None, typer.Option(help="The object to make or append to (default: the file's name).")
    ] = None,
    kind: Annotated[
        str | None, typer.Option(help="array, stream, collection or table (default: by format).")
    ] = None,
    format: Annotated[
        str | None, typer.Option(help="The files' format when their names do not say it.")
    ] = None,
    along: Annotated[
        str | None,
        typer.Option(help="Arrays: the dimension a glob's files stack on (or concatenate along)."),
    ] = None,
    dims: Annotated[
        str | None, typer.Option(help="Arrays: dimension names, comma-separated.")
    ] = None,
    chunks: Annotated[
        str | None, typer.Option(help="Arrays: chunk sizes, comma-separated.")
    ] = None,
    variables: Annotated[
        str | None, typer.Option(help="Arrays: the NetCDF/HDF5/Zarr variables to load.")
    ] = None,
    hdu: Annotated[str | None, typer.Option(help="Arrays: the FITS HDU (number or name).")] = None,
    descriptor: Annotated[
        Path | None, typer.Option(help="Streams: the record descriptor (XML or JSON file).")
    ] = None,
    index: Annotated[
        str | None, typer.Option(help="Streams: the indexing fields, comma-separated.")
    ] = None,
    create: CreateFlag = False,
) -> None:
    """Load files into an array, a stream, a collection or a table (made if it does not exist,
    appended to otherwise; all or nothing). Ctrl-C stops it and keeps nothing."""
    options: dict[str, Any] = {}
    if along is not None:
        options["along"] = along
    if dims is not None:
        options["dims"] = _list(dims)
    if chunks is not None:
        try:
            options["chunks"] = [int(c) for c in _list(chunks) or []]
        except ValueError:
            _fail(f"--chunks takes whole numbers separated by commas, not {chunks!r}")
    if variables is not None:
        options["variables"] = _list(variables)
    if hdu is not None:
        options["hdu"] = int(hdu) if hdu.isdigit() else hdu
    if descriptor is not None:
        try:
            options["descriptor"] = descriptor.read_text()
        except (OSError, UnicodeDecodeError) as err:
            _fail(f"descriptor file {descriptor}: {err}")
    if index is not None:
        options["index"] = _list(index)
    with _database(path, fallback_read_only=False, create=create) as db:
        loaded = db.load(source, into, kind, format=format, progress=sys.stderr.isatty(), **options)
        typer.echo(str(loaded))


@app.command()
def export(
    path: DatabaseDir,
    source: Annotated[str, typer.Argument(help="An object's name, or a query (SQL text).")],
    target: Annotated[
        str, typer.Argument(help="The file (or .zarr directory) to write, or an s3:// URL.")
    ],
    format: Annotated[
        str | None, typer.Option(help="The target's format when its name does not say it.")
    ] = None,
    attr: Annotated[
        str | None, typer.Option(help="Arrays: the attribute to write (FITS and npy hold one).")
    ] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing target.")] = False,
) -> None:
    """Write an array to Zarr/NetCDF/FITS/npy, a collection to JSON lines, or a table or
    query to Parquet/CSV/JSON/Arrow. A failed or stopped export leaves no target."""
    options: dict[str, Any] = {"overwrite": overwrite}
    if attr is not None:
        options["attr"] = attr
    with _database(path, read_only=True) as db:
        done = db.export(source, target, format=format, progress=sys.stderr.isatty(), **options)
        typer.echo(str(done))


@app.command()
def detach(
    path: DatabaseDir,
    name: Annotated[
        str, typer.Argument(help="The attachment to forget (its files are untouched).")
    ],
) -> None:
    """Forget an attachment and delete its sidecar indexes."""
    with _database(path, fallback_read_only=False) as db:
        db.detach(name)
        typer.echo(f"detached {name}")


@app.command()
def index(
    path: DatabaseDir,
    table: Annotated[str, typer.Argument(help="An attached table, as NAME.TABLE.")],
    columns: Annotated[list[str], typer.Argument(help="Columns to index.")],
    count: Annotated[int | None, typer.Option(help="Equal-weight bins.")] = None,
    precision: Annotated[
        int | None, typer.Option(help="Bins at this many significant digits.")
    ] = None,
    exact: Annotated[bool, typer.Option(help="One bin per distinct value.")] = False,
    encoding: Annotated[str, typer.Option(help="equality or range.")] = "equality",
) -> None:
    """Build bitmap indexes on columns of an attached table (sidecar files; the HDF5 file is untouched)."""
    import time

    with _database(path, fallback_read_only=False) as db:
        start = time.perf_counter()
        with (
            _console(stderr=True).status("building indexes", spinner="dots")
            if sys.stderr.isatty()
            else _null()
        ):
            db.create_index(
                table, columns, count=count, precision=precision, exact=exact, encoding=encoding
            )
        typer.echo(
            f"indexed {table} on {', '.join(columns)} in {time.perf_counter() - start:.2f} s"
        )


@app.command()
def bench(
    name: Annotated[str | None, typer.Argument(help="Benchmark to run (omit with --list).")] = None,
    scale: Annotated[
        str | None, typer.Option(help="Named scale (tiny, small, large, ...).")
    ] = None,
    peers: Annotated[
        str | None,
        typer.Option(help="Comma-separated peer systems (default: all of the benchmark's)."),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write results as JSON here.")
    ] = None,
    md_out: Annotated[
        Path | None, typer.Option("--md", help="Write a markdown table here.")
    ] = None,
    repeat: Annotated[int, typer.Option(help="Timed runs per case (the median is reported).")] = 5,
    warmup: Annotated[int, typer.Option(help="Untimed runs before the timed ones.")] = 1,
    list_: Annotated[
        bool, typer.Option("--list", help="List the benchmarks with their scales and systems.")
    ] = False,
    config: Annotated[
        str | None, typer.Option(help="ssdb: the configuration (its scale): test, tiny, ...")
    ] = None,
    params: Annotated[
        str | None, typer.Option(help="ssdb: the parameter set: easy, medium or hard.")
    ] = None,
    workdir: Annotated[
        Path | None,
        typer.Option(help="ssdb: keep the run here, so an interrupted run resumes."),
    ] = None,
    restart: Annotated[
        bool, typer.Option("--restart", help="ssdb: start the run in --workdir afresh.")
    ] = False,
) -> None:
    """Run a benchmark against its peers in one run and report medians and agreement."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    from tesseradb.bench.registry import available, get_benchmark
    from tesseradb.bench.runner import run_benchmark, write_report
    from tesseradb.errors import TesseraError

    console = _console()
    if list_ or name is None:
        from tesseradb.bench.peers import PEERS

        console.print("[bold]benchmarks[/]")
        for bench_name in available():
            spec = get_benchmark(bench_name)
            console.print(f"  [bold]{spec.name}[/]: {spec.description}")
            console.print(
                f"    scales: {', '.join(spec.scales)}; systems: {', '.join(spec.systems)}"
            )
        console.print("[bold]peer systems[/]")
        for p in PEERS.values():
            why = p.unavailable()
            console.print(
                f"  [bold]{p.name}[/]: {p.description}"
                + (f" [red](unavailable: {why})[/]" if why else "")
            )
        return
    if config is not None:
        if scale is not None and scale != config:
            _fail(f"--config {config} and --scale {scale} disagree; give one")
        scale = config
    if name != "ssdb" and (config or params or workdir or restart):
        _fail("--config, --params, --workdir and --restart belong to `tessera bench ssdb`")
    options = {"params": params, "workdir": workdir, "restart": restart}
    peer_list = (
        [p.strip() for p in peers.split(",") if p.strip() and p.strip() != "tessera"]
        if peers
        else None
    )
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    try:
        with Progress(*columns, console=_console(stderr=True), transient=True) as progress:
            task = progress.add_task(f"bench {name}", total=None)

            def step(event: Any) -> None:  # a measured case's runs: the bar
                progress.update(
                    task,
                    description=f"bench {name}: {event.task}",
                    completed=event.done,
                    total=event.total,
                )

            report = run_benchmark(
                name,
                scale,
                peer_list,
                repeat=repeat,
                warmup=warmup,
                progress=lambda msg: progress.update(
                    task, description=f"bench {name}: {msg}", total=None, completed=0
                ),
                options=options,
                steps=step,
            )
    except TesseraError as err:
        _fail(str(err))
    write_report(report, json_out, md_out)
    typer.echo(report.to_markdown())  # verbatim: rich would wrap the table
    if not report.agree:
        _fail("the systems did not return the same answers (see the checks above)")


@app.command()
def serve(
    path: DatabaseDir,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8765,
    read_only: ReadOnlyFlag = False,
    certfile: Annotated[
        Path | None, typer.Option(help="TLS certificate (PEM), with --keyfile.")
    ] = None,
    keyfile: Annotated[Path | None, typer.Option(help="TLS private key (PEM).")] = None,
    statement_seconds: Annotated[
        float, typer.Option(help="Time limit of one statement, in seconds.")
    ] = 300.0,
    pg_port: Annotated[
        int | None,
        typer.Option(help="Also speak the PostgreSQL wire protocol on this port (psql, psycopg)."),
    ] = None,
    flight_port: Annotated[
        int | None,
        typer.Option(help="Also speak Arrow Flight SQL on this port (ADBC, Flight SQL JDBC)."),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(help="More processes answering PostgreSQL clients' queries (with --pg-port)."),
    ] = 0,
) -> None:
    """Serve the database over HTTP (the API, the web console at /, remote clients) and,
    with --pg-port and --flight-port, the PostgreSQL wire protocol and Arrow Flight SQL."""
    from tesseradb.catalog import CATALOG_FILE
    from tesseradb.errors import TesseraError
    from tesseradb.server import Users
    from tesseradb.server import serve as run

    if not (path / CATALOG_FILE).is_file():
        _fail(f"{path} is not a TesseraDB database; `tessera init {path}` makes one")
    console = _console(stderr=True)
    if not Users(path).list():
        console.print(
            f"note: {path} has no users yet: `tessera user add {path} NAME --rights admin` "
            "makes one; until then every request but /health is refused"
        )
    try:
        run(
            path,
            host,
            port,
            read_only=read_only,
            certfile=None if certfile is None else str(certfile),
            keyfile=None if keyfile is None else str(keyfile),
            statement_seconds=statement_seconds,
            pg_port=pg_port,
            flight_port=flight_port,
            workers=workers,
            ready=lambda url: console.print(f"serving {path} at {url} (Ctrl-C stops)"),
        )
    except TesseraError as err:
        _fail(str(err))


user_app = typer.Typer(
    help="Users of a served database: tokens and rights (they take effect at once).",
    no_args_is_help=True,
)
app.add_typer(user_app, name="user")


@user_app.command("add")
def user_add(
    path: DatabaseDir,
    name: Annotated[str, typer.Argument(help="The user's name.")],
    rights: Annotated[
        list[str] | None,
        typer.Option(
            "--rights",
            help="read, write or admin for every kind, or KIND=LEVEL (array, stream, "
            "collection, table, attached, assoc); repeat it. Default: read.",
        ),
    ] = None,
) -> None:
    """Make a user and print its token (shown only now; the database keeps its hash)."""
    from tesseradb.catalog import CATALOG_FILE
    from tesseradb.errors import TesseraError
    from tesseradb.server import Users, parse_rights

    if not (path / CATALOG_FILE).is_file():
        _fail(f"{path} is not a TesseraDB database")
    try:
        token = Users(path).add(name, parse_rights(rights or []))
    except TesseraError as err:
        _fail(str(err))
    typer.echo(token)
    _console(stderr=True).print(
        f"user {name} made; the line above is its token, shown only now", markup=False
    )


@user_app.command("revoke")
def user_revoke(
    path: DatabaseDir, name: Annotated[str, typer.Argument(help="The user's name.")]
) -> None:
    """Remove a user: its token stops working at the server's next request."""
    from tesseradb.errors import TesseraError
    from tesseradb.server import Users

    try:
        Users(path).revoke(name)
    except TesseraError as err:
        _fail(str(err))
    _console().print(f"user {name} revoked", markup=False)


@user_app.command("list")
def user_list(path: DatabaseDir) -> None:
    """The users and their rights (never their tokens)."""
    from tesseradb.errors import TesseraError
    from tesseradb.server import Users

    try:
        users = Users(path).list()
    except TesseraError as err:
        _fail(str(err))
    console = _console()
    if not users:
        console.print("no users", markup=False)
    for user in users:
        rights = ", ".join(f"{k}={v}" for k, v in sorted(user.rights.items()))
        console.print(f"{user.name}: {rights} (since {user.created})", markup=False)


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *args: object) -> None:
        return None


def main() -> None:
    """The ``tessera`` entry point: errors are one line on standard error, never a traceback
    (``TESSERA_DEBUG=1`` shows it for an error that is not a TesseraError: a bug)."""
    import os

    from tesseradb.errors import TesseraError

    try:
        app()  # click's standalone mode: usage errors, Ctrl-C and exits without a traceback
    except TesseraError as err:
        _console(stderr=True).print(f"[bold red]error:[/] {err}", markup=True, soft_wrap=True)
        sys.exit(1)
    except Exception as err:
        if os.environ.get("TESSERA_DEBUG"):
            raise
        _console(stderr=True).print(
            f"[bold red]internal error:[/] {type(err).__name__}: {err} "
            "(a bug in TesseraDB; TESSERA_DEBUG=1 shows where)",
            markup=True,
            soft_wrap=True,
        )
        sys.exit(70)
