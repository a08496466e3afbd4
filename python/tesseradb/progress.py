"""Progress and cancel for long operations: one small interface every room reports through.

A long operation (a load, an export, a long SQL statement) takes
``progress`` and ``cancel`` arguments and makes one :class:`Tracker`:

- ``progress`` is ``None``/``False`` (silent, the Python API's default),
  ``True`` (a rich progress bar on stderr, with rate and ETA: what the CLI
  and the shell use) or a callable that receives each :class:`ProgressEvent`
  (the server's console, a notebook widget, a test);
- ``cancel`` is a :class:`Cancel` token; ``cancel.cancel()`` from any thread
  makes the operation raise :class:`~tesseradb.errors.CancelledError` at its
  next step, and the operation keeps nothing of itself (as it does for
  Ctrl-C, a ``KeyboardInterrupt``).

Events are monotone: ``done`` never decreases, and an operation that
succeeds ends with an event whose ``done == total`` and ``finished`` set.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tesseradb.errors import CancelledError, InvalidArgumentError

__all__ = ["Cancel", "PartOf", "ProgressEvent", "ProgressLike", "Tracker", "tracker"]

# the least time between two events of one operation (the last one always goes out)
_EVENT_PERIOD = 0.1


@dataclass(frozen=True)
class ProgressEvent:
    """How far one operation has come: ``done`` of ``total`` ``unit`` (total None: unknown)."""

    task: str
    done: int
    total: int | None
    unit: str  # "bytes", "files", "rows", "objects", "percent"
    finished: bool = False

    @property
    def fraction(self) -> float | None:
        """``done / total`` (1.0 when finished), None while the total is unknown."""
        if self.finished:
            return 1.0
        if not self.total:
            return None
        return min(1.0, self.done / self.total)


ProgressLike = bool | Callable[[ProgressEvent], Any] | None


class Cancel:
    """A token that stops the operations it is handed: call :meth:`cancel` from any thread."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self, task: str) -> None:
        """Raise CancelledError (naming ``task``) if :meth:`cancel` was called."""
        if self._event.is_set():
            raise CancelledError(f"{task}: cancelled; nothing of it was kept")

    def __repr__(self) -> str:
        return f"Cancel(cancelled={self.cancelled})"


class Tracker:
    """The progress of one operation: ``advance`` it as work is done (from any thread).

    Each ``advance`` also checks the cancel token, so a cancelled operation
    stops at its next step.
    """

    def __init__(
        self,
        task: str,
        total: int | None,
        unit: str,
        callback: Callable[[ProgressEvent], Any] | None,
        cancel: Cancel | None,
    ) -> None:
        self.task = task
        self.total = total
        self.unit = unit
        self.done = 0
        self._callback = callback
        self._cancel = cancel
        self._lock = threading.Lock()
        self._last = 0.0
        self._bar: _RichBar | None = None
        self.finished = False

    @property
    def cancel_token(self) -> Cancel | None:
        """The token that cancels this operation (to hand to a part of it)."""
        return self._cancel

    def check(self) -> None:
        if self._cancel is not None:
            self._cancel.check(self.task)

    def set_total(self, total: int | None) -> None:
        with self._lock:
            self.total = total

    def advance(self, amount: int = 1) -> None:
        self.check()
        with self._lock:
            self.done += amount
            if self.total is not None and self.done > self.total:
                self.total = self.done  # a total that was an estimate
            if self._callback is None:
                return
            now = time.monotonic()
            if now - self._last < _EVENT_PERIOD:
                return
            self._last = now
            event = ProgressEvent(self.task, self.done, self.total, self.unit)
        self._callback(event)

    def finish(self) -> None:
        """The operation succeeded: the last event, at 100%."""
        with self._lock:
            if self.finished:
                return
            self.finished = True
            self.total = self.done if self.total is None else max(self.total, self.done)
            self.done = self.total
            event = ProgressEvent(self.task, self.done, self.total, self.unit, finished=True)
        if self._callback is not None:
            self._callback(event)
        self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.close()


class PartOf:
    """A sub-operation's progress events (their fraction done) folded into a tracker that
    counts the whole in its own unit (a load's bytes)."""

    def __init__(self, watch: Tracker) -> None:
        self.watch = watch
        self._seen = 0

    def __call__(self, event: Any) -> None:
        total = self.watch.total or 0
        share = int(total * (event.fraction or 0))
        if share > self._seen:
            self.watch.advance(share - self._seen)
            self._seen = share


def tracker(
    task: str,
    total: int | None,
    unit: str,
    progress: ProgressLike = None,
    cancel: Cancel | None = None,
    where: str = "",
) -> Tracker:
    """A :class:`Tracker` reporting as ``progress`` asks (see the module's docstring)."""
    if cancel is not None and not isinstance(cancel, Cancel):
        raise InvalidArgumentError(
            f"{where or task}: cancel is a tesseradb.progress.Cancel, not {type(cancel).__name__}"
        )
    if progress is None or progress is False:
        return Tracker(task, total, unit, None, cancel)
    if progress is True:
        bar = _RichBar(task, unit)
        made = Tracker(task, total, unit, bar.update, cancel)
        made._bar = bar
        return made
    if callable(progress):
        return Tracker(task, total, unit, progress, cancel)
    raise InvalidArgumentError(
        f"{where or task}: progress is True, False, None or a callable taking a ProgressEvent, "
        f"not {type(progress).__name__}"
    )


class _RichBar:
    """A rich progress bar on stderr (rate and ETA), drawn only on a terminal."""

    def __init__(self, task: str, unit: str) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            MofNCompleteColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        amount = (
            [DownloadColumn(), TransferSpeedColumn()]
            if unit == "bytes"
            else [MofNCompleteColumn(), TextColumn(f"{unit}")]
        )
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            *amount,
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._id = self._progress.add_task(task, total=None)
        self._progress.start()

    def update(self, event: ProgressEvent) -> None:
        self._progress.update(self._id, completed=event.done, total=event.total)

    def close(self) -> None:
        self._progress.stop()
