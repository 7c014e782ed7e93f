"""What a warehouse keeps of its past: a build whose publishing fails after its commit says it
committed (exit 4), the next build finishes the publishing and collects what the failed one left;
and over many builds the build records and the Dagster runs stay those of the kept builds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import duckdb
import orjson
from conftest import REPO, build_warehouse
from smartcomment_graphs import make_graph, write_memtracebench

from pipelines.builds.run_history import BUILD_TAG, instance_for
from pipelines.storage.records import GENERATION_TABLE
from pipelines.storage.state import KEEP_BUILDS, CommitLog
from pipelines.storage.warehouse import Warehouse

CLI = [sys.executable, "-m", "pipelines.interfaces.cli"]

# Publishes the latest committed build's copies in a process whose files may not grow past 64 KB
# (RLIMIT_FSIZE: writes fail with EFBIG, as on a full disk): DuckDB fails writing the copy's log.
PUBLISH_ON_A_FULL_DISK = """\
import resource, signal, sys
from pathlib import Path
from pipelines.builds.commit import publish
from pipelines.storage.state import CommitLog
from pipelines.storage.warehouse import Warehouse
warehouse = Warehouse(Path(sys.argv[1]))
record = CommitLog(warehouse).latest()
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (65536, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    publish(warehouse, record)
except Exception as exc:
    print(type(exc).__name__, exc)
    sys.exit(1)
"""


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TRACEHOUSE_DRILLDOWN_LIMIT": "6"})


def add_graph(corpus: Path, n: int) -> None:
    (corpus / "rag" / f"locomo_locomo-x{n}.json").write_bytes(
        orjson.dumps(make_graph(f"graph-x{n}", f"locomo-x{n}", "NaiveRAG", seed=n, queries=2)))


def leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith(".") and ".tmp" in p.name)


def published(warehouse: Path) -> int:
    con = duckdb.connect(str(warehouse / "tracehouse.duckdb"), read_only=True)
    try:
        con.execute("set file_search_path = ?", [str(warehouse)])
        return con.execute("select build from tracehouse_build").fetchone()[0]
    finally:
        con.close()


def test_a_build_whose_publishing_fails_says_it_committed_and_the_next_one_finishes(tmp_path: Path) -> None:
    corpus, warehouse = tmp_path / "corpus", tmp_path / "w"
    write_memtracebench(corpus, {"rag": 2})
    assert build_warehouse(warehouse, [f"memtracebench={corpus}"]).ok
    # a publication that failed for want of space leaves DuckDB's files behind
    failed = subprocess.run([sys.executable, "-c", PUBLISH_ON_A_FULL_DISK, str(warehouse)], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert failed.returncode == 1 and "File too large" in failed.stdout, failed.stdout + failed.stderr
    left = leftovers(warehouse)
    assert any(name.startswith(".tracehouse.duckdb.") and name.endswith(".tmp.wal") for name in left), left
    # the place the catalog file is published to is taken: build 2 commits, its publishing fails
    (warehouse / "tracehouse.duckdb").unlink()
    (warehouse / "tracehouse.duckdb").mkdir()
    add_graph(corpus, 1)
    done = cli("build", "--quiet", "--warehouse", str(warehouse))
    assert done.returncode == 4, done.stdout + done.stderr
    assert "FAILED step committed_build: IsADirectoryError" in done.stdout
    assert "status: build 2 committed in" in done.stdout and "publishing its copies did not finish" in done.stdout
    assert CommitLog(Warehouse(warehouse)).latest().build == 2
    read = cli("sql", "--warehouse", str(warehouse), "--format", "csv", "select build from tracehouse_build")
    assert read.returncode == 0 and read.stdout.split() == ["build", "2"], read.stderr
    # the place freed, the next build (nothing changed) publishes build 2 and collects every leftover
    (warehouse / "tracehouse.duckdb").rmdir()
    done = cli("build", "--quiet", "--warehouse", str(warehouse))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "nothing changed since build 2" in done.stdout
    assert published(warehouse) == 2
    assert leftovers(warehouse) == []
    # the commit the failed run could not record is recorded now
    latest = instance_for(Warehouse(warehouse)).get_latest_materialization_event(dg.AssetKey("committed_build"))
    assert latest.asset_materialization.metadata["build"] == dg.IntMetadataValue(2)


def test_records_and_runs_are_those_of_the_kept_builds(tmp_path: Path) -> None:
    """Five builds, each changing the rag split only: the records are those of the last three builds,
    and the Dagster instance keeps their runs, each table's materializations by them naming the
    splits each read; the runs of builds 1 and 2 are gone with their events."""
    corpus, warehouse = tmp_path / "corpus", tmp_path / "w"
    write_memtracebench(corpus, {"rag": 1, "mem0": 1})
    sources = [f"memtracebench={corpus}"]
    builds = [build_warehouse(warehouse, sources)]
    for n in range(1, 5):
        add_graph(corpus, n)
        builds.append(build_warehouse(warehouse, sources))
    assert [b.build for b in builds if b.committed] == [1, 2, 3, 4, 5]
    assert builds[0].partitions_built == ["memtracebench__mem0", "memtracebench__rag"]
    assert all(b.partitions_built == ["memtracebench__rag"] for b in builds[1:])
    wh = Warehouse(warehouse)
    assert CommitLog(wh).numbers() == [3, 4, 5] and KEEP_BUILDS == 3
    instance = instance_for(wh)
    runs = {r.dagster_run.tags[BUILD_TAG]: r.dagster_run.run_id for r in instance.get_run_records()}
    assert sorted(runs) == ["3", "4", "5"]
    made = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=dg.AssetKey(GENERATION_TABLE)), limit=100)
    assert [(r.run_id, r.asset_materialization.metadata["splits_changed"].value) for r in made.records] == [
        (runs[build], "memtracebench__rag") for build in ("5", "4", "3")]
    # a kept build still opens; the pruned ones are said to be gone
    shown = subprocess.run([*CLI, "sql", "--warehouse", str(warehouse), "--build", "3", "--format", "csv",
                            "select build from tracehouse_build"], cwd=REPO, capture_output=True, text=True)
    assert shown.returncode == 0 and shown.stdout.split() == ["build", "3"], shown.stderr
    shown = subprocess.run([*CLI, "sql", "--warehouse", str(warehouse), "--build", "2", "select 1"], cwd=REPO,
                           capture_output=True, text=True)
    assert shown.returncode == 1 and "builds kept: 3, 4, 5" in shown.stderr and "Traceback" not in shown.stderr
    assert json.loads((warehouse / ".published.json").read_text()) == {"build": 5}
