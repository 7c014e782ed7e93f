"""One build: the source splits whose files changed flattened one after another (their order decides
which file a graph id belongs to), then one Dagster run, in-process, that reports them, runs the
checks, marts and dashboard and ends by committing the build; then a summary.

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
from typing import TextIO

import dagster as dg

from pipelines import db, remote, schema, validation_worker
from pipelines.attribution import load_cases
from pipelines.commit import catch_up
from pipelines.config import (
    Settings,
    Source,
    SourceUnavailable,
    added_sources,
    forget_added,
    generated_paths,
    pictures_option,
    recorded_form,
    refuse_missing,
    resolve_sources,
)
from pipelines.defs import build_definitions
from pipelines.defs.partitions import source_splits
from pipelines.defs.resources import TracehouseResource, pinned_listing
from pipelines.executors import IN_PROCESS, ExecutorSettings
from pipelines.fanout import flatten_ahead
from pipelines.ingest import StrictIngestError, ingest_partition
from pipelines.locks import BuildLocked, build_lock
from pipelines.on_thread import OnThread
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
    previous_generation,
    reads_cases,
)
from pipelines.progress import event
from pipelines.readers import tier
from pipelines.readers.base import Cases
from pipelines.records import BuildRecord
from pipelines.run_history import (
    instance_for,
    prune_runs,
    record_interrupted_commit,
    run_tags,
    settle_interrupted_runs,
)
from pipelines.state import (
    Attempt,
    CommitLog,
    collect_garbage,
    inputs_digest,
    mark_recorded,
    recorded_build,
    sources_to_read,
)
from pipelines.step_errors import cause
from pipelines.storage import Warehouse, write_atomic
from pipelines.summary import BuildSummary, code_fingerprint, describe, format_summary, say

__all__ = ["BuildLocked", "BuildSummary", "StrictBuildError", "format_summary", "run_build"]

FAILED_BUILD = ".failed_build.json"  # the inputs and failures of the last build that did not commit


def _run_config(verbose: bool) -> dict:
    """Dagster's console logger: its errors (with stack traces) only with --verbose; the build's own
    summary names every failure in one line."""
    return {"loggers": {"console": {"config": {"log_level": "ERROR" if verbose else "CRITICAL"}}}}


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
    current files, sources and code). ``instance`` runs the steps (default: the warehouse's own,
    pipelines.run_history, where the UI shows the runs; ``record_in_dagster=False``: an ephemeral one,
    which keeps nothing, for measuring what recording costs); a long-lived caller such as
    ``tracehouse watch`` passes ``keep_failed`` so that a build that failed is not run again, round
    after round, while nothing changes (its failures are reported again). ``pictures`` (none | svg | png, default
    $TRACEHOUSE_PICTURES, else none) asks for the drill-down pictures and PNGs besides the failure
    views. ``executor`` (default: in-process) runs the flattening of the changed graph partitions as
    steps on a Dask cluster first (pipelines.fanout). Raises ConfigError for sources it must not use."""
    started = time.monotonic()
    pictures = pictures_option(pictures)
    warehouse = Warehouse(settings.warehouse)
    summary = BuildSummary(warehouse.root, settings.remote, code=code_fingerprint())
    record: BuildRecord | None = None
    with build_lock(warehouse), validation_worker.prevalidation(warehouse) as pre:
        if settings.remote:  # an s3:// warehouse: take the store's committed builds first
            remote.pull(warehouse.root, lambda line: say(out, progress, line), prune=True)
        last = catch_up(warehouse)  # root copies of a commit whose publishing a kill interrupted
        if last is not None and record_in_dagster and instance is None and recorded_build(warehouse) != last.build:
            record_interrupted_commit(warehouse, last)  # a build killed after its commit, before its run ended
        recorded, unfinished = sources_to_read(warehouse, last, bool(settings.sources))
        if unfinished is not None:
            say(out, progress, event("unfinished_sources", attempt=unfinished.id,
                                     sources=", ".join(f"{r['name']}={r['absolute']}" for r in recorded)))
        sources = resolve_sources(settings.sources, recorded, warehouse.root, remove_sources, settings.storage)
        if remove_sources:  # a source recorded outside a build (tracehouse collect's) must not come back
            forget_added(remove_sources, warehouse.root)
        committed = last.snapshot.partitions if last else {}
        for source in sources:
            if source.url:
                try:
                    synced = remote.sync_source(source.url, source.path, settings.storage,
                                                lambda line: say(out, progress, line))
                except remote.EmptySource:
                    if emptied := emptied_sources([source], {}, committed):
                        raise SourceUnavailable(emptied_message(source, emptied[source.name], last.build)) from None
                    raise
                say(out, progress, event("source_synced", source=source.name, downloaded=synced.downloaded,
                                         kept=synced.kept, deleted=synced.deleted))
        resource = TracehouseResource.for_sources(warehouse, sources, full=full, strict=strict, progress=progress)
        sample = generated_paths(sources, warehouse.root)
        if any(s.path in sample for s in sources) and not warehouse.corpus_dir.is_dir():
            from pipelines.sample.archive import ARCHIVE

            how = "unpacking the shipped" if ARCHIVE.is_file() else "generating the"
            say(out, progress, event("sample_corpus", how=how, path=warehouse.corpus_dir))
        refuse_missing(sources, sample)
        listing = resource.discover()
        for name, keys in emptied_sources(sources, listing, committed).items():
            source = next(s for s in sources if s.name == name)
            raise SourceUnavailable(emptied_message(source, keys, last.build if last else None))
        summary.files_found = sum(len(p.files) for p in listing.values())
        if not listing and _only_empty_landings(sources, warehouse):
            say(out, progress, event("waiting_for_files", sources=", ".join(s.name for s in sources)))
            summary.build = last.build if last else None
            summary.seconds = time.monotonic() - started
            return summary
        if not listing:
            raise RuntimeError("no input files were found in the sources; nothing to build")
        attempt = Attempt.start(warehouse, last)
        attempt.sources = [recorded_form(s, warehouse.root) for s in sources]
        attempt.code = summary.code
        attempt.save()  # its sources, for a build that follows a kill without --source (unfinished_attempt)
        resource = TracehouseResource.for_sources(warehouse, sources, attempt=attempt.id, full=full, strict=strict,
                                                  progress=progress, pictures=pictures)
        job = BuildJob(build_definitions(resource), resource)
        run_config = _run_config(verbose)
        # the warehouse's own instance (or one that keeps nothing) is opened while the splits are
        # flattened: its storage's imports and a new warehouse's databases take 0.6-0.75 s. Not a daemon
        # thread: a build that ends first waits for the open rather than leave a database half made.
        opening = OnThread(_open_instance, warehouse, instance, record_in_dagster, name="dagster-instance",
                           daemon=False)
        job.tags = run_tags(attempt.id, attempt.build)
        with pinned_listing(resource, listing):
            _flatten(warehouse, resource, listing, attempt, last, opening, summary, full, progress, out, pre,
                     executor or IN_PROCESS, removed_on_request=set(remove_sources))
            instance = opening.result()
            if strict and (rejected := rejected_inputs(warehouse, attempt.snapshot)):
                attempt.discard()  # its generations stay, for the build after the files are mended
                raise StrictBuildError(_carried_over(rejected))
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
                say(out, progress, event("nothing_changed", build=last.build))
                attempt.discard()
                collect_garbage(warehouse)  # what a build killed after its commit left behind
                describe(warehouse, last, summary)
            elif keep_failed and (failed := _failed_before(warehouse, attempt.inputs)) is not None:
                attempt.discard()
                summary.failed_checks, summary.failed_steps = failed["failed_checks"], failed["failed_steps"]
                summary.report = failed.get("report")
                summary.build = last.build if last else None
            else:
                say(out, progress, event("final_run", build=attempt.build))
                # Altair, which the charts import (0.35 s), is imported meanwhile, while the first marts
                # wait on DuckDB (which releases the GIL)
                threading.Thread(target=importlib.import_module, args=("altair",), daemon=True).start()
                # and the steps' shared DuckDB database made (seeds, macros, views: 0.2 s) while Dagster
                # plans the run
                threading.Thread(target=db.prepare, args=(warehouse, attempt.snapshot), daemon=True).start()
                _materialize(job, instance, summary, run_config)
                summary.checked = True
                record = CommitLog(warehouse).latest()
                validated = attempt.output("validation") or {}
                if record is not None and record.attempt == attempt.id:
                    (warehouse.root / FAILED_BUILD).unlink(missing_ok=True)
                    attempt.discard()
                    describe(warehouse, record, summary, after_steps=True)
                    summary.committed = True
                    if record_in_dagster and summary.ok:
                        # its run, ended, holds the commit; a run whose publishing failed after the commit
                        # does not, and the next build records it (run_history.record_interrupted_commit)
                        mark_recorded(warehouse, record.build)
                    if record_in_dagster:  # the event log keeps the runs of the builds the warehouse keeps
                        prune_runs(instance, warehouse)
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
    summary.seconds = time.monotonic() - started
    return summary


def _flatten(
    warehouse: Warehouse,
    resource: TracehouseResource,
    listing: dict[str, PartitionFiles],
    attempt: Attempt,
    last: BuildRecord | None,
    opening: OnThread[dg.DagsterInstance],
    summary: BuildSummary,
    full: bool,
    progress: bool,
    out: TextIO,
    pre: validation_worker.Prevalidation,
    executor: ExecutorSettings = IN_PROCESS,
    removed_on_request: set[str] | frozenset[str] = frozenset(),
) -> None:
    """Decide every partition in key order (graph ids are claimed first come first served) and
    flatten the ones no complete generation fits, here, not in a run of their own (the build's one
    run reports them: pipelines.defs.table_events); the attempt's snapshot ends up holding them all.
    Partitions no longer listed are dropped: those of a source ``removed_on_request``
    (--remove-source), and splits whose files were all deleted from a source that still has others
    (a source with none left never gets here: :func:`pipelines.plan.emptied_sources`)."""
    snapshot = attempt.snapshot
    committed = last.snapshot.partitions if last else {}
    for key in [k for k in sorted(snapshot.partitions) if k not in listing]:
        source = snapshot.partitions[key].source
        why = (f"source {source} removed on request" if source in removed_on_request
               else f"its files were deleted from source {source}")
        say(out, progress, event("partition_removed", partition=key, why=why))
        del snapshot.partitions[key]
        summary.partitions_removed.append(key)
    if executor.distributed:  # the cluster's steps run in the instance's partitions: it is ready first
        _instance_ready(opening.result(), listing, summary.partitions_removed)
    cases_by_tier: dict[int, Cases] = {}  # tier -> the annotations the sources before it hold
    heavy_keys = frozenset(heavy_splits(listing))
    heavy = set(heavy_keys)  # the GX worker is held until these are decided (HEAVY_FILE_BYTES)
    if heavy:
        pre.hold()
    if last is None or full:  # it will flatten: Great Expectations loads on the other core meanwhile
        pre.start()
    fanned: dict[str, str] = {}  # partition key -> the generation a step on the cluster wrote for it
    if executor.distributed:
        fanned = flatten_ahead(warehouse, resource, listing, attempt, committed, executor, full=full,
                               say=lambda message: say(out, progress, message))
    for key in in_order(listing):
        if not heavy:
            pre.release()
        heavy.discard(key)
        part = listing[key]
        cases = None
        if reads_cases(part.source.kind):
            level = tier(part.source.kind)
            if level not in cases_by_tier:  # the partitions before this tier are all decided: index them once
                cases_by_tier[level] = load_cases(warehouse, snapshot, below=level)
            cases = cases_by_tier[level]
        context = cases.digest if cases is not None else ""
        claimed = {} if context else claimed_before(warehouse, snapshot, key)
        if key in fanned and (state := fitting(warehouse, part, fanned[key], claimed)) is not None:
            snapshot.partitions[key] = state  # built by this build, on the cluster; its claims hold
            pre.submit(state)
            summary.partitions_built.append(key)
            continue
        decision = decide(warehouse, part, committed.get(key), claimed, full=full, context=context)
        if decision.action == "ingest":
            if key in fanned:
                say(out, progress, event("partition_claims_moved", partition=key))
            if key in heavy_keys:  # no worker beside this split's flattening (HEAVY_FILE_BYTES)
                validation_worker.drop_early_worker()
            pre.start()  # a rebuild's first changed split: GX loads on the other core while it is flattened
            say(out, progress, event("partition_flattening", partition=key, files=len(part.files)))
            try:
                result = ingest_partition(warehouse, key, part.source.kind, part.files,
                                          previous=None if full else previous_generation(warehouse, key),
                                          claimed=claimed, cases=cases, strict=resource.strict,
                                          on_progress=resource.report)
            except StrictIngestError as exc:
                raise StrictBuildError(str(exc)) from None
            except Exception as exc:
                raise RuntimeError(f"partition {key}: flattening failed: {type(exc).__name__}: {exc}") from exc
            snapshot.partitions[key] = generation_state(warehouse, part, result.generation)
            pre.submit(snapshot.partitions[key])  # GX on the other core, while we go on
            summary.partitions_built.append(key)
            continue
        assert decision.state is not None
        snapshot.partitions[key] = decision.state
        if decision.action == "adopt":
            say(out, progress, event("partition_adopted", partition=key))
            summary.partitions_adopted.append(key)
        else:
            summary.partitions_unchanged.append(key)
    pre.release()
    if not executor.distributed:
        _instance_ready(opening.result(), listing, summary.partitions_removed)


def _open_instance(warehouse: Warehouse, given: dg.DagsterInstance | None, record: bool) -> dg.DagsterInstance:
    """The instance the build's runs go to: the caller's, else the warehouse's own, else (``record``
    off) one that keeps nothing."""
    if given is not None:
        return given
    return instance_for(warehouse) if record else dg.DagsterInstance.ephemeral()


def _instance_ready(instance: dg.DagsterInstance, listing: dict[str, PartitionFiles], removed: list[str]) -> None:
    """Before the build's runs: the runs a killed build left "started" reported as failed, and the
    splits' partitions made to match the listing."""
    settle_interrupted_runs(instance)
    known = set(instance.get_dynamic_partitions(source_splits.name))
    for key in removed:
        if key in known:
            instance.delete_dynamic_partition(source_splits.name, key)
    new_keys = [key for key in listing if key not in known]
    if new_keys:
        instance.add_dynamic_partitions(source_splits.name, new_keys)


class BuildJob:
    """A build's job over its definitions: everything after the flattening (the report of the splits
    flattened, checks, marts, dashboard, commit). ``dg.materialize`` makes and resolves a new
    Definitions, the whole asset graph, for every run it is asked for: 0.1-0.15 s a run (py-spy,
    32-graph corpus)."""

    NAME = "tracehouse_build"

    tags: dict[str, str]  # of every run (pipelines.run_history.run_tags)

    def __init__(self, defs: dg.Definitions, resource: TracehouseResource) -> None:
        self.tags = {}
        tables = dg.AssetSelection.assets(*schema.TABLES).without_checks()
        downstream = dg.AssetSelection.all() - tables
        checks = dg.AssetSelection.checks_for_assets(*schema.TABLES)
        self.defs = dg.Definitions(
            jobs=[dg.define_asset_job(self.NAME, selection=downstream | checks)],
            assets=list(defs.assets or []) + list(defs.asset_checks or []),
            # every asset returns a MaterializeResult, so no output reaches an IO manager; Dagster's
            # default one (pickled files through UPath and fsspec) cost its first run 0.06 s to set up
            resources={"tracehouse": resource, "io_manager": dg.mem_io_manager},
        )

    def definition(self) -> dg.JobDefinition:
        return self.defs.resolve_job_def(self.NAME)


def _materialize(job: BuildJob, instance: dg.DagsterInstance, summary: BuildSummary, run_config: dict) -> None:
    """Run the build's job in-process, a run of ``instance``; collect its failures into ``summary``
    (a --strict stop happens before it, while the splits are flattened). Ctrl-C during the run, which
    Dagster turns into a step's DagsterExecutionInterruptedError and the end of the run, is raised
    again as KeyboardInterrupt once the run has ended: an interrupted build, not a failed one."""
    result = job.definition().execute_in_process(
        run_config=run_config,
        instance=instance,
        raise_on_error=False,
        tags=job.tags,
    )
    for dagster_event in result.all_events:
        if dagster_event.event_type_value == "ASSET_CHECK_EVALUATION":
            evaluation = dagster_event.event_specific_data
            if not evaluation.passed:
                warn = evaluation.severity == dg.AssetCheckSeverity.WARN
                (summary.warned_checks if warn else summary.failed_checks).extend(failed_check_names(evaluation))
        elif dagster_event.event_type_value == "STEP_FAILURE":
            error = dagster_event.event_specific_data.error
            if error is not None and error.cls_name == "DagsterAssetCheckFailedError":
                continue  # a blocking check failed: named in failed_checks; the commit did not run
            if error is not None and error.cls_name == dg.DagsterExecutionInterruptedError.__name__:
                raise KeyboardInterrupt  # Ctrl-C: the run has ended, and the build was interrupted
            summary.failed_steps.append(f"{dagster_event.step_key}: {cause(error)}")


def failed_check_names(evaluation: dg.AssetCheckEvaluation) -> list[str]:
    """What a failed asset check names in the summary: a table's checks each as ``table:check``
    (its result lists them in ``failed_checks``), a mart's with its failed tests."""
    asset = evaluation.asset_key.to_user_string()
    if failed_checks := evaluation.metadata.get("failed_checks"):
        return [f"{asset}:{name}" for name in str(failed_checks.value).split(", ")]
    name = f"{asset}:{evaluation.check_name}"
    if failed_tests := evaluation.metadata.get("failed_tests"):  # a mart's declared tests
        name += f" ({failed_tests.value})"
    return [name]


def _only_empty_landings(sources: list[Source], warehouse: Warehouse) -> bool:
    """Every source is one recorded outside a build (tracehouse collect's landing folder), there and
    still empty: nothing to build yet, which is not a failure (a refusal is for a source whose rows a
    build would delete: pipelines.plan.emptied_sources)."""
    added = {entry["name"] for entry in added_sources(warehouse.root)}
    return bool(sources) and all(s.name in added and s.path.is_dir() for s in sources)


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
