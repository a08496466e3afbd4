"""Where a stream's segment files are: its folder, or a prefix in an object store.

The stream's call log always stays in its local folder: a call is committed by its
record there, appended only once every segment of the call is durable where the
segments live (renamed and the folder fsynced; or a PUT acknowledged by the store,
which makes an object whole or not at all). So a crash never leaves the log naming a
segment that is not whole, and a segment no committed call names is never served.
"""

from __future__ import annotations

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

__all__ = ["SEGMENT_SUFFIX", "LocalSegments", "RemoteSegments", "SegmentFiles"]

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

    def read(self, segment_id: int, descriptor: RecordDescriptor) -> Segment:
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

    def read(self, segment_id: int, descriptor: RecordDescriptor) -> Segment:
        return read_segment(self.path(segment_id), descriptor)

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


class RemoteSegments(SegmentFiles):
    """Objects under a prefix of an object store: one PUT each, whole or absent."""

    def __init__(self, location: Location) -> None:
        self.location = location
        self._ahead: dict[int, SegmentHeader | BaseException] = {}

    def where(self, segment_id: int) -> str:
        return f"{self.location.url}/{segment_name(segment_id)}"

    def prefetch_headers(self, ids: list[int]) -> None:
        """(opening a stream) One ranged GET per segment, 16 at once rather than one after
        another: a stream of many segments opens in a few round trips."""
        from concurrent.futures import ThreadPoolExecutor

        def fetch(segment_id: int) -> None:
            try:
                self._ahead[segment_id] = self._fetch_header(segment_id)
            except Exception as err:  # (raised again where header() is asked for it)
                self._ahead[segment_id] = err

        if len(ids) > 1:
            with ThreadPoolExecutor(min(16, len(ids))) as pool:
                list(pool.map(fetch, ids))

    @property
    def remote(self) -> bool:
        return True

    def ids(self) -> set[int]:
        found = set()
        for stored in self.location.list():
            stem = stored.path.removesuffix(SEGMENT_SUFFIX)
            if stored.path.endswith(SEGMENT_SUFFIX) and "/" not in stem and stem.isdigit():
                found.add(int(stem))
        return found

    def header(self, segment_id: int) -> SegmentHeader:
        ahead = self._ahead.pop(segment_id, None)
        if isinstance(ahead, BaseException):
            raise ahead
        return ahead if ahead is not None else self._fetch_header(segment_id)

    def _fetch_header(self, segment_id: int) -> SegmentHeader:
        import obstore

        name = segment_name(segment_id)
        # (a missing object raises StoredObjectMissingError, a FileNotFoundError)
        with self.location.failures("read the header of", name):
            got = obstore.get(self.location.store(), name, options={"range": (0, HEADER_PREFIX)})
            prefix = bytes(got.bytes())
        return parse_header(prefix, int(got.meta["size"]), self.where(segment_id), check_size=False)

    def read(self, segment_id: int, descriptor: RecordDescriptor) -> Segment:
        data = self.location.read(segment_name(segment_id))  # (missing: FileNotFoundError)
        return decode_segment(data, self.where(segment_id), descriptor)

    def write(self, segment: Segment, descriptor: RecordDescriptor, compress: bool) -> int:
        parts, total = encode_segment(segment, descriptor, compress)
        self.location.write(segment_name(segment.id), b"".join(parts))
        return total  # (durable: the store acknowledged the PUT)

    def remove(self, segment_id: int) -> None:
        self.location.delete(segment_name(segment_id))


def segment_files(directory: Path, location: Any) -> SegmentFiles:
    """The segment files of a stream whose folder is ``directory``, in ``location`` when
    given (an object store), else in the folder itself."""
    return RemoteSegments(location) if location is not None else LocalSegments(directory)
