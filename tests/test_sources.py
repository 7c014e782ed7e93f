"""The warehouse remembers its sources; one file's defect never blocks the others; user tables survive;
every committed build is recorded in the warehouse's Dagster instance."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import orjson
import pyarrow.parquet as pq
import pytest
from conftest import REPO, build_warehouse, query
from smartcomment_graphs import make_graph, write_memtracebench

from pipelines import schema
from pipelines.storage.warehouse import Warehouse
from pipelines.validation.checks import ASSET_CHECK

CLI = [sys.executable, "-m", "pipelines.interfaces.cli"]


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
    assert build_warehouse(warehouse, [mem, other]).ok  # in this process: the commands after it are the point
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
    assert build_warehouse(warehouse, [mem]).ok
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
        assert build_warehouse(warehouse, []).ok  # the recorded source
    finally:
        path.write_bytes(original)
    kept = cli("sql", "--warehouse", str(warehouse), "--format", "csv",
               "select * from scratch.per_system order by all; select count(*) from big")
    assert kept.returncode == 0, kept.stderr
    assert kept.stdout.splitlines() == ["system,n", "mem0,2", "rag,3", "count_star()", "2"]


def test_every_build_is_recorded_in_the_warehouse_dagster_instance(two_sources, tmp_path: Path) -> None:
    warehouse = tmp_path / "w"
    done = build_warehouse(warehouse, [f"mem:memtracebench={two_sources['mem']}",
                                       f"other:memtracebench={two_sources['other']}"])
    assert done.ok, done.failed_steps + done.failed_checks
    record = Warehouse(warehouse).committed()
    instance = dg.DagsterInstance.local_temp(tempdir=str(warehouse / ".dagster"))  # a persistent instance there
    partitions = sorted(record.snapshot.partitions)
    (run,) = instance.get_runs(filters=dg.RunsFilter(tags={"tracehouse/build": str(record.build)}))
    for table in schema.TABLES:  # one materialization per table, by the build's run, naming the splits it read
        event = instance.get_latest_materialization_event(dg.AssetKey(table))
        assert event is not None and event.run_id == run.run_id, table
        metadata = event.asset_materialization.metadata
        assert sorted(metadata["splits_changed"].value.split(", ")) == partitions, table
        assert metadata["rows"].value == sum(pq.ParquetFile(warehouse / path).metadata.num_rows
                                             for path in record.snapshot.table_files(table)), table
    # the run flattened: it started before the build's first table file was written
    started = instance.get_run_record_by_id(run.run_id).start_time
    written = [path.stat().st_mtime for path in (warehouse / "tables").rglob("*.parquet")]
    assert written and started < min(written), (started, min(written))
    for mart in record.snapshot.marts:
        event = instance.get_latest_materialization_event(dg.AssetKey(mart))
        assert event is not None and instance.get_run_by_id(event.run_id).tags["tracehouse/build"] == str(record.build)
    passed: dict[dg.AssetCheckKey, bool] = {}  # one asset check per table, passed when its checks did
    for check in record.checks:
        key = dg.AssetCheckKey(dg.AssetKey(check["asset"]), ASSET_CHECK)
        passed[key] = passed.get(key, True) and check["passed"]
    found = instance.event_log_storage.get_latest_asset_check_execution_by_key(list(passed))
    for key, ok in passed.items():
        execution = found.get(key)
        assert execution is not None, key
        assert execution.event.dagster_event.event_specific_data.passed == ok, key


# -- a source that lists no files is refused, not deleted ------------------------------------------------


def _copy_sources(two_sources: dict[str, Path], root: Path) -> dict[str, Path]:
    """Copies of the module's sources, for a test that empties or deletes their files."""
    return {name: Path(shutil.copytree(path, root / name)) for name, path in two_sources.items()}


def _move_contents(folder: Path, to: Path) -> None:
    """Move what ``folder`` holds into ``to`` (emptying a folder as an unmounted disk or a sync would;
    a folder with one split in it is emptied in one rename)."""
    to.mkdir(exist_ok=True)
    for child in sorted(folder.iterdir()):
        child.rename(to / child.name)


def test_a_recorded_source_that_lists_no_files_is_refused_and_keeps_every_row(two_sources, tmp_path: Path) -> None:
    sources = _copy_sources(two_sources, tmp_path / "src")
    empty = tmp_path / "empty"
    empty.mkdir()
    warehouse = tmp_path / "w"
    mem, other = f"mem:memtracebench={sources['mem']}", f"other:memtracebench={sources['other']}"
    assert build_warehouse(warehouse, [mem, other]).ok
    before, build = annotations_by_source(warehouse), Warehouse(warehouse).committed().build
    assert set(before) == {"mem", "other"}

    def refused(done: subprocess.CompletedProcess, path: Path) -> None:
        assert done.returncode == 2, done.stdout + done.stderr
        assert f"source mem: {path} lists no memtracebench files" in done.stderr
        assert "mem__mem0, mem__rag" in done.stderr and "nothing was removed" in done.stderr
        assert "--remove-source mem" in done.stderr and "Traceback" not in done.stderr
        assert "removing" not in done.stderr
        assert Warehouse(warehouse).committed().build == build and annotations_by_source(warehouse) == before

    # named on the command line, pointed at an empty folder (a mistyped path)
    refused(cli("build", "--warehouse", str(warehouse), "--source", f"mem:memtracebench={empty}",
                "--source", other), empty)
    # in tracehouse.toml
    (tmp_path / "tracehouse.toml").write_text(
        f'warehouse = "w"\n[[sources]]\nname = "mem"\nkind = "memtracebench"\npath = "{empty}"\n'
        f'[[sources]]\nname = "other"\nkind = "memtracebench"\npath = "{sources["other"]}"\n')
    refused(cli("build", cwd=tmp_path), empty)
    (tmp_path / "tracehouse.toml").unlink()
    # recorded (no --source), its folder emptied
    _move_contents(sources["mem"], tmp_path / "moved-away")
    refused(cli("build", "--warehouse", str(warehouse)), sources["mem"])

    # dropping it takes --remove-source, which says so
    removed = cli("build", "--warehouse", str(warehouse), "--remove-source", "mem")
    assert removed.returncode == 0, removed.stderr
    assert "removing mem__mem0 (source mem removed on request)" in removed.stderr
    assert "removing mem__rag (source mem removed on request)" in removed.stderr
    assert annotations_by_source(warehouse) == {"other": before["other"]}


def test_a_split_whose_files_were_deleted_is_removed_and_said_so(two_sources, tmp_path: Path) -> None:
    sources = _copy_sources(two_sources, tmp_path / "src")
    warehouse = tmp_path / "w"
    assert build_warehouse(warehouse, [f"mem:memtracebench={sources['mem']}"]).ok
    rag = query(warehouse, "select count(*) from graphs where split = 'rag'")[0][0]
    assert rag == 3
    shutil.rmtree(sources["mem"] / "rag")
    done = cli("build", "--warehouse", str(warehouse))
    assert done.returncode == 0, done.stderr
    assert "removing mem__rag (its files were deleted from source mem)" in done.stderr
    assert "partitions: 0 built, 1 unchanged, 1 removed" in done.stdout
    assert query(warehouse, "select split, count(*) from graphs group by all") == [("mem0", 2)]


def test_a_source_that_never_had_files_is_not_refused_for_being_empty(two_sources, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    # a fresh warehouse whose only source is empty: nothing to build, as before (not a refusal)
    alone = cli("build", "--warehouse", str(tmp_path / "fresh"), "--source", f"landing:memtracebench={landing}")
    assert alone.returncode == 1 and "no input files were found" in alone.stderr, alone.stderr
    # added empty beside a source with files: built, recorded, and the next build keeps it
    warehouse = tmp_path / "w"
    mem = f"mem:memtracebench={two_sources['mem']}"
    first = cli("build", "--warehouse", str(warehouse), "--source", mem)
    assert first.returncode == 0, first.stderr
    before = annotations_by_source(warehouse)
    added = cli("build", "--warehouse", str(warehouse), "--source", mem, "--source", f"landing:memtracebench={landing}")
    assert added.returncode == 0, added.stderr
    assert [s["name"] for s in Warehouse(warehouse).committed().sources] == ["mem", "landing"]
    again = cli("build", "--warehouse", str(warehouse))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "removing" not in again.stderr and "partitions: 0 built, 2 unchanged, 0 removed" in again.stdout
    assert annotations_by_source(warehouse) == before and set(before) == {"mem"}


def test_the_sensor_and_dagster_runs_do_not_delete_an_emptied_source(two_sources, tmp_path: Path) -> None:
    from pipelines.builds.run_history import instance_for
    from pipelines.builds.step_errors import cause
    from pipelines.config import load_settings
    from pipelines.defs import build_definitions
    from pipelines.defs.automation import source_files_sensor
    from pipelines.defs.resources import TracehouseResource

    sources = _copy_sources(two_sources, tmp_path / "src")
    warehouse = tmp_path / "w"
    assert build_warehouse(warehouse, [f"mem:memtracebench={sources['mem']}",
                                       f"other:memtracebench={sources['other']}"]).ok
    before, build = annotations_by_source(warehouse), Warehouse(warehouse).committed().build
    _move_contents(sources["other"], tmp_path / "moved-away")

    resource = TracehouseResource.from_settings(load_settings(str(warehouse), None))  # the recorded sources
    instance = instance_for(Warehouse(warehouse))
    result = source_files_sensor(dg.build_sensor_context(instance=instance, resources={"tracehouse": resource}))
    assert result.run_requests == []
    assert f"source other: {sources['other']} lists no memtracebench files" in result.skip_reason.skip_message
    # a build launched by hand in the UI does not commit the deletion either: its flattening refuses
    run = build_definitions(resource).resolve_job_def("tracehouse_build").execute_in_process(
        instance=instance, raise_on_error=False)
    assert not run.success
    (failure,) = [e for e in run.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failure.step_key == "flattened_tables"
    assert f"source other: {sources['other']} lists no memtracebench files" in cause(failure.event_specific_data.error)
    assert Warehouse(warehouse).committed().build == build and annotations_by_source(warehouse) == before


def test_watch_refuses_an_emptied_source_at_the_start_and_waits_for_it_after(two_sources, tmp_path: Path) -> None:
    import io
    import threading

    from pipelines.config import load_settings
    from pipelines.interfaces.watch import watch

    sources = _copy_sources(two_sources, tmp_path / "src")
    warehouse = tmp_path / "w"
    specs = [f"mem:memtracebench={sources['mem']}", f"other:memtracebench={sources['other']}"]
    assert build_warehouse(warehouse, specs).ok
    before, build = annotations_by_source(warehouse), Warehouse(warehouse).committed().build
    settings = load_settings(str(warehouse), specs)
    moved = tmp_path / "moved-away"
    _move_contents(sources["other"], moved)

    err = io.StringIO()
    assert watch(settings, interval=0.1, progress=False, out=io.StringIO(), err=err) == 2  # at the start: refused
    assert "lists no memtracebench files" in err.getvalue() and "nothing was removed" in err.getvalue()

    # emptied while it runs: each round is refused, said once, the rows kept; when the files are back it builds
    _move_contents(moved, sources["other"])
    stop, err, out = threading.Event(), io.StringIO(), io.StringIO()
    status: list[int] = []
    worker = threading.Thread(target=lambda: status.append(
        watch(settings, interval=0.1, progress=False, out=out, err=err, stop=stop)))
    worker.start()
    try:
        _wait_for(lambda: "build after" in out.getvalue(), worker)
        build = Warehouse(warehouse).committed().build  # the same, unless the code changed since
        _move_contents(sources["other"], moved)
        _wait_for(lambda: "not building until it is back" in err.getvalue(), worker)
    finally:
        stop.set()
        worker.join()
    assert status == [2]
    assert err.getvalue().count("not building until it is back") == 1
    assert Warehouse(warehouse).committed().build == build and annotations_by_source(warehouse) == before


def _wait_for(condition, worker) -> None:
    """Until ``condition()`` holds; the watch's thread must still be running meanwhile."""
    import time

    while not condition():
        assert worker.is_alive(), "the watch stopped"
        time.sleep(0.05)


def test_an_s3_source_whose_prefix_emptied_is_refused(two_sources, s3_endpoint: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's prefix of a recorded source holds no objects any more: refused, nothing removed
    from the warehouse (nor from the source's local mirror)."""
    import uuid

    from conftest import s3_client, s3_environment, upload_folder

    from pipelines.config import SourceUnavailable, load_settings

    s3_environment(monkeypatch, s3_endpoint, tmp_path / "cache")
    bucket = f"th-{uuid.uuid4().hex[:10]}"
    client = s3_client(s3_endpoint)
    client.create_bucket(Bucket=bucket)
    upload_folder(s3_endpoint, two_sources["other"], bucket, "landing/other")
    warehouse = tmp_path / "w"
    specs = [f"mem:memtracebench={two_sources['mem']}", f"other:memtracebench=s3://{bucket}/landing/other"]
    first = build_warehouse(warehouse, specs)
    assert first.ok and "other__evermemos" in first.partitions_built
    before = annotations_by_source(warehouse)
    for key in [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix="landing/")["Contents"]]:
        client.delete_object(Bucket=bucket, Key=key)
    with pytest.raises(SourceUnavailable, match=rf"source other: s3://{bucket}/landing/other lists no memtracebench "
                       r"files, but build 1 holds 1 partition\(s\) from it \(other__evermemos\); nothing was removed"):
        build_warehouse(warehouse, specs)
    assert Warehouse(warehouse).committed().build == first.build and annotations_by_source(warehouse) == before
    mirror = load_settings(str(warehouse), specs).sources[1].path
    names = sorted(p.name for p in two_sources["other"].rglob("*.json"))
    assert sorted(p.name for p in mirror.rglob("*.json")) == names and len(names) == 3


def test_every_reader_module_is_registered_under_its_own_kind() -> None:
    """The kinds in pipelines.readers are the one list: every reader module (a module of the package with
    a ``kind``) is in it under that kind, in one tier only, and every kind in it has its reader."""
    import importlib
    import pkgutil

    import pipelines.readers as readers

    modules = [importlib.import_module(f"pipelines.readers.{m.name}") for m in pkgutil.iter_modules(readers.__path__)]
    declared = sorted(m.kind for m in modules if isinstance(getattr(m, "kind", None), str))
    assert declared == sorted(readers.KINDS)
    assert len(set(readers.KINDS)) == len(readers.KINDS)  # no kind in two tiers
    for kind in readers.KINDS:
        reader = readers.reader_for(kind)
        assert reader.kind == kind and callable(reader.discover) and callable(reader.read)
    assert sorted(readers.READERS) == sorted(readers.KINDS)
    assert set(readers.PREDICTION_READERS) == set(readers.PREDICTION_KINDS)
    assert set(readers.LABEL_READERS) == set(readers.LABEL_KINDS)
    with pytest.raises(ValueError, match="unknown source kind 'nosuchkind'; use one of: agentrx, "):
        readers.reader_for("nosuchkind")
