"""``tracehouse watch``: one long-lived process that keeps the warehouse in step with its sources.

It polls the sources every few seconds and runs the same incremental build as ``tracehouse build``,
in-process, so Python, Dagster, Great Expectations and DuckDB are loaded once and one Dagster
instance records every run: a rebuild then costs what changed, not the start-up of a process
(see BENCHMARKS.md). A round with nothing changed lists the files and stops there. The Dagster
sensor (``tracehouse ui`` / ``dagster-daemon``) does the same job inside Dagster, starting a
process per run.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from typing import TextIO

from pipelines.builds.run_history import instance_for
from pipelines.config import ConfigError, Settings, SourceUnavailable
from pipelines.interfaces.build import BuildLocked, StrictBuildError, format_summary, run_build
from pipelines.storage.warehouse import Warehouse
from pipelines.validation.validate import runner_for


def watch(
    settings: Settings,
    *,
    interval: float = 10.0,
    progress: bool = True,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    stop: threading.Event | None = None,
    pictures: str | None = None,
) -> int:
    """Build now, then again whenever the sources change, until ``stop`` is set (SIGINT/SIGTERM
    set it when called from the CLI); ``pictures`` as ``tracehouse build --pictures``. Returns 0, or
    1 when the last build failed, or 2 when a source or setting cannot be used (a recorded source
    missing or listing no files: refused at the start, waited for after it)."""
    stop = stop or threading.Event()
    # The warehouse's Dagster instance first, then Great Expectations beside the first build: both
    # import SQLAlchemy's ORM, whose modules import each other; imported from two threads at once,
    # one thread can be handed a half-initialized module (Python's way out of the import deadlock),
    # and the build failed with "partially initialized module 'sqlalchemy.orm.exc'".
    instance_for(Warehouse(settings.warehouse))
    threading.Thread(target=_prepare, args=(err,), daemon=True).start()
    status = 0
    first = True
    refused = ""  # the refusal said last round (said again only when it changes)
    while not stop.is_set():
        started = time.monotonic()
        try:
            summary = run_build(settings, progress=progress and first, out=err,
                                keep_failed=not first, pictures=pictures)
        except SourceUnavailable as exc:
            # a recorded source missing or emptied since the watch began (a disk unmounted, a folder
            # being refilled): its rows stay, and the watch waits for it; at the start it is refused
            if first:
                print(f"tracehouse watch: {exc}", file=err, flush=True)
                return 2
            if str(exc) != refused:
                print(f"tracehouse watch: {exc}; not building until it is back", file=err, flush=True)
            refused, status = str(exc), 2
        except ConfigError as exc:  # e.g. a source given twice: no later round can fix that
            print(f"tracehouse watch: {exc}", file=err, flush=True)
            return 2
        except (BuildLocked, StrictBuildError, RuntimeError) as exc:
            print(f"tracehouse watch: {exc}", file=err, flush=True)
            status, refused = 1, ""
        else:
            if refused:
                print("tracehouse watch: the sources are back; building again", file=err, flush=True)
            status, refused = (0 if summary.ok else 1), ""
            if first or summary.checked:
                stamp = time.strftime("%H:%M:%S")
                print(f"[{stamp}] build after {time.monotonic() - started:.1f} s", file=out)
                print(format_summary(summary), file=out, flush=True)
        first = False
        stop.wait(interval)
    return status


def _prepare(err: TextIO) -> None:
    """Load now what a rebuild needs, so the first one does not wait for it: Great Expectations and
    its suites, the slowest part of a process's start."""
    runner_for()
    print("tracehouse watch: ready (Great Expectations loaded)", file=err, flush=True)


def watch_until_signalled(settings: Settings, *, interval: float, progress: bool, pictures: str | None = None) -> int:
    """Watch until SIGINT or SIGTERM; a build under way finishes first.

    The builds run on a worker thread: Dagster takes over SIGINT/SIGTERM while a run executes on
    the main thread and drops what arrives then, which would leave the watcher running."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    print(f"tracehouse watch: polling the sources every {interval:g} s; Ctrl-C to stop", file=sys.stderr, flush=True)
    status: list[int] = []
    worker = threading.Thread(
        target=lambda: status.append(watch(settings, interval=interval, progress=progress, stop=stop,
                                           pictures=pictures)),
        name="tracehouse-watch",
    )
    worker.start()
    while worker.is_alive():
        worker.join(0.5)  # wakes up for signal handlers
    return status[0] if status else 1
