"""The files of a persistent associative table: immutable runs and a manifest.

Each ``put`` writes one *run*: the put's triples as a sparse matrix in both
orientations (D4M's ``Tedge`` in row order and ``TedgeT`` in column order),
the column degrees it adds (``TedgeDeg``) and raw texts (``TedgeTxt``). A
run is a folder of memory-mapped files::

    run-000007/
      meta.json                      counts and key kinds
      row_keys.arrow | .npy          sorted unique row keys (Arrow large_string, or float64)
      col_keys.arrow | .npy          sorted unique column keys
      vals.arrow                     sorted unique string values (string tables)
      row_indptr.npy row_index.npy row_vals.npy   CSR: row -> column ids, values
      col_indptr.npy col_index.npy col_vals.npy   the same by column (with transpose)
      deg.npy                        entries per column key in this put (with degrees)
      txt_keys.arrow txt.arrow       row keys and their texts (with text)

``meta.json`` holds the CRC-32C of every other file of the run, and the
manifest that of each run's ``meta.json``: a file is verified the first
time a process reads it (and wholly by ``tessera check``), so a damaged
byte is an error naming the file, never a changed answer.

``manifest.json`` lists the runs in the order they were put; a later run's
triple wins over an earlier one's at the same (row, column), as a later
write wins in Accumulo. A put writes its run under a temporary name,
renames it and then replaces the manifest (each step fsynced): a put killed
at any point leaves the table as before or with the whole put. Runs the
manifest does not name are leftovers of such a put and are removed when the
table opens for writing.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tesseradb import _core
from tesseradb._durable import file_checksum, fsync_path
from tesseradb.errors import DamagedStorageError

MANIFEST = "manifest.json"
FORMAT = 1


class TextKeys:
    """Sorted unique strings in a memory-mapped Arrow file, searched in Rust.

    It answers what selection asks of a key array (``len``, ``searchsorted``,
    ``keys[positions]``, ``dtype``) without reading the file whole.
    """

    dtype = np.dtype(object)

    def __init__(self, array: Any, path: Path) -> None:
        import pyarrow as pa

        if not pa.types.is_large_string(array.type):
            array = array.cast(pa.large_string())
        self.array = array
        self.path = path
        buffers = array.buffers()
        self.offsets = np.frombuffer(buffers[1], dtype=np.int64)[
            array.offset : array.offset + len(array) + 1
        ]
        self.data = (
            np.frombuffer(buffers[2], dtype=np.uint8)
            if buffers[2] is not None
            else np.empty(0, np.uint8)
        )

    def __len__(self) -> int:
        return len(self.array)

    def searchsorted(self, value: Any, side: str = "left") -> Any:
        probes = [value] if isinstance(value, str) else list(value)
        try:
            found = _core.search_text(self.offsets, self.data, probes, side == "right")
        except ValueError as err:  # offsets that point outside the file's strings
            raise DamagedStorageError(f"{self.path} cannot be read ({err})") from None
        return int(found[0]) if isinstance(value, str) else found

    def __getitem__(self, at: Any) -> np.ndarray:
        import pyarrow as pa

        taken = self.array.take(pa.array(np.asarray(at, dtype=np.int64)))
        out = np.empty(len(taken), dtype=object)
        out[:] = taken.to_pylist()
        return out


def _opened(path: Path, load: Callable[[Path], Any]) -> Any:
    """``load(path)``, with a damaged file named in a DamagedStorageError. A
    missing file stays FileNotFoundError: a reader takes it as its run having
    been merged away by another process, and reads the runs again."""
    try:
        return load(path)
    except (FileNotFoundError, DamagedStorageError):
        raise
    # (pyarrow's errors are ValueErrors, IndexErrors or MemoryErrors: a damaged length
    # asks for terabytes)
    except (OSError, ValueError, TypeError, KeyError, IndexError, MemoryError) as err:
        raise DamagedStorageError(f"{path} cannot be read ({err})") from None


def _arrow_column(path: Path, column: str) -> Any:
    import pyarrow.feather as feather

    return feather.read_table(path, memory_map=True).column(column).combine_chunks()


def _read_keys(folder: Path, stem: str, kind: str, verified: Callable[[Path], Path]) -> Any:
    if kind == "text":
        path = folder / f"{stem}.arrow"
        return TextKeys(_opened(path, lambda p: _arrow_column(verified(p), "key")), path)
    return _opened(folder / f"{stem}.npy", lambda p: np.load(verified(p), mmap_mode="r"))


@dataclass
class Run:
    """One run's files, opened lazily (memory-mapped), each verified against its
    checksum when first opened."""

    folder: Path
    meta: dict[str, Any]
    _cache: dict[str, Any] = field(default_factory=dict)

    def verified(self, path: Path) -> Path:
        """``path``, once its bytes match the checksum ``meta.json`` gives it (a run written
        before checksums has none: its parts are checked for agreeing, see the table)."""
        expected = self.meta.get("checksums", {}).get(path.name)
        if expected is None:
            return path
        try:
            found = file_checksum(path)
        except FileNotFoundError:
            raise
        except OSError as err:
            raise DamagedStorageError(f"{path} cannot be read ({err})") from None
        if found != expected:
            raise DamagedStorageError(
                f"{path} is damaged: its checksum is {found:08x}, not {expected:08x} as written"
            )
        return path

    def verify_all(self) -> None:
        """Every file of the run against its checksum (``tessera check``)."""
        for name in sorted(self.meta.get("checksums", {})):
            self.verified(self.folder / name)

    @property
    def triples(self) -> int:
        return int(self.meta.get("triples", 0))

    def has(self, stem: str) -> bool:
        """Whether the run has the file ``stem`` (``deg``, ``txt``, ``col_indptr`` ...)."""
        if "files" not in self._cache:
            self._cache["files"] = {p.stem for p in self.folder.iterdir()}
        return stem in self._cache["files"]

    def keys(self, axis: str) -> Any:
        """Sorted unique keys of ``row``, ``col`` or ``txt``."""
        name = f"{axis}_keys"
        if name not in self._cache:
            kind = self.meta.get(f"{axis}_kind")
            if kind not in ("text", "number"):
                raise DamagedStorageError(
                    f"{self.folder / 'meta.json'} names no kind of {axis} keys ({kind!r})"
                )
            self._cache[name] = _read_keys(self.folder, name, kind, self.verified)
        return self._cache[name]

    def array(self, name: str) -> np.ndarray:
        if name not in self._cache:
            path = self.folder / f"{name}.npy"
            self._cache[name] = _opened(path, lambda p: np.load(self.verified(p), mmap_mode="r"))
        return self._cache[name]

    def values(self) -> Any:
        """The run's sorted unique string values."""
        if "vals" not in self._cache:
            self._cache["vals"] = _read_keys(self.folder, "vals", "text", self.verified)
        return self._cache["vals"]

    def texts(self) -> Any:
        if "txt" not in self._cache:
            path = self.folder / "txt.arrow"
            self._cache["txt"] = _opened(path, lambda p: _arrow_column(self.verified(p), "text"))
        return self._cache["txt"]


def write_run(
    folder: Path,
    row: Any,
    col: Any,
    val: Any,
    adj: Any,
    transpose: bool,
    degrees: bool | np.ndarray,
    texts: tuple[np.ndarray, list[str]] | None,
) -> Path:
    """Writes one run into a new temporary folder under ``folder`` (fsynced); returns it.

    ``degrees`` is True to count this run's entries per column, or the
    counts themselves (one per column key: a merge keeps the sums of the
    puts it merges, not a recount), or False.
    """
    from concurrent.futures import ThreadPoolExecutor

    tmp = folder / f"tmp-{uuid.uuid4().hex}"
    tmp.mkdir()
    meta: dict[str, Any] = {"triples": int(adj.nnz) if adj is not None else 0}
    # each file is written and fsynced by a thread of its own while the next
    # part is computed: writing releases the GIL, and one fsync after another
    # took as long as the writes (0.45 s for a 5M-triple put)
    with ThreadPoolExecutor(max_workers=4) as pool:
        jobs = []

        def save(name: str, array: np.ndarray) -> None:
            jobs.append(pool.submit(_save_synced, tmp / f"{name}.npy", array))

        def keys(stem: str, values: Any) -> str:
            kind = "text" if _is_text(values) else "number"
            jobs.append(pool.submit(_write_keys_synced, tmp, stem, values))
            return kind

        if adj is not None and adj.nnz:
            meta["row_kind"] = keys("row_keys", row)
            meta["col_kind"] = keys("col_keys", col)
            meta["values"] = "text" if val is not None else "number"
            if val is not None:
                keys("vals", val)
            save("row_indptr", adj.indptr.astype(np.int64, copy=False))
            save("row_index", adj.indices.astype(np.int64, copy=False))
            save("row_vals", adj.data.astype(np.float64, copy=False))
            if transpose:
                by_col = adj.T.tocsr()
                by_col.sort_indices()
                save("col_indptr", by_col.indptr.astype(np.int64, copy=False))
                save("col_index", by_col.indices.astype(np.int64, copy=False))
                save("col_vals", by_col.data.astype(np.float64, copy=False))
            if isinstance(degrees, np.ndarray):
                save("deg", degrees.astype(np.float64))
            elif degrees:
                save("deg", np.bincount(adj.indices, minlength=len(col)).astype(np.float64))
        if texts is not None:
            import pyarrow as pa

            text_keys, text = texts
            meta["txt_kind"] = keys("txt_keys", text_keys)
            meta["texts"] = len(text)
            jobs.append(
                pool.submit(
                    _write_arrow_synced,
                    tmp / "txt.arrow",
                    "text",
                    pa.array(text, type=pa.large_string()),
                )
            )
        # a failed write raises here, and the caller removes tmp
        meta["checksums"] = dict(job.result() for job in jobs)
    (tmp / "meta.json").write_text(json.dumps(meta))
    fsync_path(tmp / "meta.json")
    fsync_path(tmp)
    return tmp


def _is_text(keys: Any) -> bool:
    import pyarrow as pa

    return isinstance(keys, pa.Array) or keys.dtype == object


def _save_synced(path: Path, array: np.ndarray) -> tuple[str, int]:
    """Write, fsync, and checksum (from the page cache) one file: (its name, its CRC)."""
    with open(path, "wb") as out:
        np.save(out, array)
        out.flush()
        os.fsync(out.fileno())
    return path.name, file_checksum(path)


def _write_arrow_synced(path: Path, column: str, array: Any) -> tuple[str, int]:
    import pyarrow as pa
    import pyarrow.feather as feather

    feather.write_feather(pa.table({column: array}), path, compression="uncompressed")
    fsync_path(path)
    return path.name, file_checksum(path)


def _write_keys_synced(folder: Path, stem: str, keys: Any) -> tuple[str, int]:
    if _is_text(keys):
        import pyarrow as pa

        array = keys if isinstance(keys, pa.Array) else pa.array(keys, type=pa.large_string())
        return _write_arrow_synced(folder / f"{stem}.arrow", "key", array)
    return _save_synced(folder / f"{stem}.npy", np.ascontiguousarray(keys, dtype=np.float64))


def _ignore(size: int) -> None:
    """(no progress is reported for fetching a run)"""


def _json_crc(data: dict[str, Any]) -> int:
    """The CRC-32C of a manifest's content (keys sorted, so written and read agree)."""
    text = json.dumps(data, sort_keys=True).encode()
    return int(_core.crc32c_bytes(np.frombuffer(text, dtype=np.uint8)))


class Manifest:
    """The ordered list of a table's runs, replaced whole on every change (with the
    checksum of its content, and of each run's ``meta.json``)."""

    def __init__(self, folder: Path, read_only: bool, location: Any = None) -> None:
        """``location``: an object store where the runs live (the manifest stays in
        ``folder``, naming a run only once every file of it is acknowledged there; the
        folder keeps the runs this process wrote or fetched, as a cache)."""
        self.folder = folder
        self.location = location
        self.read_only = read_only
        self._cache: Path | None = None  # (a reader's own folder for the runs it fetches)
        self._seen: tuple[int, int] | None = None
        self._load()
        if not read_only:
            self.remove_leftovers()

    def _stamp(self) -> tuple[int, int] | None:
        try:
            stat = (self.folder / MANIFEST).stat()
        except FileNotFoundError:
            return None
        return (stat.st_ino, stat.st_mtime_ns)

    def refresh(self) -> None:
        """Reads the manifest again if another process replaced it."""
        if self._stamp() != self._seen:
            self._load()

    def _load(self) -> None:
        folder = self.folder
        self._seen = self._stamp()
        path = folder / MANIFEST
        if path.exists():
            try:
                data = json.loads(path.read_text())
                expected = data.pop("crc", None)  # (a manifest written before it has none)
                if expected is not None and expected != _json_crc(data):
                    raise ValueError("its checksum does not match: it is damaged")
                self.runs: list[str] = list(data["runs"])
                self.next = int(data["next"])
                self.kinds: dict[str, str | None] = dict(data["kinds"])
                # each run's meta.json checksum (a manifest written before them has none)
                self.metas: dict[str, int] = {k: int(v) for k, v in data.get("metas", {}).items()}
            except (ValueError, KeyError, TypeError, AttributeError) as err:
                raise DamagedStorageError(
                    f"associative table {folder.name!r}: {path} cannot be read ({err})"
                ) from None
            if data.get("format") != FORMAT:
                raise DamagedStorageError(
                    f"associative table {folder.name!r}: {path} has format {data.get('format')!r}"
                )
        else:
            self.runs, self.next = [], 1
            self.kinds = {"row": None, "col": None, "values": None, "txt": None}
            self.metas = {}

    def remove_leftovers(self) -> list[str]:
        """Deletes runs the manifest does not name (a put killed before its manifest)."""
        known = set(self.runs)
        removed = []
        for child in self.folder.iterdir() if self.folder.exists() else []:
            if child.name == MANIFEST:
                continue
            if child.name.startswith(("tmp-", "fetch-")) or (
                child.name.startswith("run-") and child.name not in known
            ):
                shutil.rmtree(child, ignore_errors=True)
                removed.append(child.name)
        if self.location is not None:
            # runs a killed put uploaded (wholly or in part) but no manifest names
            stale = {o.path for o in self.location.list() if o.path.split("/", 1)[0] not in known}
            for path in sorted(stale):
                self.location.delete(path)
            removed.extend(sorted({p.split("/", 1)[0] for p in stale}))
        return removed

    def commit(
        self,
        runs: list[str],
        kinds: dict[str, str | None],
        next_id: int,
        metas: dict[str, int] | None = None,
    ) -> None:
        metas = {r: c for r, c in {**self.metas, **(metas or {})}.items() if r in runs}
        data: dict[str, Any] = {
            "format": FORMAT,
            "runs": runs,
            "next": next_id,
            "kinds": kinds,
            "metas": metas,
        }
        data["crc"] = _json_crc(data)
        tmp = self.folder / f"{MANIFEST}.tmp"
        with open(tmp, "w") as out:
            out.write(json.dumps(data))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.folder / MANIFEST)
        fsync_path(self.folder)
        self.runs, self.kinds, self.next, self.metas = runs, kinds, next_id, metas
        self._seen = self._stamp()

    def publish(
        self, tmp: Path, kinds: dict[str, str | None], replacing: tuple[int, int] | None = None
    ) -> str:
        """Renames a written run into place and commits the manifest naming it:
        after the others, or in place of the runs ``replacing`` (start, stop)."""
        name = f"run-{self.next:06d}"
        meta = file_checksum(tmp / "meta.json")
        os.replace(tmp, self.folder / name)
        fsync_path(self.folder)
        if self.location is not None:
            # every file acknowledged by the store (meta.json last) before the manifest
            # names the run: a put killed here is a leftover, never a half run
            files = sorted(p for p in (self.folder / name).iterdir() if p.is_file())
            for file in sorted(files, key=lambda p: p.name == "meta.json"):
                self.location.upload(file, f"{name}/{file.name}")
        if replacing is None:
            runs = [*self.runs, name]
        else:
            start, stop = replacing
            runs = [*self.runs[:start], name, *self.runs[stop:]]
        self.commit(runs, kinds, self.next + 1, {name: meta})
        return name

    def _fetched(self, name: str) -> Path:
        """The folder of run ``name`` here, fetched from the store first if needed."""
        folder = self.folder / name
        if self.location is None or (folder / "meta.json").exists():
            return folder
        if self.read_only:  # (a reader writes nothing into the database's folder)
            if self._cache is None:
                import weakref

                from tesseradb._snapshots import private_directory

                # (named with this process's pid: a later reader removes it if this
                # process was killed; on Linux a mapped run outlives its removal)
                self._cache = private_directory("tessera-assoc-")
                weakref.finalize(self, shutil.rmtree, self._cache, ignore_errors=True)
            folder = self._cache / name
            if (folder / "meta.json").exists():
                return folder
        tmp = folder.parent / f"fetch-{uuid.uuid4().hex}"
        tmp.mkdir(parents=True)
        try:
            found = list(self.location.list(f"{name}/"))
            if not found:
                raise FileNotFoundError(f"{self.location.url}/{name}")
            for stored in found:
                self.location.download(stored.path, tmp / stored.path.split("/", 1)[1], _ignore)
            if (tmp / "meta.json").exists():
                # (every file meta.json names must have come: one missing is damage)
                listed = json.loads((tmp / "meta.json").read_text()).get("checksums", {})
                lacking = sorted(f for f in listed if not (tmp / f).exists())
                if lacking:
                    raise DamagedStorageError(
                        f"associative table {self.folder.name!r}: run {name} in "
                        f"{self.location.url} lacks {', '.join(lacking)}"
                    )
            try:
                os.replace(tmp, folder)
            except OSError:  # (fetched by another thread meanwhile)
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return folder

    def open_run(self, name: str) -> Run:
        folder = self._fetched(name)
        path = folder / "meta.json"
        try:
            text = path.read_bytes()
            expected = self.metas.get(name)
            if expected is not None:
                import numpy as np

                found = int(_core.crc32c_bytes(np.frombuffer(text, dtype=np.uint8)))
                if found != expected:
                    raise ValueError(
                        f"meta.json is damaged: its checksum is {found:08x}, not "
                        f"{expected:08x} as written"
                    )
            meta = json.loads(text)
            if not isinstance(meta, dict) or not isinstance(meta.get("triples", 0), int):
                raise ValueError("meta.json does not describe a run")
        except FileNotFoundError:
            raise  # merged away by another process: the reader reads the runs again
        except (OSError, ValueError) as err:
            raise DamagedStorageError(
                f"associative table {self.folder.name!r}: run {name} cannot be read ({err})"
            ) from None
        return Run(folder, meta)
