"""``tracehouse.duckdb`` opens in an older DuckDB: 1.5.6, from the package registry, in a virtual
environment of its own (tests/second_env.py, made once from tests/compat/duckdb15.txt), started in the
warehouse folder as the README says. Every table, view and macro the file holds must give there what
it gives with the project's DuckDB (2.x).

The environment needs the package registry the first time; without it the test is skipped, saying so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, query
from second_env import python_for

COMPAT = REPO / "tests" / "compat"
REQUIREMENTS = COMPAT / "duckdb15.txt"
PROBE = COMPAT / "probe.py"


def compat_python() -> Path:
    """The Python of the DuckDB 1.5 environment (tests/second_env.py)."""
    return python_for(REQUIREMENTS)


def probes(warehouse: Path) -> dict[str, list]:
    """One query per macro of the warehouse, with arguments taken from its rows."""
    # the last node an operation made in the first graph (it has ancestors), its first input (it has
    # descendants), and an operation with edges
    graph, node = query(warehouse, "select graph_id, target_full_node_id from edges "
                                   "order by graph_id, target_node_index desc limit 1")[0]
    graph_in, source = query(warehouse, "select graph_id, source_full_node_id from edges "
                                        "order by graph_id, source_node_index limit 1")[0]
    graph_op, op = query(warehouse, "select graph_id, op_id from edges order by all limit 1")[0]
    return {
        "graph_kinds": ["select graph_kind, count(*) from graph_kinds() group by all order by all", []],
        "error_class": ["select error_class(error_type), count(*) from annotations group by all order by all", []],
        "operation_type": ["select operation_type(g.system, o.op_name, o.category), count(*) from operations o "
                           "join graphs g using (graph_id) group by all order by all", []],
        "agent_rule": ["select * from agent_rule('magentic-one', 'WebSurfer')", []],
        "agent_role": ["select agent_role('magentic-one', 'Orchestrator'), agent_role('x', 'Computer_terminal'),"
                       " agent_role('x', null)", []],
        "agent_operation_type": ["select agent_operation_type('magentic-one', 'Assistant'), "
                                 "agent_operation_type('x', 'user')", []],
        "unquoted": ["select unquoted($$'a'$$), unquoted('\"b\"'), unquoted('c'), "
                     "(select count(*) from nodes where unquoted(value) is distinct from value)", []],
        "wilson_low": ["select round(wilson_low(3, 10), 9), wilson_low(0, 0)", []],
        "wilson_high": ["select round(wilson_high(3, 10), 9), wilson_high(0, 0)", []],
        "lineage": ["select hops, count(*) from lineage(?, ?, 'upstream') group by all order by all", [graph, node]],
        "upstream": ["select hops, count(*) from upstream(?, ?) group by all order by all", [graph, node]],
        "downstream": ["select hops, count(*) from downstream(?, ?) group by all order by all", [graph_in, source]],
        "op_subgraph": ["select role, count(*) from op_subgraph(?, ?) group by all order by all", [graph_op, op]],
        "failures": ["select system, count(*) from failures() group by all order by all", []],
        "attribution_cases": ["select method, count(*), count(predicted_op_id) from attribution_cases() "
                              "group by all order by all", []],
        "trail_category": ["select trail_category(' formatting  errors'), trail_category('Tool Selection'), "
                           "trail_category('Made up'), trail_category(null)", []],
        "agentrx_failure_case": ["select agentrx_failure_case('Intent Plan Misalignment'), agentrx_failure_case('3'), "
                                 "agentrx_failure_case('x'), agentrx_failure_case(null)", []],
        "agent_key": ["select agent_key('  WebSurfer '), agent_key(' '), agent_key(null)", []],
        "same_agent": ["select same_agent('Assistant', 'assistant '), same_agent('a', 'b'), same_agent('a', null)", []],
        "label_key": ["select label_key('Intent not-Supported!'), label_key(null)", []],
        "error_label": ["select error_label('agentrx', 'intent  not-SUPPORTED'), error_label('agentrx', 'mine'), "
                        "error_label('agentrx', null)", []],
    }


def probe(python: Path, warehouse: Path, queries: dict[str, list]) -> dict:
    done = subprocess.run([str(python), str(PROBE)], cwd=warehouse, input=json.dumps(queries), capture_output=True,
                          text=True, timeout=300, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, f"{python}: {done.stderr}"
    return json.loads(done.stdout)


def test_duckdb_1_5_opens_the_published_database_and_reads_every_view_and_macro(sample_warehouse) -> None:
    warehouse, summary = sample_warehouse
    python = compat_python()
    queries = probes(warehouse)
    older = probe(python, warehouse, queries)
    ours = probe(Path(sys.executable), warehouse, queries)
    assert older["duckdb"] == "1.5.6" and ours["duckdb"].startswith("2.")

    annotations = query(warehouse, "select count(*) from annotations")[0][0]
    assert annotations > 0 and older["relations"]["annotations"][0] == annotations
    assert older["relations"] == ours["relations"]
    # everything tracehouse's own connection holds (the same install()) is in the file, and readable
    relations = query(warehouse, "select view_name from duckdb_views() where not internal "
                                 "union all select table_name from duckdb_tables() where not internal")
    assert set(older["relations"]) == {name for (name,) in relations} and "failure_rates" in older["relations"]
    macros = query(warehouse, "select distinct function_name from duckdb_functions() where not internal "
                              "and function_type in ('macro', 'table_macro')")
    assert set(older["macros"]) == {name for (name,) in macros} == set(queries), "a macro without a probe query"
    assert older["probes"] == ours["probes"]
    assert all(older["probes"][walk] for walk in ("upstream", "downstream", "op_subgraph"))  # they found something
    assert older["probes"]["agent_role"] == [["orchestrator", "terminal", None]]
    assert older["probes"]["trail_category"] == [["Formatting Errors", "Tool Selection Errors", "made up", None]]
    assert older["probes"]["agentrx_failure_case"] == [["Intent-Plan Misalignment", "Invalid Invocation",
                                                        "Inconclusive", None]]


def test_the_duckdb_1_5_command_line_opens_it_from_the_warehouse_folder(sample_warehouse) -> None:
    """The README's `cd warehouse && duckdb -readonly tracehouse.duckdb`, with the registry's duckdb-cli 1.5.6."""
    warehouse, _ = sample_warehouse
    cli = compat_python().parent / "duckdb"
    done = subprocess.run([str(cli), "-readonly", "tracehouse.duckdb", "-json", "-c",
                           "select version() as v, count(*) as n from annotations"],
                          cwd=warehouse, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    assert row == {"v": "v1.5.6", "n": query(warehouse, "select count(*) from annotations")[0][0]}
