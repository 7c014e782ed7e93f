"""Validation as Dagster asset checks: clean data passes; corrupted tables fail the right checks with
the right failing counts, a failing blocking check keeps downstream assets from running, a failing warn
check does not; the report escapes trace content.

The warehouse is built from the sample corpus and the two Who&When records of tests/fixtures, so these
tests run on any clone. Corruption is done on a copy of it by rewriting a partition's committed
Parquet, as a bug or a hand edit would.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import build_warehouse
from processes import alive, children

from pipelines import schema
from pipelines.analytics import catalog
from pipelines.analytics.db import REPO
from pipelines.builds import commit
from pipelines.defs import validation as validation_defs
from pipelines.defs import warehouse as warehouse_defs
from pipelines.defs.resources import TracehouseResource
from pipelines.readers import base as reader_base
from pipelines.readers.base import IngestError
from pipelines.storage.records import PartitionState
from pipelines.storage.state import Attempt, CommitLog
from pipelines.storage.warehouse import Warehouse
from pipelines.validation import cache as validation_cache
from pipelines.validation import checks, gx_runner
from pipelines.validation import validate as validation
from pipelines.validation import worker as validation_worker

FIXTURES = REPO / "tests" / "fixtures"
HAND_CRAFTED = "whowhen__Hand-Crafted"
ALGORITHM_GENERATED = "whowhen__Algorithm-Generated"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from pipelines.sample.corpus import generate_corpus

    root = tmp_path_factory.mktemp("validation")
    generate_corpus(root / "corpus", seed=3, graphs_per_split=3)
    sources = [f"sample:memtracebench={root / 'corpus'}", f"whowhen={FIXTURES / 'whowhen'}"]
    summary = build_warehouse(root / "warehouse", sources)
    return {"warehouse": root / "warehouse", "summary": summary, "sources": sources}


@dg.asset(deps=list(schema.TABLES), group_name="test")
def stand_in_mart() -> dg.MaterializeResult:
    """A tiny downstream asset standing for the marts."""
    return dg.MaterializeResult(metadata={"ran": True})


def copy_warehouse(source: Path, target: Path) -> Warehouse:
    shutil.copytree(source, target)  # every path in the warehouse is relative: the copy is self-contained
    return Warehouse(target)


def rewrite(warehouse: Warehouse, partition: str, table: str, change) -> pa.Table:
    (path,) = warehouse.current_files(partition, table)  # the Who&When splits are small: one piece each
    data = change(pq.read_table(path))
    pq.write_table(data, path)
    return data


def set_values(data: pa.Table, column: str, rows: dict[int, Any]) -> pa.Table:
    values = data.column(column).to_pylist()
    for i, value in rows.items():
        values[i] = value
    field = data.schema.field(column)
    return data.set_column(data.schema.get_field_index(column), field, pa.array(values, field.type))


def run_checks(warehouse: Warehouse, sources: list[str]) -> dg.ExecuteInProcessResult:
    """One unpartitioned run, as the build's final run: every table check plus a downstream asset."""
    return dg.materialize(
        [warehouse_defs.flattened_tables, validation_defs.validate_tables, stand_in_mart],
        selection=dg.AssetSelection.checks_for_assets(*schema.TABLES) | dg.AssetSelection.assets(stand_in_mart),
        resources={"tracehouse": TracehouseResource(warehouse=str(warehouse.root), sources=sources)},
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
    """``table:check`` -> failing count of every failed check, read from its table's asset check result
    (one per table, listing its checks: the failed error ones, then the failed warn ones)."""
    found = {}
    for key, e in evaluations(result).items():
        table = key.split(":")[0]
        counts = e.metadata["failing_by_check"].value
        failed = [name for field in ("failed_checks", "warned_checks")
                  for name in e.metadata[field].value.split(", ") if name]
        assert e.passed == (not failed) and sum(counts.values()) == e.metadata["failing"].value
        found |= {f"{table}:{name}": counts[name] for name in failed}
    return found


# ---------------------------------------------------------------------------------------------
# The checks themselves


def test_key_and_relationship_checks_are_generated_from_the_schema() -> None:
    tests = {(t.asset, t.name): t for t in catalog.table_tests()}
    for table, key in schema.PRIMARY_KEYS.items():
        check = tests[(table, "duplicate_keys")]
        assert check.severity == "error" and f"group by {', '.join(key)}" in check.sql
    for rel in schema.RELATIONSHIPS:
        check = tests[(rel.table, rel.name)]
        assert f"anti join {rel.to} as y" in check.sql
        for value in rel.unlisted:
            assert f"'{value}'" in check.sql  # the one place NONE_SESSION is written is pipelines/schema.py
    hand_written = {p.stem for p in (REPO / "sql" / "checks").glob("*.sql")}
    assert hand_written == {name for (_, name), t in tests.items() if t.defined_in.startswith("sql/checks/")}


def test_suites_use_the_canonical_sets() -> None:
    suites = checks.load_suites()
    assert set(suites) == set(schema.TABLES)
    params = checks.parameters()
    assert params["error_types"] == list(schema.ERROR_TYPES) == [r["error_type"] for r in schema.seed_rows(
        "error_types")]
    assert params["known_systems"] == list(schema.KNOWN_SYSTEMS)
    used = {e["kwargs"]["value_set"]["$PARAMETER"] for doc in suites.values() for e in doc["expectations"]
            if isinstance(e["kwargs"].get("value_set"), dict)}
    assert used == set(params)
    # The GX suite accepts the kinds of sql/seeds/ingest_error_kinds.csv but the reader bugs (reader_failure warns).
    seed = schema.seed_rows("ingest_error_kinds")
    assert params["ingest_error_kinds"] == [r["kind"] for r in seed if r["reader_bug"] == "no"]
    assert [r["kind"] for r in seed if r["reader_bug"] == "yes"] == ["reader_failure"]
    assert {r["reader_bug"] for r in seed} == {"yes", "no"} and all(r["description"] for r in seed)
    # Code names a kind only through schema.ingest_error_kind (the readers' constants in readers.base and
    # IngestError itself): one the seed does not list is refused, naming the seed.
    assert {getattr(reader_base, kind.upper()) for kind in schema.INGEST_ERROR_KINDS} == set(schema.INGEST_ERROR_KINDS)
    assert IngestError(reader_base.MISSING_KEY, "x").kind == "missing_key"
    with pytest.raises(ValueError, match=r"ingest_error_kinds\.csv: unknown ingest error kind 'missing_column'"):
        IngestError("missing_column", "x")


def test_every_check_is_in_the_one_asset_check_of_its_table() -> None:
    specs = {f"{s.asset_key.to_user_string()}:{s.name}": s for s in validation_defs.CHECK_SPECS}
    listed = [(key.split(":")[0], name) for key, s in specs.items() for name in s.metadata["checks"].split(", ")]
    assert sorted(listed) == sorted((c.asset, c.name) for c in validation_defs.CHECKS)  # each exactly once
    assert sorted(specs) == sorted(f"{t}:checks" for t in schema.TABLES)
    assert "unknown_target_node" in specs["edges:checks"].metadata["error_checks"].split(", ")
    # Every table has error checks, so its asset check is blocking (the UI shows it so) and says so in
    # its metadata too; the warn checks are listed apart (their failures have severity WARN: no block).
    assert all(s.blocking and s.metadata["blocks_commit"] for s in specs.values())
    assert "input_files_match_sources" in specs["ingest_errors:checks"].metadata["warning_checks"].split(", ")
    assert "input_files_unaccounted" in specs["ingest_errors:checks"].metadata["error_checks"].split(", ")


# ---------------------------------------------------------------------------------------------
# A clean warehouse


def test_clean_warehouse_passes_every_check(built) -> None:
    warehouse, summary = built["warehouse"], built["summary"]
    assert summary.failed_checks == [] and summary.ok
    report = json.loads((warehouse / "reports" / "validation.json").read_text())
    assert len(report["checks"]) == len(validation_defs.CHECKS) and all(c["passed"] for c in report["checks"])
    assert "all checks passed" in (warehouse / "reports" / "validation.html").read_text()
    assert {HAND_CRAFTED, ALGORITHM_GENERATED} <= set(Warehouse(warehouse).partitions())


def test_checks_called_directly(built) -> None:
    resource = TracehouseResource(warehouse=str(built["warehouse"]), sources=built["sources"])
    results = list(validation_defs.validate_tables(dg.build_asset_check_context(), tracehouse=resource))
    assert len(results) == len(validation_defs.CHECK_SPECS)
    assert all(r.passed for r in results)
    by_key = {f"{r.asset_key.to_user_string()}:{r.check_name}": r for r in results}
    nodes = by_key["nodes:checks"]
    assert nodes.severity == dg.AssetCheckSeverity.ERROR and nodes.metadata["failing"].value == 0
    assert nodes.metadata["failing_by_check"].value == {
        "duplicate_keys": 0, "unknown_graph": 0, "unknown_session": 0, "expectations_critical": 0,
        "expectations_warning": 0}
    assert by_key["graphs:checks"].metadata["warned_checks"].value == ""
    wh = Warehouse(built["warehouse"])
    n_nodes = sum(pq.ParquetFile(f).metadata.num_rows for p in wh.partitions() for f in wh.current_files(p, "nodes"))
    assert f"| {n_nodes} | 0 | yes |" in nodes.metadata["expectations"].value  # every row was looked at


# ---------------------------------------------------------------------------------------------
# Corrupted tables


@pytest.fixture(scope="module")
def corrupted(built, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two dangling edge targets (one of them HTML), a duplicated edge, and a graph row deleted."""
    warehouse = copy_warehouse(built["warehouse"], tmp_path_factory.mktemp("corrupt") / "warehouse")

    def break_edges(edges: pa.Table) -> pa.Table:
        edges = set_values(edges, "target_full_node_id", {0: "<script>alert(1)</script>@1", 1: "ghost@1"})
        return pa.concat_tables([edges, edges.slice(5, 1)])

    edges = rewrite(warehouse, HAND_CRAFTED, "edges", break_edges)
    removed = {}

    def drop_graph(graphs: pa.Table) -> pa.Table:
        removed.update(graphs.slice(0, 1).to_pylist()[0])
        return graphs.slice(1)

    rewrite(warehouse, ALGORITHM_GENERATED, "graphs", drop_graph)
    return {"warehouse": warehouse, "result": run_checks(warehouse, built["sources"]), "edges": edges,
            "removed": removed}


def test_blocking_checks_fail_with_exact_counts(corrupted: dict[str, Any]) -> None:
    removed = corrupted["removed"]
    orphans = {f"{t}:unknown_graph": removed[c] for t, c in schema.COUNT_COLUMNS.items() if removed[c] > 0}
    assert failing(corrupted["result"]) == {
        "edges:unknown_target_node": 2,
        "edges:duplicate_keys": 1,
        "graphs:graph_row_counts_mismatch": 1,  # the duplicated edge's graph holds one edge more
        **orphans,  # every row of the dropped graph, per table
        "ingest_errors:input_files_unaccounted": 1,  # its file is in neither graphs nor ingest_errors
    }
    results = evaluations(corrupted["result"])
    assert {k for k, e in results.items() if not e.passed} == {
        f"{t}:checks" for t in ("edges", "graphs", "ingest_errors", *(o.split(":")[0] for o in orphans))}
    assert all(e.severity == dg.AssetCheckSeverity.ERROR for e in results.values() if not e.passed)
    samples = results["ingest_errors:checks"].metadata["samples"].value
    assert removed["file"] in samples and "in neither graphs, attributions nor ingest_errors" in samples
    assert "**input_files_unaccounted**" in samples
    dup = corrupted["edges"].slice(5, 1).to_pylist()[0]
    edges = results["edges:checks"].metadata
    assert dup["edge_id"] in edges["samples"].value
    assert edges["failed_checks"].value.split(", ") == sorted(
        key.split(":")[1] for key in failing(corrupted["result"]) if key.startswith("edges:"))
    assert "| unknown_target_node | error | 2 | NO |" in edges["checks"].value


def test_failing_error_check_stops_the_run_and_the_commit(corrupted: dict[str, Any]) -> None:
    """An error check is a blocking asset check: when it fails, its step fails, nothing downstream of
    the tables runs in that run, and the commit refuses the build in any run."""
    result, warehouse = corrupted["result"], corrupted["warehouse"]
    assert not result.success and not any(e.asset_key == stand_in_mart.key for e in _materializations(result))
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failure.step_key == "validate_tables"
    assert failure.event_specific_data.error.cls_name == "DagsterAssetCheckFailedError"
    [attempt_dir] = [d for d in (warehouse.root / ".staging").iterdir() if d.name.startswith("run-")]
    attempt = Attempt.load(warehouse, attempt_dir.name)
    before = CommitLog(warehouse).latest().build
    with pytest.raises(commit.BlockingChecksFailed, match="edges:unknown_target_node"):
        commit.commit_attempt(warehouse, attempt)
    assert CommitLog(warehouse).latest().build == before


def test_report_shows_failures_and_escapes_trace_content(corrupted: dict[str, Any]) -> None:
    report = evaluations(corrupted["result"])["edges:checks"].metadata["report"].value
    assert Path(report).parent == corrupted["warehouse"].reports_dir
    page = Path(report).read_text()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;@1" in page
    assert "blocking checks failed" in page
    assert re.search(r"FAILED</span></td><td>edges</td><td><a [^>]+>unknown_target_node</a></td>"
                     r"<td>error \(blocking\)</td><td class=n>2</td>", page)
    markdown = evaluations(corrupted["result"])["edges:checks"].metadata["samples"].value
    assert "&lt;script&gt;" in markdown and "<script>" not in markdown


def _materializations(result: dg.ExecuteInProcessResult) -> list[dg.AssetMaterialization]:
    return [e.event_specific_data.materialization for e in result.get_asset_materialization_events()]


def test_warnings_do_not_block(built, tmp_path: Path) -> None:
    """A system outside the canonical set and bad node versions warn; the downstream asset still runs."""
    warehouse = copy_warehouse(built["warehouse"], tmp_path / "warehouse")
    rewrite(warehouse, HAND_CRAFTED, "graphs", lambda g: set_values(g, "system", {0: "my-own-agents"}))
    rewrite(warehouse, ALGORITHM_GENERATED, "nodes", lambda n: set_values(n, "version", {3: 0, 4: -2, 5: None}))
    result = run_checks(warehouse, built["sources"])
    assert failing(result) == {"graphs:expectations_warning": 1, "nodes:expectations_warning": 3}
    assert all(e.severity == dg.AssetCheckSeverity.WARN for e in evaluations(result).values() if not e.passed)
    assert result.success and any(m.asset_key == stand_in_mart.key for m in _materializations(result))
    nodes = evaluations(result)["nodes:checks"].metadata["expectations"].value
    assert "expect_column_values_to_be_between(version, min_value=1)" in nodes

    # One GX batch per partition: the counts are every row's, the samples name the partition.
    suite = {"nodes": checks.load_suites()["nodes"]}
    snapshot = warehouse.committed().snapshot
    outcomes = {o.check.name: o for o in validation.validate_suites(warehouse, snapshot, suite, use_cache=False)}
    counts = {e.label: (e.element_count, e.unexpected_count) for e in outcomes["expectations_warning"].expectations}
    n_nodes = sum(pq.ParquetFile(f).metadata.num_rows
                  for p in warehouse.partitions() for f in warehouse.current_files(p, "nodes"))
    assert counts == {
        "expect_column_values_to_not_be_null(version)": (n_nodes, 1),
        "expect_column_values_to_be_between(version, min_value=1)": (n_nodes, 2),
        "expect_column_values_to_match_regex(full_node_id, regex='@[0-9]+$')": (n_nodes, 0),
    }
    samples = outcomes["expectations_warning"].samples
    assert sorted(row[3] for row in samples) == ["-2", "0", "NULL"]
    assert all(row[1] == ALGORITHM_GENERATED for row in samples)


def count_gx_runs(monkeypatch) -> list[int]:
    """The rows of each GX run from now on (a real run, counted)."""
    runs: list[int] = []
    real_run = gx_runner.Runner.run

    def counted(self, table, frame, params):
        runs.append(len(frame))
        return real_run(self, table, frame, params)

    monkeypatch.setattr(gx_runner.Runner, "run", counted)
    return runs


def test_results_are_kept_per_generation(built, tmp_path: Path, monkeypatch) -> None:
    """A partition's generation never changes: a second validation of the same build runs GX on
    nothing, and one with a changed partition runs it on that partition only."""
    warehouse = copy_warehouse(built["warehouse"], tmp_path / "warehouse")
    suite = {"nodes": checks.load_suites()["nodes"]}
    runs = count_gx_runs(monkeypatch)
    shutil.rmtree(warehouse.reports_dir / validation_cache.CACHE_DIR)
    snapshot = warehouse.committed().snapshot
    n_nodes = sum(pq.ParquetFile(warehouse.path(f)).metadata.num_rows for f in snapshot.table_files("nodes"))
    validation.validate_suites(warehouse, snapshot, suite)
    assert runs == [n_nodes]  # every partition in one GX run, its results kept per partition
    runs.clear()
    validation.validate_suites(warehouse, snapshot, suite)
    assert runs == []
    # a new generation of one partition with the same rows (as a rebuild of unchanged files makes):
    # the content is known, nothing is validated again
    part = snapshot.partitions[ALGORITHM_GENERATED]
    copy = warehouse.path(part.generation).with_name("g-copy")
    shutil.copytree(warehouse.path(part.generation), copy)
    moved = tuple(piece.replace(part.generation, warehouse.rel(copy), 1) for piece in part.pieces)
    snapshot.partitions[ALGORITHM_GENERATED] = type(part)(
        **{**part.__dict__, "generation": warehouse.rel(copy), "pieces": moved})
    validation.validate_suites(warehouse, snapshot, suite)
    assert runs == []
    # one row of a column the suite reads changed: that partition only is validated again
    (path,) = [warehouse.path(f) for f in snapshot.partitions[ALGORITHM_GENERATED].files("nodes")]
    nodes = pq.read_table(path)
    pq.write_table(set_values(nodes, "version", {0: 7}), path)
    validation.validate_suites(warehouse, snapshot, suite)
    assert runs == [nodes.num_rows]


def test_partitions_validated_together_get_what_each_gets_alone(built, tmp_path: Path, monkeypatch) -> None:
    """Partitions are validated together (validation_cache.table_results: one GX run per table), and
    get what they get in a run each (use_cache=False): a table GX passes over all of them passes in
    each, a table it fails is run again partition by partition, so every verdict, count and sample is
    GX's own; a suite with ``mostly`` is validated partition by partition."""
    warehouse = copy_warehouse(built["warehouse"], tmp_path / "warehouse")
    rewrite(warehouse, HAND_CRAFTED, "nodes", lambda n: set_values(n, "version", {0: 0, 2: None}))
    rewrite(warehouse, ALGORITHM_GENERATED, "nodes", lambda n: set_values(n, "version", {1: -3, 4: 0, 6: None}))
    rewrite(warehouse, HAND_CRAFTED, "graphs", lambda g: set_values(g, "system", {0: "my-own-agents"}))
    rewrite(warehouse, ALGORITHM_GENERATED, "operations", lambda o: set_values(o, "step", {0: -5}))
    snapshot = warehouse.committed().snapshot
    suites = checks.load_suites()
    runs = count_gx_runs(monkeypatch)

    def outcomes(**kwargs) -> list[tuple]:
        return [(o.check.asset, o.check.name, o.failing, o.samples,
                 [(e.label, e.element_count, e.unexpected_count, e.success, e.samples, e.exceptions)
                  for e in o.expectations])
                for o in validation.validate_suites(warehouse, snapshot, suites, **kwargs)]

    shutil.rmtree(warehouse.reports_dir / validation_cache.CACHE_DIR)
    together = outcomes()
    failing_tables = 3  # nodes, graphs, operations: GX failed their run together, then ran each partition
    assert len(runs) == len(suites) + failing_tables * len(snapshot.partitions)
    runs.clear()
    alone = outcomes(use_cache=False)
    assert len(runs) == len(suites) * len(snapshot.partitions)
    assert together == alone
    failed = {(asset, name): failing for asset, name, failing, _, _ in together if failing}
    assert failed == {("nodes", "expectations_warning"): 5, ("graphs", "expectations_warning"): 1,
                      ("operations", "expectations_critical"): 1}

    mostly = {"nodes": copy.deepcopy(suites["nodes"])}
    mostly["nodes"]["expectations"][0]["kwargs"]["mostly"] = 0.5
    runs.clear()
    shutil.rmtree(warehouse.reports_dir / validation_cache.CACHE_DIR)
    validation.validate_suites(warehouse, snapshot, mostly)
    assert len(runs) == len(snapshot.partitions)

    # an expectation that raises (text compared with a number): each partition alone says where
    suites = {"nodes": copy.deepcopy(suites["nodes"])}
    suites["nodes"]["expectations"][0] = {"type": "expect_column_values_to_be_between",
                                          "kwargs": {"column": "full_node_id", "min_value": 1}}
    runs.clear()
    shutil.rmtree(warehouse.reports_dir / validation_cache.CACHE_DIR)
    together = outcomes()
    assert len(runs) == 1 + len(snapshot.partitions)  # the run together, then one per partition
    label, count, failing, success, samples, exceptions = together[0][4][0]
    assert (count, failing, success, samples) == (0, 0, False, [])
    assert sorted(e.split(":")[0] for e in exceptions) == sorted(snapshot.partitions)  # an exception per partition
    assert "must either be None or of the same type" in exceptions[0]  # GX's message, named
    assert together == outcomes(use_cache=False)


def test_waiting_for_the_gx_worker_says_how_far_it_is(tmp_path: Path) -> None:
    """The checks step waits for the worker's splits saying so every second, not silently."""
    import threading
    import time

    lines: list[str] = []
    pre = validation_worker.Prevalidation(Warehouse(tmp_path))
    pre.submitted, pre.validated = 2, 1  # one split done, one being validated
    told = threading.Event()

    def worker() -> None:  # stands for the feeder: the second split is done once the wait said so twice
        told.wait(10)
        with pre.changed:
            pre.validated = 2
            pre.changed.notify_all()

    pre.feeder = threading.Thread(target=worker)
    pre.feeder.start()

    def say(line: str) -> None:
        lines.append(line)
        if len(lines) == 2:
            told.set()

    started = time.monotonic()
    pre.wait(say)
    pre.feeder.join()
    assert time.monotonic() - started < 9
    assert lines == ["checks: waiting for Great Expectations (its worker process): 1 of 2 splits validated"] * 2


def _worker_validated(warehouse: Warehouse, part: PartitionState) -> bool:
    """Whether every suite's results for this partition's data files are in the validation cache."""
    cache, params = validation_cache.ResultCache(warehouse), checks.parameters()
    digest = validation_cache.suite_digest
    return all(cache.get(cache.file_key(digest(doc, params), warehouse.path(file)))
               for table, doc in checks.load_suites().items() for file in part.files(table))


def observe_workers(monkeypatch, seen: Callable[[], Any]) -> list[validation_worker.Worker]:
    """Every GX worker started from now on (real ones), after noting ``seen()`` at its start."""
    workers: list[validation_worker.Worker] = []

    def observed() -> validation_worker.Worker:
        seen()
        workers.append(validation_worker.Worker())
        return workers[-1]

    monkeypatch.setattr(validation_worker, "new_worker", observed)
    return workers


def as_a_fresh_build_process(monkeypatch) -> None:
    """This test process holds no GX context: a build validates in a worker, as `tracehouse build` does."""
    monkeypatch.setattr(gx_runner, "_RUNNERS", {})


def test_a_held_worker_starts_on_release_and_validates_what_was_held(built, tmp_path: Path, monkeypatch) -> None:
    """While held (a big file is being flattened), the GX worker is not started and what is
    submitted waits; released, the worker starts and validates all of it into the cache. Once the
    checks have waited for it, it is told to leave and ends on its own."""
    warehouse = copy_warehouse(built["warehouse"], tmp_path / "warehouse")
    shutil.rmtree(warehouse.reports_dir / validation_cache.CACHE_DIR)
    partitions = warehouse.committed().snapshot.partitions
    workers = observe_workers(monkeypatch, lambda: None)
    with validation_worker.prevalidation(warehouse, in_worker=True) as pre:
        pre.hold()
        pre.start()
        for part in partitions.values():
            pre.submit(part)
        assert pre.worker is None and pre.submitted == 0
        pre.release()
        assert pre.worker is not None and pre.submitted == len(partitions)
        validation_worker.wait_for_worker(warehouse)
        assert pre.worker is None  # let go: the checks validate anything left in-process
    assert pre.validated == len(partitions)
    assert pre.sent == [len(partitions)]  # sent once GX had loaded: all of them in one run of the worker
    assert all(_worker_validated(warehouse, part) for part in partitions.values())
    assert len(workers) == 1
    assert workers[0].wait(60) == 0  # told to leave, it tears its interpreter down and ends by itself


def test_the_worker_is_not_started_beside_a_big_files_flattening(tmp_path: Path, monkeypatch) -> None:
    """A build starts the GX worker at once, unless a split holds a file of HEAVY_FILE_BYTES or
    more: then only once that split is flattened (the worker's memory would stack on its peak)."""
    from pipelines.builds import flattening
    from pipelines.sample.corpus import generate_corpus

    as_a_fresh_build_process(monkeypatch)
    generate_corpus(tmp_path / "corpus", seed=3, graphs_per_split=3)
    heavy_file = max((tmp_path / "corpus").glob("*/*.json"), key=lambda p: p.stat().st_size)
    heavy_key = f"sample__{heavy_file.parent.name}"
    light = Warehouse(tmp_path / "light")
    seen: list[dict[str, Any]] = []
    keys = [f"sample__{d.name}" for d in (tmp_path / "corpus").iterdir()]

    def flattened(warehouse: Warehouse) -> Callable[[], None]:  # what had been flattened when a worker started
        return lambda: seen.append({key: bool(warehouse.generations(key)) for key in keys})

    observe_workers(monkeypatch, flattened(light))
    source = [f"sample:memtracebench={tmp_path / 'corpus'}"]
    assert build_warehouse(light.root, source).committed
    assert len(seen) == 1 and not any(seen[0].values())  # started before the first split was flattened

    # a rebuild starts it when its first changed split begins flattening, not once it is flattened
    seen.clear()
    with heavy_file.open("a") as f:
        f.write("\n")
    observe_workers(monkeypatch, lambda: seen.append({"generations": len(light.generations(heavy_key))}))
    summary = build_warehouse(light.root, source)
    assert summary.committed and summary.partitions_built == [heavy_key]
    assert seen[0] == {"generations": 1} and len(light.generations(heavy_key)) >= 2

    seen.clear()
    heavy = Warehouse(tmp_path / "heavy")
    observe_workers(monkeypatch, flattened(heavy))
    monkeypatch.setattr(flattening, "HEAVY_FILE_BYTES", heavy_file.stat().st_size)
    summary = build_warehouse(heavy.root, source)
    assert summary.committed and not summary.failed_checks
    assert len(seen) == 1 and seen[0][heavy_key]  # started once the big file's split was flattened
    assert all(_worker_validated(heavy, part) for part in heavy.committed().snapshot.partitions.values())


def test_a_build_process_takes_the_worker_it_spawned_at_its_start(tmp_path: Path, monkeypatch) -> None:
    """`tracehouse build` spawns the GX worker before it imports Dagster (validation_worker.spawn_early_worker):
    a build that flattens a split takes that worker, and validates with it; a build that flattens
    nothing stops it; a split with a file of HEAVY_FILE_BYTES stops it before its flattening, and a
    new worker starts once that split is flattened."""
    from pipelines.builds import flattening
    from pipelines.sample.corpus import generate_corpus

    as_a_fresh_build_process(monkeypatch)
    generate_corpus(tmp_path / "corpus", seed=5, graphs_per_split=3)
    source = [f"sample:memtracebench={tmp_path / 'corpus'}"]
    warehouse = Warehouse(tmp_path / "warehouse")
    assert build_warehouse(warehouse.root, source).committed
    generations: list[dict[str, int]] = []
    workers = observe_workers(monkeypatch, lambda: generations.append(
        {key: len(warehouse.generations(key)) for key in warehouse.committed().snapshot.partitions}))

    def spawn() -> validation_worker.Worker:
        validation_worker.spawn_early_worker()
        early = validation_worker.early_worker()
        assert early is not None and early.alive()
        return early

    files = sorted((tmp_path / "corpus").glob("*/*.json"))
    with files[0].open("a") as f:  # one changed split: the build takes the early worker
        f.write("\n")
    spawn()
    summary = build_warehouse(warehouse.root, source)
    assert summary.partitions_built == [f"sample__{files[0].parent.name}"] and not summary.failed_checks
    assert len(workers) == 1 and validation_worker.early_worker() is None
    assert all(_worker_validated(warehouse, part)
               for part in warehouse.committed().snapshot.partitions.values())

    workers.clear()  # nothing changed: the early worker is stopped, none other is started
    early = spawn()
    summary = build_warehouse(warehouse.root, source)
    assert not summary.checked and validation_worker.early_worker() is None and len(workers) == 1
    assert not early.alive()

    workers.clear()  # a heavy split changed: stopped before its flattening, a new worker after it
    generations.clear()
    heavy_file = max(files, key=lambda p: p.stat().st_size)
    heavy_key = f"sample__{heavy_file.parent.name}"
    monkeypatch.setattr(flattening, "HEAVY_FILE_BYTES", heavy_file.stat().st_size)
    before = len(warehouse.generations(heavy_key))
    with heavy_file.open("a") as f:
        f.write("\n")
    early = spawn()
    summary = build_warehouse(warehouse.root, source)
    assert summary.partitions_built == [heavy_key] and not summary.failed_checks
    assert len(workers) == 2 and generations[1][heavy_key] == before + 1  # the second once the split was flattened
    assert not early.alive()


def test_the_early_worker_leaves_when_the_build_process_is_killed(tmp_path: Path) -> None:
    """The GX worker `tracehouse build` spawns as its first act ends with the build: killed with -9
    while it imports Dagster (before anything is written), the build leaves no process behind (the
    worker finds the pipe closed while it loads GX)."""
    import os
    import signal
    import subprocess
    import time

    build = subprocess.Popen([sys.executable, "-m", "pipelines.interfaces.cli", "build", "--quiet", "--warehouse",
                              str(tmp_path / "w")], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        spawned: list[int] = []
        while not any(WORKER in _command(pid) for pid in spawned) and time.monotonic() < deadline:
            spawned = [pid for pid in children(build.pid) if alive(pid)]
            time.sleep(0.02)
        assert any(WORKER in _command(pid) for pid in spawned), "no worker was spawned at the build's start"
        assert not (tmp_path / "w" / "tables").exists()  # still starting: nothing flattened yet
    finally:
        os.kill(build.pid, signal.SIGKILL)
        build.wait()
    deadline = time.monotonic() + 120  # a bound for a test that would otherwise wait for ever, not a speed
    while any(alive(pid) for pid in spawned) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(pid) for pid in spawned)


def test_a_worker_whose_build_is_gone_ends_while_it_loads_gx() -> None:
    """The worker does not load GX (or validate a batch) for a build that is gone: once the build's end
    of its pipe is closed, it ends itself by SIGTERM at once. Without that watch it would load GX, find
    the pipe closed when it says it is ready, and end with status 0."""
    import signal

    worker = validation_worker.new_worker()
    worker.conn.close()  # what a build killed with -9 leaves: no writer on the worker's pipe
    assert worker.wait(120) == -signal.SIGTERM  # 120 s: a bound for a hung worker, not a speed
    assert not worker.loaded


def test_a_worker_ignores_ctrl_c_its_build_decides_its_end() -> None:
    """Ctrl-C in a terminal reaches the worker too (one process group): it ignores it, and ends when
    its build lets it go (or stops it, or is gone). Without that it died with a KeyboardInterrupt
    traceback from wherever it was, printed into the user's terminal."""
    import signal

    worker = validation_worker.new_worker()
    try:
        assert worker.wait_loaded()
        worker.process.send_signal(signal.SIGINT)
        assert worker.wait(1.0) is None  # still there a second later (a bound, not a speed)
    finally:
        worker.finish()
    assert worker.wait(120) == 0


WORKER = "-m pipelines.validation.worker"  # the worker's command line


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""
