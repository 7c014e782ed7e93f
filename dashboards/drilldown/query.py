"""What a drill-down picture shows, loaded from SQL: the annotation, its faulty operation with its input
and output nodes, and one shortest path of edges on to the failed query's prediction node (multi-agent
traces have no prediction node: the path runs on to the output of the trajectory's last step).

The queries are the failure views' (``sql/drilldown/failure*.sql`` through
``dashboards.failure_view.load``), run for one annotation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb

from pipelines import db

SQL_DIR = db.SQL_DIR / "drilldown"


class AnnotationNotFound(LookupError):
    pass


class AmbiguousAnnotation(LookupError):
    def __init__(self, annotation_id: str, graphs: list[str]) -> None:
        super().__init__(
            f"annotation id {annotation_id!r} exists in {len(graphs)} graphs ({', '.join(graphs[:5])}); "
            "name one with --graph"
        )
        self.graphs = graphs


@dataclass
class Node:
    full_node_id: str
    class_name: str | None = None
    version: int | None = None
    value: str | None = None
    session_id: str | None = None


@dataclass
class Drilldown:
    annotation: dict[str, Any]
    op: dict[str, Any] | None = None
    inputs: list[Node] = field(default_factory=list)
    outputs: list[Node] = field(default_factory=list)
    path: list[Node] = field(default_factory=list)  # from an output to the target, both included
    path_edges: list[tuple[str, str, str | None, str | None]] = field(default_factory=list)  # src, dst, op, name
    target: Node | None = None
    target_kind: str = ""  # 'prediction' | 'final step output' | ''
    notes: list[str] = field(default_factory=list)

    @property
    def graph_id(self) -> str:
        return self.annotation["graph_id"]

    @property
    def annotation_id(self) -> str:
        return self.annotation["annotation_id"]


def load(con: duckdb.DuckDBPyConnection, annotation_id: str, graph_id: str | None = None) -> Drilldown:
    """Everything one picture shows: the build's set-based loading (``dashboards.failure_view.load``)
    for this one annotation, so ``tracehouse show`` and a build draw from the same queries."""
    from dashboards import failure_view

    data = failure_view.load(con, [annotation_id], paths_for=[annotation_id])
    found = [r for r in data.rows if graph_id is None or r["graph_id"] == graph_id]
    if not found:
        where = f" in graph {graph_id!r}" if graph_id is not None else ""
        raise AnnotationNotFound(f"no annotation {annotation_id!r}{where} in the warehouse")
    if len(found) > 1:
        raise AmbiguousAnnotation(annotation_id, [r["graph_id"] for r in found])
    return failure_view.drilldown(data, found[0])
