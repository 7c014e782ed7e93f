"""One build: its plan made here, before Dagster or Great Expectations are imported (a build with
nothing to do ends there), then one Dagster run, in-process, whose steps flatten what the plan
says, check it, compute the marts and dashboard and end by committing the build; then a summary.

Nothing a build writes is visible before its commit (pipelines.storage.state): a build killed at any point
leaves the previous committed state whole, and the next build adopts what the killed one finished.
Only one build may run on a warehouse at a time (pipelines.storage.locks); readers are never locked out.
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
import threading
import time
from typing import TYPE_CHECKING, TextIO

from pipelines.analytics import crosswalk
from pipelines.builds.commit import catch_up
from pipelines.builds.executors import IN_PROCESS, ExecutorSettings
from pipelines.builds.flattening import (
    Lent,
    build_inputs,
    carried_over,
    heavy_splits,
    lend,
    list_sources,
    rejected_inputs,
)
from pipelines.builds.plan import plan_splits
from pipelines.builds.source_sync import sync_sources
from pipelines.builds.summary import BuildSummary, code_fingerprint, describe, format_summary, say
from pipelines.config import (
    Settings,
    Source,
    added_sources,
    forget_added,
    pictures_option,
    recorded_form,
    sources_for_build,
)
from pipelines.on_thread import OnThread
from pipelines.progress import event
from pipelines.storage import remote
from pipelines.storage.locks import BuildLocked, build_lock
from pipelines.storage.records import BuildRecord, Snapshot
from pipelines.storage.state import Attempt, CommitLog, collect_garbage, mark_recorded, recorded_build, sources_to_read
from pipelines.storage.warehouse import Warehouse, write_atomic
from pipelines.validation import worker as validation_worker

if TYPE_CHECKING:
    import dagster as dg

__all__ = ["BuildLocked", "BuildSummary", "StrictBuildError", "format_summary", "run_build"]

FAILED_BUILD = ".failed_build.json"  # the inputs and failures of the last build that did not commit


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
    early_worker: bool = False,
) -> BuildSummary:
    """Build what changed and commit it (nothing when the last committed build covers exactly the
    current files, sources and code: decided before Dagster is imported). ``instance`` runs the
    steps (default: the warehouse's own, pipelines.builds.run_history, where the UI shows the runs;
    ``record_in_dagster=False``: an ephemeral one, which keeps nothing, for measuring what recording
    costs); a long-lived caller such as ``tracehouse watch`` passes ``keep_failed`` so that a build
    that failed is not run again, round after round, while nothing changes (its failures are
    reported again). ``pictures`` (none | svg | png, default $TRACEHOUSE_PICTURES, else none) asks for
    the drill-down pictures and PNGs besides the failure views. ``executor`` (default: in-process)
    flattens the changed graph splits as steps on a Dask cluster first (pipelines.interfaces.fanout).
    ``early_worker``: start loading Great Expectations in a worker process at once, stopped if
    nothing is flattened (the CLI's choice). Raises ConfigError for sources it must not use."""
    try:
        return _build(settings, full=full, strict=strict, progress=progress, out=out, instance=instance,
                      keep_failed=keep_failed, remove_sources=remove_sources, verbose=verbose,
                      record_in_dagster=record_in_dagster, pictures=pictures, executor=executor,
                      early_worker=early_worker)
    finally:
        validation_worker.drop_early_worker()  # one no build took (nothing to flatten, or a failure)


def _build(settings: Settings, *, full: bool, strict: bool, progress: bool, out: TextIO,
           instance: dg.DagsterInstance | None, keep_failed: bool, remove_sources: list[str] | tuple[str, ...],
           verbose: bool, record_in_dagster: bool, pictures: str | None, executor: ExecutorSettings | None,
           early_worker: bool) -> BuildSummary:
    started = time.monotonic()
    pictures = pictures_option(pictures)
    warehouse = Warehouse(settings.warehouse)
    summary = BuildSummary(warehouse.root, settings.remote, code=code_fingerprint())
    say_line = functools.partial(say, out, progress)  # the build's progress lines
    with build_lock(warehouse):
        if early_worker:  # GX loads on the other core while the plan is made and Dagster imported
            validation_worker.spawn_early_worker()
        if settings.remote:  # an s3:// warehouse: take the store's committed builds first
            remote.pull(warehouse.root, say_line, prune=True)
        last = catch_up(warehouse)  # root copies of a commit whose publishing a kill interrupted
        crosswalk.install(warehouse, settings.config_file)  # checked before reading
        if last is not None and record_in_dagster and instance is None and recorded_build(warehouse) != last.build:
            from pipelines.builds.run_history import record_interrupted_commit

            record_interrupted_commit(warehouse, last)  # a build killed after its commit, before its run ended
        recorded, unfinished = sources_to_read(warehouse, last, bool(settings.sources))
        if unfinished is not None:
            say_line(event("unfinished_sources", attempt=unfinished.id,
                           sources=", ".join(f"{r['name']}={r['absolute']}" for r in recorded)))
        sources = sources_for_build(settings, recorded, warehouse.root, remove_sources)
        if remove_sources:  # a source recorded outside a build (tracehouse collect's) must not come back
            forget_added(remove_sources, warehouse.root)
        committed = last.snapshot.partitions if last else {}
        sync_sources(sources, settings.storage, say_line, committed, last.build if last else None)
        listing = list_sources(warehouse, sources, say_line, committed, last.build if last else None)
        summary.files_found = sum(len(p.files) for p in listing.values())
        if not listing and _only_empty_landings(sources, warehouse):
            say_line(event("waiting_for_files", sources=", ".join(s.name for s in sources)))
            summary.build = last.build if last else None
            summary.seconds = time.monotonic() - started
            return summary
        if not listing:
            raise RuntimeError("no input files were found in the sources; nothing to build")
        opening: OnThread | None = None
        if last is None:  # a first build runs: Dagster loads and its instance opens while the plan is made
            opening = OnThread(_open_instance, warehouse, instance, record_in_dagster, name="dagster-instance",
                               daemon=False)  # a build that ends first waits rather than leave a database half made
        recorded_sources = [recorded_form(s, warehouse.root) for s in sources]
        # the plan, dry: which splits keep or take over a generation, and whether any must be read
        draft = Snapshot(dict(committed))
        plan = plan_splits(warehouse, listing, draft, committed, full=full)
        if not full and not plan.keys("ingest"):  # the plan is exact: no split is read
            if strict and (rejected := rejected_inputs(warehouse, draft)):
                raise StrictBuildError(carried_over(rejected))
            inputs = build_inputs(summary.code, recorded_sources, draft, pictures, crosswalk.digest(warehouse.root))
            if last is not None and last.inputs == inputs and draft.partitions == committed:
                say_line(event("nothing_changed", build=last.build))
                collect_garbage(warehouse)  # what a build killed after its commit left behind
                summary.partitions_unchanged = plan.keys("keep")
                describe(warehouse, last, summary)
                summary.seconds = time.monotonic() - started
                return summary
            if keep_failed and (failed := _failed_before(warehouse, inputs)) is not None:
                summary.failed_checks, summary.failed_steps = failed["failed_checks"], failed["failed_steps"]
                summary.report = failed.get("report")
                summary.build = last.build if last else None
                summary.seconds = time.monotonic() - started
                return summary
        say_line(event("plan_made", read=len(plan.keys("ingest")), splits=len(listing), kept=len(plan.keys("keep")),
                       taken=len(plan.keys("adopt")), removed=len(plan.removed)))
        with validation_worker.prevalidation(warehouse) as pre:
            if plan.keys("ingest") and not heavy_splits(listing):
                pre.start()  # GX loads in its worker while Dagster is imported and the run starts
            _run(warehouse, sources, listing, last, recorded_sources, summary, say_line, pre, instance=instance,
                 full=full, strict=strict, progress=progress, verbose=verbose, record_in_dagster=record_in_dagster,
                 pictures=pictures, executor=executor or IN_PROCESS, removed_on_request=frozenset(remove_sources),
                 opening=opening)
    summary.seconds = time.monotonic() - started
    return summary


def _run(warehouse: Warehouse, sources: list[Source], listing: dict, last: BuildRecord | None,
         recorded_sources: list[dict], summary: BuildSummary, say_line, pre: validation_worker.Prevalidation, *,
         instance: dg.DagsterInstance | None, full: bool, strict: bool, progress: bool, verbose: bool,
         record_in_dagster: bool, pictures: str, executor: ExecutorSettings,
         removed_on_request: frozenset[str], opening: OnThread | None) -> None:
    """The build's Dagster run, started before anything is flattened, and what it leaves: a commit,
    or the failures the summary names."""
    # Altair, which the charts import, loads on a thread while the run flattens (DuckDB and the
    # readers release the GIL)
    threading.Thread(target=importlib.import_module, args=("altair",), daemon=True).start()
    importlib.import_module("dagster")  # the longest wait before the run: its line comes halfway
    say_line(event("final_run", build=(last.build if last else 0) + 1))
    from pipelines.builds.run_history import prune_runs, run_tags
    from pipelines.defs.build_run import build_job, execute
    from pipelines.defs.resources import TracehouseResource

    attempt = Attempt.start(warehouse, last)
    attempt.sources = recorded_sources
    attempt.code = summary.code
    attempt.save()  # its sources, for a build that follows a kill without --source (unfinished_attempt)
    resource = TracehouseResource.for_sources(warehouse, sources, attempt=attempt.id, full=full, strict=strict,
                                              progress=progress, pictures=pictures)
    instance = opening.result() if opening is not None else _open_instance(warehouse, instance, record_in_dagster)
    fanned: dict[str, str] = {}
    if executor.distributed:  # the cluster's steps flatten ahead; the run takes what still fits
        from pipelines.interfaces.fanout import flatten_ahead

        fanned = flatten_ahead(warehouse, resource, listing, attempt, last.snapshot.partitions if last else {},
                               executor, full=full, say=say_line)
    say_line(event("run_starting", build=attempt.build))
    lent = Lent(listing, say_line, pre, fanned, removed_on_request)
    with lend(attempt, lent):
        execute(build_job(resource), instance, summary, run_tags(attempt.id, attempt.build), verbose)
    attempt = Attempt.load(warehouse, attempt.id)
    if stopped := attempt.output("flattening"):
        if stopped["strict"]:
            attempt.discard()  # its generations stay, for the build after the files are mended
            raise StrictBuildError(stopped["stopped"])
        raise RuntimeError(stopped["stopped"])
    done = attempt.summary
    summary.partitions_built = done.get("partitions_built", [])
    summary.partitions_adopted = done.get("partitions_adopted", [])
    summary.partitions_unchanged = done.get("partitions_unchanged", [])
    summary.partitions_removed = done.get("partitions_removed", [])
    summary.checked = True
    record = CommitLog(warehouse).latest()
    validated = attempt.output("validation") or {}
    if record is not None and record.attempt == attempt.id:
        (warehouse.root / FAILED_BUILD).unlink(missing_ok=True)
        attempt.discard()
        describe(warehouse, record, summary, after_steps=True)
        summary.committed = True
        if record_in_dagster and summary.ok:
            # its run, ended, holds the commit; a run whose publishing failed after the commit does
            # not, and the next build records it (run_history.record_interrupted_commit)
            mark_recorded(warehouse, record.build)
        if record_in_dagster:  # the event log keeps the runs of the builds the warehouse keeps
            prune_runs(instance, warehouse)
        return
    if not summary.failed_checks and not summary.failed_steps:
        summary.failed_steps.append("committed_build: the build was not committed")
    summary.report = validated.get("report")
    summary.build = last.build if last else None
    if attempt.inputs:
        write_atomic(warehouse.root / FAILED_BUILD, json.dumps({
            "inputs": attempt.inputs, "failed_checks": summary.failed_checks,
            "failed_steps": summary.failed_steps, "report": summary.report,
        }))


def _open_instance(warehouse: Warehouse, given: dg.DagsterInstance | None, record: bool) -> dg.DagsterInstance:
    from pipelines.defs.build_run import open_instance

    return open_instance(warehouse, given, record)


def _only_empty_landings(sources: list[Source], warehouse: Warehouse) -> bool:
    """Every source is one recorded outside a build (tracehouse collect's landing folder), there and
    still empty: nothing to build yet, which is not a failure (a refusal is for a source whose rows a
    build would delete: pipelines.builds.plan.emptied_sources)."""
    added = {entry["name"] for entry in added_sources(warehouse.root)}
    return bool(sources) and all(s.name in added and s.path.is_dir() for s in sources)


def _failed_before(warehouse: Warehouse, inputs: str) -> dict | None:
    try:
        failed = json.loads((warehouse.root / FAILED_BUILD).read_text())
    except (OSError, ValueError):
        return None
    return failed if failed.get("inputs") == inputs else None
