"""What a drill-down picture shows, loaded from SQL: the annotation, its faulty operation with its input
and output nodes, and one shortest path of edges on to the failed query's prediction node (multi-agent
traces have no prediction node: the path runs on to the output of the trajectory's last step).

The queries are the failure views' too (``sql/drilldown/failure*.sql``): :func:`load_failures` loads
what the views and pictures of a set of annotations show in a few set-based queries, :func:`load` the
same for one annotation (``tracehouse show``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import duckdb

from pipelines.analytics import db
from pipelines.builds.changes import FORMAT_VERSION

SQL_DIR = db.SQL_DIR / "drilldown"
VALUE_CHARS = 65536  # characters of one value a view embeds; the page says how to get the rest


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


# -- loading: a few set-based queries ----------------------------------------------------------------


def failures_sql(name: str) -> str:
    """The text of ``sql/drilldown/<name>.sql``."""
    return (SQL_DIR / f"{name}.sql").read_text()


def _rows(con: duckdb.DuckDBPyConnection, query: str, params: dict[str, Any] | None = None) -> list[dict]:
    cursor = con.execute(query, params or {})
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


@dataclass
class Failures:
    """What the failure views (and pictures) of a set of annotations show, loaded at once."""

    rows: list[dict[str, Any]]
    ends: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    paths: dict[tuple[str, str, str], list[dict[str, Any]]] = field(default_factory=dict)
    timelines: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    nodes: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    graph_contents: dict[str, str] = field(default_factory=dict)
    predictions: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    # OpenTelemetry traces: their spans (in start order), what flows into and out of each, their labels
    spans: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    span_ends: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    span_labels: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    seconds: float = 0.0

    def node(self, graph_id: str, full_node_id: str) -> dict[str, Any] | None:
        return self.nodes.get((graph_id, full_node_id))


def load_failures(con: duckdb.DuckDBPyConnection, annotation_ids: list[str] | None = None,
         paths_for: Iterable[str] | None = None, chars: int = VALUE_CHARS, light: bool = False) -> Failures:
    """Everything the views of ``annotation_ids`` (None: every annotation) show, on a cursor of its
    own (temp tables; the connection's views stay as they are). Paths are computed for memory
    failures (the views show them) and for the multi-agent annotations in ``paths_for`` (only
    pictures draw those: a trajectory's walk is as deep as it is long). ``light``: only the rows,
    the predictions, the graphs' contents and the traces' labels, what a view's name is made from
    (the node values, most of the cost, are then loaded for the views not written yet)."""
    started = time.monotonic()
    cur = con.cursor()
    try:
        search_path = con.execute("select current_setting('file_search_path')").fetchone()[0]
        cur.execute("set file_search_path = ?", [search_path])  # a per-cursor setting
        cur.execute("create or replace temp table failure_rows as " + failures_sql("failures"),
                    {"annotation_ids": annotation_ids})
        rows = _rows(cur, "select * from failure_rows order by draw_order")
        data = Failures(rows)
        for row in _rows(cur, failures_sql("failure_predictions")):
            data.predictions.setdefault((row["graph_id"], row["annotation_id"]), []).append(row)
        data.graph_contents = {
            graph_id: f"{FORMAT_VERSION}:{sha256}"
            for graph_id, sha256 in cur.execute("select distinct graph_id, file_sha256 from failure_rows").fetchall()
        }
        for row in _rows(cur, failures_sql("failure_span_labels")):
            data.span_labels.setdefault(row["graph_id"], []).append(row)
        if light:
            data.seconds = time.monotonic() - started
            return data
        wanted_paths = set(paths_for or ())
        if any(r["graph_kind"] == "multi_agent" and r["annotation_id"] not in wanted_paths for r in rows):
            cur.execute("update failure_rows set final_node_id = null where not list_contains($ids, annotation_id)",
                        {"ids": sorted(wanted_paths)})
        # each computed once into a temp table (the paths' walks are most of it), read in its order,
        # and named again below by the nodes they show
        for name in ("failure_ends", "failure_paths", "failure_timeline", "failure_span_ends"):
            cur.execute(f"create or replace temp table {name}_rows as " + failures_sql(name))
        for row in _rows(cur, "select * from failure_ends_rows order by graph_id, op_id, role, full_node_id"):
            data.ends.setdefault((row["graph_id"], row["op_id"]), []).append(row)
        for row in _rows(cur, "select * from failure_paths_rows order by graph_id, op_id, target, source_hops,"
                              " source_full_node_id, target_full_node_id, edge_op_id"):
            data.paths.setdefault((row["graph_id"], row["op_id"], row["target"]), []).append(row)
        for row in _rows(cur, "select * from failure_timeline_rows order by graph_id, step, op_id"):
            data.timelines.setdefault(row["graph_id"], []).append(row)
        for row in _rows(cur, failures_sql("failure_spans")):
            data.spans.setdefault(row["graph_id"], []).append(row)
        for row in _rows(cur, "select * from failure_span_ends_rows order by graph_id, op_id, role, full_node_id"):
            data.span_ends.setdefault((row["graph_id"], row["op_id"]), []).append(row)
        cur.execute(
            "create or replace temp table failure_wanted as select distinct graph_id, full_node_id from ("
            " select graph_id, full_node_id from failure_ends_rows"
            " union all select graph_id, unnest(source_evidence_ids) from failure_rows"
            " union all select graph_id, prediction_node_id from failure_rows"
            " union all select graph_id, final_node_id from failure_rows"
            " union all select graph_id, target_full_node_id from failure_paths_rows"
            " union all select graph_id, unnest(outputs) from failure_timeline_rows"
            " union all select graph_id, full_node_id from failure_span_ends_rows"
            ") where full_node_id is not null"
        )
        for row in _rows(cur, failures_sql("failure_nodes"), {"chars": chars}):
            data.nodes[(row["graph_id"], row["full_node_id"])] = row
    finally:
        cur.close()
    data.seconds = time.monotonic() - started
    return data


# -- the drill-down picture of one annotation, from the loaded data ------------------------------


def _node(data: Failures, graph_id: str, full_node_id: str, row: dict | None = None) -> Node:
    found = data.node(graph_id, full_node_id) or {}
    return Node(full_node_id, found.get("class_name"), found.get("version"), found.get("value"),
                found.get("session_id"))


def canonical_path(edges: list[dict[str, Any]]) -> tuple[str, list[tuple[str, str, str | None, str | None]]]:
    """One shortest path out of the on-path edges of ``failure_paths.sql``, chosen as
    the drill-down picture draws it: from the smallest output id on a shortest path,
    then at each hop the smallest next node id (then op id)."""
    real = [e for e in edges if e["source_full_node_id"] is not None]
    if not real:  # the operation produced the target
        return edges[0]["target"], []
    by_source: dict[str, list[dict[str, Any]]] = {}
    for edge in real:
        by_source.setdefault(edge["source_full_node_id"], []).append(edge)
    current = min(e["source_full_node_id"] for e in real if e["source_hops"] == 0)
    start, path = current, []
    for _ in range(real[0]["total_hops"]):
        step = min(by_source[current], key=lambda e: (e["target_full_node_id"], e["edge_op_id"] or ""))
        path.append((step["source_full_node_id"], step["target_full_node_id"], step["edge_op_id"],
                     step["edge_op_name"]))
        current = step["target_full_node_id"]
    return start, path


def drilldown(data: Failures, row: dict[str, Any]) -> Drilldown:
    """What the drill-down picture of ``row`` shows (``dashboards.drilldown.load`` gives it for one
    annotation, loaded alone)."""
    d = Drilldown(dict(row))
    graph_id = row["graph_id"]
    if row["faulty_op_id"] is None:
        d.notes.append("the label names no faulty operation (e.g. a wrong reference or a wrong judge)")
    else:
        ends = data.ends.get((graph_id, row["faulty_op_id"]), [])
        if not ends:
            d.notes.append("the faulty operation has no edges in this graph")
            d.op = {"op_id": row["faulty_op_id"], "op_name": row["op_name"], "op_category": None, "actor": None}
        else:
            first = ends[0]
            d.op = {"op_id": first["op_id"], **{k: first[k] for k in ("op_name", "op_category", "op_session_id",
                                                                         "actor")}}
            nodes = [(e["role"], _node(data, graph_id, e["full_node_id"])) for e in ends]
            for role, node in sorted(nodes, key=lambda x: (x[0], x[1].class_name or "", x[1].full_node_id)):
                (d.inputs if role == "input" else d.outputs).append(node)
    target_id = row["prediction_node_id"] or row["final_node_id"]
    if target_id is None:
        if row["graph_kind"] == "memory":
            d.notes.append("no prediction node was resolved for the failed query")
        return d
    d.target_kind = "prediction" if row["prediction_node_id"] else "final step output"
    d.target = _node(data, graph_id, target_id)
    if not d.outputs:
        return d
    edges = data.paths.get((graph_id, row["faulty_op_id"], target_id))
    if not edges:
        d.notes.append(f"the {d.target_kind} is not downstream of the operation's outputs")
        return d
    start, path = canonical_path(edges)
    ids = [start] + [dst for _, dst, _, _ in path]
    d.path = [_node(data, graph_id, i) for i in ids]
    d.path_edges = path
    hops = len(path)
    d.notes.append(
        f"{d.target_kind}: {hops} edge{'s' if hops != 1 else ''} from the operation's output"
        + (" (the operation produced it)" if hops == 0 else "")
    )
    return d


# -- one annotation, loaded alone -------------------------------------------------------------------


def load(con: duckdb.DuckDBPyConnection, annotation_id: str, graph_id: str | None = None) -> Drilldown:
    """Everything one picture shows: the build's set-based loading (:func:`load_failures`) for this one
    annotation, so ``tracehouse show`` and a build draw from the same queries."""
    data = load_failures(con, [annotation_id], paths_for=[annotation_id])
    found = [r for r in data.rows if graph_id is None or r["graph_id"] == graph_id]
    if not found:
        where = f" in graph {graph_id!r}" if graph_id is not None else ""
        raise AnnotationNotFound(f"no annotation {annotation_id!r}{where} in the warehouse")
    if len(found) > 1:
        raise AmbiguousAnnotation(annotation_id, [r["graph_id"] for r in found])
    return drilldown(data, found[0])
