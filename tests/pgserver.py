"""A PostgreSQL server for the tests: a fresh cluster in a temporary folder, listening on 127.0.0.1
only, started by the test and stopped by its own process id (the Debian `postgresql` package's
binaries; run as the `postgres` user when the tests run as root, since PostgreSQL refuses root).
``available()`` says why a test must be skipped when there is none."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def _binary(name: str) -> str | None:
    for folder in BIN_DIRS:
        if (folder / name).is_file():
            return str(folder / name)
    return shutil.which(name)


def available() -> str | None:
    """None when a server can be started here, else why not."""
    if _binary("initdb") is None or _binary("postgres") is None:
        return "no PostgreSQL server binaries (Debian package postgresql) on this machine"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres user to run the server as"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresServer:
    """``with PostgresServer() as server: server.url`` (a SQLAlchemy URL, database postgres). Its
    folder is a new one under the system's temporary folder, which the server's user can reach
    (pytest's are private to the user running the tests), removed when the server stops."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="tracehouse-pg-"))
        self.port = _free_port()
        self.proc: subprocess.Popen | None = None
        self.user = "postgres"

    def _as_server_user(self) -> dict:
        if os.geteuid() != 0:
            return {}
        entry = pwd.getpwnam("postgres")
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}

    def __enter__(self) -> PostgresServer:
        data, sockets = self.folder / "data", self.folder / "sockets"
        for path in (data, sockets):
            path.mkdir()
        if os.geteuid() == 0:
            entry = pwd.getpwnam("postgres")
            for path in (self.folder, data, sockets):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        made = subprocess.run([_binary("initdb"), "-D", str(data), "-U", self.user, "--auth=trust", "-E", "UTF8",
                               "--no-instructions"], capture_output=True, text=True, **self._as_server_user())
        if made.returncode != 0:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise RuntimeError(f"initdb failed: {made.stderr.strip()[-500:]}")
        self.proc = subprocess.Popen(
            [_binary("postgres"), "-D", str(data), "-h", "127.0.0.1", "-p", str(self.port), "-k", str(sockets),
             "-c", "fsync=off"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **self._as_server_user())
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.proc.returncode} before accepting connections")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("postgres did not accept connections within 30 s") from None
                time.sleep(0.1)
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        import sqlalchemy

        engine = sqlalchemy.create_engine(self.url)
        deadline = time.monotonic() + 30
        try:
            while True:
                try:
                    with engine.connect() as conn:
                        conn.exec_driver_sql("select 1")
                    return
                except sqlalchemy.exc.OperationalError:  # "the database system is starting up"
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        finally:
            engine.dispose()

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://{self.user}@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGINT)  # "fast" shutdown
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def __exit__(self, *exc: object) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)
