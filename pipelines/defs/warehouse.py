"""The warehouse core: flattened tables per source split, and the commit that publishes a build."""

from contextlib import nullcontext

import dagster as dg

from pipelines import catalog, db, schema
from pipelines.attribution import load_cases
from pipelines.commit import commit_attempt
from pipelines.defs.partitions import source_splits
from pipelines.defs.resources import TracehouseResource
from pipelines.defs.table_events import table_metadata
from pipelines.ingest import ingest_partition
from pipelines.locks import build_lock
from pipelines.plan import claimed_before, previous_generation, reads_cases
from pipelines.readers import tier
from pipelines.records import Snapshot
from pipelines.state import CommitLog

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


@dg.multi_asset(specs=TABLE_SPECS, partitions_def=source_splits, can_subset=False)
def flattened_tables(context: dg.AssetExecutionContext, tracehouse: TracehouseResource):
    """Read one source split into a new, complete generation of all its tables. It becomes visible
    when the build that includes it is committed (``committed_build``). A run of one partition,
    started in the UI, by the sensor or by automation; ``tracehouse build`` flattens the splits it
    decided itself and reports them from its run (pipelines.defs.table_events)."""
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
    last = CommitLog(warehouse).latest()  # the splits before this one: as committed
    snapshot = last.snapshot if last else Snapshot()
    cases = None
    if reads_cases(part.source.kind):  # matched against what the partitions of the tiers before it hold
        cases = load_cases(warehouse, snapshot, below=tier(part.source.kind))
        claimed = {}
    else:
        claimed = claimed_before(warehouse, snapshot, key)
    with build_lock(warehouse, wait=LOCK_WAIT):  # waits for a build under way: one writer at a time
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
    for name, metadata in table_metadata(warehouse, result.generation).items():
        yield dg.MaterializeResult(asset_key=name, metadata=metadata)


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
