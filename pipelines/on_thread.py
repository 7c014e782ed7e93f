"""A function's value computed on a thread of its own while the caller goes on: a file's sha256
beside its decoding (pipelines.readers.base), the warehouse's Dagster instance beside the flattening
(pipelines.interfaces.build). One thread a call, never a pool's: a pool starts its thread lazily, at its first
submit, and a Ctrl-C landing while ``Thread.start`` waited for it left that thread outside the
pool's bookkeeping, never told to stop, and the interrupted build waited for it at exit for ever
(seen: a build interrupted as it began flattening)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class OnThread[T]:
    """``function(*args)`` on a thread named ``name``; ``result()`` waits for its value (or raises its
    error in the caller's thread). The constructor returns once the function runs: a caller that goes
    on to hold the interpreter's lock (a msgspec decode) leaves the thread inside the function, where
    hashlib, SQLite or file I/O let it go. ``daemon``: a process that exits first does not wait for it
    (a hash nobody needs then); otherwise exit waits for it to end (an open database is finished)."""

    def __init__(self, function: Callable[..., T], *args: Any, name: str, daemon: bool) -> None:
        self._value: T | None = None
        self._error: BaseException | None = None
        running = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(function, args, running), name=name, daemon=daemon)
        self._thread.start()
        running.wait()

    def _run(self, function: Callable[..., T], args: tuple[Any, ...], running: threading.Event) -> None:
        running.set()
        try:
            self._value = function(*args)
        except BaseException as exc:  # noqa: BLE001 - raised again by result(), in the caller's thread
            self._error = exc

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # set by the function, which returned
