"""Validation as Dagster asset checks on the tables: SQL integrity checks and Great Expectations suites.

One multi-asset check step evaluates every check over every partition of the build's candidate
snapshot (one DuckDB connection, one GX context), writes the build's report
(``reports/validation-<attempt>.html``), keeps the results in the build attempt (the commit records
them), and yields one result per check. Structural checks (keys, uniqueness, references, counts,
accounting, critical expectations) are blocking asset checks: the step runs first in the build's
final run, and when one fails nothing downstream of the tables runs (marts, dashboard, commit) and
the build is not committed; the UI shows them as blocking. Domain checks (warning expectations,
sources in sync) have severity WARN and never block.

The checks look at the whole warehouse, so they run in unpartitioned runs (the build's final run,
or "check" in the UI). A run of one partition of the tables evaluates none of them: half-way through
a build the other partitions are not rebuilt yet, and a cross-partition check would report that.
"""

import dagster as dg

from pipelines import checks, db, validation, validation_report, validation_worker
from pipelines.defs.resources import TracehouseResource
from pipelines.progress import event
from pipelines.state import Attempt
from pipelines.storage import Warehouse
from pipelines.text import markdown_table

CHECKS = checks.all_checks()

CHECK_SPECS = [
    dg.AssetCheckSpec(
        name=check.name,
        asset=check.asset,
        description=check.description,
        blocking=check.blocking,
        metadata={"severity": check.severity, "blocks_commit": check.blocking, "defined_in": check.defined_in},
    )
    for check in CHECKS
]


def _found_files(tracehouse: TracehouseResource) -> dict[str, list[str]]:
    """The files the build's sources hold now, per partition."""
    return {key: [f.relpath for f in part.files] for key, part in tracehouse.partitions().items()}


_RUNS: dict[str, validation.ValidationRun] = {}  # attempt id -> its validation, made once per process


def validate_attempt(
    warehouse: Warehouse, attempt: Attempt, found_files: dict[str, list[str]]
) -> validation.ValidationRun:
    """Every check over the attempt's snapshot; the results and report go into the attempt. Made
    once: the checks' step and the commit step each ask, whichever runs first validates."""
    if attempt.id in _RUNS and attempt.output("validation") is not None:
        return _RUNS[attempt.id]
    con = db.connection(warehouse, attempt.snapshot)
    try:
        run = validation.validate(warehouse, attempt.snapshot, con, found_files)
    finally:
        con.close()
    html_report, json_report = validation_report.write_report(run, warehouse, attempt.id)
    attempt.put_output("validation", {
        "checks": run.results(),
        "report": warehouse.rel(html_report),
        "files": [warehouse.rel(html_report), warehouse.rel(json_report)],
        "seconds": round(run.seconds, 3),
    })
    _RUNS.clear()  # one build at a time per process: keep the latest only
    _RUNS[attempt.id] = run
    return run


def result_for(outcome: checks.Outcome, report: str | None = None) -> dg.AssetCheckResult:
    """The Dagster result of one check: passed, severity, failing count and samples as metadata."""
    metadata: dict[str, object] = {
        "failing": dg.MetadataValue.int(outcome.failing),
        "samples": dg.MetadataValue.md(outcome.samples_markdown()),
        "seconds": dg.MetadataValue.float(round(outcome.seconds, 3)),
    }
    if outcome.expectations:
        rows = [(e.label, e.severity, e.element_count, e.unexpected_count, "yes" if e.success else "NO")
                for e in outcome.expectations]
        table = markdown_table(["expectation", "severity", "rows", "unexpected", "passed"], rows, 200)
        metadata["expectations"] = dg.MetadataValue.md(table)
    if outcome.error:
        metadata["error"] = dg.MetadataValue.text(outcome.error)
    if report:
        metadata["report"] = dg.MetadataValue.path(report)
    return dg.AssetCheckResult(
        asset_key=outcome.check.asset,
        check_name=outcome.check.name,
        passed=outcome.passed,
        severity=dg.AssetCheckSeverity.ERROR if outcome.check.blocking else dg.AssetCheckSeverity.WARN,
        metadata=metadata,
        description=outcome.check.description,
    )


def checked(tracehouse: TracehouseResource, attempt: Attempt) -> validation.ValidationRun:
    """The attempt's validation (made now if no step made it yet), with progress lines."""
    if attempt.id in _RUNS:
        return validate_attempt(tracehouse.wh, attempt, _found_files(tracehouse))
    tracehouse.say(event("checks_started", partitions=len(attempt.snapshot.partitions)))
    validation_worker.wait_for_worker(tracehouse.wh, tracehouse.say)
    run = validate_attempt(tracehouse.wh, attempt, _found_files(tracehouse))
    tracehouse.say(event("checks_done", checks=len(run.outcomes), seconds=run.seconds,
                         blocking_failures=len(run.blocking_failures), warnings=len(run.warnings)))
    return run


@dg.multi_asset_check(
    specs=CHECK_SPECS,
    can_subset=True,
    name="validate_tables",
    description="Every integrity check and expectation suite over every partition of the build; "
    "writes the build's validation report. An error check that fails stops the build's commit.",
)
def validate_tables(context: dg.AssetCheckExecutionContext, tracehouse: TracehouseResource):
    if context.has_partition_key:
        context.log.info("validation covers every partition: it runs in an unpartitioned run, not in this one")
        return
    warehouse = tracehouse.wh
    attempt = tracehouse.attempt_for(context)
    if not attempt.snapshot.partitions:
        raise RuntimeError(f"nothing to validate: the build of {warehouse.root} has no partition")
    run = checked(tracehouse, attempt)
    report = warehouse.path(attempt.output("validation")["report"])
    context.log.info(
        f"validation: {len(run.outcomes)} checks, {len(run.blocking_failures)} blocking failures, "
        f"{len(run.warnings)} warnings, {run.seconds:.2f} s; report {report}"
    )
    selected = context.selected_asset_check_keys
    for outcome in run.outcomes:
        key = dg.AssetCheckKey(dg.AssetKey(outcome.check.asset), outcome.check.name)
        if key in selected:
            yield result_for(outcome, str(report))


defs = dg.Definitions(asset_checks=[validate_tables])
