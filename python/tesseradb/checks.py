"""What ``db.check()`` and ``tessera check`` report: findings per object, and what repair did.

Each data model checks its own storage (segment checksums, chunk CRCs, the
call log, sidecar indexes, the backend's integrity) and returns
:class:`Finding` objects; the database gathers them, with its own findings
about the catalog and the directory, into one :class:`CheckReport`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CheckReport", "Finding", "Verified"]


@dataclass(frozen=True)
class Finding:
    """One thing wrong with one part of one object.

    ``part`` names the file, segment, chunk or table; ``problem`` says what is
    wrong with it. With repair, ``action`` says what was done (set aside,
    removed, rebuilt) and ``lost`` what can no longer be read because of it
    (records, cells), where that is known.
    """

    object: str
    part: str
    problem: str
    action: str = ""
    lost: str = ""
    repaired: bool = False

    def __str__(self) -> str:
        text = f"{self.object}: {self.part}: {self.problem}"
        if self.action:
            text += f"; {self.action}"
        if self.lost:
            text += f"; lost: {self.lost}"
        return text


@dataclass(frozen=True)
class Verified:
    """What the check read of one object and found whole (``12 segments, 40,000 records``)."""

    object: str
    kind: str
    what: str


@dataclass
class CheckReport:
    """Every object checked, and every finding, of one database."""

    path: Path
    repair: bool
    verified: list[Verified] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing is wrong, or everything wrong was repaired."""
        return all(f.repaired for f in self.findings)

    @property
    def damaged(self) -> list[Finding]:
        """Findings that are still wrong (not repaired)."""
        return [f for f in self.findings if not f.repaired]

    def __str__(self) -> str:
        lines = [f"check of {self.path}" + (" (with repair)" if self.repair else "")]
        for item in self.verified:
            lines.append(f"  ok       {item.object} ({item.kind}): {item.what}")
        for finding in self.findings:
            mark = "repaired" if finding.repaired else "DAMAGED "
            lines.append(f"  {mark} {finding}")
        if not self.findings:
            lines.append("no problems found")
        elif self.ok:
            lines.append(f"{len(self.findings)} problem(s) found, all repaired")
        else:
            hint = "" if self.repair else "; `tessera check --repair` sets aside what it can"
            lines.append(f"{len(self.damaged)} problem(s) left{hint}")
        return "\n".join(lines)


# What a database directory holds besides its kinds' directories.
TOP_LEVEL = {
    "catalog.sqlite",
    "catalog.sqlite-wal",
    "catalog.sqlite-shm",
    "catalog.sqlite-journal",
    "tables.duckdb",
    "tables.duckdb.wal",
    "tables.snapshots",  # what readers in other processes read (tesseradb.sql.store)
    "tables.duckdb.tmp",  # where the writer's DuckDB spills (tesseradb.sql.instance)
    "write.lock",
    "quarantine",
    "server",  # the users of a served database (tesseradb.server)
}
QUARANTINE = "quarantine"


def check_layout(
    path: Path, directories: Sequence[Path], strays: Sequence[tuple[Path, str]], repair: bool
) -> list[Finding]:
    """Findings about files that belong to no object of the database directory ``path``.

    ``directories`` are the kinds' folders and ``strays`` what each kind found
    in its folder that belongs to none of its objects (a foreign file, or the
    directory of an object the catalog does not know, left by a crash between
    making it and naming it). Such entries are never read; repair moves them
    under ``quarantine/`` (nothing is deleted) so the directory holds only what
    the catalog names.
    """
    import shutil

    allowed = TOP_LEVEL | {d.name for d in directories}
    foreign = [
        (entry, "belongs to no part of a database")
        for entry in sorted(path.iterdir())
        if entry.name not in allowed
    ]
    foreign.extend(strays)
    findings = []
    for entry, problem in foreign:
        relative = entry.relative_to(path)
        action = ""
        if repair:
            target = path / QUARANTINE / "__".join(relative.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            while target.exists():
                target = target.with_name(target.name + "_")
            shutil.move(entry, target)
            action = f"moved to {target.relative_to(path)}"
        findings.append(Finding("(database)", str(relative), problem, action, repaired=repair))
    return findings
