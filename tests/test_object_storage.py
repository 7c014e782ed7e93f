"""Warehouses and sources on object storage (pipelines/storage/remote.py), against moto's S3 server started on
127.0.0.1: a build there equals the local build row for row, a second working copy reads the same
build, sources are mirrored by ETag and size, the commit is a conditional PUT that one of two racing
builds loses, and a build killed mid-upload leaves the committed build whole."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pgserver
import pytest
from builds import add_node, rows, warehouse_rows
from conftest import REPO, build_warehouse, s3_client, s3_environment, upload_folder

from pipelines.builds.executors import ExecutorSettings
from pipelines.builds.run_history import instance_for
from pipelines.config import load_settings
from pipelines.interfaces.build import run_build
from pipelines.storage import remote
from pipelines.storage.records import BuildRecord, CommitConflict
from pipelines.storage.state import CommitLog
from pipelines.storage.warehouse import Warehouse


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pipelines.sample.corpus import generate_corpus

    out = tmp_path_factory.mktemp("s3-corpus") / "corpus"
    generate_corpus(out, seed=3, graphs_per_split=4)
    return out


@pytest.fixture
def store(s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket; the AWS variables point at the server; working copies under tmp_path."""
    s3_environment(monkeypatch, s3_endpoint, tmp_path / "cache")
    bucket = f"th-{uuid.uuid4().hex[:10]}"
    s3_client(s3_endpoint).create_bucket(Bucket=bucket)
    return bucket


def keys(endpoint: str, bucket: str, prefix: str = "") -> list[str]:
    pages = s3_client(endpoint).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def test_build_on_s3_equals_local_build(store, s3_endpoint, small_corpus, tmp_path, monkeypatch):
    """Sources and warehouse on the S3 server, flattened on a 2-worker Dask cluster, against the
    in-process build of the same files on local disk: every table and mart, row for row."""
    upload_folder(s3_endpoint, small_corpus, store, "sources/corpus")
    url = f"s3://{store}/warehouse"
    on_s3 = build_warehouse(url, [f"memtracebench=s3://{store}/sources/corpus"],
                            executor=ExecutorSettings(kind="dask", workers=2))
    assert on_s3.ok and on_s3.build == 1 and on_s3.remote == url
    assert len(on_s3.partitions_built) >= 3 and not on_s3.partitions_adopted
    copy = Warehouse(load_settings(url, None, None).warehouse)
    runs = [run for run in instance_for(copy).get_runs() if run.job_name == "flatten_partitions"]
    assert len(runs) == 1 and runs[0].is_success  # the flattening ran as steps on the cluster
    local = build_warehouse(tmp_path / "local", [f"memtracebench={small_corpus}"])
    assert local.ok and on_s3.rows == local.rows and on_s3.rows["annotations"] > 10

    copy = copy.root
    assert warehouse_rows(copy) == warehouse_rows(tmp_path / "local")  # every table and mart, row for row

    # the store holds the record, and every file it names
    stored = keys(s3_endpoint, store, "warehouse/")
    assert "warehouse/builds/00000001.json" in stored
    record = json.loads(s3_client(s3_endpoint).get_object(Bucket=store, Key="warehouse/builds/00000001.json")
                        ["Body"].read())
    for rel in CommitLog(Warehouse(copy)).get(1).files():
        assert any(k == f"warehouse/{rel}" or k.startswith(f"warehouse/{rel}/") for k in stored), rel
    assert record["build"] == 1 and record["sources"][0]["url"] == f"s3://{store}/sources/corpus"

    # another machine: a new working copy reads the same build, and has nothing to rebuild
    monkeypatch.setenv("TRACEHOUSE_CACHE", str(tmp_path / "cache-2"))
    again = build_warehouse(url, [])
    assert again.ok and not again.checked and again.build == 1
    assert warehouse_rows(load_settings(url, None, None).warehouse) == warehouse_rows(tmp_path / "local")


def test_source_changes_are_found_by_etag_and_size(store, s3_endpoint, small_corpus, tmp_path):
    upload_folder(s3_endpoint, small_corpus, store, "corpus")
    url, source = f"s3://{store}/wh", f"s3://{store}/corpus"
    first = build_warehouse(url, [f"memtracebench={source}"])
    assert first.ok and len(first.partitions_built) >= 3

    # one object rewritten with other content: only its partition is rebuilt
    changed = sorted(small_corpus.rglob("*.json"))[0]
    graph = json.loads(changed.read_text())
    graph["data"]["nodes"].append(dict(graph["data"]["nodes"][0], name="extra", node_id="extra@1",
                                       full_node_id="extra@1", full_name="extra"))
    key = f"corpus/{changed.relative_to(small_corpus).as_posix()}"
    s3_client(s3_endpoint).put_object(Bucket=store, Key=key, Body=json.dumps(graph).encode())
    second = build_warehouse(url, [])  # no --source: the recorded s3:// one
    assert second.ok and second.build == 2 and len(second.partitions_built) == 1
    assert second.rows["nodes"] == first.rows["nodes"] + 1

    # nothing changed in the store: nothing downloaded, nothing rebuilt
    result = remote.sync_source(source, remote.local_copy(source, remote.StoreOptions()), remote.StoreOptions())
    objects = sum(p.is_file() for p in small_corpus.rglob("*"))
    assert (result.downloaded, result.deleted, result.kept) == (0, 0, objects)
    third = build_warehouse(url, [])
    assert third.ok and not third.checked and third.build == 2

    # an object deleted in the store is deleted from the mirror, and its graph from the warehouse
    s3_client(s3_endpoint).delete_object(Bucket=store, Key=key)
    fourth = build_warehouse(url, [])
    assert fourth.ok and fourth.build == 3 and fourth.rows["graphs"] == first.rows["graphs"] - 1


def test_two_builds_racing_for_one_number_one_wins(store, s3_endpoint, small_corpus, tmp_path, monkeypatch):
    """Two machines (two working copies) at build 1 each make a build 2: the conditional PUT lets the
    first in and refuses the second; the store's build 2 is the winner's, whole."""
    upload_folder(s3_endpoint, small_corpus, store, "corpus")
    url = f"s3://{store}/wh"
    assert build_warehouse(url, [f"memtracebench=s3://{store}/corpus"]).ok
    copies = []
    for name in ("a", "b"):
        monkeypatch.setenv("TRACEHOUSE_CACHE", str(tmp_path / f"cache-{name}"))
        assert build_warehouse(url, []).build == 1  # pulls build 1 into this copy
        copies.append(Warehouse(load_settings(url, None, None).warehouse))
    a, b = copies
    record_a, record_b = CommitLog(a).get(1), CommitLog(b).get(1)
    for record, copy, tag in ((record_a, a, "a"), (record_b, b, "b")):
        record.build, record.parent, record.attempt = 2, 1, f"race-{tag}"
        report = copy.reports_dir / f"validation-race-{tag}.html"
        report.write_text(f"<p>{tag}</p>")
        record.outputs["validation"] = {"report": copy.rel(report), "files": [copy.rel(report)]}
    CommitLog(a).commit(record_a)
    with pytest.raises(CommitConflict, match="another build"):
        CommitLog(b).commit(record_b)
    assert not CommitLog(b).path(2).exists()  # the loser's copy did not take the number either
    stored = json.loads(remote.store_of(a.root).get("builds/00000002.json"))
    assert stored["attempt"] == "race-a"
    assert "wh/reports/validation-race-a.html" in keys(s3_endpoint, store, "wh/")

    # the loser's next build takes build 2 from the store and goes on from there
    monkeypatch.setenv("TRACEHOUSE_CACHE", str(tmp_path / "cache-b"))
    assert remote.pull(b.root) == 2 and CommitLog(b).latest().attempt == "race-a"


def test_racing_build_processes_never_mix(store, s3_endpoint, small_corpus, tmp_path):
    """Two `tracehouse build` processes on one s3:// warehouse from two machines' working copies at
    once: each commits or is refused, and the store's records name whole builds."""
    upload_folder(s3_endpoint, small_corpus, store, "corpus")
    url = f"s3://{store}/wh"
    env = {**os.environ, "AWS_ENDPOINT_URL": s3_endpoint}
    runs = []
    for name in ("a", "b"):
        run_env = dict(env, TRACEHOUSE_CACHE=str(tmp_path / f"cache-{name}"))
        runs.append(subprocess.Popen(
            [sys.executable, "-m", "pipelines.interfaces.cli", "build", "--quiet", "--warehouse", url,
             "--source", f"memtracebench=s3://{store}/corpus"],
            env=run_env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = [run.communicate(timeout=300) for run in runs]
    codes = [run.returncode for run in runs]
    assert 0 in codes, outputs
    for code, (out, err) in zip(codes, outputs, strict=True):
        assert code == 0 or "by another build" in out + err, (code, out, err)
    records = sorted(k for k in keys(s3_endpoint, store, "wh/builds/"))
    assert records[0] == "wh/builds/00000001.json" and len(records) <= 2
    stored = keys(s3_endpoint, store, "wh/")
    for key in records:
        record = json.loads(s3_client(s3_endpoint).get_object(Bucket=store, Key=key)["Body"].read())
        for rel in BuildRecord.from_json(record).files():
            assert any(k == f"wh/{rel}" or k.startswith(f"wh/{rel}/") for k in stored), (key, rel)


def test_build_killed_while_uploading_leaves_the_committed_build(store, s3_endpoint, small_corpus, tmp_path,
                                                                  monkeypatch):
    upload_folder(s3_endpoint, small_corpus, store, "corpus")
    url = f"s3://{store}/wh"
    first = build_warehouse(url, [f"memtracebench=s3://{store}/corpus"])
    expected = warehouse_rows(load_settings(url, None, None).warehouse)
    # a --full build re-flattens everything: new generations to upload; kill it as the upload starts
    env = {**os.environ, "AWS_ENDPOINT_URL": s3_endpoint, "TRACEHOUSE_CACHE": str(tmp_path / "cache-killed")}
    run = subprocess.Popen([sys.executable, "-m", "pipelines.interfaces.cli", "build", "--full", "--warehouse", url],
                           env=env, cwd=REPO, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    for line in run.stderr:
        if "commit: uploading" in line:
            run.send_signal(signal.SIGKILL)
            break
    run.wait(timeout=120)
    assert run.returncode == -signal.SIGKILL
    assert keys(s3_endpoint, store, "wh/builds/") == ["wh/builds/00000001.json"]
    # a reader on a new machine gets build 1, whole
    monkeypatch.setenv("TRACEHOUSE_CACHE", str(tmp_path / "cache-reader"))
    reader = load_settings(url, None, None).warehouse
    assert remote.pull(reader) == 1 and warehouse_rows(reader) == expected
    # the next build completes; its orphans are young, so kept (a racing build might own them) until old
    monkeypatch.setenv("TRACEHOUSE_CACHE", str(tmp_path / "cache-killed"))
    nxt = build_warehouse(url, [], full=True)
    assert nxt.ok and nxt.build == 2 and nxt.rows == first.rows
    before = keys(s3_endpoint, store, "wh/")
    deleted = remote.collect_garbage(load_settings(url, None, None).warehouse, keep=1,
                                     now=time.time() + 2 * remote.ORPHAN_GRACE)
    after = keys(s3_endpoint, store, "wh/")
    assert deleted > 0 and len(after) == len(before) - deleted
    assert keys(s3_endpoint, store, "wh/builds/") == ["wh/builds/00000002.json"]  # build 1's record went with it
    assert warehouse_rows(load_settings(url, None, None).warehouse) == expected  # build 2 stays whole


def test_missing_bucket_is_named(s3_endpoint, tmp_path, monkeypatch, capsys):
    from pipelines.interfaces.cli import main

    s3_environment(monkeypatch, s3_endpoint, tmp_path / "cache")
    code = main(["build", "--warehouse", "s3://no-such-bucket-here/wh", "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and "s3://no-such-bucket-here/wh" in err and "cannot list objects" in err


@pytest.mark.skipif(pgserver.available() is not None, reason=f"no PostgreSQL server: {pgserver.available()}")
def test_an_s3_warehouse_publishes_its_iceberg_tables_on_the_store(store, s3_endpoint, small_corpus, tmp_path,
                                                                   monkeypatch):
    """An s3:// warehouse with [iceberg] catalog = a PostgreSQL catalog (started on 127.0.0.1): the
    tables' metadata go to the store beside the data, the manifests name the data files by their
    s3:// URLs, and plain pyiceberg on another machine (the catalog and the store, nothing local)
    reads the rows `tracehouse sql` reads. A working copy on a second machine finds the build
    published; without a shared catalog, Iceberg on object storage is refused with the reason."""
    from pyiceberg.catalog.sql import SqlCatalog

    from pipelines.interfaces.cli import main
    from pipelines.storage import iceberg

    upload_folder(s3_endpoint, small_corpus, store, "corpus")
    url, source = f"s3://{store}/w", f"memtracebench=s3://{store}/corpus"
    with pgserver.PostgresServer() as server:
        config = tmp_path / "tracehouse.toml"
        config.write_text('[iceberg]\nenabled = true\n')
        assert main(["build", "--config", str(config), "--warehouse", url, "--source", source, "--quiet"]) == 2
        config.write_text(f'[iceberg]\nenabled = true\ncatalog = "{server.url}"\n')
        assert main(["build", "--config", str(config), "--warehouse", url, "--source", source, "--quiet"]) == 0
        copy = load_settings(url, None, None).warehouse
        expected = warehouse_rows(copy)
        assert not (copy / "iceberg" / "catalog.db").exists()
        assert iceberg.published(Warehouse(copy), 1)["root"] == url
        assert any(k.startswith("w/iceberg/tracehouse/nodes/metadata/") and k.endswith(".metadata.json")
                   for k in keys(s3_endpoint, store, "w/iceberg/"))

        catalog = SqlCatalog("tracehouse", uri=server.url, **{"s3.endpoint": s3_endpoint, "s3.region": "us-east-1"})
        try:
            assert {name for _, name in catalog.list_tables("tracehouse")} == set(expected)
            for name, want in expected.items():
                table = catalog.load_table(f"tracehouse.{name}")
                assert rows(table.scan().to_arrow()) == want, name
                paths = table.inspect.files().column("file_path").to_pylist()
                assert paths and all(p.startswith(f"{url}/") for p in paths), name
            # metadata no snapshot uses (a killed publication's) is swept on the store too
            s3_client(s3_endpoint).put_object(Bucket=store, Key="w/iceberg/tracehouse/nodes/metadata/orphan.avro",
                                              Body=b"x")
            iceberg._remove_unreferenced_metadata(catalog.load_table("tracehouse.nodes"))
            left = keys(s3_endpoint, store, "w/iceberg/tracehouse/nodes/metadata/")
            assert "w/iceberg/tracehouse/nodes/metadata/orphan.avro" not in left and len(left) >= 3
            assert rows(catalog.load_table("tracehouse.nodes").scan().to_arrow()) == expected["nodes"]
        finally:
            catalog.engine.dispose()

        monkeypatch.setenv("TRACEHOUSE_CACHE", str(tmp_path / "cache-2"))  # another machine
        assert main(["build", "--config", str(config), "--warehouse", url, "--quiet"]) == 0
        second = load_settings(url, None, None).warehouse
        assert second != copy and iceberg.published(Warehouse(second), 1) is not None
        assert warehouse_rows(second) == expected


def test_fan_out_workers_that_share_only_the_store(store, s3_endpoint, small_corpus, tmp_path, capfd):
    """A Dask cluster whose 2 workers keep their own cache (for files, another machine): each step
    mirrors its partition's source objects, flattens in the worker's copy of the warehouse and uploads
    the generation and its mart fragments; the build downloads them, adopts them and commits rows
    equal to a local in-process build's. After one source object changes, the step of its split copies
    the other files' rows from the committed generation, which it takes from the store."""
    from distributed import LocalCluster

    upload_folder(s3_endpoint, small_corpus, store, "corpus")
    url, source = f"s3://{store}/w", f"memtracebench=s3://{store}/corpus"
    workers_cache = tmp_path / "workers-cache"
    cluster = LocalCluster(n_workers=2, processes=True, threads_per_worker=1, host="127.0.0.1",
                           dashboard_address=None, env={"TRACEHOUSE_CACHE": str(workers_cache)})
    on_cluster = ExecutorSettings(kind="dask", scheduler=cluster.scheduler_address)
    try:
        said = io.StringIO()
        on_s3 = run_build(load_settings(url, [source], None), out=said, executor=on_cluster)
        assert on_s3.ok and on_s3.build == 1 and len(on_s3.partitions_built) >= 3
        copy = load_settings(url, None, None).warehouse
        runs = [run for run in instance_for(Warehouse(copy)).get_runs() if run.job_name == "flatten_partitions"]
        assert len(runs) == 1 and runs[0].is_success
        worker_copy = remote.local_copy(url, remote.StoreOptions(cache=workers_cache))
        assert worker_copy != copy
        record = CommitLog(Warehouse(copy)).get(1)
        for key, part in record.snapshot.partitions.items():  # each generation written by a worker, then fetched
            assert (worker_copy / part.generation / "manifest.json").is_file(), key
            assert (copy / part.generation / "manifest.json").is_file(), key
        # the commit uploaded everything but what the workers had: their generations and fragments
        from_workers = {p for part in record.snapshot.partitions.values()
                        for p in (copy / part.generation).rglob("*") if p.is_file()}
        from_workers |= set((copy / "marts" / "fragments").rglob("*.parquet"))
        named = {p for rel in record.files() for p in ([copy / rel] if (copy / rel).is_file()
                                                        else (copy / rel).rglob("*")) if p.is_file()}
        uploading = re.search(r"commit: uploading (\d+) files", said.getvalue() + capfd.readouterr().err)
        assert uploading and int(uploading[1]) == len(named - from_workers) and from_workers <= named
        assert not (copy / remote.ON_STORE).exists()
        mirrored = remote.local_copy(f"s3://{store}/corpus", remote.StoreOptions(cache=workers_cache))
        assert sorted(p.relative_to(mirrored) for p in mirrored.rglob("*.json")) == sorted(
            p.relative_to(small_corpus) for p in small_corpus.rglob("*.json"))
        local = build_warehouse(tmp_path / "local", [f"memtracebench={small_corpus}"])
        assert warehouse_rows(copy) == warehouse_rows(tmp_path / "local") and on_s3.rows == local.rows

        changed = tmp_path / "changed"
        shutil.copytree(small_corpus, changed)
        add_node(changed, "rag", "U9:extra")
        edited = next(p for p in changed.rglob("*.json")
                      if p.read_bytes() != (small_corpus / p.relative_to(changed)).read_bytes())
        s3_client(s3_endpoint).upload_file(str(edited), store, f"corpus/{edited.relative_to(changed).as_posix()}")
        shutil.rmtree(worker_copy / "tables")  # the workers must take the committed generations from the store
        said = io.StringIO()
        again = run_build(load_settings(url, [source], None), out=said, executor=on_cluster)
        assert again.ok and again.build == 2 and again.partitions_built == ["memtracebench__rag"]
        step = re.search(r"flattened memtracebench__rag on a worker \[1/1\]: (\d+) files \((\d+) parsed\)",
                         said.getvalue())
        assert step and int(step[2]) == 1 < int(step[1]), said.getvalue()
        build_warehouse(tmp_path / "local-2", [f"memtracebench={changed}"])
        assert warehouse_rows(copy) == warehouse_rows(tmp_path / "local-2")
    finally:
        cluster.close()
