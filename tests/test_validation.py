"""Validation as Dagster asset checks: clean data passes; corrupted published tables fail the right
checks with the right failing counts, a failing blocking check keeps downstream assets from running,
a failing warn check does not; the report escapes trace content.

Corruption is done on a copy of the session's multi-agent warehouse by rewriting a partition's
published Parquet, as a bug or a hand edit would.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines import schema
from pipelines.db import REPO
from pipelines.defs import validation as validation_defs
from pipelines.defs import warehouse as warehouse_defs
from pipelines.defs.resources import TracehouseResource
from pipelines.storage import Warehouse
from pipelines.validation import expectations, sql_checks
from tests.conftest import TRACERTRAJ, WHOWHEN

SOURCES = [f"whowhen={WHOWHEN}", f"tracertraj={TRACERTRAJ}"]
HAND_CRAFTED = "whowhen__Hand-Crafted"
ALGORITHM_GENERATED = "whowhen__Algorithm-Generated"


@dg.asset(deps=list(schema.TABLES), group_name="test")
def stand_in_mart() -> dg.MaterializeResult:
    """A tiny downstream asset standing for the marts."""
    return dg.MaterializeResult(metadata={"ran": True})


def copy_warehouse(source: Path, target: Path) -> Warehouse:
    shutil.copytree(source, target, symlinks=True)  # `current` links are relative: the copy is self-contained
    return Warehouse(target)


def rewrite(warehouse: Warehouse, partition: str, table: str, change) -> pa.Table:
    path = warehouse.current(partition) / f"{table}.parquet"
    data = change(pq.read_table(path))
    pq.write_table(data, path)
    return data


def set_values(data: pa.Table, column: str, rows: dict[int, Any]) -> pa.Table:
    values = data.column(column).to_pylist()
    for i, value in rows.items():
        values[i] = value
    field = data.schema.field(column)
    return data.set_column(data.schema.get_field_index(column), field, pa.array(values, field.type))


def run_checks(warehouse: Warehouse) -> dg.ExecuteInProcessResult:
    """One unpartitioned run, as the build's final run: every table check plus a downstream asset."""
    return dg.materialize(
        [warehouse_defs.flattened_tables, validation_defs.validate_tables, stand_in_mart],
        selection=dg.AssetSelection.checks_for_assets(*schema.TABLES) | dg.AssetSelection.assets(stand_in_mart),
        resources={"tracehouse": TracehouseResource(warehouse=str(warehouse.root), sources=SOURCES)},
        instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
    )


def evaluations(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    return {
        f"{e.asset_key.to_user_string()}:{e.check_name}": e
        for e in (event.event_specific_data for event in result.all_events
                  if event.event_type_value == "ASSET_CHECK_EVALUATION")
    }


def failing(result: dg.ExecuteInProcessResult) -> dict[str, int]:
    return {key: e.metadata["failing"].value for key, e in evaluations(result).items() if not e.passed}


# ---------------------------------------------------------------------------------------------
# The check files themselves


def test_check_files_declare_what_they_check() -> None:
    specs = sql_checks.load_sql_checks()
    assert len({s.name for s in specs}) == len(specs) == len(list((REPO / "sql" / "checks").glob("*.sql")))
    by_name = {s.name: s for s in specs}
    # Every key of schema.PRIMARY_KEYS has a uniqueness check over exactly those columns.
    for table, key in schema.PRIMARY_KEYS.items():
        name = "duplicate_graph_ids" if table == "graphs" else f"duplicate_{table.removesuffix('s')}_keys"
        assert by_name[name].asset == table and by_name[name].blocking
        assert f"group by {', '.join(key)}" in sql_checks.check_sql(by_name[name])
    assert {s.severity for s in specs} == {"error"}  # the SQL checks are structural


def test_suites_use_the_canonical_sets() -> None:
    suites = expectations.load_suites()
    assert set(suites) == set(schema.TABLES)
    params = expectations.parameters()
    assert params["error_types"] == list(schema.ERROR_TYPES)
    assert params["known_systems"] == list(schema.KNOWN_SYSTEMS)
    used = {e["kwargs"]["value_set"]["$PARAMETER"] for doc in suites.values() for e in doc["expectations"]
            if isinstance(e["kwargs"].get("value_set"), dict)}
    assert used == set(params)
    # Every kind of ingest error a reader or the ingest loop writes is a documented kind.
    modules = [*(REPO / "pipelines" / "readers").glob("*.py"), REPO / "pipelines" / "ingest.py"]
    code = "".join(path.read_text() for path in modules)
    kinds = set(re.findall(r'IngestError\(\s*"([a-z_]+)"', code)) | {"empty_file", "missing_key", "wrong_field_type",
                                                                      "wrong_top_level_type"}
    assert kinds - {"reader_failure"} <= set(expectations.INGEST_ERROR_KINDS)
    assert "reader_failure" not in expectations.INGEST_ERROR_KINDS  # a reader bug is worth a warning


def test_every_check_is_an_asset_check() -> None:
    keys = {f"{s.asset_key.to_user_string()}:{s.name}" for s in validation_defs.CHECK_SPECS}
    assert len(keys) == len(validation_defs.SPECS)
    assert "edges:edges_with_unknown_endpoint" in keys and "nodes:expectations_critical" in keys
    blocking = {f"{s.asset_key.to_user_string()}:{s.name}" for s in validation_defs.CHECK_SPECS if s.blocking}
    assert "graphs:expectations_warning" not in blocking and "ingest_errors:input_files_match_sources" not in blocking
    assert "ingest_errors:input_files_unaccounted" in blocking


# ---------------------------------------------------------------------------------------------
# A clean warehouse


def test_clean_warehouse_passes_every_check(multi_agent_warehouse) -> None:
    warehouse, summary = multi_agent_warehouse
    assert summary.failed_checks == []
    report = json.loads((warehouse / "reports" / "validation.json").read_text())
    assert len(report["checks"]) == len(validation_defs.SPECS) and all(c["passed"] for c in report["checks"])
    assert "all checks passed" in (warehouse / "reports" / "validation.html").read_text()


def test_checks_called_directly(multi_agent_warehouse) -> None:
    warehouse, _ = multi_agent_warehouse
    resource = TracehouseResource(warehouse=str(warehouse), sources=SOURCES)
    results = list(validation_defs.validate_tables(dg.build_asset_check_context(), tracehouse=resource))
    assert len(results) == len(validation_defs.SPECS)
    assert all(r.passed for r in results)
    by_key = {f"{r.asset_key.to_user_string()}:{r.check_name}": r for r in results}
    nodes = by_key["nodes:expectations_critical"]
    assert nodes.severity == dg.AssetCheckSeverity.ERROR and nodes.metadata["failing"].value == 0
    assert by_key["graphs:expectations_warning"].severity == dg.AssetCheckSeverity.WARN
    n_nodes = sum(pq.ParquetFile(Warehouse(warehouse).current(p) / "nodes.parquet").metadata.num_rows
                  for p in Warehouse(warehouse).partitions())
    assert f"| {n_nodes} | 0 | yes |" in nodes.metadata["expectations"].value  # every row was looked at


# ---------------------------------------------------------------------------------------------
# Corrupted tables


@pytest.fixture(scope="module")
def corrupted(multi_agent_warehouse, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two dangling edge endpoints (one of them HTML), a duplicated edge, and a graph row deleted."""
    warehouse = copy_warehouse(multi_agent_warehouse[0], tmp_path_factory.mktemp("corrupt") / "warehouse")

    def break_edges(edges: pa.Table) -> pa.Table:
        edges = set_values(edges, "target_full_node_id", {0: "<script>alert(1)</script>@1", 1: "ghost@1"})
        return pa.concat_tables([edges, edges.slice(5, 1)])

    edges = rewrite(warehouse, HAND_CRAFTED, "edges", break_edges)
    removed = {}

    def drop_graph(graphs: pa.Table) -> pa.Table:
        removed.update(graphs.slice(0, 1).to_pylist()[0])
        return graphs.slice(1)

    rewrite(warehouse, ALGORITHM_GENERATED, "graphs", drop_graph)
    return {"warehouse": warehouse, "result": run_checks(warehouse), "edges": edges, "removed": removed}


def test_blocking_checks_fail_with_exact_counts(corrupted: dict[str, Any]) -> None:
    removed = corrupted["removed"]
    child_tables = [t for t in schema.COUNT_COLUMNS if removed[schema.COUNT_COLUMNS[t]] > 0]
    assert failing(corrupted["result"]) == {
        "edges:edges_with_unknown_endpoint": 2,
        "edges:duplicate_edge_keys": 1,
        "graphs:graph_row_counts_mismatch": 1,  # the duplicated edge's graph holds one edge more
        "graphs:rows_of_unknown_graphs": len(child_tables),  # one row per table holding the dropped graph
        "ingest_errors:input_files_unaccounted": 1,  # its file is in neither graphs nor ingest_errors
    }
    results = evaluations(corrupted["result"])
    assert all(results[k].severity == dg.AssetCheckSeverity.ERROR for k in failing(corrupted["result"]))
    samples = results["ingest_errors:input_files_unaccounted"].metadata["samples"].value
    assert removed["file"] in samples and "in neither graphs nor ingest_errors" in samples
    dup = corrupted["edges"].slice(5, 1).to_pylist()[0]
    assert dup["edge_id"] in results["edges:duplicate_edge_keys"].metadata["samples"].value


def test_failing_blocking_check_stops_downstream(corrupted: dict[str, Any]) -> None:
    result = corrupted["result"]
    assert not result.success
    assert not any(e.asset_key == stand_in_mart.key for e in _materializations(result))
    started = [e.step_key for e in result.all_events if e.event_type_value == "STEP_START"]
    failed = [e.step_key for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert started == failed == ["validate_tables"]  # the downstream step never started


def test_report_shows_failures_and_escapes_trace_content(corrupted: dict[str, Any]) -> None:
    report = evaluations(corrupted["result"])["edges:edges_with_unknown_endpoint"].metadata["report"].value
    assert Path(report).parent == corrupted["warehouse"].reports_dir
    page = Path(report).read_text()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;@1" in page
    assert "blocking checks failed" in page
    assert re.search(r"FAILED</span></td><td>edges</td><td><a [^>]+>edges_with_unknown_endpoint</a></td>"
                     r"<td>error \(blocking\)</td><td class=n>2</td>", page)
    markdown = evaluations(corrupted["result"])["edges:edges_with_unknown_endpoint"].metadata["samples"].value
    assert "&lt;script&gt;" in markdown and "<script>" not in markdown


def _materializations(result: dg.ExecuteInProcessResult) -> list[dg.AssetMaterialization]:
    return [e.event_specific_data.materialization for e in result.get_asset_materialization_events()]


def test_warnings_do_not_block(multi_agent_warehouse, tmp_path: Path) -> None:
    """A system outside the canonical set and bad node versions warn; the downstream asset still runs."""
    warehouse = copy_warehouse(multi_agent_warehouse[0], tmp_path / "warehouse")
    rewrite(warehouse, HAND_CRAFTED, "graphs", lambda g: set_values(g, "system", {2: "my-own-agents"}))
    rewrite(warehouse, ALGORITHM_GENERATED, "nodes", lambda n: set_values(n, "version", {3: 0, 4: -2, 5: None}))
    result = run_checks(warehouse)
    assert failing(result) == {"graphs:expectations_warning": 1, "nodes:expectations_warning": 3}
    assert all(e.severity == dg.AssetCheckSeverity.WARN for e in evaluations(result).values() if not e.passed)
    assert result.success and any(m.asset_key == stand_in_mart.key for m in _materializations(result))
    nodes = evaluations(result)["nodes:expectations_warning"].metadata["expectations"].value
    assert "expect_column_values_to_be_between(version, min_value=1)" in nodes

    # Summing per batch is exact: each partition file cut into batches of 500 rows, or all packed into one.
    suite = {"nodes": expectations.load_suites()["nodes"]}
    for batch_rows in (500, 100_000):
        snapshot = warehouse.committed().snapshot
        outcomes = {(o.spec.asset, o.spec.name): o for o in expectations.validate_suites(
            warehouse, snapshot, suite, use_cache=False, batch_rows=batch_rows)}
        nodes = outcomes[("nodes", "expectations_warning")]
        counts = {e.label: (e.element_count, e.unexpected_count) for e in nodes.expectations}
        n_nodes = sum(pq.ParquetFile(warehouse.current(p) / "nodes.parquet").metadata.num_rows
                      for p in warehouse.partitions())
        assert counts == {
            "expect_column_values_to_not_be_null(version)": (n_nodes, 1),
            "expect_column_values_to_be_between(version, min_value=1)": (n_nodes, 2),
            "expect_column_values_to_match_regex(full_node_id, regex='@[0-9]+$')": (n_nodes, 0),
        }
        versions = sorted(row[3] for row in nodes.samples)
        assert versions == ["-2", "0", "NULL"]
        assert all(row[1] == ALGORITHM_GENERATED for row in nodes.samples)


def test_cached_results_follow_content(multi_agent_warehouse, tmp_path: Path, monkeypatch) -> None:
    """A partition file rewritten with the same rows costs no GX run; a changed value costs one batch."""
    warehouse = copy_warehouse(multi_agent_warehouse[0], tmp_path / "warehouse")
    suite = {"nodes": expectations.load_suites()["nodes"]}
    runs: list[int] = []
    real_run = expectations._Runner.run

    def counted(self, table, frame, params):
        runs.append(len(frame))
        return real_run(self, table, frame, params)

    monkeypatch.setattr(expectations._Runner, "run", counted)

    def warnings() -> int:
        snapshot = warehouse.committed().snapshot
        outcomes = {o.spec.name: o for o in expectations.validate_suites(warehouse, snapshot, suite, batch_rows=500)}
        return outcomes["expectations_warning"].failing

    assert warnings() == 0 and len(runs) > 1  # several batches of 500 rows
    runs.clear()
    rewrite(warehouse, ALGORITHM_GENERATED, "nodes", lambda n: n)  # same rows, a new file
    assert warnings() == 0 and runs == []
    rewrite(warehouse, ALGORITHM_GENERATED, "nodes", lambda n: set_values(n, "version", {3: 0}))
    assert warnings() == 1 and len(runs) == 1  # only the batch holding row 3
