"""Analytics: every mart declared in sql/marts/_marts.yml (computed by pipelines.analytics.marts) as an asset of one
multi-asset step, with the mart's declared tests as blocking asset checks.

One step, not one per mart: the in-process executor runs steps one after another anyway, and every
step costs a run events and questions to the event log (BENCHMARKS.md, "fewer, larger steps"). The
step computes the selected marts in dependency order (pipelines.analytics.catalog.mart_order); a mart whose SQL
fails does not stop the others, but fails the step, naming it, after them.

An asset's description, columns and tests come from the declaration; its upstream tables and marts
from what its SQL reads, directly or through the macros it calls (pipelines.analytics.catalog.tables_read and
marts_read, derived from the SQL). A new mart is a SQL file and its entry in _marts.yml; its asset
appears by itself.
"""

import dagster as dg
import pyarrow.parquet as pq

from pipelines.analytics import catalog
from pipelines.analytics.marts import build_mart
from pipelines.defs.resources import TracehouseResource, run_attempt
from pipelines.progress import event
from pipelines.text import markdown_table
from pipelines.validation.checks import Outcome
from pipelines.validation.validate import test_mart

PREVIEW_ROWS = 10
TESTS_CHECK = "declared_tests"  # each mart's one check: the tests _marts.yml declares for it


def mart_spec(mart: catalog.Mart) -> dg.AssetSpec:
    """The asset of one mart: its upstream tables and marts, description and SQL file."""
    return dg.AssetSpec(
        mart.name,
        group_name="analytics",
        kinds={"duckdb", "parquet"},
        deps=[dg.AssetKey(name) for name in [*sorted(catalog.tables_read(mart.name)), *catalog.marts_read(mart.name)]],
        description=mart.description,
        metadata={"sql_file": f"sql/marts/{mart.name}.sql", "grain": ", ".join(mart.grain)},
        skippable=True,
    )


def _materialized(mart: catalog.Mart, out) -> dg.MaterializeResult:
    """A mart's materialization: rows, file, time, column schema and the first rows."""
    head = pq.ParquetFile(out.path)
    columns = [dg.TableColumn(f.name, str(f.type), description=mart.columns.get(f.name)) for f in head.schema_arrow]
    first = head.schema_arrow.empty_table()
    if head.num_row_groups:
        first = head.read_row_group(0).slice(0, PREVIEW_ROWS)
    preview = markdown_table(first.column_names, [list(row.values()) for row in first.to_pylist()])
    return dg.MaterializeResult(
        asset_key=mart.name,
        metadata={
            "rows": out.rows,
            "dagster/row_count": out.rows,
            "path": str(out.path),
            "bytes": out.path.stat().st_size,
            "seconds": round(out.seconds, 3),
            "computed": out.computed,
            "preview": dg.MetadataValue.md(preview),
            "dagster/column_schema": dg.TableSchema(columns=columns),
        },
    )


def tests_spec(mart: catalog.Mart) -> dg.AssetCheckSpec:
    """One blocking check per mart holding all its declared tests, as a GX suite is one check of a
    table: a check per test would cost every build three events a test in the run (BENCHMARKS.md)."""
    return dg.AssetCheckSpec(TESTS_CHECK, asset=mart.name, blocking=True,
                             description="; ".join(t.description for t in mart.tests()))


def tests_result(mart: catalog.Mart, outcomes: list[Outcome]) -> dg.AssetCheckResult:
    """The mart's tests as one check result: passed when every test passed; each test's failing rows
    in a table, the first failing test's samples, and the failing tests named."""
    failed = [o for o in outcomes if not o.passed]
    rows = [(o.check.name, o.failing, o.error or "", "yes" if o.passed else "NO") for o in outcomes]
    metadata: dict[str, object] = {
        "tests": dg.MetadataValue.md(markdown_table(["test", "failing rows", "error", "passed"], rows, 200)),
        "failing": dg.MetadataValue.int(sum(o.failing for o in outcomes)),
        "failed_tests": dg.MetadataValue.text(", ".join(o.check.name for o in failed)),
        "seconds": dg.MetadataValue.float(round(sum(o.seconds for o in outcomes), 3)),
    }
    if failed:
        metadata["samples"] = dg.MetadataValue.md(f"{failed[0].check.name}: {failed[0].samples_markdown()}")
    return dg.AssetCheckResult(asset_key=mart.name, check_name=TESTS_CHECK, passed=not failed,
                               severity=dg.AssetCheckSeverity.ERROR, metadata=metadata)


def marts_asset(names: list[str] | tuple[str, ...] | None = None) -> dg.AssetsDefinition:
    """One multi-asset step computing the marts ``names`` (default: every mart), each after the marts it reads."""
    chosen = [catalog.marts()[name] for name in (names if names is not None else catalog.mart_order())]
    order = [name for name in catalog.mart_order() if name in {m.name for m in chosen}]

    @dg.multi_asset(
        name="marts",
        specs=[mart_spec(mart) for mart in chosen],
        check_specs=[tests_spec(mart) for mart in chosen],
        can_subset=True,
        description="Every mart of sql/marts, each after the marts it reads, with its declared tests.",
    )
    def _marts(context: dg.AssetExecutionContext, tracehouse: TracehouseResource):
        warehouse = tracehouse.wh
        attempt = run_attempt(tracehouse, context)
        selected = context.selected_asset_keys
        checks = context.selected_asset_check_keys
        failed: dict[str, str] = {}
        for name in order:
            if dg.AssetKey(name) not in selected:
                continue
            mart = catalog.marts()[name]
            missing = [m for m in catalog.marts_read(name) if m in failed]
            if missing:
                failed[name] = f"not computed: it reads {', '.join(missing)}, which failed"
                continue
            try:
                out = build_mart(warehouse, attempt.snapshot, name)
            except Exception as error:  # the other marts go on; the step fails after them, naming this one
                failed[name] = f"{type(error).__name__}: {error}"
                tracehouse.say(event("mart_failed", mart=name, error=failed[name]))
                continue
            rel = warehouse.rel(out.path)
            attempt.put_output(f"mart.{name}", {"path": rel, "rows": out.rows,
                                                "files": [rel, *(warehouse.rel(f) for f in out.fragments)]})
            kept = "" if out.computed else " (kept)"
            tracehouse.say(event("mart_done", mart=name, rows=out.rows, seconds=out.seconds, kept=kept))
            yield _materialized(mart, out)
            if dg.AssetCheckKey(dg.AssetKey(name), TESTS_CHECK) in checks:
                yield tests_result(mart, test_mart(warehouse, out))
        if failed:
            raise RuntimeError("; ".join(f"mart {name}: {why}" for name, why in failed.items()))

    return _marts


MART_ASSETS = [marts_asset()]

defs = dg.Definitions(assets=MART_ASSETS)
