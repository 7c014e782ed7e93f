"""One build, in-process through Dagster: a run per changed source split, then one run for the
checks, marts, database and dashboard, then a summary.

Only one build may run on a warehouse at a time (a lock file says so); readers are never locked
out, because everything they read is published by atomic renames.
"""

from __future__ import annotations

import fcntl
import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import dagster as dg
from dagster._core.instance.ref import InstanceRef

from pipelines import allocator, db, schema
from pipelines.config import Settings
from pipelines.defs import build_definitions
from pipelines.defs.partitions import source_splits
from pipelines.defs.resources import PartitionFiles, TracehouseResource, pinned_listing
from pipelines.ingest import load_manifest
from pipelines.storage import Warehouse

QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


class BuildLocked(RuntimeError):
    pass


@dataclass
class BuildSummary:
    warehouse: Path
    partitions_built: list[str] = field(default_factory=list)
    partitions_unchanged: list[str] = field(default_factory=list)
    partitions_removed: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    files_found: int = 0
    files_rejected: list[dict] = field(default_factory=list)
    failed_checks: list[str] = field(default_factory=list)
    warned_checks: list[str] = field(default_factory=list)
    failed_steps: list[str] = field(default_factory=list)
    seconds: float = 0.0
    code: str = ""
    checked: bool = False  # the checks, marts and dashboard ran (not skipped: nothing had changed)

    @property
    def ok(self) -> bool:
        return not self.failed_checks and not self.failed_steps

    @property
    def exit_code(self) -> int:
        """0: clean; 1: a check or step failed; 3: built, but some input could not be loaded."""
        if not self.ok:
            return 1
        return 3 if self.files_rejected else 0


@contextmanager
def build_lock(warehouse: Warehouse) -> Iterator[None]:
    warehouse.root.mkdir(parents=True, exist_ok=True)
    handle = (warehouse.root / ".build.lock").open("w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise BuildLocked(f"another build is running on {warehouse.root}") from None
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def build_instance() -> dg.DagsterInstance:
    """Where a build's runs are recorded: $DAGSTER_HOME when set (as Dagster does), else in memory.

    Recording costs about 50 ms per event in Dagster's SQLite storage, several seconds a build,
    so it is opt-in: ``DAGSTER_HOME=<warehouse>/.dagster tracehouse build`` shows the build in
    ``tracehouse ui``."""
    if os.environ.get("DAGSTER_HOME"):
        return dg.DagsterInstance.get()
    return dg.DagsterInstance.ephemeral()


def instance_for(warehouse: Warehouse) -> dg.DagsterInstance:
    """The persistent Dagster instance inside the warehouse, the one `tracehouse ui` uses."""
    warehouse.dagster_home.mkdir(parents=True, exist_ok=True)
    config = warehouse.dagster_home / "dagster.yaml"
    if not config.exists():
        config.write_text("telemetry:\n  enabled: false\n")
    return dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(warehouse.dagster_home)))


def partition_unchanged(warehouse: Warehouse, part: PartitionFiles) -> bool:
    """True when the published generation was built from exactly these files (path, size, mtime)."""
    manifest = load_manifest(warehouse.current(part.key))
    if manifest is None or manifest.get("kind") != part.source.kind:
        return False
    before = [(e["file"], e["size"], e["mtime_ns"]) for e in manifest["files"]]
    now = []
    for f in sorted(part.files, key=lambda f: f.relpath):
        stat = f.path.stat()
        now.append((f.relpath, stat.st_size, stat.st_mtime_ns))
    return before == now


def code_fingerprint() -> str:
    """Every file the outputs are made by (Python, SQL, suites, seeds): a build after a code change
    runs the checks, marts and dashboard even when no input changed."""
    return db.files_digest(
        path
        for folder in ("pipelines", "dashboards", "sql", "expectations")
        for path in sorted((db.REPO / folder).rglob("*"))
        if path.suffix in {".py", ".sql", ".json", ".csv"} and "__pycache__" not in path.parts
    ).hexdigest()


def outputs_current(warehouse: Warehouse, code: str, *, keep_failed: bool = False) -> dict | None:
    """The last build's record when it checked the tables with this code and its outputs are all
    there; a failed one only with ``keep_failed`` (the same tables and code fail the same way)."""
    try:
        last = json.loads((warehouse.root / "last_build.json").read_text())
    except (OSError, ValueError):
        return None
    if last.get("code") != code or not warehouse.db_path.is_file():
        return None
    if last.get("failed_steps") or last.get("failed_checks"):
        return last if keep_failed else None
    return last if (warehouse.dashboards_dir / "index.html").is_file() else None


def run_build(
    settings: Settings,
    *,
    full: bool = False,
    strict: bool = False,
    progress: bool = True,
    out: TextIO = sys.stderr,
    instance: dg.DagsterInstance | None = None,
    keep_failed: bool = False,
) -> BuildSummary:
    """Build what changed: a run per changed partition, then the checks, marts, database and
    dashboard (skipped when no partition changed and the last clean build used the same code).
    ``instance`` records the runs (default: :func:`build_instance`); a long-lived caller such as
    ``tracehouse watch`` passes one for all its builds, and ``keep_failed`` so that a failed build
    is not run again, round after round, while nothing changes (its failures are reported again)."""
    started = time.monotonic()
    warehouse = Warehouse(settings.warehouse)
    summary = BuildSummary(warehouse.root, code=code_fingerprint())
    with build_lock(warehouse):
        warehouse.sweep_all()
        resource = TracehouseResource.from_settings(settings, full=full, strict=strict, progress=progress)
        if settings.uses_sample and not warehouse.corpus_dir.is_dir():
            _say(out, progress, f"generating the default sample corpus into {warehouse.corpus_dir}")
        with pinned_listing(resource) as partitions:
            _build(warehouse, resource, partitions, instance or build_instance(), summary, full, progress, out,
                   keep_failed)

    con = db.connect(warehouse)
    try:
        summary.rows = {name: con.execute(f'select count(*) from "{name}"').fetchone()[0] for name in schema.TABLES}
        rejected = con.execute(
            "select source, split, file, kind, reason, position from ingest_errors where rejected order by all"
        ).fetchall()
    finally:
        con.close()
    cols = ("source", "split", "file", "kind", "reason", "position")
    summary.files_rejected = [dict(zip(cols, row, strict=True)) for row in rejected]
    summary.seconds = time.monotonic() - started
    _write_last_build(warehouse, summary)
    allocator.release_freed_memory()  # glibc keeps what the checks and marts freed too; a watch process lives on
    return summary


def _build(
    warehouse: Warehouse,
    resource: TracehouseResource,
    partitions: dict[str, PartitionFiles],
    instance: dg.DagsterInstance,
    summary: BuildSummary,
    full: bool,
    progress: bool,
    out: TextIO,
    keep_failed: bool = False,
) -> None:
    defs = build_definitions(resource)
    assets = list(defs.assets or []) + list(defs.asset_checks or [])
    summary.files_found = sum(len(p.files) for p in partitions.values())
    stale = [key for key in warehouse.partitions() if key not in partitions]
    known = set(instance.get_dynamic_partitions(source_splits.name))
    new_keys = [key for key in [*partitions, *stale] if key not in known]
    if new_keys:
        instance.add_dynamic_partitions(source_splits.name, new_keys)

    table_selection = dg.AssetSelection.assets(*schema.TABLES).without_checks()
    changed = [key for key, part in partitions.items() if full or not partition_unchanged(warehouse, part)]
    if changed or stale:
        # Great Expectations takes ~2.5 s to import and the checks need it whenever a partition
        # changed: import it on a thread while the partitions are flattened.
        threading.Thread(target=importlib.import_module, args=("great_expectations",), daemon=True).start()
    for key, part in partitions.items():
        if key not in changed:
            summary.partitions_unchanged.append(key)
            continue
        _say(out, progress, f"flattening {key} ({len(part.files)} files)")
        _materialize(assets, table_selection, instance, resource, summary, partition_key=key)
        summary.partitions_built.append(key)
    for key in stale:
        _say(out, progress, f"removing {key} (its files are gone)")
        _materialize(assets, table_selection, instance, resource, summary, partition_key=key)
        instance.delete_dynamic_partition(source_splits.name, key)
        summary.partitions_removed.append(key)

    allocator.release_freed_memory()  # what the ingest kept for reuse; the checks and marts allocate elsewhere
    if not warehouse.partitions():
        raise RuntimeError("no input files were found in the sources; nothing to build")
    last = None if (changed or stale) else outputs_current(warehouse, summary.code, keep_failed=keep_failed)
    if last is not None:
        _say(out, progress, "nothing changed: the checks, marts and dashboard of the last build stand")
        summary.warned_checks = list(last.get("warned_checks") or [])
        summary.failed_checks = list(last.get("failed_checks") or [])
        summary.failed_steps = list(last.get("failed_steps") or [])
        return
    _say(out, progress, "checking tables, computing marts, publishing the database and dashboard")
    downstream = dg.AssetSelection.all() - table_selection
    checks = dg.AssetSelection.checks_for_assets(*schema.TABLES)
    _materialize(assets, downstream | checks, instance, resource, summary)
    summary.checked = True
    if not warehouse.db_path.is_file():
        db.publish_database(warehouse)  # tables stay queryable even when marts were blocked


def _materialize(
    assets: list,
    selection: dg.AssetSelection,
    instance: dg.DagsterInstance,
    resource: TracehouseResource,
    summary: BuildSummary,
    partition_key: str | None = None,
) -> dg.ExecuteInProcessResult:
    result = dg.materialize(
        assets,
        selection=selection,
        instance=instance,
        resources={"tracehouse": resource},
        partition_key=partition_key,
        run_config=QUIET_LOGS,
        raise_on_error=False,
        tags={"tracehouse/cli": "build"},
    )
    for event in result.all_events:
        if event.event_type_value == "ASSET_CHECK_EVALUATION":
            evaluation = event.event_specific_data
            if not evaluation.passed:
                name = f"{evaluation.asset_key.to_user_string()}:{evaluation.check_name}"
                warn = evaluation.severity == dg.AssetCheckSeverity.WARN
                (summary.warned_checks if warn else summary.failed_checks).append(name)
        elif event.event_type_value == "STEP_FAILURE":
            error = event.event_specific_data.error
            strict = _strict_cause(error)
            if strict:
                raise StrictBuildError(strict)
            summary.failed_steps.append(f"{event.step_key}: {error.message.strip() if error else 'failed'}")
    return result


def _strict_cause(error) -> str | None:
    """Dagster wraps what an asset raised; find a StrictIngestError anywhere in the cause chain."""
    while error is not None:
        if error.cls_name == "StrictIngestError":
            return error.message.split(":", 1)[-1].strip() if error.message.startswith("StrictIngestError") \
                else error.message.strip()
        error = error.cause or error.context
    return None


class StrictBuildError(RuntimeError):
    """--strict stopped the build at the first bad file."""


def _say(out: TextIO, progress: bool, message: str) -> None:
    if progress:
        print(f"tracehouse: {message}", file=out, flush=True)


def _write_last_build(warehouse: Warehouse, summary: BuildSummary) -> None:
    record = {
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "seconds": round(summary.seconds, 3),
        "partitions_built": summary.partitions_built,
        "partitions_unchanged": summary.partitions_unchanged,
        "partitions_removed": summary.partitions_removed,
        "rows": summary.rows,
        "files_found": summary.files_found,
        "files_rejected": summary.files_rejected,
        "failed_checks": summary.failed_checks,
        "warned_checks": summary.warned_checks,
        "failed_steps": summary.failed_steps,
        "code": summary.code,
        "checked": summary.checked,
    }
    tmp = warehouse.root / ".last_build.json.tmp"
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, warehouse.root / "last_build.json")


def format_summary(summary: BuildSummary) -> str:
    lines = [f"warehouse: {summary.warehouse}"]
    lines.append(
        f"partitions: {len(summary.partitions_built)} built, {len(summary.partitions_unchanged)} unchanged, "
        f"{len(summary.partitions_removed)} removed"
    )
    lines.append(f"files: {summary.files_found} found, {len(summary.files_rejected)} rejected")
    if not summary.checked:
        lines.append("nothing changed since the last build: its checks, marts and dashboard stand")
    lines.append("rows: " + ", ".join(f"{name} {n:,}" for name, n in summary.rows.items()))
    for row in summary.files_rejected[:20]:
        at = f" at {row['position']}" if row["position"] else ""
        lines.append(f"  rejected {row['source']}/{row['file']}: {row['kind']}: {row['reason']}{at}")
    if len(summary.files_rejected) > 20:
        lines.append(f"  ... and {len(summary.files_rejected) - 20} more (select * from ingest_errors)")
    for check in summary.failed_checks:
        lines.append(f"  FAILED check {check}")
    for check in summary.warned_checks:
        lines.append(f"  warning: check {check} found problems (see reports/validation.html)")
    for step in summary.failed_steps:
        lines.append(f"  FAILED step {step.splitlines()[0][:300]}")
    status = "ok" if summary.exit_code == 0 else "built with rejected input" if summary.exit_code == 3 else "FAILED"
    lines.append(f"status: {status} in {summary.seconds:.1f} s")
    return "\n".join(lines)
