"""Where a stream's segment files are: its folder, or a prefix in an object store.

The stream's call log always stays in its local folder: a call is committed by its
record there, appended only once every segment of the call is durable where the
segments live (renamed and the folder fsynced; or a PUT acknowledged by the store,
which makes an object whole or not at all). So a crash never leaves the log naming a
segment that is not whole, and a segment no committed call names is never served.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tesseradb.records._segment_file import (
    HEADER_PREFIX,
    TEMPORARY_SUFFIX,
    SegmentHeader,
    decode_segment,
    encode_segment,
    fsync_directory,
    parse_header,
    read_header,
    read_segment,
    write_segment,
)

if TYPE_CHECKING:
    from tesseradb.records._descriptor import RecordDescriptor
    from tesseradb.records._segments import Segment
    from tesseradb.storage import Location

__all__ = ["HEADER_CACHE", "SEGMENT_SUFFIX", "LocalSegments", "RemoteSegments", "SegmentFiles"]

SEGMENT_SUFFIX = ".seg"


def segment_name(segment_id: int) -> str:
    return f"{segment_id:012d}{SEGMENT_SUFFIX}"


class SegmentFiles:
    """The segment files of one stream (the interface; see the two kinds below)."""

    def where(self, segment_id: int) -> str:
        """The file's path or URL, for messages."""
        raise NotImplementedError

    def ids(self) -> set[int]:
        """The ids of the segment files there (by their names)."""
        raise NotImplementedError

    def header(self, segment_id: int) -> SegmentHeader:
        """A file's header and bounding box (FileNotFoundError when it is missing); a file
        whose length differs from its header's is returned, ``file_size`` telling."""
        raise NotImplementedError

    def read(
        self, segment_id: int, descriptor: RecordDescriptor, orders: Sequence[Sequence[int]] = ()
    ) -> Segment:
        raise NotImplementedError

    def write(self, segment: Segment, descriptor: RecordDescriptor, compress: bool) -> int:
        """Write a segment; it is durable once :meth:`sync` returns. Its size."""
        raise NotImplementedError

    def sync(self) -> None:
        """Make every write so far durable."""

    def prefetch_headers(self, ids: list[int]) -> None:
        """Read these files' headers ahead, together, for :meth:`header` to return."""

    def remove(self, segment_id: int) -> None:
        raise NotImplementedError

    def prepare(self) -> None:
        """(a writer opening the stream) Clear what interrupted writes left."""

    @property
    def remote(self) -> bool:
        return False


class LocalSegments(SegmentFiles):
    """Files in the stream's folder: written to a temporary name, fsynced, renamed."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, segment_id: int) -> Path:
        return self.directory / segment_name(segment_id)

    def where(self, segment_id: int) -> str:
        return str(self.path(segment_id))

    def ids(self) -> set[int]:
        if not self.directory.exists():
            return set()
        return {int(p.stem) for p in self.directory.glob(f"*{SEGMENT_SUFFIX}") if p.stem.isdigit()}

    def header(self, segment_id: int) -> SegmentHeader:
        return read_header(self.path(segment_id), check_size=False)

    def read(
        self, segment_id: int, descriptor: RecordDescriptor, orders: Sequence[Sequence[int]] = ()
    ) -> Segment:
        return read_segment(self.path(segment_id), descriptor, orders)

    def write(self, segment: Segment, descriptor: RecordDescriptor, compress: bool) -> int:
        return write_segment(
            self.path(segment.id), segment, descriptor, compress, sync_directory=False
        )

    def sync(self) -> None:
        fsync_directory(self.directory)  # the renames are durable now

    def remove(self, segment_id: int) -> None:
        self.path(segment_id).unlink(missing_ok=True)

    def prepare(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for leftover in self.directory.glob(f"*{TEMPORARY_SUFFIX}"):
            leftover.unlink()  # a write interrupted before its rename: never confirmed


HEADER_CACHE = "headers"  # a stream folder's copies of its remote segments' headers


class RemoteSegments(SegmentFiles):
    """Objects under a prefix of an object store: one PUT each, whole or absent.

    Opening a stream needs every committed segment's header (its bounding box for the
    R*-tree): one ranged GET each. The stream's folder keeps a copy of each header
    (``headers/<id>``, written after the PUT or the first fetch), named by the object's
    size and entity tag; the listing made at open gives both for every object, so a
    copy is used only for the very object it was made from, and a replaced or missing
    object is fetched or reported as before.
    """

    def __init__(self, location: Location) -> None:
        self.location = location
        self._ahead: dict[int, SegmentHeader | BaseException] = {}
        self._cache_dir: Path | None = None  # where header copies are read (none: not used)
        self._cache: Path | None = None  # where they are written (none: a read-only database)
        self._listed: dict[int, tuple[int, str | None]] = {}  # id -> (size, entity tag)

    def where(self, segment_id: int) -> str:
        return f"{self.location.url}/{segment_name(segment_id)}"

    def prefetch_headers(self, ids: list[int]) -> None:
        """(opening a stream) One ranged GET per segment without a header copy, 16 at once
        rather than one after another: a stream of many segments opens in a few round trips."""
        from tesseradb.executor import Threads

        def fetch(segment_id: int) -> None:
            try:
                self._ahead[segment_id] = self._fetch_header(segment_id)
            except Exception as err:  # (raised again where header() is asked for it)
                self._ahead[segment_id] = err

        missing = [i for i in ids if self._copied(i) is None]
        Threads(16).map(fetch, missing, what="reading segment headers")

    def use_header_copies(self, folder: Path, write: bool) -> None:
        """Read header copies from ``folder`` (and write new ones there, if ``write``)."""
        self._cache_dir = folder
        self._cache = folder if write else None

    def _copy_path(self, segment_id: int) -> Path | None:
        return None if self._cache_dir is None else self._cache_dir / f"{segment_id:012d}"

    def _copied(self, segment_id: int) -> SegmentHeader | None:
        """The header of segment ``segment_id`` from its copy, if the copy was made from the
        object the listing names (the same size and entity tag)."""
        import json

        path = self._copy_path(segment_id)
        listed = self._listed.get(segment_id)
        if path is None or listed is None or listed[1] is None:
            return None
        try:
            meta, prefix = path.read_bytes().split(b"\n", 1)
            made = json.loads(meta)
        except (OSError, ValueError):
            return None  # (no copy, or one cut short by a crash: fetched instead)
        if (made.get("size"), made.get("etag")) != listed or made.get("length") != len(prefix):
            return None
        return parse_header(prefix, listed[0], self.where(segment_id), check_size=False)

    def _keep_copy(self, segment_id: int, prefix: bytes, size: int, etag: str | None) -> None:
        import json
        import os

        if self._cache is None or etag is None:
            return
        path = self._cache / f"{segment_id:012d}"
        meta = json.dumps({"size": size, "etag": etag, "length": len(prefix)}).encode()
        try:
            self._cache.mkdir(exist_ok=True)
            temporary = path.with_name(path.name + TEMPORARY_SUFFIX)
            temporary.write_bytes(meta + b"\n" + prefix)
            os.replace(temporary, path)  # (a copy: no fsync; a damaged one is refetched)
        except OSError:
            pass  # (a copy is only a shortcut)
        self._listed[segment_id] = (size, etag)

    @property
    def remote(self) -> bool:
        return True

    def ids(self) -> set[int]:
        found = set()
        for stored in self.location.list():
            stem = stored.path.removesuffix(SEGMENT_SUFFIX)
            if stored.path.endswith(SEGMENT_SUFFIX) and "/" not in stem and stem.isdigit():
                found.add(int(stem))
                self._listed[int(stem)] = (stored.size, stored.etag)
        return found

    def header(self, segment_id: int) -> SegmentHeader:
        ahead = self._ahead.pop(segment_id, None)
        if isinstance(ahead, BaseException):
            raise ahead
        if ahead is not None:
            return ahead
        copied = self._copied(segment_id)
        return copied if copied is not None else self._fetch_header(segment_id)

    def _fetch_header(self, segment_id: int) -> SegmentHeader:
        import obstore

        name = segment_name(segment_id)
        # (a missing object raises StoredObjectMissingError, a FileNotFoundError)
        with self.location.failures("read the header of", name):
            got = obstore.get(self.location.store(), name, options={"range": (0, HEADER_PREFIX)})
            prefix = bytes(got.bytes())
        size = int(got.meta["size"])
        header = parse_header(prefix, size, self.where(segment_id), check_size=False)
        self._keep_copy(segment_id, prefix, size, got.meta.get("e_tag"))  # (once it parsed)
        return header

    def read(
        self, segment_id: int, descriptor: RecordDescriptor, orders: Sequence[Sequence[int]] = ()
    ) -> Segment:
        data = self.location.read(segment_name(segment_id))  # (missing: FileNotFoundError)
        return decode_segment(data, self.where(segment_id), descriptor, orders)

    def write(self, segment: Segment, descriptor: RecordDescriptor, compress: bool) -> int:
        parts, total = encode_segment(segment, descriptor, compress)
        data = b"".join(parts)
        etag = self.location.write(segment_name(segment.id), data)
        self._keep_copy(segment.id, data[:HEADER_PREFIX], len(data), etag)
        return total  # (durable: the store acknowledged the PUT)

    def remove(self, segment_id: int) -> None:
        self.location.delete(segment_name(segment_id))
        path = self._copy_path(segment_id)
        if path is not None and self._cache is not None:
            path.unlink(missing_ok=True)

    def prepare(self) -> None:
        if self._cache is not None and self._cache.is_dir():
            for leftover in self._cache.glob(f"*{TEMPORARY_SUFFIX}"):
                leftover.unlink()  # a copy interrupted before its rename


def segment_files(directory: Path, location: Any) -> SegmentFiles:
    """The segment files of a stream whose folder is ``directory``, in ``location`` when
    given (an object store), else in the folder itself."""
    return RemoteSegments(location) if location is not None else LocalSegments(directory)
