"""The warehouse's own Dagster instance (``<warehouse>/.dagster``): every build runs its steps there,
so the runs, their steps, the partitions' materializations and the check results are what
``tracehouse ui`` shows, and ``DagsterInstance.get()`` with ``DAGSTER_HOME=<warehouse>/.dagster``
lists the builds' runs.

The instance is configured only through its documented ``dagster.yaml``: Dagster's one-file SQLite
event log (``ConsolidatedSqliteEventLogStorage``, which writes an event faster than the default
one-database-per-run log, and every step writes several) and the no-op compute-log manager (no ``tail -F``
per step). It is opened with the public ``DagsterInstance.local_temp(tempdir=...)``, a regular,
persistent instance in that folder.

A process killed in the middle of a run leaves the run "started" for ever; the next build on the
warehouse (it holds the warehouse's build lock, so no other build's run is live) reports such runs
of a dead process as failed (:func:`settle_interrupted_runs`). A build killed after its commit
but before its run ended has its commit recorded by the next build, even one with nothing to do:
the build number the instance last recorded is kept in ``recorded.json`` beside ``dagster.yaml``, so
that a build with nothing to do decides it without opening the instance.
"""

from __future__ import annotations

import calendar
import os
import socket
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from pipelines.storage.records import BuildRecord
from pipelines.storage.state import KEEP_BUILDS, CommitLog, mark_recorded, recorded_build
from pipelines.storage.warehouse import Warehouse, write_atomic

BUILD_TAG = "tracehouse/build"
ATTEMPT_TAG = "tracehouse/attempt"  # every run of one build carries its attempt id
PROCESS_TAG = "tracehouse/process"  # host:pid of the process that runs it (a dead one left it unfinished)
DAGSTER_YAML = """\
# Written by tracehouse (4): the instance `tracehouse build` runs its steps in and `tracehouse ui` shows.
telemetry:
  enabled: false
# No "Join the Dagster community" dialog on the UI's first start.
nux:
  enabled: false
# Dagster's one-file SQLite event log: one database to write, not one per run beside an index.
# Module paths as Dagster's dagster.yaml reference spells them (dagster.core...).
event_log_storage:
  module: dagster.core.storage.event_log
  class: ConsolidatedSqliteEventLogStorage
  config:
    base_dir: {base_dir}
# No captured step output: on a Dask worker, Dagster's default capture starts two `tail -F`
# processes a step, which outlived their worker (and held the build's stderr open) when the
# cluster stopped it; the build says its progress itself.
compute_logs:
  module: dagster.core.storage.noop_compute_log_manager
  class: NoOpComputeLogManager
"""
OURS = "# Written by tracehouse"
UNFINISHED = (dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.NOT_STARTED,
              dg.DagsterRunStatus.CANCELING)

_INSTANCES: dict[str, dg.DagsterInstance] = {}
_LOCK = threading.Lock()


def write_config(home: Path) -> bool:
    """Write the instance's dagster.yaml when it is missing or an older one of ours; True when the
    file is ours (a user's own, say with PostgreSQL storages, is left as it is)."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    written = config.read_text() if config.exists() else None
    ours = DAGSTER_YAML.format(base_dir=home / "history")
    if written is None or (written.startswith(OURS) and written != ours):
        write_atomic(config, ours)
        return True
    return written.startswith(OURS)


def instance_for(warehouse: Warehouse) -> dg.DagsterInstance:
    """The warehouse's Dagster instance (its dagster.yaml written on first use; one per process)."""
    home = warehouse.dagster_home
    with _LOCK:
        if str(home) not in _INSTANCES:
            write_config(home)
            _INSTANCES[str(home)] = dg.DagsterInstance.local_temp(tempdir=str(home))
        return _INSTANCES[str(home)]


def run_tags(attempt: str, build: int) -> dict[str, str]:
    """The tags of every run a build starts: the CLI, its attempt, the build number it will commit as,
    and the process running it (the UI filters runs by any of them)."""
    return {"tracehouse/cli": "build", ATTEMPT_TAG: attempt, BUILD_TAG: str(build),
            PROCESS_TAG: f"{socket.gethostname()}:{os.getpid()}"}


def _alive(process: str) -> bool:
    """Whether ``host:pid`` names a process alive on this host (another host's: assumed alive)."""
    host, _, pid = process.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    if int(pid) == os.getpid():
        return False  # this process is starting a build: none of its own earlier runs is still going
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def settle_interrupted_runs(instance: dg.DagsterInstance) -> list[str]:
    """Report as failed the build runs left unfinished by a process that is gone (killed, or its
    machine stopped); returns their run ids. Called by a build holding the warehouse's lock."""
    settled = []
    records = instance.get_run_records(dg.RunsFilter(statuses=list(UNFINISHED), tags={"tracehouse/cli": "build"}))
    for record in records:
        run = record.dagster_run
        process = run.tags.get(PROCESS_TAG)
        if process is None or _alive(process):
            continue
        instance.report_run_failed(run, "the process running this build ended before the run did (killed?)")
        settled.append(run.run_id)
    return settled


def record_interrupted_commit(warehouse: Warehouse, record: BuildRecord) -> bool:
    """Record the commit of ``record`` when the run that made it ended before saying so (its process
    killed after the commit): its unfinished runs reported as failed, and the commit a runless
    materialization of ``committed_build`` naming the build. True when it recorded something."""
    if recorded_build(warehouse) == record.build:
        return False
    instance = instance_for(warehouse)
    settle_interrupted_runs(instance)
    latest = instance.get_latest_materialization_event(dg.AssetKey("committed_build"))
    materialization = latest.asset_materialization if latest is not None else None
    already = materialization is not None and materialization.metadata.get("build") == dg.IntMetadataValue(
        record.build)
    if not already:
        rows = record.summary.get("rows", {})
        instance.report_runless_asset_event(dg.AssetMaterialization(
            asset_key="committed_build",
            description=f"build {record.build}, committed by a run that ended without recording it (its process "
            "killed, or its publishing failed after the commit)",
            metadata={"build": record.build, BUILD_TAG: record.build, **{f"rows_{k}": v for k, v in rows.items()}},
        ))
    mark_recorded(warehouse, record.build)
    return not already


FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


def attempt_started(attempt: str) -> datetime | None:
    """When a build attempt started, from its id (storage.new_id: UTC time to the second, then hex)."""
    try:
        return datetime.fromtimestamp(calendar.timegm(time.strptime(attempt.split("-", 1)[0], "%Y%m%dT%H%M%S")), UTC)
    except ValueError:
        return None


def prune_runs(instance: dg.DagsterInstance, warehouse: Warehouse, keep: int = KEEP_BUILDS) -> int:
    """Delete the finished runs (with their events) older than the builds the warehouse keeps: every
    run created before the oldest kept build's attempt started, whatever started it (a build, its
    fan-out, the UI). The event log then holds the runs of about ``keep`` builds. Returns how many
    runs were deleted."""
    log = CommitLog(warehouse)
    numbers = log.numbers()[-keep:]
    if len(numbers) < keep:
        return 0
    oldest = attempt_started(log.get(numbers[0]).attempt)
    if oldest is None:
        return 0
    old = instance.get_run_records(dg.RunsFilter(statuses=list(FINISHED), created_before=oldest))
    for record in old:
        instance.delete_run(record.dagster_run.run_id)
    return len(old)
