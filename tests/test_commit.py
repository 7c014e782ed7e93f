"""One committed state: a real `tracehouse build` killed with SIGKILL at many points of its run leaves
tables, marts and dashboard agreeing with each other, and a plain rebuild then equals a fresh build.

Each kill lands in a later phase than the one before (flattening, checks, marts, charts, pictures,
page, commit, publishing), on one warehouse, because every build adopts what the killed one finished.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import dagster as dg
import duckdb
import orjson
import pyarrow.parquet as pq
import pytest
from conftest import REPO, build_warehouse, every_row
from processes import session_members
from smartcomment_graphs import make_graph, write_memtracebench

from pipelines.analytics import db
from pipelines.builds.run_history import instance_for
from pipelines.storage.warehouse import Warehouse

CLI = [sys.executable, "-m", "pipelines.interfaces.cli"]
ENV_LIMIT = {"TRACEHOUSE_DRILLDOWN_LIMIT": "6"}


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([*CLI, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **ENV_LIMIT})


def start_build(*args: str, session: bool = False) -> subprocess.Popen:
    """A `tracehouse build` with JSON progress; ``session``: in a session (and process group) of its
    own, as a terminal's foreground job is, so that a Ctrl-C can be sent to all of it."""
    import os

    def as_a_terminal_starts_it() -> None:  # a foreground job gets Ctrl-C, whatever the test runner ignores
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    return subprocess.Popen([*CLI, "build", "--progress", "json", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, bufsize=1, env={**os.environ, **ENV_LIMIT},
                            start_new_session=session, preexec_fn=as_a_terminal_starts_it if session else None)


def kill_at(proc: subprocess.Popen, marker: tuple[str, dict]) -> list[str]:
    """SIGKILL the build the moment it reports progress event ``marker`` (its name, and fields it must
    have); the lines it printed."""
    seen = wait_for(proc, marker)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return seen


def wait_for(proc: subprocess.Popen, marker: tuple[str, dict]) -> list[str]:
    """Read the build's progress until it reports event ``marker``; the lines it printed."""
    assert proc.stderr is not None
    name, fields = marker
    seen = []
    for line in proc.stderr:
        seen.append(line)
        said = json.loads(line) if line.startswith("{") else {}
        if said.get("event") == name and fields.items() <= said.items():
            return seen
    proc.wait()
    raise AssertionError(f"the build ended (exit {proc.returncode}) before {marker!r}:\n{''.join(seen)}")


def page_summary(page: Path) -> dict:
    """The numbers a dashboard page shows, from its build-summary block."""
    found = re.search(r'<script type="application/json" id="build-summary">(.*?)</script>', page.read_text(), re.S)
    assert found, page
    return json.loads(found.group(1))


def agreement(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """(build, annotations) of a connection's build, after checking every mart agrees with the tables."""
    annotations = con.execute("select count(*) from annotations").fetchone()[0]
    by_system = con.execute("select coalesce(sum(n), 0) from failure_modes_by_system").fetchone()[0]
    by_dataset = con.execute("select coalesce(sum(n), 0) from failure_modes_by_dataset").fetchone()[0]
    rates = con.execute("select coalesce(sum(n_annotations), 0) from failure_rates").fetchone()[0]
    propagation = con.execute("select count(*) from failure_propagation").fetchone()[0]
    graphs = con.execute("select count(*), coalesce(sum(n_annotations), 0) from graphs").fetchone()
    assert by_system == by_dataset == rates == propagation == graphs[1] == annotations
    return con.execute("select build from tracehouse_build").fetchone()[0], annotations


def assert_one_state(warehouse: Path) -> int:
    """Every reader of the warehouse sees one build whole: the committed views (as `tracehouse sql`
    opens them), its dashboard page, and the published copies (tracehouse.duckdb, index.html), which
    may still show the previous build but then show all of it. Returns the committed build."""
    wh = Warehouse(warehouse)
    con = db.connect(wh)
    try:
        build, annotations = agreement(con)
    finally:
        con.close()
    record = wh.committed()
    assert record.build == build
    assert page_summary(wh.path(record.dashboard_page)) == {**page_summary(wh.path(record.dashboard_page)),
                                                             "build": build, "annotations": annotations}
    published = duckdb.connect(str(wh.db_path), read_only=True)
    try:
        published.execute("set file_search_path = ?", [str(wh.root)])
        published_build, published_annotations = agreement(published)
    finally:
        published.close()
    index = page_summary(wh.dashboards_dir / "index.html")
    assert (index["build"], index["annotations"]) == (published_build, published_annotations)
    assert published_build in (build, build - 1)
    return build


# One progress event per phase (its name, and fields it must have), in the order a build meets them;
# every build reports them all (a phase whose outputs exist already still says so), except the
# flattening of partitions an earlier attempt finished (and a build with nothing to do, which says so
# and stops).
MARKERS = [
    ("final_run", {}),
    ("partition_flattening", {"partition": "b__mem0"}),
    ("partition_files", {"partition": "b__rag"}),
    ("checks_started", {}),
    ("checks_done", {}),
    ("mart_done", {"mart": "failure_modes_by_dataset"}),
    ("mart_done", {"mart": "failure_rates"}),
    ("chart_done", {}),
    ("pictures_started", {}),
    ("pictures_done", {}),
    ("page_done", {}),
    ("commit_writing", {}),
    ("commit_committed", {}),
    ("commit_published", {}),
]


@pytest.fixture()
def sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    for name, value in ENV_LIMIT.items():  # the builds these tests run in this process draw as the CLI's do
        monkeypatch.setenv(name, value)
    a, b = tmp_path / "a", tmp_path / "b"
    write_memtracebench(a, {"rag": 4, "mem0": 4})
    for split in ("rag", "mem0"):
        (b / split).mkdir(parents=True)
        for i in range(4):
            graph = make_graph(f"graph-b-{split}-{i}", f"locomo-b{i}", "Mem0" if split == "mem0" else "NaiveRAG",
                               seed=100 + i, queries=3)
            (b / split / f"locomo_locomo-b{i}.json").write_bytes(orjson.dumps(graph))
    return {"a": a, "b": b}


def test_a_build_killed_at_every_phase_leaves_one_state_and_the_rebuild_equals_a_fresh_one(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    warehouse = tmp_path / "w"
    # Built in this process (the killed builds below are the processes this test is about)
    assert build_warehouse(warehouse, [f"a:memtracebench={sources['a']}"]).ok
    assert assert_one_state(warehouse) == 1
    only_a = every_row(warehouse)

    both = ["--warehouse", str(warehouse), "--source", f"a:memtracebench={sources['a']}",
            "--source", f"b:memtracebench={sources['b']}"]
    # a change in a too, so its partition is rebuilt alongside b's new ones
    (sources["a"] / "rag" / "locomo_locomo-0.json").write_bytes(
        orjson.dumps(make_graph("graph-rag-0000", "locomo-0", "NaiveRAG", seed=7, queries=4)))
    builds = []
    for marker in MARKERS:
        if marker[0] == "commit_published":  # build 2 is committed: give the next one something to do
            (sources["b"] / "rag" / "locomo_locomo-b0.json").write_bytes(
                orjson.dumps(make_graph("graph-b-rag-0", "locomo-b0", "NaiveRAG", seed=8, queries=2)))
        kill_at(start_build(*both), marker)
        builds.append(assert_one_state(warehouse))
    # Killed before its commit, a build changes nothing readers see; killed after, all of it.
    committed_at = MARKERS.index(("commit_committed", {}))
    assert builds[:committed_at] == [1] * committed_at
    assert builds[committed_at] == 2 and builds[-1] == 3
    assert every_row(warehouse) != only_a

    rebuild = run_cli("build", *both)
    assert rebuild.returncode == 0, rebuild.stderr
    assert "nothing changed" in rebuild.stdout  # the last killed build had committed already
    # In the warehouse's Dagster instance no run of a killed build is left "started": the next build
    # reported each as failed, and the build with nothing to do recorded the commit the last killed
    # one made after its run stopped. A build killed as its run starts may have none.
    instance = instance_for(Warehouse(warehouse))
    statuses = [r.dagster_run.status for r in instance.get_run_records()]
    assert set(statuses) == {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE}
    assert statuses.count(dg.DagsterRunStatus.FAILURE) >= len(MARKERS) - MARKERS.index(("final_run", {})) - 1
    committed = instance.get_latest_materialization_event(dg.AssetKey("committed_build")).asset_materialization
    assert committed.metadata["build"].value == 3
    # each table's latest materialization is the committed build's, with its rows, naming what it read
    record = Warehouse(warehouse).committed()
    for table in ("nodes", "ingest_errors"):
        latest = instance.get_latest_materialization_event(dg.AssetKey(table)).asset_materialization
        assert latest.metadata["build"].value == record.build == 3, table
        assert latest.metadata["rows"].value == sum(pq.ParquetFile(warehouse / path).metadata.num_rows
                                                    for path in record.snapshot.table_files(table)), table
        assert latest.metadata["splits_changed"].value == "b__rag", table
    fresh = tmp_path / "fresh"
    assert build_warehouse(fresh, [f"a:memtracebench={sources['a']}", f"b:memtracebench={sources['b']}"]).ok
    assert every_row(warehouse) == every_row(fresh)
    # nothing is left of the killed builds but what the kept builds refer to
    assert not list((warehouse / ".staging").iterdir())
    assert not list(warehouse.rglob("*.tmp"))


def test_a_build_killed_before_its_commit_is_finished_by_the_next(sources: dict[str, Path], tmp_path: Path) -> None:
    """The interrupted work is adopted, not redone, and the result equals a fresh build."""
    warehouse = tmp_path / "w"
    both = ["--warehouse", str(warehouse), "--source", f"a:memtracebench={sources['a']}",
            "--source", f"b:memtracebench={sources['b']}"]
    kill_at(start_build(*both), ("pictures_started", {}))
    assert not Warehouse(warehouse).committed()
    done = run_cli("build", *both)
    assert done.returncode == 0, done.stderr
    assert "partitions: 0 built, 0 unchanged, 4 taken from an unfinished build, 0 removed" in done.stdout
    assert "flattening" not in done.stderr
    fresh = tmp_path / "fresh"
    assert build_warehouse(fresh, [f"a:memtracebench={sources['a']}", f"b:memtracebench={sources['b']}"]).ok
    assert every_row(warehouse) == every_row(fresh)


@pytest.mark.parametrize(("marker", "partitions"), [
    (("partition_flattening", {}), "partitions: 2 built, 0 unchanged, 0 removed"),
    (("checks_started", {}), "partitions: 0 built, 0 unchanged, 2 taken from an unfinished build, 0 removed"),
], ids=["flattening", "checks"])
def test_a_first_build_killed_is_continued_without_its_source_flag(
    sources: dict[str, Path], tmp_path: Path, marker: tuple[str, dict], partitions: str
) -> None:
    """The first build of a warehouse killed before its commit (as it starts flattening, or once it
    has), then `tracehouse build` with the --source forgotten: the build reads the killed build's
    sources and takes what it flattened, not the sample corpus (whose build would have deleted that
    work); once committed, they are recorded."""
    warehouse = tmp_path / "w"
    source = f"a:memtracebench={sources['a']}"
    kill_at(start_build("--warehouse", str(warehouse), "--source", source), marker)
    assert not Warehouse(warehouse).committed()
    done = run_cli("build", "--warehouse", str(warehouse))
    assert done.returncode == 0, done.stderr
    assert ("no --source given and no build committed yet: reading the sources of the build that started "
            "before and did not commit") in done.stderr and f"a={sources['a']}" in done.stderr
    assert "sample corpus" not in done.stderr and not (warehouse / "corpus").exists()
    assert partitions in done.stdout
    assert [(r["name"], r["absolute"]) for r in Warehouse(warehouse).committed().sources] == [("a", str(sources["a"]))]
    fresh = tmp_path / "fresh"
    assert build_warehouse(fresh, [source]).ok
    assert every_row(warehouse) == every_row(fresh)
    again = run_cli("build", "--warehouse", str(warehouse))
    assert again.returncode == 0 and "nothing changed" in again.stdout, again.stderr


INTERRUPTED = ("tracehouse: build interrupted; the last committed build stands, and the next build takes over "
               "what this one finished")


@pytest.mark.parametrize(("marker", "taken"), [(("partition_flattening", {}), 0), (("checks_started", {}), 2)],
                         ids=["flattening", "checks"])
def test_ctrl_c_stops_a_build_with_one_line_and_exit_130(
    sources: dict[str, Path], tmp_path: Path, marker: tuple[str, dict], taken: int
) -> None:
    """Ctrl-C, as a terminal sends it (SIGINT to the build's whole process group, its GX worker too),
    while the build flattens (the worker loading GX) or runs its checks in Dagster: one line and exit
    130, no traceback from the build or its worker, no process left, nothing committed; the next
    build takes over what it finished."""
    import os
    import time

    warehouse = tmp_path / "w"
    source = f"a:memtracebench={sources['a']}"
    proc = start_build("--warehouse", str(warehouse), "--source", source, session=True)
    wait_for(proc, marker)
    os.killpg(proc.pid, signal.SIGINT)
    try:
        _, rest = proc.communicate(timeout=120)  # a bound for a build that would never end, not a speed
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail("the interrupted build did not end within 120 s")
    assert proc.returncode == 130, rest
    assert rest.splitlines()[-1] == INTERRUPTED
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest and "FAILED" not in rest, rest
    deadline = time.monotonic() + 30  # a bound for a worker that would never end, not a speed
    while session_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not session_members(proc.pid)
    assert not Warehouse(warehouse).committed()
    done = run_cli("build", "--warehouse", str(warehouse), "--source", source)
    assert done.returncode == 0, done.stderr
    assert f"{taken} taken from an unfinished build" in done.stdout if taken else "taken from" not in done.stdout


def test_garbage_collection_deletes_exactly_the_files_no_kept_build_names(sample_warehouse, tmp_path: Path) -> None:
    """Stray generations, mart files, failure views and temporary files go; every file a kept build
    names stays (the warehouse's paths are cut from its root by text, not resolved one by one)."""
    import shutil

    from pipelines.storage.state import CommitLog, collect_garbage
    from pipelines.storage.warehouse import Warehouse

    warehouse = Warehouse(shutil.copytree(sample_warehouse[0], tmp_path / "w", symlinks=True))
    named = CommitLog(warehouse).latest().files()
    part = next(p for p in warehouse.tables_dir.iterdir() if p.is_dir())
    strays = [part / "g-stale", warehouse.marts_dir / "failure_rates" / "stale.parquet",
              warehouse.marts_dir / "fragments" / "operation_links" / "stale.parquet",
              warehouse.dashboards_dir / "failures" / "failure-stale.html", warehouse.root / ".left.tmp"]
    strays[0].mkdir()
    (strays[0] / "nodes.parquet").write_bytes(b"x")
    for stray in strays[1:]:
        stray.parent.mkdir(parents=True, exist_ok=True)
        stray.write_bytes(b"x")

    assert collect_garbage(warehouse) == len(strays)
    assert not any(stray.exists() for stray in strays)
    assert all(warehouse.path(rel).exists() for rel in named)
    assert every_row(warehouse.root) == every_row(sample_warehouse[0])
