"""Failure-attribution evaluation: the annotations prediction sources are matched against.

The readers of prediction sources (pipelines/readers/predictions.py) resolve each prediction to an
annotation of the graph sources; :func:`load_cases` builds that index from a snapshot's graph
partitions, once per build. The scoring itself is SQL: the marts attribution_accuracy,
attribution_op_distance and attribution_confusion (sql/marts, docs/ATTRIBUTION.md).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import PurePosixPath

from pipelines import db
from pipelines.readers import PREDICTION_READERS
from pipelines.readers.base import Case, Cases
from pipelines.records import Snapshot
from pipelines.storage import Warehouse


def graph_partitions(snapshot: Snapshot) -> Snapshot:
    """The snapshot's partitions of graph sources (not of prediction sources)."""
    return Snapshot({k: p for k, p in snapshot.partitions.items() if p.kind not in PREDICTION_READERS})


def load_cases(warehouse: Warehouse, snapshot: Snapshot) -> Cases:
    """Every annotation of the snapshot's graph sources, with where its graph came from."""
    graphs_only = graph_partitions(snapshot)
    if not graphs_only.partitions:
        return Cases([], [], digest=hashlib.sha256(b"[]").hexdigest()[:16])
    kinds = {p.source: p.kind for p in graphs_only.partitions.values()}
    con = db.connection(warehouse, graphs_only)
    try:
        graph_rows = con.execute("select graph_id, source, split, file from graphs order by all").fetchall()
        case_rows = con.execute(
            "select a.annotation_id, a.graph_id, a.system, a.dataset, g.source, g.split, g.file, a.query_id "
            "from annotations a join graphs g using (graph_id) order by all"
        ).fetchall()
    finally:
        con.close()
    graphs = [(gid, source, kinds.get(source, ""), split, PurePosixPath(file).name)
              for gid, source, split, file in graph_rows]
    cases = [Case(aid, gid, system, dataset, source, kinds.get(source, ""), split, PurePosixPath(file).name, qid)
             for aid, gid, system, dataset, source, split, file, qid in case_rows]
    digest = hashlib.sha256(json.dumps([graphs, [list(c.__dict__.values()) for c in cases]]).encode()).hexdigest()
    return Cases(cases, graphs, digest=digest[:16])
