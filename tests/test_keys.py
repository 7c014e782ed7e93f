"""The integer keys written at ingest (readers.base.with_keys): graph_key in graphs, nodes and edges,
node_index in nodes, and the node indices of each edge's ends. The marts join on them instead of on
(graph_id, full_node_id), so they must name exactly the nodes the strings name, for every reader."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import build_warehouse, query

from pipelines.readers import base


@pytest.mark.parametrize("built", ["sample_warehouse", "multi_agent_warehouse"])
def test_the_keys_name_the_nodes_the_ids_name(built, request) -> None:
    warehouse, summary = request.getfixturevalue(built)
    assert summary.ok, summary.failed_checks
    graphs = query(warehouse, "select graph_id, graph_key from graphs")
    assert graphs and all(key == base.graph_key(graph_id) for graph_id, key in graphs)
    assert len({key for _, key in graphs}) == len(graphs)
    # node_index: 0..n-1 in each graph, and the graph's key on every node and edge
    [(bad_nodes,)] = query(warehouse, """
        select count(*) from (
            select n.graph_id, min(n.node_index) as low, max(n.node_index) as high,
                   count(distinct n.node_index) as distinct_indices, count(*) as n, any_value(g.graph_key) as key,
                   count(*) filter (where n.graph_key <> g.graph_key) as other_keys
            from nodes n join graphs g using (graph_id) group by n.graph_id)
        where low <> 0 or high <> n - 1 or distinct_indices <> n or other_keys > 0""")
    assert bad_nodes == 0
    # each edge's indices are those of the nodes its ids name
    [(edges, named, other_keys)] = query(warehouse, """
        select count(*),
               count(*) filter (where s.node_index = e.source_node_index and t.node_index = e.target_node_index),
               count(*) filter (where e.graph_key <> g.graph_key)
        from edges e
        join graphs g using (graph_id)
        join nodes s on s.graph_id = e.graph_id and s.full_node_id = e.source_full_node_id
        join nodes t on t.graph_id = e.graph_id and t.full_node_id = e.target_full_node_id""")
    assert edges > 0 and named == edges and other_keys == 0
    [(total,)] = query(warehouse, "select count(*) from edges")
    assert total == edges


def test_the_graph_key_is_stable_and_signed() -> None:
    """The same id gives the same key in every process (no salted hash), within int64."""
    assert base.graph_key("graph-c538a30aff140bb566ed8ee28c15f88a") == 5433172037135219907
    keys = {base.graph_key(f"graph-{i}") for i in range(1000)}
    assert len(keys) == 1000 and any(k < 0 for k in keys) and all(-(2**63) <= k < 2**63 for k in keys)


def test_two_graphs_sharing_a_key_stop_the_commit(tmp_path: Path, monkeypatch) -> None:
    """The marts would mix two graphs sharing a key: the blocking check graph_keys_shared finds
    them, and the build commits nothing."""
    from smartcomment_graphs import write_memtracebench

    write_memtracebench(tmp_path / "src", {"rag": 2})
    monkeypatch.setattr(base, "graph_key", lambda graph_id: 7)
    summary = build_warehouse(tmp_path / "w", [f"memtracebench={tmp_path / 'src'}"])
    assert not summary.committed
    assert "graphs:graph_keys_shared" in summary.failed_checks
