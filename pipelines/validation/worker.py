"""Great Expectations in a worker process beside the build: the worker validates the partitions the
build has flattened into the validation cache while the build goes on (flattening, marts, charts),
so GX's slow import and its runs leave the build's critical path, and the checks' step finds their
results in the cache.

Where a build validates is chosen explicitly (:func:`prevalidation`): in this process when it holds
a GX context already (``tracehouse watch`` keeps one; ``gx_runner.loaded``), else in a worker.

The worker is a child process (``python -m pipelines.validation.worker``: a fresh interpreter, no
copy of the build's Dagster state) and a pair of pipes, both the build's own: the build sends it
batches of splits as pickled messages and reads back when each is validated. A plain subprocess, not
``multiprocessing``: its spawn start method also starts a resource-tracker process, which outlived
every build command by a few milliseconds. Its end, by public means only:

* idle once the checks have their results: told to leave, it tears its interpreter down (about a
  second with GX and pandas loaded) while the build commits, not waited for;
* a build that stops half-way, or a worker no build took: SIGTERM and a wait (then SIGKILL if it
  has not ended within TERMINATE_SECONDS);
* the build process ending while the worker still tears down: an exit handler stops and reaps it,
  so no process outlives the command;
* the build process killed with -9: the worker finds its pipe closed, at once while it loads GX or
  validates (a thread watches the pipe), at its next message while it waits for one, and ends.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pipelines.progress import event
from pipelines.storage.records import PartitionState
from pipelines.storage.warehouse import Warehouse
from pipelines.validation import gx_runner
from pipelines.validation.cache import table_results
from pipelines.validation.checks import load_suites, parameters

PROGRESS_SECONDS = 1.0  # how often a build waiting for the GX worker says how far it is
# How long a stopped worker gets to end on SIGTERM before it is killed: a worker that survives its
# SIGTERM (seen under the test suite: `build` with a usage error waited in join() for ever, the
# worker blocked in its pipe's recv with no handler installed) must not hang the build process.
TERMINATE_SECONDS = 5.0


def prevalidate(root: str, partitions: list[PartitionState]) -> int:
    """Validate partitions' generations (their data files) into the cache; what the worker does
    with each batch. Returns the GX runs it made."""
    warehouse = Warehouse(root)
    suites, params = load_suites(), parameters(warehouse.root)  # as validation.validate_suites: same cache keys
    runs = []

    def runner_of() -> gx_runner.Runner:
        runs.append(1)
        return gx_runner.runner_for(suites)

    for table, doc in suites.items():
        table_results(warehouse, table, doc, [(file, part.key) for part in partitions for file in part.files(table)],
                      params, runner_of)
    return len(runs)


class Channel:
    """Pickled messages over two pipe ends, one each way: the worker's protocol."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.reader = os.fdopen(read_fd, "rb")
        self.writer = os.fdopen(write_fd, "wb")

    def send(self, message: Any) -> None:
        pickle.dump(message, self.writer, protocol=pickle.HIGHEST_PROTOCOL)
        self.writer.flush()

    def recv(self) -> Any:
        """The next message; EOFError when the other side is gone."""
        try:
            return pickle.load(self.reader)
        except pickle.UnpicklingError as exc:  # cut off half-way: the other side died writing
            raise EOFError(str(exc)) from exc

    def close(self) -> None:
        for end in (self.writer, self.reader):
            with contextlib.suppress(OSError):
                end.close()


def _send(conn: Channel, message: Any) -> bool:
    try:
        conn.send(message)
    except OSError:  # the other side closed its end
        return False
    return True


def serve(conn: Channel) -> None:
    """The worker process: load GX and set its context up, say so, then validate each batch of
    splits it is sent, until it is told to leave (None) or the build's end of the pipe is gone (the
    build killed with -9): found at once while it loads GX or validates (:func:`_end_with_the_build`),
    at its next message while it waits for one."""
    busy = threading.Lock()  # held while loading GX and validating, not while waiting for a message
    busy.acquire()
    threading.Thread(target=_end_with_the_build, args=(conn.reader.fileno(), busy), name="tracehouse-gx-watch",
                     daemon=True).start()
    try:
        gx_runner.runner_for()
    except Exception as exc:  # noqa: BLE001 - the build validates in-process instead, and says why if it fails too
        busy.release()
        _send(conn, ("failed", f"{type(exc).__name__}: {exc}"))
        return
    busy.release()  # before saying so: a build that lets the worker go once it hears must find it idle
    if not _send(conn, ("ready", None)):
        return
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        with busy:
            root, partitions = job
            try:
                reply: tuple[str, Any] = ("done", prevalidate(root, partitions))
            except Exception as exc:  # noqa: BLE001 - validate_suites runs GX itself for whatever is missing
                reply = ("failed", f"{type(exc).__name__}: {exc}")
        if not _send(conn, reply):  # idle again first, as for "ready"
            return


def _end_with_the_build(fd: int, busy: threading.Lock) -> None:
    """The worker's watch on the build's end of the pipe: once no writer is left (the build process
    gone, killed with -9 or stopped) while the worker is busy loading GX or validating a batch, which
    would take seconds (minutes for a large corpus) for nobody, the worker ends itself with SIGTERM
    (its default action: no handler is installed here). A worker waiting for a message finds the end
    itself (EOF), and one told to leave tears down on its own."""
    poller = select.poll()
    poller.register(fd, 0)  # POLLHUP and POLLERR are reported whatever the mask
    while True:
        flags = 0
        for _, happened in poller.poll():
            flags |= happened
        if flags & select.POLLNVAL:
            return
        if flags & (select.POLLHUP | select.POLLERR):
            break
    while True:
        if not busy.acquire(blocking=False):
            os.kill(os.getpid(), signal.SIGTERM)
            return
        busy.release()  # waiting for a message: EOF ends it; look again in case a last one keeps it busy
        time.sleep(0.1)


class Worker:
    """The GX worker as the build holds it: its process (started now; it loads GX, which takes
    seconds, on the other core) and the build's ends of the pipes to it."""

    def __init__(self) -> None:
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", __name__, str(to_worker_r), str(from_worker_w)],
                pass_fds=(to_worker_r, from_worker_w), stdin=subprocess.DEVNULL, env=_worker_env(),
            )
        finally:  # the worker's ends are the worker's: its death is then the build's EOF
            os.close(to_worker_r)
            os.close(from_worker_w)
        self.conn = Channel(from_worker_r, to_worker_w)
        self.loaded = False
        _STARTED.append(self)

    def _receive(self) -> tuple[str, Any] | None:
        try:
            return self.conn.recv()
        except (EOFError, OSError, ValueError):  # the worker ended (stopped, or failed), or the end was closed
            return None

    def wait_loaded(self) -> bool:
        """Wait until GX is loaded in the worker; False when it could not be."""
        reply = self._receive()
        self.loaded = reply is not None and reply[0] == "ready"
        return self.loaded

    def validate(self, root: str, partitions: list[PartitionState]) -> bool:
        """Have the worker validate these splits into the cache; False when it could not."""
        if not _send(self.conn, (root, partitions)):
            return False
        reply = self._receive()
        return reply is not None and reply[0] == "done"

    def finish(self) -> None:
        """Tell the idle worker to leave. Its teardown is not waited for (see the module's doc)."""
        _send(self.conn, None)

    def alive(self) -> bool:
        return self.process.poll() is None

    def wait(self, timeout: float | None = None) -> int | None:
        """Its exit status once it has ended, None if it has not within ``timeout`` seconds."""
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        """Stop the worker now, whatever it is doing: what it was doing is in the cache or not needed.
        SIGTERM first; SIGKILL if it has not ended within TERMINATE_SECONDS."""
        if self.process.poll() is None:
            self.process.terminate()
        if self.wait(TERMINATE_SECONDS) is None:
            self.process.kill()
            self.process.wait()


def _worker_env() -> dict[str, str]:
    """The worker imports this process's own ``pipelines`` (its folder first on the path), never a
    ``pipelines`` folder that happens to be in the current directory (PYTHONSAFEPATH)."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "PYTHONSAFEPATH": "1"}


_STARTED: list[Worker] = []  # every worker this process started: stopped and reaped at exit


@atexit.register
def _reap_workers() -> None:
    """At the process's exit: stop the workers still tearing down (or still running) and reap them,
    so that no worker outlives the command that started it."""
    for worker in _STARTED:
        worker.conn.close()
        worker.stop()
    _STARTED.clear()


def new_worker() -> Worker:
    return Worker()


class Prevalidation:
    """The splits a build has flattened, validated by its worker process while the build goes on.

    The worker gets, each time it is free, every split submitted meanwhile, and validates them
    together (``validation_cache.table_results``: one GX run per table, not one per split and table).
    ``in_worker=False``: nothing is done here, the checks' step validates in-process."""

    def __init__(self, warehouse: Warehouse, in_worker: bool = True) -> None:
        self.warehouse = warehouse
        self.in_worker = in_worker
        self.worker: Worker | None = None
        self.feeder: threading.Thread | None = None  # sends the worker what is queued, once it is free
        self.changed = threading.Condition()
        self.queued: list[PartitionState] = []  # submitted, not yet sent to the worker
        self.sent: list[int] = []  # how many splits each run of the worker was given
        self.submitted = 0
        self.validated = 0  # splits the worker has finished with (validated, or failed: the build does them)
        self.closing = False
        self.held: list[PartitionState] | None = None  # while held: the splits to validate once released
        self.start_wanted = False

    def start(self) -> None:
        """Start the worker now, for a build that will flatten something: its first partition then
        finds GX loaded. While held, once released."""
        if not self.in_worker or self.closing:
            return
        if self.held is not None:
            self.start_wanted = True
        elif self.worker is None:
            self.worker = take_early_worker() or new_worker()
            self.feeder = threading.Thread(target=self._feed, args=(self.worker,), name="tracehouse-gx-feeder",
                                           daemon=True)
            self.feeder.start()

    def hold(self) -> None:
        """Start no worker until :meth:`release`: the build is about to flatten a file big enough
        that the worker's memory would stack on the flattening's peak (``flattening.HEAVY_FILE_BYTES``)."""
        if self.held is None:
            self.held = []

    def release(self) -> None:
        """Start the worker if it was wanted meanwhile, and give it the splits submitted while held."""
        held, self.held = self.held, None
        if self.start_wanted or held:
            self.start()
        for part in held or []:
            self.submit(part)

    def submit(self, part: PartitionState) -> None:
        if not self.in_worker or self.closing:
            return  # validated in-process by the checks' step
        if self.held is not None:
            self.held.append(part)
            return
        self.start()
        with self.changed:
            self.queued.append(part)
            self.submitted += 1
            self.changed.notify_all()

    def _feed(self, worker: Worker) -> None:
        """Once the worker has loaded GX, send it everything queued, and again each time it is done."""
        working = worker.wait_loaded()
        while True:
            with self.changed:
                self.changed.wait_for(lambda: self.queued or self.closing)
                if not self.queued:
                    return
                batch, self.queued = self.queued, []
                self.sent.append(len(batch))
            try:  # a worker that failed leaves its splits to the checks' step
                working = working and worker.validate(str(self.warehouse.root), batch)
            finally:
                with self.changed:
                    self.validated += len(batch)
                    self.changed.notify_all()

    def _busy(self) -> bool:
        return self.validated < self.submitted and self.feeder is not None and self.feeder.is_alive()

    def wait(self, say: Callable[[str], None] | None = None) -> None:
        """Wait for what was submitted, saying every second how far the worker is (``say``)."""
        self.release()  # a build that stopped before releasing: what was held is validated now
        with self.changed:
            while not self.changed.wait_for(lambda: not self._busy(), timeout=PROGRESS_SECONDS):
                if say is None:
                    continue
                if self.worker is not None and not self.worker.loaded:
                    say(event("checks_waiting"))
                else:
                    say(event("checks_waiting_splits", validated=self.validated, submitted=self.submitted))

    def close(self) -> None:
        """End the worker: told to leave when it is idle, stopped when it is still working (a build
        that failed half-way). Nothing is submitted afterwards; the checks' step validates the rest."""
        with self.changed:
            self.closing = True
            unfinished = self._busy() or (self.worker is not None and not self.worker.loaded)
            self.changed.notify_all()
        drop_early_worker()  # a build that flattened nothing did not take it
        worker, self.worker = self.worker, None
        if worker is not None:
            if unfinished:
                worker.stop()
            else:
                worker.finish()
        if self.feeder is not None:
            self.feeder.join()
        if worker is not None:
            worker.conn.close()


_PREVALIDATIONS: dict[str, Prevalidation] = {}


@contextmanager
def prevalidation(warehouse: Warehouse, in_worker: bool | None = None) -> Iterator[Prevalidation]:
    """A :class:`Prevalidation` for the duration of one build; the checks' step on the same
    warehouse waits for it. ``in_worker``: by default, unless this process holds a GX context."""
    pre = Prevalidation(warehouse, in_worker=not gx_runner.loaded() if in_worker is None else in_worker)
    _PREVALIDATIONS[str(warehouse.root)] = pre
    try:
        yield pre
    finally:
        del _PREVALIDATIONS[str(warehouse.root)]
        pre.close()


def wait_for_worker(warehouse: Warehouse, say: Callable[[str], None] | None = None) -> None:
    """Wait for the build's worker (if any) to validate what it was given, saying every second how
    far it is; then let it go: the checks' step validates whatever is left in-process."""
    pre = _PREVALIDATIONS.get(str(warehouse.root))
    if pre is not None:
        pre.wait(say)
        pre.close()


# A worker spawned by `tracehouse build` before it imports Dagster (spawn_early_worker), for the
# build's Prevalidation to take.
_EARLY: Worker | None = None


def spawn_early_worker() -> None:
    """Start loading Great Expectations in a worker process now, at the start of a build process:
    loading it takes seconds, which a rebuild's checks would otherwise wait for if the worker
    started only at the first changed split. A build that flattens nothing, or a file too big to have the
    worker beside it (``flattening.HEAVY_FILE_BYTES``), stops it (:func:`drop_early_worker`)."""
    global _EARLY
    if _EARLY is None and not gx_runner.loaded():
        _EARLY = new_worker()


def early_worker() -> Worker | None:
    """The early worker no build has taken yet."""
    return _EARLY


def take_early_worker() -> Worker | None:
    """The early worker, now no longer anybody else's; None if there is none."""
    global _EARLY
    early, _EARLY = _EARLY, None
    return early


def drop_early_worker() -> None:
    """Stop the early worker if no build took it."""
    early = take_early_worker()
    if early is not None:
        early.stop()
        early.conn.close()


if __name__ == "__main__":  # the worker process (Worker): its ends of the two pipes as arguments
    # Ctrl-C in a terminal reaches the whole process group: the build stops its worker itself (or the
    # worker sees the build gone), so the worker ignores it rather than print a KeyboardInterrupt
    # traceback from the middle of GX's import into the user's terminal
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    serve(Channel(int(sys.argv[1]), int(sys.argv[2])))
