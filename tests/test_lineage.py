"""Lineage at two levels.

The SQL's: what each mart, chart and page reads is derived from its SQL (pipelines.analytics.catalog.sql_reads),
checked against what DuckDB's binder scans for it (tests/sql_references.py), and that is what the
Dagster asset graph holds upstream of each asset; a new mart's upstream comes with no declaration.

The data's: the lineage macros (sql/macros/20_lineage.sql) against a breadth-first search in Python.
Random DAGs traced with the real smartcomment package and built through the real build path (a
dozen in one build, every node of every graph checked, queried like `tracehouse sql` does), and random graphs
with cycles written straight as published Parquet partitions (many examples, cheap: checks that the
keyed recursive CTE terminates and keeps shortest distances).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import orjson
import pyarrow as pa
import pytest
from conftest import REPO, build_warehouse, query
from hypothesis import given, settings
from hypothesis import strategies as st
from smartcomment import comment_graph, comment_op, comment_session, comment_variable
from sql_references import Binder

from pipelines import schema
from pipelines.analytics import catalog, db
from pipelines.storage.warehouse import Warehouse

# -- what the SQL reads ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def binder():
    binder = Binder()
    yield binder
    binder.close()


def test_what_each_query_reads_is_what_duckdb_binds(binder: Binder) -> None:
    """The lineage from the parse tree (macros followed by name) names exactly the tables and marts
    DuckDB's bound plan of each mart, chart and page query scans (macros expanded by DuckDB)."""
    for name, mart in catalog.marts().items():
        assert set(mart.reads) == binder.reads(mart.sql) - {name}, name
    queries = [*sorted((catalog.SQL_DIR / "charts").glob("*.sql")), *sorted((catalog.SQL_DIR / "page").glob("*.sql"))]
    for path in queries:
        assert set(catalog.sql_reads(path.read_text())) == binder.reads(path.read_text()), path.name
    # through nested table macros: attribution_cases() calls graph_kinds(), which reads sessions
    assert {"sessions", "attributions", "attribution_scope"} <= set(catalog.marts()["attribution_accuracy"].reads)
    assert catalog.tables_read("operation_links") == ("edges",)
    assert catalog.marts_read("attribution_op_distance") == ("operation_links",)


def test_derived_lineage_is_kept_between_processes(tmp_path: Path) -> None:
    """The first process derives every mart's reads and keeps them in the user's cache; the next gets
    the same answer without parsing any SQL."""
    probe = ("import json; from pipelines.analytics import catalog; "
             "reads = {m: catalog.marts()[m].reads for m in catalog.mart_order()}; "
             "print(json.dumps([reads, catalog._PARSER is not None]))")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", probe], env=env, cwd=REPO, capture_output=True, text=True,
                           check=True) for _ in range(2)]
    (first, parsed_first), (second, parsed_second) = (orjson.loads(r.stdout) for r in runs)
    assert first == second and first == {m: list(catalog.marts()[m].reads) for m in catalog.mart_order()}
    assert parsed_first and not parsed_second
    assert (tmp_path / "tracehouse" / "sql-reads.json").is_file()


def test_each_asset_is_downstream_of_what_its_sql_reads(binder: Binder) -> None:
    """In the Dagster asset graph a mart's parents are exactly what its SQL reads, and the dashboard's
    include what every chart and the page read (and what the failure views' SQL reads)."""
    from dashboards import failure_view
    from pipelines.defs import build_definitions
    from pipelines.defs.resources import TracehouseResource

    graph = build_definitions(TracehouseResource(warehouse="/nonexistent")).resolve_asset_graph()

    def parents(key: str) -> set[str]:
        return {p.to_user_string() for p in graph.get(dg.AssetKey(key)).parent_keys}

    for name, mart in catalog.marts().items():
        assert parents(name) == binder.reads(mart.sql) - {name}, name
    shown = [*sorted((catalog.SQL_DIR / "charts").glob("*.sql")), *sorted((catalog.SQL_DIR / "page").glob("*.sql"))]
    assert set().union(*(binder.reads(p.read_text()) for p in shown)) | set(failure_view.reads()) <= parents(
        "dashboard")
    assert {"failure_propagation", "nodes", "edges"} <= set(failure_view.reads())


def test_a_new_mart_reads_what_its_sql_reads_with_no_declaration(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A mart is its SQL file and its YAML entry: its upstream (tables, marts, those of the macros it
    calls) comes from the SQL, and a change of the SQL alone changes it."""
    from pipelines.defs import analytics

    sql_dir = tmp_path / "sql"
    shutil.copytree(catalog.SQL_DIR, sql_dir)
    mart_sql = sql_dir / "marts" / "links_per_kind.sql"
    mart_sql.write_text("-- operations that feed another, per kind of graph\n"
                        "select k.graph_kind, count(*) as n\n"
                        "from operation_links l join graph_kinds() k using (graph_id) group by all\n")
    with (sql_dir / "marts" / "_marts.yml").open("a") as declarations:
        declarations.write("  - name: links_per_kind\n    description: Operation links per kind of graph.\n"
                           "    grain: [graph_kind]\n    columns:\n"
                           "      - {name: graph_kind, description: memory or multi_agent}\n"
                           "      - {name: n, description: links}\n")
    monkeypatch.setattr(catalog, "SQL_DIR", sql_dir)
    for cached in (catalog.marts, catalog.mart_order):
        cached.cache_clear()
    try:
        expected = {"operation_links", "graphs", "sessions"}  # graph_kinds() reads graphs and sessions
        assert set(catalog.marts()["links_per_kind"].reads) == expected
        [spec] = analytics.marts_asset(["links_per_kind"]).specs
        assert {d.asset_key.to_user_string() for d in spec.deps} == expected
        order = catalog.mart_order()
        assert order.index("operation_links") < order.index("links_per_kind")
        mart_sql.write_text("select system as graph_kind, count(*) as n from graphs group by all\n")
        assert catalog.marts()["links_per_kind"].reads == ("graphs",)
    finally:
        monkeypatch.undo()
        for cached in (catalog.marts, catalog.mart_order):
            cached.cache_clear()


# -- reference implementation -------------------------------------------------------------------


def bfs(edges: list[tuple[str, str]], start: str, *, reverse: bool) -> dict[str, int]:
    """Shortest hop count to every node reachable from ``start`` (against the edges when reverse)."""
    adjacent: dict[str, set[str]] = defaultdict(set)
    for src, dst in edges:
        if reverse:
            adjacent[dst].add(src)
        else:
            adjacent[src].add(dst)
    distance = {start: 0}
    frontier = deque([start])
    while frontier:
        node = frontier.popleft()
        for nxt in adjacent[node]:
            if nxt not in distance:
                distance[nxt] = distance[node] + 1
                frontier.append(nxt)
    del distance[start]
    return distance


# -- random DAGs traced with smartcomment -------------------------------------------------------

# One op: indices (into the nodes that exist so far) of its inputs, and how many new outputs it makes.
def random_ops(rng: random.Random) -> list[tuple[list[int], int]]:
    return [([rng.randrange(10_000) for _ in range(rng.randint(0, 4))], rng.randint(1, 3))
            for _ in range(rng.randint(1, 14))]


def trace_dag(graph_id: str, seed_nodes: int, ops: list[tuple[list[int], int]]) -> dict[str, Any]:
    """Trace a random pipeline: root messages, then ops reading existing nodes and writing new ones;
    the last op's outputs are predictions (class_name 'prediction'). Returns the exported graph."""

    def var(value: str, name: str, **options: Any):
        return comment_variable(value, id_strategy=lambda _v: name, to_runtime=True, **options)

    with comment_graph(graph_id=graph_id, user_id="locomo-1", project_id="mem0") as graph:
        with comment_session(session_id=f"{graph_id}-s0", category="memory_construction"):
            existing = [var(f"root {i}", f"root_{i}", category="message") for i in range(seed_nodes)]
        with comment_session(session_id=f"{graph_id}-s1", category="memory_search"):
            for k, (picks, n_out) in enumerate(ops):
                inputs = list({id(existing[p % len(existing)]): existing[p % len(existing)] for p in picks}.values())
                last = k == len(ops) - 1
                outputs = [
                    var(f"value {k}.{j}", f"n{k}_{j}", **({"class_name": "prediction"} if last else {}))
                    for j in range(n_out)
                ]
                comment_op(inputs=inputs, outputs=outputs, op_name=f"step_{k}", category="retrieval")
                existing.extend(outputs)
        return graph.export_graph()


def edge_list(export: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["source_full_node_id"], e["target_full_node_id"]) for e in export["data"]["edges"]]


def test_upstream_and_downstream_match_bfs_on_traced_dags(tmp_path: Path) -> None:
    """Twelve random DAGs (a new seed each run, named in every failure) in one build: the macros'
    answer for every node of every graph equals a breadth-first search over its exported edges."""
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    corpus = tmp_path / "corpus"
    (corpus / "graphs").mkdir(parents=True)
    exports = {}
    for i in range(12):
        export = trace_dag(f"graph-dag{i:02d}", rng.randint(1, 4), random_ops(rng))
        exports[export["graph_id"]] = export
        (corpus / "graphs" / f"dag_{i}.json").write_bytes(orjson.dumps(export))
    warehouse = tmp_path / "W"
    summary = build_warehouse(warehouse, [f"dags:smartcomment={corpus}"])
    assert not summary.failed_steps and not summary.files_rejected, (seed, summary)

    checked_predictions = 0
    con = db.connect(Warehouse(warehouse))  # the published database, as `tracehouse sql` opens it
    try:
        for gid, export in exports.items():
            edges = edge_list(export)
            for node in export["data"]["nodes"]:
                nid = node["full_node_id"]
                for macro, reverse in (("upstream", True), ("downstream", False)):
                    rows = con.execute(f"select full_node_id, hops from {macro}(?, ?)", [gid, nid]).fetchall()
                    assert dict(rows) == bfs(edges, nid, reverse=reverse), (seed, macro, gid, nid)
                    assert len(rows) == len(dict(rows)), (seed, macro, gid, nid)  # one row per node
                if node["class_name"] == "prediction":
                    checked_predictions += 1
    finally:
        con.close()
    assert checked_predictions >= len(exports), seed


def test_op_subgraph_lists_inputs_and_outputs_of_an_op(tmp_path: Path) -> None:
    export = trace_dag("graph-opsub", 3, [([0, 1], 2), ([2, 3], 1), ([4, 0], 2)])
    corpus = tmp_path / "corpus" / "graphs"
    corpus.mkdir(parents=True)
    (corpus / "g.json").write_bytes(orjson.dumps(export))
    warehouse = tmp_path / "W"
    summary = build_warehouse(warehouse, [f"one:smartcomment={corpus.parent}"])
    assert not summary.failed_steps and not summary.files_rejected, summary
    values = {n["full_node_id"]: n["value"] for n in export["data"]["nodes"]}
    for op in export["data"]["operations"]:
        op_edges = [e for e in export["data"]["edges"] if e["op_id"] == op["op_id"]]
        expected = {("input", e["source_full_node_id"]) for e in op_edges} | {
            ("output", e["target_full_node_id"]) for e in op_edges
        }
        rows = query(
            warehouse,
            "select role, full_node_id, value, op_name, op_category from op_subgraph(?, ?)",
            ["graph-opsub", op["op_id"]],
        )
        assert {(r[0], r[1]) for r in rows} == expected
        assert len(rows) == len(expected)
        assert all(r[2] == values[r[1]] for r in rows)
        assert {(r[3], r[4]) for r in rows} == {(op["op_name"], op["category"])}
    assert query(warehouse, "select count(*) from op_subgraph('graph-opsub', 'op-missing')") == [(0,)]

    # The macros live in the published database: the `tracehouse sql` command can call them.
    prediction = next(n["full_node_id"] for n in export["data"]["nodes"] if n["class_name"] == "prediction")
    result = subprocess.run(
        [sys.executable, "-m", "pipelines.interfaces.cli", "sql", "--warehouse", str(warehouse), "--format", "csv",
         f"select full_node_id, hops from upstream('graph-opsub', '{prediction}') order by hops, full_node_id"],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=True,
    )
    lines = result.stdout.strip().splitlines()
    expected = bfs(edge_list(export), prediction, reverse=True)
    assert lines[0] == "full_node_id,hops"
    assert {tuple(line.rsplit(",", 1)) for line in lines[1:]} == {(k, str(v)) for k, v in expected.items()}


# -- random graphs with cycles, straight into DuckDB ------------------------------------------------


def lineage_connection(graphs: dict[str, list[tuple[str, str]]]) -> duckdb.DuckDBPyConnection:
    """In-memory tables in the canonical schemas holding the graphs, plus sql/macros/20_lineage.sql."""
    rows: dict[str, list[dict[str, Any]]] = {"nodes": [], "edges": [], "operations": []}
    for gid, edges in graphs.items():
        nodes = sorted({n for edge in edges for n in edge})
        rows["nodes"] += [{"graph_id": gid, "full_node_id": n, "class_name": "c", "session_id": "s"} for n in nodes]
        for k, (src, dst) in enumerate(edges):
            rows["edges"].append({"graph_id": gid, "edge_id": f"e{k}", "op_id": f"op-{k}",
                                  "source_full_node_id": src, "target_full_node_id": dst})
            rows["operations"].append({"graph_id": gid, "op_id": f"op-{k}", "step": k})
    con = duckdb.connect()
    for name, table_rows in rows.items():
        con.register(f"{name}_rows", pa.Table.from_pylist(table_rows, schema=schema.TABLES[name]))
        con.execute(f"create table {name} as select * from {name}_rows")
    con.execute(db.sql_file("macros", "20_lineage.sql"))
    return con


# Node names with quotes, colons and spaces: they travel as parameters, never spliced into SQL.
NODE_NAMES = [f"kind:node {i}'{'x' * (i % 3)}@1" for i in range(9)]
graph_strategy = st.lists(
    st.tuples(st.sampled_from(NODE_NAMES), st.sampled_from(NODE_NAMES)), min_size=1, max_size=24
)


@settings(max_examples=60, deadline=None)
@given(graphs=st.lists(graph_strategy, min_size=1, max_size=3))
def test_macros_terminate_on_cycles_and_keep_shortest_hops(graphs: list[list[tuple[str, str]]]) -> None:
    named = {f"graph {i}": edges for i, edges in enumerate(graphs)}
    con = lineage_connection(named)
    try:
        for gid, edges in named.items():
            for nid in sorted({n for edge in edges for n in edge}):
                up = con.execute("select full_node_id, hops from upstream(?, ?)", [gid, nid]).fetchall()
                down = con.execute("select full_node_id, hops from downstream(?, ?)", [gid, nid]).fetchall()
                assert dict(up) == bfs(edges, nid, reverse=True)
                assert dict(down) == bfs(edges, nid, reverse=False)
                assert len(up) == len(dict(up)) and len(down) == len(dict(down))
        # Edges of other graphs never leak in.
        assert con.execute("select count(*) from upstream('no such graph', ?)", [NODE_NAMES[0]]).fetchone() == (0,)
    finally:
        con.close()
