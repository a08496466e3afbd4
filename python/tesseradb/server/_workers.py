"""``tessera serve --workers N``: reader processes beside the writer for PostgreSQL clients.

Python runs one statement's Python at a time per process; on a machine with several
cores, more processes answer more clients. Each worker opens the database read-only
(it reads the snapshots the writer publishes, as any reader process does) and listens
on the same PostgreSQL port as the writer (``SO_REUSEPORT``: the kernel spreads new
connections over the processes). A worker answers a client's queries itself; from the
client's first statement that is not a plain query (a write, ``BEGIN``, a setting), it
logs in to the writer as that client's user and relays the connection there, so every
write is acknowledged by the writer, once committed. A cancel request reaching the
wrong process is passed to the right one (the process number is in the key).

The writer starts the workers and restarts one that dies; a worker ends when its
writer does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Sequence

__all__ = ["Workers", "free_ports"]


def free_ports(count: int) -> tuple[int, ...]:
    """``count`` loopback ports free now (each process's own, for relays and cancels)."""
    import socket

    probes = []
    try:
        for _ in range(count):
            probe = socket.socket()
            probe.bind(("127.0.0.1", 0))
            probes.append(probe)
        return tuple(int(p.getsockname()[1]) for p in probes)
    finally:
        for probe in probes:
            probe.close()


class Workers:
    """The worker processes of a served database, kept running until :meth:`stop`."""

    def __init__(
        self,
        path: str,
        host: str,
        port: int,
        ports: Sequence[int],
        statement_seconds: float,
        certfile: str | None = None,
        keyfile: str | None = None,
    ) -> None:
        # (the writer's pid is given, not read by the worker: a worker started just
        # before its writer died would read its new parent's)
        self._args = [
            str(os.getpid()),
            path,
            host,
            str(port),
            ",".join(map(str, ports)),
            str(statement_seconds),
        ]
        if certfile is not None and keyfile is not None:
            self._args += [certfile, keyfile]
        self._processes: dict[int, subprocess.Popen[bytes]] = {}
        self._stopping = threading.Event()
        for number in range(1, len(ports)):
            self._start(number)
        self._monitor = threading.Thread(target=self._watch, name="tessera-workers", daemon=True)
        self._monitor.start()

    def _start(self, number: int) -> None:
        self._processes[number] = subprocess.Popen(
            [sys.executable, "-m", "tesseradb.server._workers", str(number), *self._args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )

    def _watch(self) -> None:
        while not self._stopping.wait(0.5):
            for number, process in list(self._processes.items()):
                if process.poll() is not None and not self._stopping.is_set():
                    self._start(number)  # (a worker that died: its clients reconnect)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._processes.values()]

    def stop(self) -> None:
        self._stopping.set()
        for process in self._processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self._processes.values():
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _main(argv: list[str]) -> None:
    """A worker: ``NUMBER WRITER_PID PATH HOST PORT PORTS STATEMENT_SECONDS [CERT KEY]``."""
    import signal

    import tesseradb
    from tesseradb.server._http import Server, ServerOptions
    from tesseradb.server._pgserver import PgServer, Processes
    from tesseradb.server._users import Users

    number, writer, path, host, port, ports, seconds = argv[:7]
    certfile, keyfile = (argv[7], argv[8]) if len(argv) >= 9 else (None, None)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    db = tesseradb.connect(path, read_only=True)
    try:
        options = ServerOptions(read_only=True, statement_seconds=float(seconds))
        server = Server(db, Users(db.path), options)
        processes = Processes(tuple(int(p) for p in ports.split(",")), int(number))
        pg = PgServer(server, host, int(port), certfile, keyfile, processes).start()
        while not stop.wait(0.5):
            if os.getppid() != int(writer):  # (the writer is gone: so is its worker)
                break
        pg.stop()
    finally:
        db.close()


if __name__ == "__main__":
    _main(sys.argv[1:])
