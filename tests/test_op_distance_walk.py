"""attribution_op_distance on random operation graphs, against a breadth-first search written here.

The mart's walk (over operation_links, computed here first as a build does, and checked against the
links the generator made) is a plain UNION recursion that keeps every path length and takes the
least, stopped at the graph's count of operation pairs (docs in sql/marts/attribution_op_distance.sql).
These graphs have what the generated corpora rarely have: cycles between operations, operations that
read their own output, edges without an operation, guesses outside the graph, several writers of a
node and multi-agent graphs whose guesses name steps. The mart's SQL runs over in-memory tables in
the warehouse's schemas, with the real macros and seeds.
"""

from __future__ import annotations

import random
from collections import Counter, deque

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pytest

from pipelines import schema
from pipelines.analytics import catalog
from pipelines.analytics.catalog import SQL_DIR

METHODS = ("m1", "m2")


def keyed(arrow: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """graphs, nodes and edges with the integer keys ingest writes (readers.base.with_keys), graph by graph."""
    from pipelines.readers.base import with_keys

    parts: dict[str, list[pa.Table]] = {"graphs": [], "nodes": [], "edges": []}
    for graph_id in arrow["graphs"]["graph_id"].to_pylist():
        one = {name: arrow[name].filter(pc.equal(arrow[name]["graph_id"], graph_id)) for name in parts}
        for name, table in with_keys(one).items():
            parts[name].append(table)
    return {name: pa.concat_tables(tables) if tables else arrow[name] for name, tables in parts.items()}


def connection(tables: dict[str, list[dict]]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    arrow = {name: pa.Table.from_pylist(tables.get(name, []), schema=table_schema)
             for name, table_schema in schema.TABLES.items()}
    arrow.update(keyed(arrow))
    for name, table in arrow.items():
        con.register(f"{name}_rows", table)
        con.execute(f"create table {name} as select * from {name}_rows")
        con.unregister(f"{name}_rows")
    for seed in sorted((SQL_DIR / "seeds").glob("*.csv")):
        con.register("seed_rows", pacsv.read_csv(seed))
        con.execute(f'create table "{seed.stem}" as select * from seed_rows')
        con.unregister("seed_rows")
    for path in sorted((SQL_DIR / "macros").glob("*.sql")):
        con.execute(path.read_text())
    return con


def hops(succ: dict[str, set[str]], frm: str, to: str) -> int | None:
    """The shortest number of operation-to-operation steps from ``frm`` to ``to`` (None: no path)."""
    seen, todo = {frm: 0}, deque([frm])
    while todo:
        here = todo.popleft()
        for nxt in sorted(succ.get(here, ())):
            if nxt not in seen:
                seen[nxt] = seen[here] + 1
                todo.append(nxt)
    return seen.get(to)


def relation(succ: dict[str, set[str]], faulty: str, guess: str | None, guessed: bool) -> tuple[str, int | None]:
    if not guessed:
        return "missing", None
    if guess not in succ:
        return "not_in_graph", None
    if guess == faulty:
        return "exact", None
    if (up := hops(succ, guess, faulty)) is not None:
        return "upstream", up
    if (down := hops(succ, faulty, guess)) is not None:
        return "downstream", down
    return "unrelated", None


Case = tuple[str, str, str, int | None]  # method, system, relation, hops: a row of the mart before counting


Link = tuple[str, str, str]  # graph_id, from_op_id, to_op_id: a row of operation_links


def random_warehouse(rng: random.Random, n_graphs: int
                     ) -> tuple[dict[str, list[dict]], list[Case], list[str], set[Link]]:
    """Tables of ``n_graphs`` random graphs; the cases the mart scores (one per method and annotation,
    and the baselines'), each as a breadth-first search over the graph concludes; the cyclic graphs;
    which operation feeds which."""
    tables: dict[str, list[dict]] = {name: [] for name in schema.TABLES}
    memory_types = list(schema.MEMORY_ERROR_TYPES)
    cases: list[Case] = []
    cyclic: list[str] = []
    links: set[Link] = set()
    for g in range(n_graphs):
        graph_id, multi = f"g{g}", g % 3 == 2
        system = "magentic-one" if multi else rng.choice(["mem0", "rag"])
        tables["graphs"].append({
            "graph_id": graph_id, "source": "test", "system": system, "dataset": "d", "split": system,
            "file": f"{graph_id}.json", "file_sha256": "0", "n_nodes": 0, "n_edges": 0, "n_operations": 0,
            "n_sessions": 1, "n_annotations": 0,
        })
        tables["sessions"].append({"graph_id": graph_id, "session_id": "s", "ordinal": 0,
                                   "category": "multi_agent_trajectory" if multi else "memory_construction"})
        n_ops, n_nodes = rng.randint(2, 9), rng.randint(2, 8)
        ops = [f"op{g}-{i}" for i in range(n_ops)]
        for i, op in enumerate(ops):
            tables["operations"].append({"graph_id": graph_id, "op_id": op, "step": i})
        for i in range(n_nodes):  # every edge's ends are nodes of its graph, as ingest checks
            tables["nodes"].append({"graph_id": graph_id, "full_node_id": f"n{i}", "session_id": "s"})
        writes: dict[str, set[str]] = {op: set() for op in ops}
        reads: dict[str, set[str]] = {op: set() for op in ops}
        for k in range(rng.randint(0, 3 * n_ops)):  # edges: an operation reads a node and writes one
            op = rng.choice(ops + [None])
            src, dst = f"n{rng.randrange(n_nodes)}", f"n{rng.randrange(n_nodes)}"
            tables["edges"].append({"graph_id": graph_id, "edge_id": f"e{g}-{k}", "op_id": op,
                                    "source_full_node_id": src, "target_full_node_id": dst})
            if op is not None:
                reads[op].add(src)
                writes[op].add(dst)
        succ = {a: {b for b in ops if b != a and writes[a] & reads[b]} for a in ops}
        links.update((graph_id, a, b) for a in ops for b in succ[a])
        if any(a != b and hops(succ, a, b) is not None and hops(succ, b, a) is not None for a in ops for b in ops):
            cyclic.append(graph_id)
        for method in METHODS:
            tables["attribution_scope"].append({"method": method, "graph_id": graph_id, "source_file": "f"})
        for a in range(rng.randint(1, 3)):
            annotation_id, faulty = f"{graph_id}#a{a}", rng.choice(ops)
            tables["annotations"].append({
                "graph_id": graph_id, "annotation_id": annotation_id, "system": system, "dataset": "d",
                "query_id": "n0", "error_type": None if multi else rng.choice(memory_types),
                "faulty_op_id": faulty, "decisive_step": ops.index(faulty) if multi else None,
            })
            if multi:  # baseline:last_step guesses the last step
                cases.append(("baseline:last_step", system, *relation(succ, faulty, ops[-1], True)))
            else:  # no prediction node: baseline:response finds no question-answering operation
                cases.append(("baseline:response", system, "missing", None))
            for method in METHODS:
                kind = rng.randrange(5)
                if kind == 0:  # no prediction
                    cases.append((method, system, "missing", None))
                    continue
                step = rng.randrange(n_ops + 2) if multi else None  # a step past the end names no operation
                op = None if multi else (rng.choice(ops) if kind < 4 else "op-elsewhere")
                if kind == 1 and not multi:  # a prediction without an operation
                    op = None
                tables["attributions"].append({
                    "method": method, "annotation_id": annotation_id, "graph_id": graph_id, "system": system,
                    "dataset": "d", "predicted_op_id": op, "predicted_step": step, "source_file": "f",
                })
                guess = (ops[step] if step < n_ops else None) if multi else op
                cases.append((method, system, *relation(succ, faulty, guess, op is not None or step is not None)))
    return tables, cases, cyclic, links


@pytest.mark.parametrize("seed", range(6))
def test_op_distance_equals_a_breadth_first_search(seed: int) -> None:
    rng = random.Random(seed)
    tables, cases, cyclic, links = random_warehouse(rng, 40)
    assert cyclic, "the generated graphs should include cycles"
    con = connection(tables)
    try:
        for mart in catalog.marts_upstream("attribution_op_distance"):  # operation_links, as a build makes it first
            con.execute(f"create table {mart} as {catalog.marts()[mart].sql}")
        assert set(con.execute("select graph_id, from_op_id, to_op_id from operation_links").fetchall()) == links
        got = {tuple(r[:4]): r[4] for r in con.execute((SQL_DIR / "marts" / "attribution_op_distance.sql").read_text())
               .fetchall()}
    finally:
        con.close()
    assert got == dict(Counter(cases))
    assert {k[2] for k in got} >= {"exact", "upstream", "downstream", "unrelated", "not_in_graph", "missing"}
