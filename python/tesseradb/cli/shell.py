"""The interactive shell of ``tessera shell``: multi-line statements, history, dot commands."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    import tesseradb

HELP = """\
Statements end with ';' and may span lines. Dot commands:
  .tables              list tables, relations and other objects
  .schema NAME         the columns of NAME
  .timer on|off        print how long each statement took
  .explain on|off      print what each statement pushes down before running it
  .explain SQL         print what SQL would push down, without running it
  .help                this text
  .quit / .exit        leave (so does end of input)"""

HISTORY = Path("~/.tessera_history").expanduser()


class Shell:
    """Reads statements from ``read_line`` (``input`` by default) until end of input.

    A person at a terminal sees errors and goes on; piped input (a script)
    stops at its first error, like ``sqlite3 -bail``, and :attr:`failed`
    says so (``tessera shell`` then exits 1). Ctrl-C during a statement
    cancels it and returns to the prompt.
    """

    def __init__(
        self,
        db: tesseradb.Database,
        console: Console,
        read_line: Callable[[str], str] | None = None,
    ) -> None:
        import sys

        self.db = db
        self.console = console
        self.timer = False
        self.explain = False
        self.failed = False  # a statement or command failed
        # Prompts, banner and history only for a person at a terminal; piped
        # input (a script) gets just the results.
        self.interactive = read_line is None and sys.stdin.isatty()
        if read_line is not None:
            self.read_line = read_line
        elif self.interactive:
            self.read_line = input
        else:
            self.read_line = _read_piped_line

    def run(self) -> None:
        readline = self._history() if self.interactive else None
        if self.interactive:
            self.console.print(
                f"TesseraDB shell on {self.db.path}; statements end with ';', .help for help"
            )
        buffer: list[str] = []
        try:
            while True:
                try:
                    line = self.read_line("tessera> " if not buffer else "    ...> ")
                except EOFError:
                    break
                except KeyboardInterrupt:
                    buffer = []
                    self.console.print()
                    continue
                if not buffer and line.strip().startswith("."):
                    if not self.command(line.strip()) or self._bail():
                        break
                    continue
                if not line.strip() and not buffer:
                    continue
                buffer.append(line)
                if line.rstrip().endswith(";"):
                    self.statement("\n".join(buffer))
                    buffer = []
                    if self._bail():
                        break
            if buffer and "".join(buffer).strip() and not self._bail():
                self.statement("\n".join(buffer))
        finally:
            if readline is not None:
                with contextlib.suppress(OSError):
                    readline.write_history_file(HISTORY)

    def _history(self) -> Any:
        try:
            import readline
        except ImportError:
            return None
        with contextlib.suppress(OSError):
            readline.read_history_file(HISTORY)
        return readline

    def _bail(self) -> bool:
        return self.failed and not self.interactive

    def statement(self, text: str) -> None:
        from tesseradb.cli.output import render_table
        from tesseradb.errors import TesseraError

        try:
            if self.explain:
                self.console.print(str(self.db.explain(text)), markup=False)
            start = time.perf_counter()
            result = self._cancellable(text)
            elapsed = time.perf_counter() - start
            render_table(result, 100, self.console)
            if self.timer:
                self.console.print(f"time: {elapsed * 1000:.1f} ms")
        except TesseraError as err:
            self.failed = True
            self.console.print(f"error: {err}", markup=False)

    def _cancellable(self, text: str) -> Any:
        """``db.sql(text)`` in a thread, so that Ctrl-C (in this, the main thread) can
        interrupt it: the statement then raises InterruptedStatementError, keeping nothing."""
        import threading

        outcome: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                # a bar for a long statement, on a terminal (rich draws it only there)
                outcome["result"] = self.db.sql(text, progress=self.console.is_terminal)
            except BaseException as err:  # handed to the main thread
                outcome["error"] = err
            finally:
                done.set()

        worker = threading.Thread(target=run, name="tessera-shell-statement", daemon=True)
        requested: list[int] = []  # Ctrl-C while the worker starts
        started = cancelled = False
        while True:
            try:
                if not started:
                    # (a KeyboardInterrupt inside Thread.start could leave the statement
                    # running unseen; a Ctrl-C then only asks for the cancel)
                    with _sigint_recorded(requested):
                        started = True
                        worker.start()
                if requested:
                    cancelled = True
                if cancelled:  # it may not have reached DuckDB at the first request
                    self.db.interrupt()
                if done.wait(0.1):
                    break
            except KeyboardInterrupt:
                cancelled = True
                self.db.interrupt()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["result"]

    def command(self, line: str) -> bool:
        """Run a dot command; return False to leave the shell."""
        from tesseradb.errors import TesseraError

        word, _, rest = line.partition(" ")
        rest = rest.strip()
        try:
            if word in (".quit", ".exit"):
                return False
            if word == ".help":
                self.console.print(HELP, markup=False)
            elif word == ".tables":
                for obj in self.db.info().objects:
                    self.console.print(f"{obj.name}  ({obj.kind})", markup=False)
            elif word == ".schema":
                if not rest:
                    self.console.print("usage: .schema NAME")
                else:
                    for field in self.db.schema(rest):
                        self.console.print(f"{field.name}  {field.type}", markup=False)
            elif word == ".timer":
                self.timer = rest.lower() == "on"
            elif word == ".explain":
                if rest.lower() in ("on", "off"):
                    self.explain = rest.lower() == "on"
                elif rest:
                    self.console.print(str(self.db.explain(rest.rstrip(";"))), markup=False)
                else:
                    self.console.print("usage: .explain on|off|SQL")
            else:
                self.failed = True
                self.console.print(f"unknown command {word}; .help lists them", markup=False)
        except TesseraError as err:
            self.failed = True
            self.console.print(f"error: {err}", markup=False)
        return True


def _read_piped_line(_prompt: str) -> str:
    import sys

    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.rstrip("\n")


@contextlib.contextmanager
def _sigint_recorded(requested: list[int]) -> Iterator[None]:
    """Within the block, Ctrl-C (SIGINT) appends to ``requested`` instead of raising
    KeyboardInterrupt: only in the main thread, and only where Python handles SIGINT (a
    shell started with SIGINT ignored, as in a background job, keeps ignoring it)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or not callable(
        signal.getsignal(signal.SIGINT)  # (SIG_IGN, SIG_DFL, or a handler installed from C)
    ):
        yield
        return
    previous = signal.signal(signal.SIGINT, lambda *_: requested.append(1))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
