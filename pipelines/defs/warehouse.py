"""The warehouse core: flattened tables per source split, and the DuckDB database over them."""


import dagster as dg
import pyarrow.parquet as pq

from pipelines import db, schema
from pipelines.defs.partitions import source_splits
from pipelines.defs.resources import TracehouseResource
from pipelines.ingest import ingest_partition

FULL_TAG = "tracehouse/full"  # a run with this tag re-reads every file (the scheduled consistency pass)

TABLE_DESCRIPTIONS = {
    "graphs": "One row per execution graph: source, system, dataset, file, and per-table row counts.",
    "sessions": "One row per session of a graph.",
    "nodes": "One row per variable version (node) of a graph.",
    "edges": "One row per information-flow edge, attributed to an operation.",
    "operations": "One row per operation; multi-agent steps carry their actor.",
    "annotations": "One row per failure annotation: error type and decisive faulty operation.",
    "ingest_errors": "One row per defect found while reading the sources (rejected files and records).",
}

TABLE_SPECS = [
    dg.AssetSpec(
        name,
        group_name="warehouse",
        kinds={"parquet"},
        description=TABLE_DESCRIPTIONS[name],
        metadata={"dagster/column_schema": dg.TableSchema(
            columns=[dg.TableColumn(f.name, str(f.type)) for f in schema.TABLES[name]]
        )},
    )
    for name in schema.TABLES
]


def _preview(path, rows: int = 5) -> str:
    """A small markdown preview of a Parquet table, long values cut short."""
    parquet = pq.ParquetFile(path)
    if parquet.metadata.num_rows == 0:
        return "_empty_"
    head = next(parquet.iter_batches(batch_size=rows)).to_pylist()
    columns = list(head[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in head:
        cells = [str(row[c])[:40].replace("|", "\\|").replace("\n", " ") for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


@dg.multi_asset(specs=TABLE_SPECS, partitions_def=source_splits, can_subset=False)
def flattened_tables(context: dg.AssetExecutionContext, tracehouse: TracehouseResource):
    """Read one source split and publish a new generation of all its tables at once."""
    key = context.partition_key
    warehouse = tracehouse.wh
    partitions = tracehouse.partitions()
    if key not in partitions:
        warehouse.remove_partition(key)
        context.log.info(f"partition {key} has no input files any more: its rows were removed")
        for name in schema.TABLES:
            yield dg.MaterializeResult(asset_key=name, metadata={"rows": 0, "removed": True})
        return
    part = partitions[key]
    result = ingest_partition(
        warehouse,
        key,
        part.source.kind,
        part.files,
        full=tracehouse.full or context.run.tags.get(FULL_TAG) == "true",
        strict=tracehouse.strict,
        on_progress=tracehouse.report,
    )
    context.log.info(
        f"{key}: {result.files} files ({result.parsed} parsed, {result.reused} reused), "
        f"{len(result.errors)} ingest errors, {result.seconds:.2f} s"
    )
    for name in schema.TABLES:
        path = result.generation / f"{name}.parquet"
        yield dg.MaterializeResult(
            asset_key=name,
            metadata={
                "rows": result.rows[name],
                "bytes": path.stat().st_size,
                "files": result.files,
                "files_parsed": result.parsed,
                "ingest_errors": len(result.errors),
                "generation": result.generation.name,
                "preview": dg.MetadataValue.md(_preview(path)),
            },
        )


@dg.asset(
    group_name="warehouse",
    kinds={"duckdb"},
    # After the marts too, so their views exist; a blocked mart leaves the previous database in place.
    deps=[spec.key for spec in TABLE_SPECS] + [dg.AssetKey(mart) for mart in db.mart_names()],
    description="tracehouse.duckdb: views over the published tables and marts, seed tables and SQL macros.",
)
def warehouse_database(context: dg.AssetExecutionContext, tracehouse: TracehouseResource) -> dg.MaterializeResult:
    path = db.publish_database(tracehouse.wh)
    con = db.connect(tracehouse.wh)
    try:
        counts = {name: con.execute(f'select count(*) from "{name}"').fetchone()[0] for name in schema.TABLES}
    finally:
        con.close()
    context.log.info(f"published {path}")
    return dg.MaterializeResult(metadata={"path": str(path), **{f"rows_{k}": v for k, v in counts.items()}})


defs = dg.Definitions(assets=[flattened_tables, warehouse_database])
