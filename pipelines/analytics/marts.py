"""Computing the marts: each one a SELECT in sql/marts (declared in sql/marts/_marts.yml), run by
DuckDB over a snapshot's tables into one Parquet file, then tested.

A mart's file is named by the digest of what it is computed from (its SQL, the views, macros and
seeds, and the table generations it read), so it is computed once and never rewritten. A mart
declared ``compute: per_partition`` (every row depends on one graph) is computed once per partition
generation into ``marts/fragments/<name>/`` (shared by every build with that generation) and the
fragments are concatenated in ``combine_order``: a rebuild computes the rebuilt partitions' only.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipelines import schema
from pipelines.analytics import catalog, db
from pipelines.readers import tier
from pipelines.storage.records import PartitionState, Snapshot
from pipelines.storage.warehouse import Warehouse, write_parquet_atomic


def compute_mart(warehouse: Warehouse, snapshot: Snapshot, name: str) -> pa.Table:
    """Run one mart's SQL over a snapshot's tables (in-memory DuckDB), with the marts it reads
    attached: the snapshot's own files of them, else the files :func:`build_mart` finds or makes."""
    con = db.connection(warehouse, Snapshot(snapshot.partitions, upstream_marts(warehouse, snapshot, name)))
    try:
        return con.sql(catalog.marts()[name].sql).to_arrow_table()
    finally:
        con.close()


def upstream_marts(warehouse: Warehouse, snapshot: Snapshot, name: str) -> dict[str, str]:
    """The files of the marts mart ``name`` reads (catalog.marts_read), by mart name."""
    return {upstream: snapshot.marts.get(upstream) or warehouse.rel(build_mart(warehouse, snapshot, upstream).path)
            for upstream in catalog.marts_read(name)}


def mart_code(name: str, warehouse: Warehouse | None = None) -> str:
    """What a mart's rows are computed by: its SQL, the SQL of the marts it reads, and the views,
    macros and seeds (with ``warehouse``: its team crosswalk too, pipelines.analytics.crosswalk)."""
    from pipelines.analytics import crosswalk

    sql_dir = catalog.SQL_DIR
    marts = [sql_dir / "marts" / f"{m}.sql" for m in (*catalog.marts_upstream(name), name)]
    digest = db.files_digest([*marts, *db.sql_files("views"), *db.sql_files("macros"),
                              *sorted((sql_dir / "seeds").glob("*.csv"))])
    if warehouse is not None and (team := crosswalk.warehouse_file(warehouse.root)) is not None:
        digest.update(b"crosswalk\n" + team.read_bytes())
    return digest.hexdigest()


@dataclass
class MartOutput:
    name: str
    path: Path  # marts/<name>/<digest>.parquet
    rows: int
    fragments: list[Path]
    computed: bool  # False: a file of the same inputs was there already
    seconds: float


def build_mart(warehouse: Warehouse, snapshot: Snapshot, name: str) -> MartOutput:
    """The mart's file for ``snapshot``, computed unless a file of the same inputs is there."""
    started = time.monotonic()
    mart = catalog.marts()[name]
    code = mart_code(name, warehouse)
    fragments: list[Path] = []
    if mart.compute == "per_partition":
        attached = attached_partitions(snapshot, name)
        code = fragment_code(code, attached)
        parts = [part for _, part in sorted(snapshot.partitions.items()) if tier(part.kind) == 0]
        missing = [part for part in parts if not fragment_path(warehouse, name, part, code).is_file()]
        if len(missing) > 1:
            build_fragments_together(warehouse, name, missing, code, attached)
        fragments = [build_fragment(warehouse, name, part, code, attached) for part in parts]
        inputs = json.dumps([code, [p.name for p in fragments]])
    else:
        inputs = json.dumps([code, snapshot.tables_digest()])
    path = warehouse.marts_dir / name / f"{hashlib.sha256(inputs.encode()).hexdigest()[:20]}.parquet"
    computed = not path.is_file()
    if computed:
        if fragments:
            table = in_combine_order(name, pa.concat_tables([pq.read_table(f) for f in fragments],
                                                            promote_options="default"))
        else:
            table = compute_mart(warehouse, snapshot, name)
        write_parquet_atomic(table, path)
    rows = pq.ParquetFile(path).metadata.num_rows
    return MartOutput(name, path, rows, fragments, computed, time.monotonic() - started)


def attached_partitions(snapshot: Snapshot, name: str) -> list[PartitionState]:
    """The partitions of label and prediction sources (tiers 1 and 2) whose rows per-partition mart
    ``name`` reads: their annotations or predictions are about the graphs of other partitions (a
    TRAIL label's trace is in an otlp source), so they are attached to every graph partition's
    fragment and have none of their own. Only the tiers of tables the mart reads: a change of
    predictions does not recompute a mart that reads no prediction."""
    reads = set(catalog.marts()[name].reads)
    tiers = {1} if "annotations" in reads else set()
    tiers |= {2} if reads & set(schema.ATTRIBUTION_TABLES) else set()
    return [snapshot.partitions[key] for key in sorted(snapshot.partitions)
            if tier(snapshot.partitions[key].kind) in tiers]


def fragment_code(code: str, attached: list[PartitionState]) -> str:
    """The code a fragment is named by: the mart's, and the generations attached to every fragment."""
    if not attached:
        return code
    return hashlib.sha256(json.dumps([code, [p.generation for p in attached]]).encode()).hexdigest()


def build_fragment(warehouse: Warehouse, name: str, part: PartitionState, code: str | None = None,
                   attached: list[PartitionState] | tuple[PartitionState, ...] = ()) -> Path:
    """The fragment of per-partition mart ``name`` for one partition generation (with the label and
    prediction partitions ``attached``), computed unless it is there (named by the generation and the
    code, so every build with that generation shares it). ``code``: :func:`fragment_code`'s."""
    path = fragment_path(warehouse, name, part, code or mart_code(name, warehouse))
    if not path.is_file():
        con = db.connection(warehouse, Snapshot({part.key: part} | {p.key: p for p in attached}))
        try:
            table = con.sql(catalog.marts()[name].sql).to_arrow_table()
        finally:
            con.close()
        if attached:  # rows of its own graphs only (an attached label may be about another partition's)
            own = pa.array(sorted(own_graphs(warehouse, part)), pa.string())
            table = table.filter(pc.is_in(table["graph_id"], value_set=own))
        write_parquet_atomic(in_combine_order(name, table), path)
    return path


def own_graphs(warehouse: Warehouse, part: PartitionState) -> set[str]:
    """The graph ids a graph partition's rows are about (its ``graphs`` and ``annotations``)."""
    graphs: set[str] = set()
    for table in ("graphs", "annotations"):
        for file in part.files(table):
            graphs.update(pq.read_table(warehouse.path(file), columns=["graph_id"])["graph_id"].to_pylist())
    return graphs


def in_combine_order(name: str, table: pa.Table) -> pa.Table:
    """A per-partition mart's rows in its declared combine_order: its fragments are the same files
    whether computed alone or together, whatever order the SQL leaves them in."""
    return table.sort_by([(column, "ascending") for column in catalog.marts()[name].combine_order])


def fragment_path(warehouse: Warehouse, name: str, part: PartitionState, code: str) -> Path:
    return warehouse.marts_dir / "fragments" / name / f"{part.key}--{Path(part.generation).name}--{code[:16]}.parquet"


def build_fragments_together(warehouse: Warehouse, name: str, parts: list[PartitionState], code: str,
                             attached: list[PartitionState] | tuple[PartitionState, ...] = ()) -> bool:
    """The fragments of several partitions from one query over all of them, its rows split by graph:
    on small partitions one query costs about what one partition's does, so the fixed cost of a
    query is paid once rather than once a partition. The split needs each partition's graphs (from its
    ``graphs`` and ``annotations``) disjoint and every row's graph in one of them; otherwise nothing
    is written (False) and each fragment is computed alone."""
    owner: dict[str, int] = {}
    for i, part in enumerate(parts):
        for graph in own_graphs(warehouse, part):
            if owner.setdefault(graph, i) != i:
                return False
    con = db.connection(warehouse, Snapshot({part.key: part for part in [*parts, *attached]}))
    try:
        table = con.sql(catalog.marts()[name].sql).to_arrow_table()
    finally:
        con.close()
    index = pa.array([owner.get(graph, -1) for graph in table["graph_id"].to_pylist()], pa.int64())
    if len(table) and pc.min(index).as_py() < 0:
        return False
    for i, part in enumerate(parts):
        write_parquet_atomic(in_combine_order(name, table.filter(pc.equal(index, i))),
                             fragment_path(warehouse, name, part, code))
    return True


def build_fragments(warehouse: Warehouse, part: PartitionState) -> list[Path]:
    """Every per-partition mart's fragment for one new generation of a graph source: a step that
    flattened a partition on a worker computes them there (pipelines/defs/fanout.py), so the marts'
    step only combines. Those of a mart with label or prediction partitions attached are named by
    them too, so the marts' step computes those itself."""
    if tier(part.kind) != 0:
        return []
    return [build_fragment(warehouse, name, part) for name, mart in catalog.marts().items()
            if mart.compute == "per_partition"]
