"""Throwaway PostgreSQL and MariaDB servers, for benchmark peers and the test suite.

Each is initialised in a temporary folder from Debian's packages, listens on
a free loopback port, and is stopped and removed when the ``with`` block
ends. Where a server cannot be had, :class:`ServerUnavailable` says why.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tesseradb.server import free_ports

__all__ = [
    "S3Endpoint",
    "Server",
    "ServerUnavailable",
    "mariadb_server",
    "postgres_server",
    "s3_server",
]


class ServerUnavailable(RuntimeError):
    """The server is not installed or would not start; the message says which."""


@dataclass(frozen=True)
class Server:
    kind: str
    host: str
    port: int
    user: str
    database: str

    @property
    def url(self) -> str:
        scheme = {"postgresql": "postgresql", "mariadb": "mysql"}[self.kind]
        return f"{scheme}://{self.user}@{self.host}:{self.port}/{self.database}"


def _wait_for_port(port: int, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.1)
    return False


def _step(args: list[str], root: Path, what: str, timeout: float = 180) -> None:
    """Run one set-up command; if it fails, remove ``root`` and say why."""
    try:
        subprocess.run(args, check=True, capture_output=True, timeout=timeout)
    except (subprocess.SubprocessError, OSError) as err:
        detail = getattr(err, "stderr", b"") or b""
        shutil.rmtree(root, ignore_errors=True)
        raise ServerUnavailable(
            f"could not {what}: {err} {detail.decode(errors='replace')[-300:]}"
        ) from err


def _as_postgres_user(args: list[str]) -> list[str]:
    # PostgreSQL refuses to run as root: run it as the `postgres` account.
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


@contextmanager
def postgres_server(fsync: bool = False) -> Iterator[Server]:
    """A PostgreSQL server for the block (``fsync`` off unless asked: it is a benchmark peer's choice)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise ServerUnavailable(
            "PostgreSQL is not installed (scripts/install-servers.sh installs it)"
        )
    bindir = Path(found[-1]).parent
    root = Path(tempfile.mkdtemp(prefix="tessera-pg-"))
    data, sockets, log = root / "data", root / "sock", root / "server.log"
    sockets.mkdir()
    if os.geteuid() == 0:
        import pwd

        try:
            pw = pwd.getpwnam("postgres")
        except KeyError as err:
            shutil.rmtree(root, ignore_errors=True)
            raise ServerUnavailable(
                "running as root and there is no `postgres` account to run PostgreSQL as"
            ) from err
        for path in (root, sockets):
            os.chown(path, pw.pw_uid, pw.pw_gid)
    port = free_ports(1)[0]
    initdb = [
        str(bindir / "initdb"),
        "-D",
        str(data),
        "-U",
        "tessera",
        "--auth=trust",
        "-E",
        "UTF8",
        "--no-sync",
    ]
    _step(_as_postgres_user(initdb), root, "initialise PostgreSQL")
    options = (
        f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync={'on' if fsync else 'off'}"
    )
    start = [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "start"]
    _step(_as_postgres_user(start), root, "start PostgreSQL")
    try:
        yield Server("postgresql", "127.0.0.1", port, "tessera", "postgres")
    finally:
        stop = [str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]
        subprocess.run(_as_postgres_user(stop), capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def mariadb_server() -> Iterator[Server]:
    """A MariaDB server for the block."""
    mariadbd = shutil.which("mariadbd") or (
        "/usr/sbin/mariadbd" if os.path.exists("/usr/sbin/mariadbd") else None
    )
    install_db = shutil.which("mariadb-install-db")
    if not mariadbd or not install_db:
        raise ServerUnavailable("MariaDB is not installed (scripts/install-servers.sh installs it)")
    root = Path(tempfile.mkdtemp(prefix="tessera-mariadb-"))
    data = root / "data"
    port = free_ports(1)[0]
    user_args = ["--user=root"] if os.geteuid() == 0 else []
    install = [
        install_db,
        f"--datadir={data}",
        "--auth-root-authentication-method=normal",
        "--skip-test-db",
    ]
    _step([*install, *user_args], root, "initialise MariaDB")
    process = subprocess.Popen(
        [
            mariadbd,
            "--no-defaults",
            f"--datadir={data}",
            f"--port={port}",
            "--bind-address=127.0.0.1",
            f"--socket={root / 'mysqld.sock'}",
            f"--pid-file={root / 'mysqld.pid'}",
            "--skip-grant-tables",
            "--innodb-flush-log-at-trx-commit=2",
            f"--log-error={root / 'error.log'}",
            *user_args,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if not _wait_for_port(port, timeout=60):
        process.kill()
        detail = (root / "error.log").read_text()[-500:] if (root / "error.log").exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        raise ServerUnavailable(f"MariaDB did not start listening on port {port}: {detail}")
    try:
        yield Server("mariadb", "127.0.0.1", port, "root", "mysql")
    finally:
        _stop(process)
        shutil.rmtree(root, ignore_errors=True)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Ask a server process to end; kill it when it has not within 30 s."""
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


@dataclass(frozen=True)
class S3Endpoint:
    """An S3-compatible endpoint on loopback, with keys it accepts."""

    endpoint_url: str
    access_key_id: str = "tessera-test-key"
    secret_access_key: str = "tessera-test-secret"
    region: str = "us-east-1"
    checks_signatures: bool = False  # (then only these keys, signed, are let in)

    def storage_options(self) -> dict[str, str]:
        """What ``tesseradb.connect(..., storage_options=)`` takes to reach it."""
        return {
            "endpoint_url": self.endpoint_url,
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
            "region": self.region,
        }

    def environment(self) -> dict[str, str]:
        """The standard AWS environment variables that reach it (for a child process)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_REGION": self.region,
        }

    def client(self, service: str) -> Any:
        """A boto3 client of ``service`` on this endpoint, signing with its key."""
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            region_name=self.region,
        )

    def create_bucket(self, name: str) -> str:
        """Make bucket ``name``; its URL. (The S3 server takes the call unsigned, as
        a local MinIO in its default set-up does.)"""
        import httpx

        if self.checks_signatures:
            self.client("s3").create_bucket(Bucket=name)
            return f"s3://{name}"
        answer = httpx.put(f"{self.endpoint_url}/{name}", timeout=30)
        if answer.status_code not in (200, 409):
            raise ServerUnavailable(
                f"the S3 server refused to make bucket {name!r}: {answer.text[:200]}"
            )
        return f"s3://{name}"


@contextmanager
def s3_server(checks_signatures: bool = False) -> Iterator[S3Endpoint]:
    """moto's standalone S3 server (a real HTTP endpoint) on a free loopback port.

    With ``checks_signatures`` it behaves as AWS does: a request must be signed, by
    the key of a user allowed to use S3, or it is refused (InvalidAccessKeyId,
    SignatureDoesNotMatch); the endpoint carries that user's new key.
    """
    try:
        import moto.server  # noqa: F401
    except ImportError:
        raise ServerUnavailable(
            "moto's S3 server is not installed (pip install 'moto[server]'; make install does)"
        ) from None
    import sys

    port = free_ports(1)[0]
    root = Path(tempfile.mkdtemp(prefix="tessera-s3-"))
    log = open(root / "server.log", "wb")  # noqa: SIM115 (open for the server's life)
    environment = dict(os.environ)
    if checks_signatures:
        # the server checks every request after the first three: those make the user
        environment["INITIAL_NO_AUTH_ACTION_COUNT"] = "3"
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=environment,
        start_new_session=True,  # (a Ctrl-C in the terminal reaches the tests, not it)
    )
    try:
        if not _wait_for_port(port, timeout=60):
            detail = (root / "server.log").read_text(errors="replace")[-500:]
            raise ServerUnavailable(
                f"the S3 server did not start listening on port {port}: {detail}"
            )
        endpoint = S3Endpoint(f"http://127.0.0.1:{port}")
        yield _signing_user(endpoint) if checks_signatures else endpoint
    finally:
        _stop(process)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


def _signing_user(endpoint: S3Endpoint) -> S3Endpoint:
    """A user allowed every S3 action on ``endpoint``'s server, and the endpoint with its key."""
    import json

    iam = endpoint.client("iam")
    iam.create_user(UserName="tessera")
    key = iam.create_access_key(UserName="tessera")["AccessKey"]
    allow = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
    }
    iam.put_user_policy(UserName="tessera", PolicyName="s3", PolicyDocument=json.dumps(allow))
    return S3Endpoint(
        endpoint.endpoint_url,
        key["AccessKeyId"],
        key["SecretAccessKey"],
        endpoint.region,
        checks_signatures=True,
    )
