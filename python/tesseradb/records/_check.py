"""Checking a stream's files, and setting aside what cannot be read (``tessera check``).

The check reads every committed segment whole (length, SHA-256, record
format, kd-tree), the call log record by record, and lists what does not
belong. Repair moves unreadable segment files into ``quarantine/`` and
rewrites the call log without them, so the stream opens with the rest
served; the findings say how many records were set aside.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Any

from tesseradb.checks import Finding, Verified
from tesseradb.errors import SegmentFileError
from tesseradb.records._calls import CALL_LOG, CallLog, CallRecord
from tesseradb.records._descriptor import RecordDescriptor
from tesseradb.records._files import HEADER_CACHE, SEGMENT_SUFFIX
from tesseradb.records._segment_file import (
    TEMPORARY_SUFFIX,
    fsync_directory,
    read_header,
    read_segment,
)

__all__ = ["QUARANTINE", "check_stream"]

QUARANTINE = "quarantine"


def check_stream(
    name: str, descriptor: RecordDescriptor, directory: Path, repair: bool
) -> tuple[list[Finding], Verified]:
    """Findings about the closed stream ``name`` in ``directory``, repaired if ``repair``."""
    findings: list[Finding] = []
    log = CallLog(directory)
    files = {
        int(p.stem): p
        for p in directory.glob(f"*{SEGMENT_SUFFIX}")
        if p.stem.isdigit() and p.is_file()
    }
    if log.exists:
        try:
            calls = log.read_new(name)
        except SegmentFileError as err:
            findings.append(Finding(name, f"call log {log.path.name}", str(err)))
            return findings, Verified(name, "stream", "call log unreadable")
        torn = log.size() - log.offset
    else:  # written before there was a call log: every file stands for itself
        calls, torn = [CallRecord(i, 1, 0) for i in sorted(files)], 0
    for message in log.damaged:
        written = (
            "written again from the records left"
            if log.cut_short and "cut short" in message
            else "written again without the record"
        )
        findings.append(
            Finding(
                name,
                f"call log {log.path.name}",
                message,
                action=written if repair else "",
                repaired=repair,
            )
        )
    if torn:
        findings.append(
            Finding(
                name,
                f"call log {log.path.name}",
                f"its last {torn} bytes are an append a crash cut short (part of a record, or "
                "a call's first parts without its last)",
                action="cut off" if repair else "",
                repaired=repair,
            )
        )
        if repair:
            log.cut_torn_tail()

    bad: dict[int, str] = {}  # segment id -> what is wrong
    records_of: dict[int, int] = {}  # readable segments' record counts
    for call in calls:
        for segment_id in call.ids:
            path = files.get(segment_id, directory / f"{segment_id:012d}{SEGMENT_SUFFIX}")
            try:
                segment = read_segment(path, descriptor)
            except FileNotFoundError:
                bad[segment_id] = "the file is missing"
                continue
            except SegmentFileError as err:
                bad[segment_id] = str(err).replace(f"segment file {path} ", "")
                # the header may still say how many records it held
                with contextlib.suppress(SegmentFileError, OSError):
                    records_of[segment_id] = read_header(path, check_size=False).record_count
                continue
            if segment.id != segment_id:
                bad[segment_id] = f"holds segment {segment.id}, not its name's"
                continue
            records_of[segment_id] = segment.num_records

    committed = {i for call in calls for i in call.ids}
    orphans = sorted(set(files) - committed)
    for segment_id in orphans:
        if log.damaged:
            bad[segment_id] = (
                "belongs to no committed call, and the call log is damaged: it may be of the "
                "damaged record's call, or of one a crash cut short"
            )
            with contextlib.suppress(SegmentFileError, OSError):
                records_of[segment_id] = read_header(
                    files[segment_id], check_size=False
                ).record_count
        elif repair:  # without repair it may be a writer's call in flight: not a problem
            findings.append(
                Finding(
                    name,
                    f"segment {segment_id} ({files[segment_id].name})",
                    "belongs to no committed call: left by a crash before its call was whole, "
                    "never served",
                    action="removed",
                    repaired=True,
                )
            )
            files[segment_id].unlink()
    for path in sorted(directory.iterdir()):
        known = (
            path.name in (CALL_LOG, QUARANTINE, HEADER_CACHE)
            or (path.suffix == SEGMENT_SUFFIX and path.stem.isdigit())
            or path.name.endswith(TEMPORARY_SUFFIX)
        )
        if not known:
            action = ""
            if repair:  # (never deleted: moved aside, as every foreign file is)
                aside = directory / QUARANTINE / path.name
                aside.parent.mkdir(exist_ok=True)
                while aside.exists():
                    aside = aside.with_name(aside.name + "_")
                shutil.move(os.fspath(path), os.fspath(aside))
                action = f"moved to {QUARANTINE}/{aside.name}"
            findings.append(
                Finding(
                    name,
                    path.name,
                    "is not a file TesseraDB made",
                    action=action,
                    repaired=repair,
                )
            )

    lost = _records_lost(calls, bad, records_of)
    for segment_id, problem in sorted(bad.items()):
        path = directory / f"{segment_id:012d}{SEGMENT_SUFFIX}"
        action = ""
        if repair:
            action = f"set aside in {QUARANTINE}/" if path.exists() else "left out of the call log"
        findings.append(
            Finding(
                name,
                f"segment {segment_id} ({path.name})",
                problem,
                action=action,
                lost=lost.get(segment_id, ""),
                repaired=repair,
            )
        )
    if repair and bad:
        _set_aside(directory, log, calls, bad, records_of)
    good_segments = len(committed) - len(set(bad) & committed)
    kept = sum(records_of.get(i, 0) for i in committed if i not in bad)
    what = f"{len(calls)} calls, {good_segments} segments, {kept:,} records read whole"
    return findings, Verified(name, "stream", what)


def _records_lost(
    calls: list[CallRecord], bad: dict[int, str], records_of: dict[int, int]
) -> dict[int, str]:
    """What each bad segment held: from its header, or what its call is short of."""
    lost: dict[int, str] = {}
    for call in calls:
        damaged = [i for i in call.ids if i in bad]
        unknown = [i for i in damaged if i not in records_of]
        for i in damaged:
            if i in records_of:
                lost[i] = f"{records_of[i]:,} records"
        if unknown and call.records:
            known = sum(records_of.get(i, 0) for i in call.ids if i not in unknown)
            share = call.records - known
            what = "segments " + ", ".join(map(str, unknown)) if len(unknown) > 1 else ""
            for i in unknown:
                lost[i] = f"{share:,} records" + (f" (with {what})" if what else "")
    for i in bad:
        if i in records_of:  # (a segment no record vouches for: its header says)
            lost.setdefault(i, f"{records_of[i]:,} records")
        lost.setdefault(i, "its records (how many is not known)")
    return lost


def _set_aside(
    directory: Path,
    log: CallLog,
    calls: list[CallRecord],
    bad: dict[int, str],
    records_of: dict[int, int],
) -> None:
    """Move bad segment files to quarantine/ and write the call log without them."""
    quarantine = directory / QUARANTINE
    quarantine.mkdir(exist_ok=True)
    for segment_id in bad:
        path = directory / f"{segment_id:012d}{SEGMENT_SUFFIX}"
        if path.exists():
            shutil.move(os.fspath(path), os.fspath(quarantine / path.name))
    fsync_directory(quarantine)
    kept: list[CallRecord] = []
    for call in calls:
        run: list[int] = []
        for segment_id in [*call.ids, -1]:  # -1 ends the last run
            if segment_id >= 0 and segment_id not in bad:
                run.append(segment_id)
                continue
            if run:
                records = sum(records_of.get(i, 0) for i in run)
                kept.append(CallRecord(run[0], len(run), records))
                run = []
    log.create(kept)


def check_remote_stream(name: str, stream: Any) -> tuple[list[Finding], Verified]:
    """Findings about a stream whose segments are in an object store: every segment its
    committed calls name is read whole and checked (length, checksum, record format);
    what could not be read or reached is reported. Nothing is repaired there: a damaged
    segment object is its store's to restore."""
    from tesseradb.errors import StorageError

    findings = [Finding(name, "stream", problem) for problem in stream.problems]
    files = stream._files
    ids = sorted(stream._store._stored)
    read = 0
    for segment_id in ids:
        try:
            files.read(segment_id, stream.descriptor)
            read += 1
        except FileNotFoundError:
            findings.append(Finding(name, f"segment {files.where(segment_id)}", "is missing"))
        except (SegmentFileError, StorageError) as err:
            findings.append(Finding(name, f"segment {files.where(segment_id)}", str(err)))
    what = f"{read} of {len(ids)} segment object(s) in {stream.location} read and checked"
    return findings, Verified(name, "stream", what)
