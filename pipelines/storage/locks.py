"""One writer at a time per warehouse: ``tracehouse build``, ``watch`` and the runs Dagster starts
take this lock around whatever writes or deletes warehouse files. Readers never take it: they read
committed builds, whose files are never rewritten."""

from __future__ import annotations

import fcntl
import time
from collections.abc import Iterator
from contextlib import contextmanager

from pipelines.storage.warehouse import Warehouse


class BuildLocked(RuntimeError):
    pass


@contextmanager
def build_lock(warehouse: Warehouse, *, wait: float = 0.0) -> Iterator[None]:
    """Hold the warehouse's writer lock; wait up to ``wait`` seconds for it, then refuse."""
    warehouse.root.mkdir(parents=True, exist_ok=True)
    handle = (warehouse.root / ".build.lock").open("w")
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                handle.close()
                raise BuildLocked(f"another build is running on {warehouse.root}") from None
            time.sleep(0.2)
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()
