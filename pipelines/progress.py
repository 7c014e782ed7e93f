"""Progress as named events: a name and fields, with the line a person reads written once here.

A build says what it is doing through :func:`event`; the CLI prints the line (``--progress text``,
the default) or one JSON object per event (``--progress json``: ``{"event": name, "t": seconds since
the process began, ...fields, "text": line}``), which tests and the benchmark key on instead of the
wording. An event is a ``str`` (its line), so every function that hands progress on as text keeps
working; a plain string said anywhere is the event ``message``.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

STARTED = time.monotonic()

# name -> the line printed for it (str.format over its fields)
EVENTS: dict[str, str] = {
    "nothing_changed": "nothing changed: build {build} stands (its checks, marts and dashboard)",
    "waiting_for_files": "nothing to build yet: {sources} lists no files (the landing folder tracehouse collect "
                         "writes to is still empty)",
    "sample_corpus": "{how} default sample corpus into {path}",
    "unfinished_sources": "no --source given and no build committed yet: reading the sources of the build that "
                          "started before and did not commit ({attempt}: {sources})",
    "source_synced": "source {source}: {downloaded} objects downloaded, {kept} unchanged, {deleted} deleted since "
                     "the last sync",
    "source_saved": "source {source}: {spans} spans and {annotations} span annotations from {url} ({rewritten} "
                    "files rewritten)",
    "partition_removed": "removing {partition} ({why})",
    "partition_flattening": "flattening {partition} ({files} files)",
    "partition_files": "{partition}: {files_done}/{files_total} files, {mb_done:.1f}/{mb_total:.1f} MB "
                       "({mb_per_s:.0f} MB/s), {reused} reused, {errors} errors",
    "partition_adopted": "taking {partition} as an earlier, unfinished build left it (its files are unchanged)",
    "partition_claims_moved": "{partition}: the cluster's generation assumed other graph ids loaded before it",
    "plan_made": "plan: {read} of {splits} splits to read, {kept} kept, {taken} taken from an unfinished build, "
                 "{removed} removed",
    "final_run": "build {build}: one Dagster run reads what the plan says, checks it, computes marts and dashboard, "
                 "commits",
    "run_starting": "starting Dagster's run of build {build}",
    "checks_started": "checks: validating {partitions} partitions",
    "checks_waiting": "checks: waiting for Great Expectations to load in its worker process",
    "checks_waiting_splits": "checks: waiting for Great Expectations (its worker process): {validated} of "
                             "{submitted} splits validated",
    "checks_done": "checks: {checks} checks in {seconds:.1f} s, {blocking_failures} blocking failures, "
                   "{warnings} warnings",
    "mart_done": "mart {mart}: {rows} rows in {seconds:.1f} s{kept}",
    "mart_failed": "mart {mart} failed: {error}",
    "chart_done": "chart {chart}: {rows} rows in {seconds:.1f} s",
    "chart_hidden": "chart {chart}: {rows} rows, hidden (nothing to show) in {seconds:.1f} s",
    "pictures_loading": "pictures: loading the node values and paths of {missing} of {views} failure views",
    "pictures_started": "pictures: drawing {views} failure views{what}",
    "pictures_progress": "pictures: {done}/{views} failure views ({written} new, {rendered} new pictures), "
                         "{seconds:.1f} s",
    "pictures_converting": "pictures: converting {pictures} pictures to PNG",
    "pictures_done": "pictures: {views} failure views ({written} new), {pictures}, in {seconds:.1f} s",
    "page_done": "dashboard page: {mb:.1f} MB in {seconds:.1f} s",
    "fanout_started": "flattening {partitions} partitions on the cluster ({files} files)",
    "fanout_done": "flattened {partitions} partitions on the cluster in {seconds:.1f} s{rest}",
    "cluster_starting": "starting a Dask cluster of {workers} worker processes",
    "cluster_up": "Dask cluster up at {address} ({workers} workers, {seconds:.1f} s)",
    "cluster_stopping": "stopping the Dask cluster",
    "partition_flattened_on_worker": "flattened {partition} on a worker [{done}/{steps}]: {files} files "
                                     "({files_parsed} parsed), {rows:,} rows, {seconds:.1f} s",
    "commit_writing": "commit: writing build {build}",
    "commit_committed": "commit: build {build} committed; publishing {copies}",
    "commit_published": "commit: published{took}; {deleted} files of older builds deleted",
}

FORMATS = ("text", "json")
_format = "text"


class Event(str):
    """One progress event: the line it prints, with its ``name`` and ``fields``."""

    name: str
    fields: dict[str, Any]

    def __new__(cls, name: str, fields: dict[str, Any]) -> Event:
        line = super().__new__(cls, EVENTS[name].format(**fields))
        line.name, line.fields = name, fields
        return line


def event(name: str, **fields: Any) -> Event:
    """The event ``name`` (a key of :data:`EVENTS`) with ``fields``."""
    return Event(name, fields)


def set_format(name: str) -> None:
    """How :func:`show` writes events from now on in this process: ``text`` or ``json``."""
    global _format
    if name not in FORMATS:
        raise ValueError(f"unknown progress format {name!r}; use one of: {', '.join(FORMATS)}")
    _format = name


def render(message: str, prefix: str) -> str:
    """The line shown for ``message``: ``prefix`` + its text, or its JSON object."""
    if _format == "text":
        return f"{prefix}{message}"
    name, fields = (message.name, message.fields) if isinstance(message, Event) else ("message", {})
    return json.dumps({"event": name, "t": round(time.monotonic() - STARTED, 3), **fields, "text": str(message)},
                      default=str)


def show(message: str, prefix: str = "", out: TextIO | None = None) -> None:
    """Write one event (or plain message) on ``out`` (stderr), at once."""
    print(render(message, prefix), file=out or sys.stderr, flush=True)


class FileProgress:
    """One progress line per file a split's flattening reads, at most two a second for long splits
    (the last file always); nothing when ``shown`` is false."""

    def __init__(self, shown: bool) -> None:
        self.shown = shown
        self.last = 0.0

    def __call__(self, progress) -> None:  # pipelines.builds.ingest.Progress
        if not self.shown:
            return
        now = time.monotonic()
        done = progress.files_done == progress.files_total
        if not done and now - self.last < 0.5:
            return
        self.last = now
        rate = progress.bytes_done / 1e6 / max(now - progress.started, 1e-6)
        show(event("partition_files", partition=progress.partition, files_done=progress.files_done,
                   files_total=progress.files_total, mb_done=progress.bytes_done / 1e6,
                   mb_total=progress.bytes_total / 1e6, mb_per_s=rate, reused=progress.reused,
                   errors=progress.errors), "  ")
