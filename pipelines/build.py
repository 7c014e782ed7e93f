"""One build, in-process through Dagster: a run per source split whose files changed, then one run
for the checks, marts and dashboard that ends by committing the build, then a summary.

Nothing a build writes is visible before its commit (pipelines.state): a build killed at any point
leaves the previous committed state whole, and the next build adopts what the killed one finished.
Only one build may run on a warehouse at a time (pipelines.locks); readers are never locked out.
"""

from __future__ import annotations

import importlib
import json
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import dagster as dg

from pipelines import db, remote, schema, validation_worker
from pipelines.attribution import load_cases
from pipelines.commit import catch_up
from pipelines.config import Settings, SourceUnavailable, pictures_option, recorded_form, resolve_sources
from pipelines.defs import build_definitions
from pipelines.defs.partitions import source_splits
from pipelines.defs.resources import TracehouseResource, pinned_listing
from pipelines.executors import IN_PROCESS, ExecutorSettings
from pipelines.fanout import flatten_ahead
from pipelines.ingest import release_freed_memory
from pipelines.locks import BuildLocked, build_lock
from pipelines.plan import (
    PartitionFiles,
    claimed_before,
    decide,
    emptied_message,
    emptied_sources,
    fitting,
    generation_state,
    in_order,
    manifest_of,
    reads_cases,
)
from pipelines.readers import tier
from pipelines.records import BuildRecord
from pipelines.run_history import build_instance
from pipelines.state import Attempt, CommitLog, collect_garbage, inputs_digest
from pipelines.step_errors import cause, strict_cause
from pipelines.storage import Warehouse, write_atomic

__all__ = ["BuildLocked", "BuildSummary", "StrictBuildError", "format_summary", "run_build"]

FAILED_BUILD = ".failed_build.json"  # the inputs and failures of the last build that did not commit


def _run_config(verbose: bool) -> dict:
    """Dagster's console logger: its errors (with stack traces) only with --verbose; the build's own
    summary names every failure in one line."""
    return {"loggers": {"console": {"config": {"log_level": "ERROR" if verbose else "CRITICAL"}}}}


@dataclass
class BuildSummary:
    warehouse: Path
    remote: str | None = None  # the s3:// URL of a warehouse on object storage (``warehouse``: its working copy)
    build: int | None = None  # the committed build this summary describes
    partitions_built: list[str] = field(default_factory=list)
    partitions_unchanged: list[str] = field(default_factory=list)
    partitions_adopted: list[str] = field(default_factory=list)  # finished by a build that was killed
    partitions_removed: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    files_found: int = 0
    files_rejected: list[dict] = field(default_factory=list)
    failed_checks: list[str] = field(default_factory=list)
    warned_checks: list[str] = field(default_factory=list)
    failed_steps: list[str] = field(default_factory=list)
    report: str | None = None  # the validation report of this build (committed or not)
    seconds: float = 0.0
    dagster_seconds: float = 0.0  # recording the build in the warehouse's Dagster instance
    code: str = ""
    checked: bool = False  # the checks, marts and dashboard ran (not skipped: nothing had changed)
    committed: bool = False  # this build committed ``build`` (even if publishing it failed after)

    @property
    def ok(self) -> bool:
        return not self.failed_checks and not self.failed_steps

    @property
    def exit_code(self) -> int:
        """0: clean; 1: a check or step failed; 3: built, but some input could not be loaded."""
        if not self.ok:
            return 1
        return 3 if self.files_rejected else 0


# A split of at least this many bytes gives its freed heap back when it is flattened (the peak of the
# splits after it, and of the rest of the build, no longer stacks on it); after smaller ones the next
# split would only fault the pages in again (0.35 s on the 1.1 GB corpus when done after every split).
RELEASE_AFTER_BYTES = 256 << 20

# While a split holding a file of at least this many bytes is flattened, the Great Expectations
# worker (validation_worker.Prevalidation, ~300 MB resident) is not started: its memory would stack on the
# flattening's peak, and for such a file the flattening outlasts the worker's start anyway. On the
# benchmark's large corpus (its largest file 448 MB; budget 3x that + 500 MB = 1844 MB) the process
# tree peaked at 1864-1891 MB with the worker beside that file, 1704-1797 MB held (3 interleaved
# rounds each, with ingest.MEMORY_BUDGET_FILES at 3; at 2, 1276-1306 MB held).
HEAVY_FILE_BYTES = 128 << 20


def heavy_splits(listing: dict[str, PartitionFiles]) -> list[str]:
    """Keys of the splits holding a file of at least HEAVY_FILE_BYTES, in the order a build decides them."""
    return [key for key in in_order(listing) if any(f.size >= HEAVY_FILE_BYTES for f in listing[key].files)]


class StrictBuildError(RuntimeError):
    """--strict stopped the build at the first bad file."""


_CODE_DIGEST: tuple[tuple, str] = ((), "")  # the last fingerprint, after the files' paths, sizes and mtimes


def code_fingerprint() -> str:
    """Every file the outputs are made by (Python, SQL, suites, seeds): a build after a code change
    runs the checks, marts and dashboard even when no input changed. Hashed again only when a file's
    size or mtime changed (a process that builds again and again, as ``tracehouse watch``, read and
    hashed every file each round: 0.05 s of a 0.4 s round)."""
    paths = [
        path
        for folder in ("pipelines", "dashboards", "sql", "expectations")
        for path in sorted((db.REPO / folder).rglob("*"))
        if path.suffix in {".py", ".sql", ".json", ".csv", ".yml", ".j2", ".css", ".js"}
        and "__pycache__" not in path.parts
    ]
    stamp = tuple((str(path), stat.st_size, stat.st_mtime_ns) for path in paths for stat in (path.stat(),))
    global _CODE_DIGEST
    if _CODE_DIGEST[0] != stamp:
        _CODE_DIGEST = (stamp, db.files_digest(paths).hexdigest())
    return _CODE_DIGEST[1]


def run_build(
    settings: Settings,
    *,
    full: bool = False,
    strict: bool = False,
    progress: bool = True,
    out: TextIO = sys.stderr,
    instance: dg.DagsterInstance | None = None,
    keep_failed: bool = False,
    remove_sources: list[str] | tuple[str, ...] = (),
    verbose: bool = False,
    record_in_dagster: bool = True,
    pictures: str | None = None,
    executor: ExecutorSettings | None = None,
) -> BuildSummary:
    """Build what changed and commit it (skipped when the last committed build covers exactly the
    current files, sources and code). ``instance`` runs the steps (default: an in-memory one); a
    long-lived caller such as ``tracehouse watch`` passes one for all its builds, and
    ``keep_failed`` so that a build that failed is not run again, round after round, while nothing
    changes (its failures are reported again). ``pictures`` (none | svg | png, default
    $TRACEHOUSE_PICTURES, else none) asks for the drill-down pictures and PNGs besides the failure
    views. ``executor`` (default: in-process) runs the flattening of the changed graph partitions as
    steps on a Dask cluster first (pipelines.fanout). Raises ConfigError for sources it must not use."""
    started = time.monotonic()
    pictures = pictures_option(pictures)
    warehouse = Warehouse(settings.warehouse)
    summary = BuildSummary(warehouse.root, settings.remote, code=code_fingerprint())
    instance = instance or build_instance()
    events: list = []
    record: BuildRecord | None = None
    with build_lock(warehouse), validation_worker.prevalidation(warehouse) as pre:
        if settings.remote:  # an s3:// warehouse: take the store's committed builds first
            remote.pull(warehouse.root, lambda line: _say(out, progress, line), prune=True)
        last = catch_up(warehouse)  # root copies of a commit whose publishing a kill interrupted
        sources = resolve_sources(settings.sources, last.sources if last else None, warehouse.root, remove_sources,
                                  settings.storage)
        committed = last.snapshot.partitions if last else {}
        for source in sources:
            if source.url:
                try:
                    synced = remote.sync_source(source.url, source.path, settings.storage,
                                                lambda line: _say(out, progress, line))
                except remote.EmptySource:
                    if emptied := emptied_sources([source], {}, committed):
                        raise SourceUnavailable(emptied_message(source, emptied[source.name], last.build)) from None
                    raise
                _say(out, progress, f"source {source.name}: {synced.downloaded} objects downloaded, "
                     f"{synced.kept} unchanged, {synced.deleted} deleted since the last sync")
        resource = TracehouseResource.for_sources(warehouse, sources, full=full, strict=strict, progress=progress)
        sample = {warehouse.corpus_dir, *(s.path for s in sources if s.path.parent == warehouse.sample_predictions_dir)}
        if any(s.path in sample for s in sources) and not warehouse.corpus_dir.is_dir():
            from pipelines.sample.archive import ARCHIVE

            how = "unpacking the shipped" if ARCHIVE.is_file() else "generating the"
            _say(out, progress, f"{how} default sample corpus into {warehouse.corpus_dir}")
        missing = [s for s in sources if s.path not in sample and not s.path.exists()]
        if missing:
            s = missing[0]
            raise SourceUnavailable(f"source {s.name}: {s.path} does not exist (restore it, give its new place with "
                                    f"--source {s.name}:{s.kind}=PATH, or drop it with --remove-source {s.name})")
        listing = resource.discover()
        for name, keys in emptied_sources(sources, listing, committed).items():
            source = next(s for s in sources if s.name == name)
            raise SourceUnavailable(emptied_message(source, keys, last.build if last else None))
        summary.files_found = sum(len(p.files) for p in listing.values())
        if not listing:
            raise RuntimeError("no input files were found in the sources; nothing to build")
        attempt = Attempt.start(warehouse, last)
        attempt.sources = [recorded_form(s, warehouse.root) for s in sources]
        attempt.code = summary.code
        resource = TracehouseResource.for_sources(warehouse, sources, attempt=attempt.id, full=full, strict=strict,
                                                  progress=progress, pictures=pictures)
        jobs = BuildJobs(build_definitions(resource), resource)
        run_config = _run_config(verbose)
        with pinned_listing(resource, listing):
            _flatten(warehouse, resource, listing, attempt, last, instance, jobs, run_config, summary, full,
                     progress, out, pre, executor or IN_PROCESS, removed_on_request=set(remove_sources))
            if strict and (rejected := rejected_inputs(warehouse, attempt.snapshot)):
                attempt.discard()  # its generations stay, for the build after the files are mended
                raise StrictBuildError(_carried_over(rejected))
            release_freed_memory()  # what flattening freed, before the marts and the dashboard
            fingerprints = {key: part.fingerprint for key, part in attempt.snapshot.partitions.items()}
            # pictures asked for are part of what a build makes: a build that asks for more is not a no-op
            code = summary.code if pictures == "none" else f"{summary.code}+pictures={pictures}"
            attempt.inputs = inputs_digest(code, attempt.sources, fingerprints)
            attempt.summary = {
                "files_found": summary.files_found,
                "partitions_built": summary.partitions_built,
                "partitions_adopted": summary.partitions_adopted,
                "partitions_removed": summary.partitions_removed,
            }
            attempt.save()
            if not full and last is not None and last.inputs == attempt.inputs and (
                    attempt.snapshot.partitions == last.snapshot.partitions):
                _say(out, progress, f"nothing changed: build {last.build} stands (its checks, marts and dashboard)")
                attempt.discard()
                collect_garbage(warehouse)  # what a build killed after its commit left behind
                _describe(warehouse, last, summary)
            elif keep_failed and (failed := _failed_before(warehouse, attempt.inputs)) is not None:
                attempt.discard()
                summary.failed_checks, summary.failed_steps = failed["failed_checks"], failed["failed_steps"]
                summary.report = failed.get("report")
                summary.build = last.build if last else None
            else:
                _say(out, progress, f"checking tables, computing marts and dashboard, committing build {attempt.build}")
                # Altair, which the charts import (0.35 s), is imported meanwhile, while the first marts
                # wait on DuckDB (which releases the GIL)
                threading.Thread(target=importlib.import_module, args=("altair",), daemon=True).start()
                # and the steps' shared DuckDB database made (seeds, macros, views: 0.2 s) while Dagster
                # plans the run
                threading.Thread(target=db.prepare, args=(warehouse, attempt.snapshot), daemon=True).start()
                if record_in_dagster:  # open the warehouse's Dagster event log meanwhile
                    from pipelines.run_history import history_for

                    opening = threading.Thread(target=history_for, args=(warehouse,), daemon=True)
                    opening.start()
                events = _materialize(jobs.job(jobs.FINAL), instance, summary, run_config)
                summary.checked = True
                record = CommitLog(warehouse).latest()
                validated = attempt.output("validation") or {}
                if record is not None and record.attempt == attempt.id:
                    (warehouse.root / FAILED_BUILD).unlink(missing_ok=True)
                    attempt.discard()
                    _describe(warehouse, record, summary, after_steps=True)
                    summary.committed = True
                else:
                    if not summary.failed_checks and not summary.failed_steps:
                        summary.failed_steps.append("committed_build: the build was not committed")
                    summary.report = validated.get("report")
                    summary.build = last.build if last else None
                    write_atomic(warehouse.root / FAILED_BUILD, json.dumps({
                        "inputs": attempt.inputs, "failed_checks": summary.failed_checks,
                        "failed_steps": summary.failed_steps, "report": summary.report,
                    }))
                    record = None
        if summary.checked and record is not None and record_in_dagster:
            from pipelines.run_history import record_build

            rebuilt = summary.partitions_built + summary.partitions_adopted
            summary.dagster_seconds = record_build(warehouse, record, rebuilt, summary.partitions_removed, events)
    summary.seconds = time.monotonic() - started
    return summary


def _flatten(
    warehouse: Warehouse,
    resource: TracehouseResource,
    listing: dict[str, PartitionFiles],
    attempt: Attempt,
    last: BuildRecord | None,
    instance: dg.DagsterInstance,
    jobs: BuildJobs,
    run_config: dict,
    summary: BuildSummary,
    full: bool,
    progress: bool,
    out: TextIO,
    pre: validation_worker.Prevalidation,
    executor: ExecutorSettings = IN_PROCESS,
    removed_on_request: set[str] | frozenset[str] = frozenset(),
) -> None:
    """Decide every partition in key order (graph ids are claimed first come first served) and
    flatten the ones no complete generation fits; the attempt's snapshot ends up holding them all.
    Partitions no longer listed are dropped: those of a source ``removed_on_request``
    (--remove-source), and splits whose files were all deleted from a source that still has others
    (a source with none left never gets here: :func:`pipelines.plan.emptied_sources`)."""
    snapshot = attempt.snapshot
    committed = last.snapshot.partitions if last else {}
    for key in [k for k in sorted(snapshot.partitions) if k not in listing]:
        source = snapshot.partitions[key].source
        why = (f"source {source} removed on request" if source in removed_on_request
               else f"its files were deleted from source {source}")
        _say(out, progress, f"removing {key} ({why})")
        del snapshot.partitions[key]
        summary.partitions_removed.append(key)
    known = set(instance.get_dynamic_partitions(source_splits.name))
    new_keys = [key for key in listing if key not in known]
    if new_keys:
        instance.add_dynamic_partitions(source_splits.name, new_keys)
    cases_digests: dict[int, str] = {}  # tier -> the digest of what the sources before it hold
    heavy_keys = frozenset(heavy_splits(listing))
    heavy = set(heavy_keys)  # the GX worker is held until these are decided (HEAVY_FILE_BYTES)
    if heavy:
        pre.hold()
    if last is None or full:  # it will flatten: Great Expectations loads on the other core meanwhile
        pre.start()
    fanned: dict[str, str] = {}  # partition key -> the generation a step on the cluster wrote for it
    if executor.distributed:
        fanned = flatten_ahead(warehouse, resource, listing, attempt, committed, executor, full=full,
                               say=lambda message: _say(out, progress, message))
    for key in in_order(listing):
        if not heavy:
            pre.release()
        heavy.discard(key)
        part = listing[key]
        context = ""
        if reads_cases(part.source.kind):
            level = tier(part.source.kind)
            if level not in cases_digests:  # the partitions before this tier are all decided: index them once
                attempt.save()
                cases_digests[level] = load_cases(warehouse, snapshot, below=level).digest
            context = cases_digests[level]
        claimed = {} if context else claimed_before(warehouse, snapshot, key)
        if key in fanned and (state := fitting(warehouse, part, fanned[key], claimed)) is not None:
            snapshot.partitions[key] = state  # built by this build, on the cluster; its claims hold
            pre.submit(key, state.generation)
            summary.partitions_built.append(key)
            continue
        decision = decide(warehouse, part, committed.get(key), claimed, full=full, context=context)
        if decision.action == "ingest":
            if key in fanned:
                _say(out, progress, f"{key}: the cluster's generation assumed other graph ids loaded before it")
            attempt.save()  # the run reads the partitions decided before this one
            if key in heavy_keys:  # no worker beside this split's flattening (HEAVY_FILE_BYTES)
                validation_worker.drop_early_worker()
            pre.start()  # a rebuild's first changed split: GX loads on the other core while it is flattened
            _say(out, progress, f"flattening {key} ({len(part.files)} files)")
            _materialize(jobs.job(jobs.FLATTEN), instance, summary, run_config, partition_key=key)
            if key in heavy_keys or sum(f.size for f in part.files) >= RELEASE_AFTER_BYTES:  # not the next split's
                release_freed_memory()
            written = warehouse.generations(key)
            if not written:
                raise RuntimeError(f"partition {key}: flattening left no complete generation")
            snapshot.partitions[key] = generation_state(warehouse, part, written[0])
            pre.submit(key, snapshot.partitions[key].generation)  # GX on the other core, while we go on
            summary.partitions_built.append(key)
            continue
        assert decision.state is not None
        snapshot.partitions[key] = decision.state
        if decision.action == "adopt":
            _say(out, progress, f"taking {key} as an earlier, unfinished build left it (its files are unchanged)")
            summary.partitions_adopted.append(key)
        else:
            summary.partitions_unchanged.append(key)
    pre.release()


class BuildJobs:
    """A build's two jobs over its definitions, resolved once: the flattening of the tables (a run per
    changed split) and everything after it (checks, marts, dashboard, commit). ``dg.materialize``
    makes and resolves a new Definitions, the whole asset graph, for every run it is asked for:
    0.1-0.15 s a run (py-spy, 32-graph corpus)."""

    FLATTEN = "tracehouse_flatten"
    FINAL = "tracehouse_checks_marts_dashboard"

    def __init__(self, defs: dg.Definitions, resource: TracehouseResource) -> None:
        tables = dg.AssetSelection.assets(*schema.TABLES).without_checks()
        downstream = dg.AssetSelection.all() - tables
        checks = dg.AssetSelection.checks_for_assets(*schema.TABLES)
        self.defs = dg.Definitions(
            jobs=[dg.define_asset_job(self.FLATTEN, selection=tables),
                  dg.define_asset_job(self.FINAL, selection=downstream | checks)],
            assets=list(defs.assets or []) + list(defs.asset_checks or []),
            # every asset returns a MaterializeResult, so no output reaches an IO manager; Dagster's
            # default one (pickled files through UPath and fsspec) cost its first run 0.06 s to set up
            resources={"tracehouse": resource, "io_manager": dg.mem_io_manager},
        )

    def job(self, name: str) -> dg.JobDefinition:
        return self.defs.resolve_job_def(name)


def _materialize(
    job: dg.JobDefinition,
    instance: dg.DagsterInstance,
    summary: BuildSummary,
    run_config: dict,
    partition_key: str | None = None,
) -> list:
    """Run one job in-process; collect failures into ``summary``; return the materializations and
    check results it produced."""
    result = job.execute_in_process(
        run_config=run_config,
        instance=instance,
        partition_key=partition_key,
        raise_on_error=False,
        tags={"tracehouse/cli": "build"},
    )
    produced = []
    for event in result.all_events:
        if event.event_type_value == "ASSET_MATERIALIZATION":
            produced.append(event.event_specific_data.materialization)
        elif event.event_type_value == "ASSET_CHECK_EVALUATION":
            evaluation = event.event_specific_data
            produced.append(evaluation)
            if not evaluation.passed:
                name = f"{evaluation.asset_key.to_user_string()}:{evaluation.check_name}"
                warn = evaluation.severity == dg.AssetCheckSeverity.WARN
                (summary.warned_checks if warn else summary.failed_checks).append(name)
        elif event.event_type_value == "STEP_FAILURE":
            error = event.event_specific_data.error
            strict = strict_cause(error)
            if strict:
                raise StrictBuildError(strict)
            summary.failed_steps.append(f"{event.step_key}: {cause(error)}")
    return produced




def rejected_inputs(warehouse: Warehouse, snapshot) -> list[dict]:
    """The rejected files and records (ingest_errors' rows with rejected true) of a snapshot's
    partitions, from their manifests: rejected by this build or carried over from an earlier one
    whose generation a partition keeps (its files unchanged)."""
    rejected = []
    for key in sorted(snapshot.partitions):
        manifest = manifest_of(warehouse, snapshot.partitions[key].generation) or {}
        rejected += [error for entry in manifest.get("files", []) for error in entry["errors"] if error["rejected"]]
    return rejected


def _carried_over(rejected: list[dict]) -> str:
    """--strict on input an earlier build rejected: the first such file, why, and how many more."""
    first = rejected[0]
    at = f" at {first['position']}" if first.get("position") else ""
    more = len(rejected) - 1
    others = f"; and {more} more rejected (tracehouse sql \"select * from ingest_errors\")" if more else ""
    return (f"{first['source']}/{first['file']}: {first['kind']}: {first['reason']}{at} (rejected when an earlier "
            f"build read it; unchanged since){others}")


def _failed_before(warehouse: Warehouse, inputs: str) -> dict | None:
    try:
        failed = json.loads((warehouse.root / FAILED_BUILD).read_text())
    except (OSError, ValueError):
        return None
    return failed if failed.get("inputs") == inputs else None


def _describe(warehouse: Warehouse, record: BuildRecord, summary: BuildSummary, after_steps: bool = False) -> None:
    """Fill the summary with what the committed build ``record`` holds (``after_steps``: read from the
    database the build's steps set up; otherwise from a database with that one view, not every view,
    seed and macro: 0.1 s of a build that found nothing changed)."""
    summary.build = record.build
    rows = record.summary.get("rows", {})
    summary.rows = {table: rows[table] for table in schema.TABLES if table in rows}
    summary.warned_checks = summary.warned_checks or [
        f"{c['asset']}:{c['name']}" for c in record.checks if not c["passed"] and c["severity"] == "warn"
    ]
    summary.report = record.report
    con = db.connection(warehouse, record.snapshot) if after_steps else db.tables_connection(
        warehouse, record.snapshot, ["ingest_errors"])
    try:
        rejected = con.execute(
            "select source, split, file, kind, reason, position from ingest_errors where rejected order by all"
        ).fetchall()
    finally:
        con.close()
    cols = ("source", "split", "file", "kind", "reason", "position")
    summary.files_rejected = [dict(zip(cols, row, strict=True)) for row in rejected]


def _say(out: TextIO, progress: bool, message: str) -> None:
    if progress:
        print(f"tracehouse: {message}", file=out, flush=True)


def format_summary(summary: BuildSummary) -> str:
    lines = [f"warehouse: {summary.remote} (working copy {summary.warehouse})" if summary.remote
             else f"warehouse: {summary.warehouse}"]
    adopted = len(summary.partitions_adopted)
    adopted = f", {adopted} taken from an unfinished build" if adopted else ""
    lines.append(
        f"partitions: {len(summary.partitions_built)} built, {len(summary.partitions_unchanged)} unchanged"
        f"{adopted}, {len(summary.partitions_removed)} removed"
    )
    lines.append(f"files: {summary.files_found} found, {len(summary.files_rejected)} rejected")
    if summary.ok and not summary.checked:
        lines.append(f"nothing changed since build {summary.build}: its checks, marts and dashboard stand")
    if summary.rows:
        lines.append("rows: " + ", ".join(f"{name} {n:,}" for name, n in summary.rows.items()))
    for row in summary.files_rejected[:20]:
        at = f" at {row['position']}" if row["position"] else ""
        lines.append(f"  rejected {row['source']}/{row['file']}: {row['kind']}: {row['reason']}{at}")
    if len(summary.files_rejected) > 20:
        lines.append(f"  ... and {len(summary.files_rejected) - 20} more (select * from ingest_errors)")
    for check in summary.failed_checks:
        lines.append(f"  FAILED check {check}")
    for check in summary.warned_checks:
        lines.append(f"  warning: check {check} found problems")
    for step in summary.failed_steps:
        lines.append(f"  FAILED step {step.splitlines()[0][:300]}")
    if summary.report and (summary.failed_checks or summary.warned_checks):
        lines.append(f"  validation report: {summary.warehouse / summary.report}")
    if summary.ok:
        status = "ok" if summary.exit_code == 0 else "built with rejected input (select * from ingest_errors)"
        lines.append(f"status: {status}; build {summary.build} committed in {summary.seconds:.1f} s"
                     if summary.checked else f"status: {status} in {summary.seconds:.1f} s")
    elif summary.committed:  # e.g. an Iceberg catalog that could not be reached
        lines.append(f"status: FAILED in {summary.seconds:.1f} s; build {summary.build} was committed, but publishing "
                     "it did not finish (the next build publishes it again first)")
    else:
        stands = f"; build {summary.build} stands" if summary.build else ""
        lines.append(f"status: FAILED in {summary.seconds:.1f} s; nothing was committed{stands}")
    return "\n".join(lines)
