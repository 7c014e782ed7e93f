"""The landing folder's durable writer of ``tracehouse collect`` (pipelines.interfaces.collect).

Each accepted request is one line appended to a file of the folder; :meth:`Landing.submit` gives a
future that completes once the line is written and fsynced (or fails with :class:`LandingFailed`).
One writer thread writes whatever arrived while the previous fsync ran in one write and one fsync
(group commit), so concurrent requests share an fsync. Files are named by the UTC time they were
opened, ``<YYYYMMDDTHHMMSSZ>-<pid>-<n>.jsonl``: path order is arrival order. A file is first written
as ``.jsonl.part`` and renamed once its first line is on disk, then appended to until it holds
``roll_bytes`` or is ``roll_seconds`` old. ``.collect.lock`` keeps a second writer out of the folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path


class LandingFailed(OSError):
    """The landing file could not be written or fsynced: the requests of that group get 503."""


@dataclass
class _Pending:
    data: bytes
    done: Future[None] = field(default_factory=Future)


class Landing:
    """The landing folder's writer: :meth:`submit` returns a future that is done once the line is
    written and fsynced (or fails with :class:`LandingFailed`); one thread writes and fsyncs for every
    request waiting."""

    def __init__(self, folder: Path, roll_bytes: int, roll_seconds: float) -> None:
        self.folder = folder
        self.roll_bytes, self.roll_seconds = roll_bytes, roll_seconds
        folder.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(folder / ".collect.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise LandingFailed(f"another tracehouse collect is writing to {folder}") from None
        self.repaired = self._repair()
        self._fd: int | None = None
        self._path: Path | None = None
        self._size = 0
        self._opened = 0.0
        self._serial = 0
        self._queue: list[_Pending] = []
        self._cond = threading.Condition()
        self._closing = False
        self.files = 0
        self.fsyncs = 0
        self._thread = threading.Thread(target=self._run, name="landing-writer", daemon=True)
        self._thread.start()

    def _repair(self) -> list[str]:
        """Cut what a crash left half-written (never acknowledged: an acknowledged line ends in a
        newline and was fsynced) from the end of earlier files, and finish their renames."""
        repaired = []
        for path in sorted(self.folder.glob("*.jsonl*")):
            if path.suffix not in (".jsonl", ".part"):
                continue
            data = path.read_bytes()
            end = data.rfind(b"\n") + 1
            if end != len(data):
                with open(path, "r+b") as f:
                    f.truncate(end)
                    os.fsync(f.fileno())
                repaired.append(path.name)
            if path.suffix == ".part":
                if end:
                    os.replace(path, path.with_suffix(""))
                else:
                    path.unlink()
        if repaired:
            fsync_dir(self.folder)
        return repaired

    def submit(self, data: bytes) -> Future[None]:
        """Queue one line (ending in a newline) for the next group; the future is done once it is on disk."""
        pending = _Pending(data)
        with self._cond:
            if self._closing:
                raise LandingFailed("the receiver is stopping")
            self._queue.append(pending)
            self._cond.notify()
        return pending.done

    def append(self, data: bytes) -> None:
        """:meth:`submit`, waiting until the line is on disk."""
        self.submit(data).result()

    def close(self) -> None:
        """Write what is waiting, then stop the writer and close the file (already fsynced)."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        os.close(self._lock_fd)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                group, self._queue = self._queue, []
            if not group:
                return
            error: OSError | None = None
            try:
                self._write(b"".join(p.data for p in group))
            except Exception as exc:  # noqa: BLE001 - the group gets 503; the writer stays up for the next one
                error = exc if isinstance(exc, OSError) else OSError(f"{type(exc).__name__}: {exc}")
                self._abandon()
            for pending in group:
                if error is None:
                    pending.done.set_result(None)
                else:
                    failed = LandingFailed(f"could not land the request in {self.folder}: {error}")
                    failed.__cause__ = error
                    pending.done.set_exception(failed)

    def _write(self, data: bytes) -> None:
        if self._fd is not None and (self._size >= self.roll_bytes or
                                     time.monotonic() - self._opened >= self.roll_seconds):
            os.close(self._fd)
            self._fd = None
        fresh = self._fd is None
        if fresh:
            self._serial += 1
            name = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}-{self._serial:06d}.jsonl"
            self._path = self.folder / name
            self._fd = os.open(self._path.with_name(name + ".part"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            self._size, self._opened = 0, time.monotonic()
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        os.fdatasync(self._fd)
        if fresh:  # the file is listed (by its .jsonl name) only once its first lines are on disk
            os.replace(self._path.with_name(self._path.name + ".part"), self._path)
            fsync_dir(self.folder)
            self.files += 1
        self._size += len(data)
        self.fsyncs += 1

    def _abandon(self) -> None:
        """After a failed write: cut the file back to its last acknowledged line and start another
        with the next group, so no acknowledged line is ever glued to a half-written one."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, self._size)
            os.fsync(self._fd)
        with contextlib.suppress(OSError):
            os.close(self._fd)
        part = self._path.with_name(self._path.name + ".part") if self._path else None
        if part is not None and part.exists() and self._size == 0:
            with contextlib.suppress(OSError):
                part.unlink()
        self._fd = None


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
