"""The last step of a build: turn its attempt into the committed state, then publish that state.

Committing refuses a build whose blocking checks failed (the previous state stays), writes the build
record (the one atomic step, ``state.CommitLog.commit``), then publishes copies of the committed
state for readers who do not go through tracehouse (``tracehouse.duckdb``, ``dashboards/index.html``,
``reports/validation.html``, and, when the warehouse has it on, every table and mart as an Apache
Iceberg snapshot tagged ``build-N``: ``pipelines.storage.iceberg``) and deletes what no kept build refers to.
Publishing is idempotent: a build killed between the commit and the end of publishing leaves copies
of the previous build, whole (each Iceberg table at the previous build or the new one), and the next
build catches up.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from pipelines.analytics import crosswalk, db
from pipelines.progress import event
from pipelines.storage import iceberg, remote
from pipelines.storage.records import BuildRecord
from pipelines.storage.state import KEEP_BUILDS, Attempt, CommitLog, collect_garbage, committed_rows
from pipelines.storage.warehouse import Warehouse, write_atomic

PUBLISHED = ".published.json"  # which build the root copies show


class BlockingChecksFailed(RuntimeError):
    """A build whose tables fail a blocking check is not committed."""

    def __init__(self, failed: list[dict[str, Any]]) -> None:
        self.failed = failed
        names = ", ".join(f"{c['asset']}:{c['name']}" for c in failed)
        super().__init__(f"blocking checks failed ({names}); the build was not committed")


def blocking_failures(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in checks if not c["passed"] and c["severity"] == "error"]


def commit_attempt(warehouse: Warehouse, attempt: Attempt, say: Callable[[str], None] = lambda _: None
                   ) -> BuildRecord:
    """Commit ``attempt`` as the warehouse's next build, publish it and collect garbage."""
    validation = attempt.output("validation")
    if validation is None:
        raise RuntimeError("the tables of this build were not validated; nothing was committed")
    failed = blocking_failures(validation["checks"])
    if failed:
        raise BlockingChecksFailed(failed)
    crosswalk.keep_for_commit(warehouse, attempt)  # the record names it: a store's readers get it too
    record = attempt.record(validation["checks"])
    record.summary["rows"] = committed_rows(warehouse, record)
    say(event("commit_writing", build=record.build))
    CommitLog(warehouse).commit(record, say)
    copies = "tracehouse.duckdb, dashboards/index.html" + (" and Iceberg" if iceberg.enabled(warehouse) else "")
    say(event("commit_committed", build=record.build, copies=copies))
    timings: dict[str, float] = {}
    publish(warehouse, record, timings)
    deleted = collect_garbage(warehouse, keep_attempt=attempt.id)
    deleted += remote.collect_garbage(warehouse.root, KEEP_BUILDS)
    took = f" (Iceberg snapshots in {timings['iceberg']:.2f} s)" if "iceberg" in timings else ""
    say(event("commit_published", took=took, deleted=deleted))
    return record


def publish(warehouse: Warehouse, record: BuildRecord, timings: dict[str, float] | None = None) -> None:
    """Write the root copies of ``record``'s state (each atomically) and its Iceberg snapshots (when on),
    then say which build they show (a kill before that: the next build publishes again, idempotently)."""
    db.publish_database(warehouse, record)
    report = record.report
    for rel, copy in ((record.dashboard_page, warehouse.dashboards_dir / "index.html"),
                      (report, warehouse.reports_dir / "validation.html"),
                      (report and report.removesuffix(".html") + ".json", warehouse.reports_dir / "validation.json")):
        if rel and warehouse.path(rel).is_file():
            write_atomic(copy, warehouse.path(rel).read_bytes())
    if iceberg.enabled(warehouse):
        started = time.perf_counter()
        iceberg.publish(warehouse, record)
        if timings is not None:
            timings["iceberg"] = time.perf_counter() - started
    remote.publish_copies(warehouse.root, ["dashboards/index.html", "reports/validation.html",
                                           "reports/validation.json"])
    write_atomic(warehouse.root / PUBLISHED, json.dumps({"build": record.build}))


def published_build(warehouse: Warehouse) -> int | None:
    try:
        return json.loads((warehouse.root / PUBLISHED).read_text())["build"]
    except (OSError, ValueError, KeyError):
        return None


def catch_up(warehouse: Warehouse) -> BuildRecord | None:
    """Publish the latest committed build if a killed build left the root copies behind it (or its
    Iceberg snapshots: Iceberg just turned on, or the warehouse was moved or copied)."""
    record = CommitLog(warehouse).latest()
    if record is not None and published_build(warehouse) != record.build:
        publish(warehouse, record)
    elif record is not None and iceberg.enabled(warehouse) and iceberg.published(warehouse, record.build) is None:
        iceberg.publish(warehouse, record)
    return record
