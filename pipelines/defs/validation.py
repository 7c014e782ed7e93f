"""Validation as Dagster asset checks on the tables: SQL integrity checks and Great Expectations suites.

One multi-asset check step evaluates every check over every partition of the build's candidate
snapshot (one DuckDB connection, one GX context), writes the build's report
(``reports/validation-<attempt>.html``), keeps the results in the build attempt (the commit records
them), and yields one result per table, its asset check ``checks``, listing its checks (their
failing counts, samples and expectations) in its metadata, as a mart's ``declared_tests`` lists its
tests. Each asset check result is three events in the run's log: one per table instead of one per
check keeps most of them out.

Each table's ``checks`` is a blocking asset check. Its result has severity ERROR when one of its
error checks failed (keys, uniqueness, references, counts, accounting, critical expectations): then
nothing downstream of the tables runs (marts, dashboard, commit) and the build is not committed.
When only warn checks failed (warning expectations, sources in sync, unmapped labels) the result has
severity WARN, which Dagster does not block on.

The checks look at the whole build's tables, so they run after the flattening step of the build's run.
"""

import dagster as dg

from pipelines.analytics import db
from pipelines.defs.resources import TracehouseResource, listing, run_attempt
from pipelines.progress import event
from pipelines.storage.state import Attempt
from pipelines.storage.warehouse import Warehouse
from pipelines.text import markdown_table
from pipelines.validation import checks
from pipelines.validation import report as validation_report
from pipelines.validation import validate as validation
from pipelines.validation import worker as validation_worker

CHECKS = checks.all_checks()
ASSET_CHECKS = checks.asset_checks(CHECKS)  # (table, asset check name) -> the checks it reports


def _spec(table: str, name: str, members: list[checks.Check]) -> dg.AssetCheckSpec:
    errors = [c.name for c in members if c.blocking]
    warnings = [c.name for c in members if not c.blocking]
    listed = "; ".join(f"{c.name} ({c.severity}): {c.description}" for c in members)
    return dg.AssetCheckSpec(
        name=name,
        asset=table,
        description=f"{len(errors)} error checks of {table} (one failing stops the build's commit) and "
        f"{len(warnings)} warn checks (reported, never block): {listed}",
        blocking=bool(errors),
        metadata={"blocks_commit": bool(errors), "checks": ", ".join(c.name for c in members),
                  "error_checks": ", ".join(errors), "warning_checks": ", ".join(warnings),
                  "defined_in": ", ".join(dict.fromkeys(c.defined_in for c in members))},
    )


CHECK_SPECS = [_spec(table, name, members) for (table, name), members in ASSET_CHECKS.items()]


def _found_files(tracehouse: TracehouseResource) -> dict[str, list[str]]:
    """The files the build's sources hold now, per partition."""
    return {key: [f.relpath for f in part.files] for key, part in listing(tracehouse).items()}


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


def result_for(outcomes: list[checks.Outcome], report: str | None = None) -> dg.AssetCheckResult:
    """The Dagster result of one table's checks: passed when each passed, severity ERROR when an
    error check failed (it blocks), else WARN; per check its failing count, and the failing ones'
    samples and the suite's expectations, as metadata. ``failed_checks`` and ``warned_checks`` name
    the failed error and warn checks (the build's summary lists them as ``table:check``)."""
    first = outcomes[0].check
    failed = [o for o in outcomes if not o.passed]
    blocking = [o for o in failed if o.check.blocking]
    rows = [(o.check.name, o.check.severity, o.failing, "yes" if o.passed else "NO", o.check.defined_in)
            for o in outcomes]
    samples = "\n\n".join(f"**{o.check.name}**\n\n{o.samples_markdown()}" for o in failed)
    metadata: dict[str, object] = {
        "failing": dg.MetadataValue.int(sum(o.failing for o in outcomes)),
        "failed_checks": dg.MetadataValue.text(", ".join(o.check.name for o in blocking)),
        "warned_checks": dg.MetadataValue.text(", ".join(o.check.name for o in failed if not o.check.blocking)),
        "failing_by_check": dg.MetadataValue.json({o.check.name: o.failing for o in outcomes}),
        "checks": dg.MetadataValue.md(markdown_table(["check", "severity", "failing", "passed", "defined in"], rows,
                                                     200)),
        "samples": dg.MetadataValue.md(samples or "_no failing rows_"),
        "seconds": dg.MetadataValue.float(round(sum(o.seconds for o in outcomes), 3)),
    }
    expectations = [e for o in outcomes for e in o.expectations]
    if expectations:
        lines = [(e.label, e.severity, e.element_count, e.unexpected_count, "yes" if e.success else "NO")
                 for e in expectations]
        table = markdown_table(["expectation", "severity", "rows", "unexpected", "passed"], lines, 200)
        metadata["expectations"] = dg.MetadataValue.md(table)
    if errors := [f"{o.check.name}: {o.error}" for o in outcomes if o.error]:
        metadata["error"] = dg.MetadataValue.text("\n".join(errors))
    if report:
        metadata["report"] = dg.MetadataValue.path(report)
    return dg.AssetCheckResult(
        asset_key=first.asset,
        check_name=first.asset_check,
        passed=not failed,
        severity=dg.AssetCheckSeverity.ERROR if blocking or (not failed and any(o.check.blocking for o in outcomes))
        else dg.AssetCheckSeverity.WARN,
        metadata=metadata,
        description=", ".join(f"{o.check.name} failed ({o.failing})" for o in failed) or "every check passed",
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
    description="Every integrity check and expectation suite over every partition of the build, one "
    "result per table and severity; writes the build's validation report. An error check that fails "
    "stops the build's commit.",
)
def validate_tables(context: dg.AssetCheckExecutionContext, tracehouse: TracehouseResource):
    warehouse = tracehouse.wh
    attempt = run_attempt(tracehouse, context)
    if not attempt.snapshot.partitions:
        raise RuntimeError(f"nothing to validate: the build of {warehouse.root} has no partition")
    run = checked(tracehouse, attempt)
    report = warehouse.path(attempt.output("validation")["report"])
    context.log.info(
        f"validation: {len(run.outcomes)} checks, {len(run.blocking_failures)} blocking failures, "
        f"{len(run.warnings)} warnings, {run.seconds:.2f} s; report {report}"
    )
    selected = context.selected_asset_check_keys
    by_check = {(o.check.asset, o.check.name): o for o in run.outcomes}
    for (table, name), members in ASSET_CHECKS.items():
        if dg.AssetCheckKey(dg.AssetKey(table), name) in selected:
            yield result_for([by_check[(c.asset, c.name)] for c in members], str(report))


defs = dg.Definitions(asset_checks=[validate_tables])
