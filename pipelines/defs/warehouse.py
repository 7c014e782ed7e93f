"""The warehouse core: the flattened tables, and the commit that publishes a build."""

import threading
from contextlib import nullcontext

import dagster as dg

from pipelines import schema
from pipelines.analytics import catalog, crosswalk, db
from pipelines.builds.commit import commit_attempt
from pipelines.builds.flattening import Lent, flatten_splits, lent_to, list_sources
from pipelines.builds.source_sync import run_storage, sync_sources
from pipelines.builds.summary import code_fingerprint
from pipelines.config import pictures_option
from pipelines.defs.resources import TracehouseResource, run_attempt
from pipelines.defs.table_events import tables_metadata
from pipelines.storage.locks import build_lock
from pipelines.storage.state import CommitLog, mark_recorded

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


@dg.multi_asset(specs=TABLE_SPECS, can_subset=False)
def flattened_tables(context: dg.AssetExecutionContext, tracehouse: TracehouseResource):
    """Carry out the build's plan: every source split kept, taken over or read into a new, complete
    generation of all its tables, which becomes visible when the build that includes it is
    committed (``committed_build``). One materialization per table, naming the splits that changed."""
    full = tracehouse.full or context.run.tags.get(FULL_TAG) == "true"
    pictures = pictures_option(tracehouse.pictures or None)
    warehouse = tracehouse.wh
    attempt = run_attempt(tracehouse, context)
    lent = lent_to(attempt.id)
    if lent is not None:  # `tracehouse build`'s run: it holds the build lock and the listing
        plan = flatten_splits(warehouse, attempt, lent, full=full, strict=tracehouse.strict, pictures=pictures,
                              progress=tracehouse.progress)
    else:
        with build_lock(warehouse, wait=LOCK_WAIT):  # waits for a build under way: one writer at a time
            crosswalk.install(warehouse, tracehouse.config_path)  # as `tracehouse build` does, before reading
            sources = tracehouse.resolved_sources()
            sync_sources(sources, run_storage(warehouse.root), context.log.info, attempt.snapshot.partitions,
                         attempt.parent)  # as `tracehouse build` does: s3:// and Phoenix sources into their mirrors
            found = list_sources(warehouse, sources, context.log.info,
                                 attempt.snapshot.partitions, attempt.parent)  # an emptied source: not a deletion
            attempt.code = code_fingerprint()
            plan = flatten_splits(warehouse, attempt, Lent(found, context.log.info), full=full,
                                  strict=tracehouse.strict, pictures=pictures, progress=False)
    # the steps' shared DuckDB database (seeds, macros, views) is made while Dagster starts the next steps
    threading.Thread(target=db.prepare, args=(warehouse, attempt.snapshot), daemon=True).start()
    summary = attempt.summary
    context.log.info(
        f"{len(summary['partitions_built'])} splits flattened, {len(summary['partitions_adopted'])} taken over, "
        f"{len(summary['partitions_unchanged'])} unchanged, {len(plan.removed)} removed"
    )
    for name, metadata in tables_metadata(warehouse, attempt, plan).items():
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
    attempt = run_attempt(tracehouse, context)
    from pipelines.defs.validation import checked

    checked(tracehouse, attempt)  # the checks' results, made by their step or now
    with nullcontext() if tracehouse.attempt else build_lock(warehouse, wait=LOCK_WAIT):
        record = commit_attempt(warehouse, attempt, say=tracehouse.say)
    if not tracehouse.attempt:  # this run holds the commit (a CLI build marks it once its run has ended)
        mark_recorded(warehouse, record.build)
    context.log.info(f"committed build {record.build} ({len(record.snapshot.partitions)} partitions)")
    rows = record.summary.get("rows", {})
    return dg.MaterializeResult(metadata={
        "build": record.build,
        "record": str(CommitLog(warehouse).path(record.build)),
        "database": str(warehouse.db_path),
        **{f"rows_{k}": v for k, v in rows.items()},
    })


BUILD_JOB = "tracehouse_build"
build_job = dg.define_asset_job(
    BUILD_JOB, selection=dg.AssetSelection.all(),
    description="One build: flatten what changed, check it, compute the marts and dashboard, commit.",
)

defs = dg.Definitions(assets=[flattened_tables, committed_build], jobs=[build_job])
