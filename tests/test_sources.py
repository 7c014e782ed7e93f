"""The warehouse remembers its sources; one file's defect never blocks the others; user tables survive;
every committed build is recorded in the warehouse's Dagster instance."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import orjson
import pytest
from conftest import REPO, query
from smartcomment_graphs import make_graph, write_memtracebench

from pipelines import schema
from pipelines.storage import Warehouse

CLI = [sys.executable, "-m", "pipelines.cli"]


def cli(*args: str, cwd: Path = REPO, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRACEHOUSE_DRILLDOWN_LIMIT": "4"}
    env.pop("TRACEHOUSE_CONFIG", None)
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env, input=stdin)


@pytest.fixture(scope="module")
def two_sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sources")
    write_memtracebench(root / "mem", {"rag": 3, "mem0": 2})
    other = root / "other"
    (other / "evermemos").mkdir(parents=True)
    for i in range(3):
        graph = make_graph(f"graph-other-{i}", f"locomo-o{i}", "EverMemOS", seed=40 + i, queries=2)
        (other / "evermemos" / f"locomo_locomo-o{i}.json").write_bytes(orjson.dumps(graph))
    return {"mem": root / "mem", "other": other}


def annotations_by_source(warehouse: Path) -> dict[str, int]:
    return dict(query(warehouse, "select g.source, count(*) from annotations a join graphs g using (graph_id) "
                                 "group by all order by all"))


def test_the_recorded_sources_are_used_kept_and_removed_only_on_purpose(two_sources, tmp_path: Path) -> None:
    warehouse = tmp_path / "w"
    mem, other = f"mem:memtracebench={two_sources['mem']}", f"other:memtracebench={two_sources['other']}"
    assert cli("build", "--quiet", "--warehouse", str(warehouse), "--source", mem, "--source", other).returncode == 0
    before = annotations_by_source(warehouse)
    assert set(before) == {"mem", "other"} and all(before.values())

    # no --source: the recorded ones, nothing lost
    again = cli("build", "--warehouse", str(warehouse))
    assert again.returncode == 0, again.stderr
    assert "nothing changed" in again.stdout and annotations_by_source(warehouse) == before

    # naming only one of them is refused, with what to do, and keeps every row
    refused = cli("build", "--warehouse", str(warehouse), "--source", mem)
    assert refused.returncode == 2
    assert "other" in refused.stderr and "--remove-source other" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert annotations_by_source(warehouse) == before

    # a name that is not recorded
    unknown = cli("build", "--warehouse", str(warehouse), "--remove-source", "nope")
    assert unknown.returncode == 2 and "no source named 'nope'" in unknown.stderr

    # --remove-source drops exactly that source's rows, and the warehouse forgets it
    removed = cli("build", "--warehouse", str(warehouse), "--remove-source", "other")
    assert removed.returncode == 0, removed.stderr
    assert annotations_by_source(warehouse) == {"mem": before["mem"]}
    assert [s["name"] for s in Warehouse(warehouse).committed().sources] == ["mem"]
    assert query(warehouse, "select count(*) from graphs where source = 'other'") == [(0,)]


def test_a_misspelled_config_key_is_refused(two_sources, tmp_path: Path) -> None:
    for text, key in ((f'warehous = "w"\n[[sources]]\nkind = "memtracebench"\npath = "{two_sources["mem"]}"\n',
                       "warehous"),
                      (f'warehouse = "w"\n[[source]]\nkind = "memtracebench"\npath = "{two_sources["mem"]}"\n',
                       "source"),
                      (f'warehouse = "w"\n[[sources]]\nkind = "memtracebench"\npth = "{two_sources["mem"]}"\n',
                       "pth")):
        (tmp_path / "tracehouse.toml").write_text(text)
        done = cli("build", cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert f"unknown key '{key}'" in done.stderr and "Traceback" not in done.stderr
        assert not (tmp_path / "w").exists() and not (tmp_path / "warehouse").exists()


def test_a_repeated_graph_id_is_quarantined_and_the_rest_is_committed(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    write_memtracebench(corpus, {"rag": 2, "mem0": 2})
    # a mem0 file that carries the graph id of a rag file: rag's partition key sorts first... no: mem0's does
    copy = orjson.loads((corpus / "rag" / "locomo_locomo-0.json").read_bytes())
    (corpus / "rag" / "zz_copy.json").write_bytes(orjson.dumps(copy))
    (corpus / "evermemos").mkdir()
    (corpus / "evermemos" / "locomo_copy.json").write_bytes(orjson.dumps(copy))
    warehouse = tmp_path / "w"
    done = cli("build", "--warehouse", str(warehouse), "--source", f"memtracebench={corpus}")
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr and "FAILED" not in done.stdout
    gid = copy["graph_id"]
    # first come, first served in partition order (evermemos < rag), then path order within rag
    assert query(warehouse, "select split, file from graphs where graph_id = ?", [gid]) == [
        ("evermemos", "evermemos/locomo_copy.json")]
    errors = query(warehouse, "select split, file, kind, reason from ingest_errors order by all")
    assert errors == [
        ("rag", "rag/locomo_locomo-0.json", "duplicate_graph_id",
         f"graph_id {gid!r} was already loaded from memtracebench/evermemos/locomo_copy.json"),
        ("rag", "rag/zz_copy.json", "duplicate_graph_id",
         f"graph_id {gid!r} was already loaded from memtracebench/evermemos/locomo_copy.json"),
    ]
    # everything else is built, checked and published
    record = Warehouse(warehouse).committed()
    assert all(c["passed"] for c in record.checks if c["severity"] == "error")
    assert query(warehouse, "select count(*) from graphs") == [(4,)]
    n = query(warehouse, "select count(*) from annotations")[0][0]
    assert query(warehouse, "select sum(n) from failure_modes_by_system") == [(n,)]
    assert (warehouse / "dashboards" / "index.html").is_file()

    # the first copy goes: the rag file loads again, from its own partition, with no rebuild of others' files
    (corpus / "evermemos" / "locomo_copy.json").unlink()
    (corpus / "evermemos").rmdir()
    again = cli("build", "--warehouse", str(warehouse))
    assert again.returncode == 3, again.stderr
    assert query(warehouse, "select split, file from graphs where graph_id = ?", [gid]) == [
        ("rag", "rag/locomo_locomo-0.json")]
    assert [r[1] for r in query(warehouse, "select kind, file from ingest_errors")] == ["rag/zz_copy.json"]


def test_tables_made_with_write_survive_the_next_build(two_sources, tmp_path: Path) -> None:
    warehouse = tmp_path / "w"
    mem = f"mem:memtracebench={two_sources['mem']}"
    assert cli("build", "--quiet", "--warehouse", str(warehouse), "--source", mem).returncode == 0
    made = cli("sql", "--warehouse", str(warehouse), "--write",
               "create table per_system as select system, count(*) as n from graphs group by all; "
               "create view big as select * from per_system where n > 0")
    assert made.returncode == 0, made.stderr
    refused = cli("sql", "--warehouse", str(warehouse), "create table nope as select 1")
    assert refused.returncode == 1 and "--write" in refused.stderr and "Traceback" not in refused.stderr

    # a build that changes the tables (touching a file's content) does not touch scratch
    path = two_sources["mem"] / "rag" / "locomo_locomo-0.json"
    original = path.read_bytes()
    path.write_bytes(orjson.dumps(make_graph("graph-rag-0000", "locomo-0", "NaiveRAG", seed=3)))
    try:
        assert cli("build", "--quiet", "--warehouse", str(warehouse)).returncode == 0
    finally:
        path.write_bytes(original)
    kept = cli("sql", "--warehouse", str(warehouse), "--format", "csv",
               "select * from scratch.per_system order by all; select count(*) from big")
    assert kept.returncode == 0, kept.stderr
    assert kept.stdout.splitlines() == ["system,n", "mem0,2", "rag,3", "count_star()", "2"]


def test_every_build_is_recorded_in_the_warehouse_dagster_instance(two_sources, tmp_path: Path) -> None:
    from dagster._core.instance.ref import InstanceRef

    warehouse = tmp_path / "w"
    done = cli("build", "--quiet", "--warehouse", str(warehouse), "--source",
               f"mem:memtracebench={two_sources['mem']}", "--source", f"other:memtracebench={two_sources['other']}")
    assert done.returncode == 0, done.stderr
    record = Warehouse(warehouse).committed()
    instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(warehouse / ".dagster")))
    partitions = sorted(record.snapshot.partitions)
    assert sorted(instance.get_dynamic_partitions("source_splits")) == partitions
    for table in schema.TABLES:
        materialized = instance.get_materialized_partitions(dg.AssetKey(table))
        assert materialized == set(partitions), table
    for mart in record.snapshot.marts:
        event = instance.get_latest_materialization_event(dg.AssetKey(mart))
        assert event is not None and event.asset_materialization.metadata["tracehouse/build"].value == record.build
    for check in record.checks:
        key = dg.AssetCheckKey(dg.AssetKey(check["asset"]), check["name"])
        found = instance.event_log_storage.get_latest_asset_check_execution_by_key([key])
        execution = found.get(key)
        assert execution is not None, key
        assert execution.event.dagster_event.event_specific_data.passed == check["passed"], key
