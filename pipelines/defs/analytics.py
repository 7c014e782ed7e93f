"""Analytics: one asset per mart declared in sql/marts/_marts.yml (computed by pipelines.marts), with
the mart's declared tests as blocking asset checks.

The asset's description, columns and tests come from the declaration; its upstream tables and marts
from its declared ``reads`` (pipelines.catalog.tables_read and marts_read: what the SQL reads, directly
or through the macros it calls). A new mart is a SQL file and its entry in _marts.yml; the asset
appears by itself.
"""

import dagster as dg
import pyarrow.parquet as pq

from pipelines import catalog
from pipelines.defs.resources import TracehouseResource
from pipelines.defs.validation import result_for
from pipelines.marts import build_mart, test_mart
from pipelines.progress import event
from pipelines.text import markdown_table

PREVIEW_ROWS = 10


def mart_asset(mart: catalog.Mart) -> dg.AssetsDefinition:
    tests = mart.tests()

    @dg.asset(
        name=mart.name,
        group_name="analytics",
        kinds={"duckdb", "parquet"},
        deps=[dg.AssetKey(name) for name in [*sorted(catalog.tables_read(mart.name)), *catalog.marts_read(mart.name)]],
        description=mart.description,
        metadata={"sql_file": f"sql/marts/{mart.name}.sql", "grain": ", ".join(mart.grain)},
        check_specs=[dg.AssetCheckSpec(t.name, asset=mart.name, description=t.description, blocking=True)
                     for t in tests],
    )
    def _mart(context: dg.AssetExecutionContext, tracehouse: TracehouseResource):
        warehouse = tracehouse.wh
        attempt = tracehouse.attempt_for(context)
        out = build_mart(warehouse, attempt.snapshot, mart.name)
        rel = warehouse.rel(out.path)
        attempt.put_output(f"mart.{mart.name}", {"path": rel, "rows": out.rows,
                                                 "files": [rel, *(warehouse.rel(f) for f in out.fragments)]})
        context.log.info(f"{mart.name}: {out.rows} rows in {out.seconds:.2f} s -> {out.path}")
        kept = "" if out.computed else " (kept)"
        tracehouse.say(event("mart_done", mart=mart.name, rows=out.rows, seconds=out.seconds, kept=kept))
        head = pq.ParquetFile(out.path)
        columns = [dg.TableColumn(f.name, str(f.type), description=mart.columns.get(f.name))
                   for f in head.schema_arrow]
        first = head.schema_arrow.empty_table()
        if head.num_row_groups:
            first = head.read_row_group(0).slice(0, PREVIEW_ROWS)
        preview = markdown_table(first.column_names, [list(row.values()) for row in first.to_pylist()])
        yield dg.MaterializeResult(
            metadata={
                "rows": out.rows,
                "dagster/row_count": out.rows,
                "path": str(out.path),
                "bytes": out.path.stat().st_size,
                "seconds": round(out.seconds, 3),
                "computed": out.computed,
                "preview": dg.MetadataValue.md(preview),
                "dagster/column_schema": dg.TableSchema(columns=columns),
            }
        )
        for outcome in test_mart(warehouse, out):
            yield result_for(outcome)

    return _mart


MART_ASSETS = [mart_asset(catalog.marts()[name]) for name in catalog.mart_order()]

defs = dg.Definitions(assets=MART_ASSETS)
