"""The warehouse core: flattened tables per source split, and the commit that publishes a build."""

from contextlib import nullcontext
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq

from pipelines import catalog, db, schema
from pipelines.attribution import load_cases
from pipelines.commit import commit_attempt
from pipelines.defs.partitions import source_splits
from pipelines.defs.resources import TracehouseResource
from pipelines.ingest import generation_files, ingest_partition
from pipelines.locks import build_lock
from pipelines.plan import claimed_before, previous_generation, reads_cases
from pipelines.readers import tier
from pipelines.records import Snapshot
from pipelines.state import Attempt, CommitLog

LOCK_WAIT = 3600.0  # seconds a run Dagster started waits for a build under way
FULL_TAG = "tracehouse/full"  # a run with this tag re-reads every file (the scheduled consistency pass)

TABLE_SPECS = [
    dg.AssetSpec(
        name,
        group_name="warehouse",
        kinds={"parquet"},
        description=catalog.views()[name]["description"],
        metadata={"dagster/column_schema": dg.TableSchema(
            columns=[dg.TableColumn(f.name, str(f.type)) for f in schema.TABLES[name]]
        )},
    )
    for name in schema.TABLES
]


def _preview(paths: list[Path], rows: int = 5) -> str:
    """A small markdown preview of a table's first data file with rows, long values cut short."""
    parquet = next((f for f in map(pq.ParquetFile, paths) if f.metadata.num_rows), None)
    if parquet is None:
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
    """Read one source split into a new, complete generation of all its tables. It becomes visible
    when the build that includes it is committed (``committed_build``)."""
    key = context.partition_key
    warehouse = tracehouse.wh
    partitions = tracehouse.partitions()
    if key not in partitions:
        context.log.info(f"partition {key} has no input files any more: the next commit drops its rows")
        for name in schema.TABLES:
            yield dg.MaterializeResult(asset_key=name, metadata={"rows": 0, "removed": True})
        return
    part = partitions[key]
    full = tracehouse.full or context.run.tags.get(FULL_TAG) == "true"
    if tracehouse.attempt:  # inside `tracehouse build`: the partitions before this one are decided
        snapshot = Attempt.load(warehouse, tracehouse.attempt).snapshot
    else:
        last = CommitLog(warehouse).latest()
        snapshot = last.snapshot if last else Snapshot()
    cases = None
    if reads_cases(part.source.kind):  # matched against what the partitions of the tiers before it hold
        cases = load_cases(warehouse, snapshot, below=tier(part.source.kind))
        claimed = {}
    else:
        claimed = claimed_before(warehouse, snapshot, key)
    # a run Dagster started waits for a build under way (one writer at a time); a build's own run holds its lock
    with nullcontext() if tracehouse.attempt else build_lock(warehouse, wait=LOCK_WAIT):
        result = ingest_partition(
            warehouse,
            key,
            part.source.kind,
            part.files,
            previous=None if full else previous_generation(warehouse, key),
            claimed=claimed,
            cases=cases,
            strict=tracehouse.strict,
            on_progress=tracehouse.report,
        )
    context.log.info(
        f"{key}: {result.files} files ({result.parsed} parsed, {result.reused} reused), "
        f"{len(result.errors)} ingest errors, {result.seconds:.2f} s"
    )
    for name in schema.TABLES:
        paths = generation_files(warehouse, result.generation, name)
        yield dg.MaterializeResult(
            asset_key=name,
            metadata={
                "rows": result.rows[name],
                "bytes": sum(path.stat().st_size for path in paths),
                "data_files": len(paths),
                "files": result.files,
                "files_parsed": result.parsed,
                "ingest_errors": len(result.errors),
                "generation": result.generation.name,
                "preview": dg.MetadataValue.md(_preview(paths)),
            },
        )


COMMIT_KEY = dg.AssetKey("committed_build")


@dg.asset(
    key=COMMIT_KEY,
    group_name="warehouse",
    kinds={"duckdb"},
    deps=[spec.key for spec in TABLE_SPECS] + [dg.AssetKey(mart) for mart in db.mart_names()]
    + [dg.AssetKey("dashboard")],
    description="Commits the build: one record (builds/<number>.json) makes its tables, marts, checks and "
    "dashboard the warehouse's state at once, then tracehouse.duckdb and dashboards/index.html are "
    "published from it. A build whose blocking checks failed is not committed.",
)
def committed_build(context: dg.AssetExecutionContext, tracehouse: TracehouseResource) -> dg.MaterializeResult:
    warehouse = tracehouse.wh
    attempt = tracehouse.attempt_for(context)
    from pipelines.defs.validation import checked

    checked(tracehouse, attempt)  # the checks' results, made by their step or now
    with nullcontext() if tracehouse.attempt else build_lock(warehouse, wait=LOCK_WAIT):
        record = commit_attempt(warehouse, attempt, say=tracehouse.say)
    context.log.info(f"committed build {record.build} ({len(record.snapshot.partitions)} partitions)")
    rows = record.summary.get("rows", {})
    return dg.MaterializeResult(metadata={
        "build": record.build,
        "record": str(CommitLog(warehouse).path(record.build)),
        "database": str(warehouse.db_path),
        **{f"rows_{k}": v for k, v in rows.items()},
    })


defs = dg.Definitions(assets=[flattened_tables, committed_build])
