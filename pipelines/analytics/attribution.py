"""Failure-attribution evaluation: the annotations prediction sources are matched against.

The readers of prediction sources (pipelines/readers/predictions.py) resolve each prediction to an
annotation of the graph sources; :func:`load_cases` builds that index from a snapshot's graph
partitions, once per build. The scoring itself is SQL: the marts attribution_accuracy,
attribution_op_distance and attribution_confusion, and each benchmark's own rules in
attribution_trail_scores and attribution_agentrx_scores (sql/marts, docs/ATTRIBUTION.md).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import PurePosixPath

from pipelines.analytics import db
from pipelines.readers import tier
from pipelines.readers.base import Case, Cases
from pipelines.storage.records import Snapshot
from pipelines.storage.warehouse import Warehouse


def graph_partitions(snapshot: Snapshot, below: int = 2) -> Snapshot:
    """The snapshot's partitions of the sources read before tier ``below`` (readers.tier): for a
    prediction source (2) the graph and label sources, for a label source (1) the graph sources."""
    return Snapshot({k: p for k, p in snapshot.partitions.items() if tier(p.kind) < below})


def load_cases(warehouse: Warehouse, snapshot: Snapshot, below: int = 2) -> Cases:
    """Every annotation of the snapshot's sources read before tier ``below``, with where its graph
    came from, and the spans (operations) of its OpenTelemetry traces (graphs ``otel:<trace id>``),
    which the label sources locate their labels at."""
    graphs_only = graph_partitions(snapshot, below)
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
        span_rows = con.execute(
            "select g.graph_id, g.system, g.dataset, list(o.op_id order by o.op_id) filter (where o.op_id is not null) "
            "from graphs g left join operations o using (graph_id) where g.graph_id like 'otel:%' "
            "group by all order by all"
        ).fetchall()
    finally:
        con.close()
    graphs = [(gid, source, kinds.get(source, ""), split, PurePosixPath(file).name)
              for gid, source, split, file in graph_rows]
    cases = [Case(aid, gid, system, dataset, source, kinds.get(source, ""), split, PurePosixPath(file).name, qid)
             for aid, gid, system, dataset, source, split, file, qid in case_rows]
    spans = {gid: (system, dataset, frozenset(ops or ())) for gid, system, dataset, ops in span_rows}
    digest = hashlib.sha256(json.dumps([graphs, [list(c.__dict__.values()) for c in cases],
                                        [[g, s, d, sorted(o)] for g, (s, d, o) in sorted(spans.items())]]).encode())
    return Cases(cases, graphs, digest=digest.hexdigest()[:16], spans=spans)
