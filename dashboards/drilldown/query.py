"""What a drill-down picture shows, loaded from SQL: the annotation, its faulty operation with its input
and output nodes, and one shortest path of edges on to the failed query's prediction node (multi-agent
traces have no prediction node: the path runs on to the output of the trajectory's last step).

Everything comes through the lineage macros (``op_subgraph``, ``downstream``, ``upstream``); the
queries are ``sql/drilldown/*.sql``.
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


def sql(name: str) -> str:
    return (SQL_DIR / f"{name}.sql").read_text()


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


def rows(con: duckdb.DuckDBPyConnection, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    cursor = con.execute(query, params or {})
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def _node(row: dict[str, Any]) -> Node:
    return Node(row["full_node_id"], row.get("class_name"), row.get("version"), row.get("value"), row.get("session_id"))


def _nodes(con: duckdb.DuckDBPyConnection, graph_id: str, ids: list[str]) -> dict[str, Node]:
    found = {r["full_node_id"]: _node(r) for r in rows(con, sql("nodes"), {"graph_id": graph_id, "ids": ids})}
    return {i: found.get(i, Node(i)) for i in ids}


def shortest_path(
    con: duckdb.DuckDBPyConnection, graph_id: str, start: str, target: str
) -> list[tuple[str, str, str | None, str | None]] | None:
    """One shortest path of edges from ``start`` to ``target`` (``[]`` when they are the same node,
    None when ``target`` is not downstream): at each hop the smallest next node id, then op id."""
    if start == target:
        return []
    found = rows(con, sql("path"), {"graph_id": graph_id, "start": start, "target": target})
    if not found:
        return None
    by_source: dict[str, list[dict[str, Any]]] = {}
    for row in found:
        by_source.setdefault(row["source_full_node_id"], []).append(row)
    path, current = [], start
    for _ in range(found[0]["total_hops"]):
        step = min(by_source[current], key=lambda r: (r["target_full_node_id"], r["op_id"] or ""))
        path.append((step["source_full_node_id"], step["target_full_node_id"], step["op_id"], step["op_name"]))
        current = step["target_full_node_id"]
    assert current == target, "the shortest-path edges do not reach the target"
    return path


def load(con: duckdb.DuckDBPyConnection, annotation_id: str, graph_id: str | None = None) -> Drilldown:
    """Everything one picture shows, from the marts and the lineage macros."""
    found = rows(con, sql("annotation"), {"annotation_id": annotation_id})
    if graph_id is not None:
        found = [r for r in found if r["graph_id"] == graph_id]
    if not found:
        where = f" in graph {graph_id!r}" if graph_id is not None else ""
        raise AnnotationNotFound(f"no annotation {annotation_id!r}{where} in the warehouse")
    if len(found) > 1:
        raise AmbiguousAnnotation(annotation_id, [r["graph_id"] for r in found])
    d = Drilldown(found[0])
    a = d.annotation

    if a["faulty_op_id"] is None:
        d.notes.append("the label names no faulty operation (e.g. a wrong reference or a wrong judge)")
    else:
        ends = rows(con, sql("op_subgraph"), {"graph_id": d.graph_id, "op_id": a["faulty_op_id"]})
        if not ends:
            d.notes.append("the faulty operation has no edges in this graph")
            d.op = {"op_id": a["faulty_op_id"], "op_name": a["op_name"], "op_category": None, "actor": None}
        else:
            first = ends[0]
            d.op = {k: first[k] for k in ("op_id", "op_name", "op_category", "op_session_id", "actor")}
            seen: set[tuple[str, str]] = set()
            for row in sorted(ends, key=lambda r: (r["role"], r["class_name"] or "", r["full_node_id"])):
                if (row["role"], row["full_node_id"]) in seen:
                    continue
                seen.add((row["role"], row["full_node_id"]))
                (d.inputs if row["role"] == "input" else d.outputs).append(_node(row))

    target_id = a["prediction_node_id"] or a["final_node_id"]
    if target_id is None:
        if a["graph_kind"] == "memory":
            d.notes.append("no prediction node was resolved for the failed query")
        return d
    d.target_kind = "prediction" if a["prediction_node_id"] else "final step output"
    d.target = _nodes(con, d.graph_id, [target_id])[target_id]
    if not d.outputs:
        return d
    best: tuple[int, str, list] | None = None
    for output in d.outputs:
        edges = shortest_path(con, d.graph_id, output.full_node_id, target_id)
        if edges is not None and (best is None or (len(edges), output.full_node_id) < best[:2]):
            best = (len(edges), output.full_node_id, edges)
    if best is None:
        d.notes.append(f"the {d.target_kind} is not downstream of the operation's outputs")
        return d
    _, start, edges = best
    ids = [start] + [dst for _, dst, _, _ in edges]
    nodes = _nodes(con, d.graph_id, ids)
    d.path = [nodes[i] for i in ids]
    d.path_edges = edges
    hops = len(edges)
    d.notes.append(
        f"{d.target_kind}: {hops} edge{'s' if hops != 1 else ''} from the operation's output"
        + (" (the operation produced it)" if hops == 0 else "")
    )
    return d
