"""Validation as Dagster asset checks on the tables: SQL integrity checks and Great Expectations suites.

One multi-asset check step evaluates every check over ALL published partitions (one DuckDB
connection, one GX context), writes ``<warehouse>/reports/validation.html``, and yields one result
per check. Structural checks (keys, uniqueness, references, counts, accounting, critical
expectations) are blocking: when one fails, nothing downstream of the tables runs in that run.
Domain checks (warning expectations, sources in sync) have severity WARN and never block.

The checks look at the whole warehouse, so they run in unpartitioned runs (the build's final run,
or "check" in the UI). A run of one partition of the tables evaluates none of them: half-way through
a build the other partitions are not rebuilt yet, and a cross-partition check would report that.
"""

import dagster as dg

from pipelines import db, validation
from pipelines.defs.resources import TracehouseResource
from pipelines.validation.checks import md_cell
from pipelines.validation.report import write_report

SPECS = validation.all_specs()

CHECK_SPECS = [
    dg.AssetCheckSpec(
        name=spec.name,
        asset=spec.asset,
        description=spec.description,
        blocking=spec.blocking,
        metadata={"severity": spec.severity, "defined_in": spec.path or ""},
    )
    for spec in SPECS
]


def _found_files(tracehouse: TracehouseResource) -> dict[str, list[str]] | None:
    """The files the configured sources hold now, per partition; None when there is nothing to compare
    (no sources configured and no sample corpus: discovering would generate one)."""
    if not tracehouse.sources and not tracehouse.wh.corpus_dir.is_dir():
        return None
    return {key: [f.relpath for f in part.files] for key, part in tracehouse.partitions().items()}


def result_for(outcome: validation.CheckOutcome, report: str | None = None) -> dg.AssetCheckResult:
    """The Dagster result of one check: passed, severity, failing count and samples as metadata."""
    metadata: dict[str, object] = {
        "failing": dg.MetadataValue.int(outcome.failing),
        "samples": dg.MetadataValue.md(outcome.samples_markdown()),
        "seconds": dg.MetadataValue.float(round(outcome.seconds, 3)),
    }
    if outcome.expectations:
        rows = ["| expectation | severity | rows | unexpected | passed |", "|---|---|---|---|---|"]
        rows += [
            f"| {md_cell(e.label)} | {e.severity} | {e.element_count} | {e.unexpected_count} | "
            f"{'yes' if e.success else '**no**'} |"
            for e in outcome.expectations
        ]
        metadata["expectations"] = dg.MetadataValue.md("\n".join(rows))
    if outcome.error:
        metadata["error"] = dg.MetadataValue.text(outcome.error)
    if report:
        metadata["report"] = dg.MetadataValue.path(report)
    return dg.AssetCheckResult(
        asset_key=outcome.spec.asset,
        check_name=outcome.spec.name,
        passed=outcome.passed,
        severity=dg.AssetCheckSeverity.ERROR if outcome.spec.blocking else dg.AssetCheckSeverity.WARN,
        metadata=metadata,
        description=outcome.spec.description,
    )


@dg.multi_asset_check(
    specs=CHECK_SPECS,
    can_subset=True,
    name="validate_tables",
    description="Every integrity check and expectation suite over all published partitions; "
    "writes reports/validation.html.",
)
def validate_tables(context: dg.AssetCheckExecutionContext, tracehouse: TracehouseResource):
    if context.has_partition_key:
        context.log.info("validation covers every partition: it runs in an unpartitioned run, not in this one")
        return
    warehouse = tracehouse.wh
    if not warehouse.partitions():
        raise RuntimeError(f"nothing to validate: {warehouse.root} has no published partition")
    con = db.scratch(warehouse, with_marts=False)
    try:
        run = validation.validate_warehouse(warehouse, con, found_files=_found_files(tracehouse))
    finally:
        con.close()
    report = write_report(run, warehouse)
    context.log.info(
        f"validation: {len(run.outcomes)} checks, {len(run.blocking_failures)} blocking failures, "
        f"{len(run.warnings)} warnings, {run.seconds:.2f} s; report {report}"
    )
    selected = context.selected_asset_check_keys
    for outcome in run.outcomes:
        key = dg.AssetCheckKey(dg.AssetKey(outcome.spec.asset), outcome.spec.name)
        if key in selected:
            yield result_for(outcome, str(report))


defs = dg.Definitions(asset_checks=[validate_tables])
