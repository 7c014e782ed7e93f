"""Crash safety and readers during rebuilds, with real subprocesses.

A build killed with SIGKILL at any point leaves the previous warehouse readable and consistent
(each partition all-old or all-new), and the next build recovers with no manual step.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from conftest import REPO, build_warehouse, query
from smartcomment_graphs import make_graph, write_memtracebench

from pipelines import schema
from pipelines.storage import Warehouse

SPLITS = {"rag": 25, "mem0": 25, "evermemos": 25, "long_context": 25}


def start_build(corpus: Path, warehouse: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipelines.cli",
            "build",
            "--source",
            f"memtracebench={corpus}",
            "--warehouse",
            str(warehouse),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill_when(proc: subprocess.Popen, marker: str, timeout: float = 120) -> str:
    """SIGKILL the build as soon as its progress output shows ``marker``."""
    seen = []
    deadline = time.monotonic() + timeout
    assert proc.stderr is not None
    for line in proc.stderr:
        seen.append(line)
        if marker in line:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return "".join(seen)
        if time.monotonic() > deadline:
            break
    proc.kill()
    raise AssertionError(f"build ended before {marker!r} appeared:\n{''.join(seen)}")


def rewrite_corpus(corpus: Path, seed: int) -> None:
    """Change every file, so a rebuild has to replace every partition."""
    for path in sorted(corpus.glob("*/*.json")):
        graph = orjson.loads(path.read_bytes())
        fresh = make_graph(graph["graph_id"], graph["user_id"], graph["project_id"], seed=seed, queries=3)
        path.write_bytes(orjson.dumps(fresh))


def assert_consistent(warehouse: Path) -> None:
    """Every view answers, and within each partition the tables agree with graphs.n_*."""
    for table, count_column in schema.COUNT_COLUMNS.items():
        rows = query(
            warehouse,
            f"""
            select g.split, sum(g.{count_column}) as expected,
                   (select count(*) from {table} t join graphs g2 using (graph_id) where g2.split = g.split) as actual
            from graphs g group by g.split""",
        )
        for split, expected, actual in rows:
            assert expected == actual, (table, split, expected, actual)
    for key in Warehouse(warehouse).partitions():
        current = Warehouse(warehouse).current(key)
        assert current is not None and not current.name.endswith(".tmp")


@pytest.fixture()
def built(tmp_path: Path) -> tuple[Path, Path]:
    corpus = tmp_path / "corpus"
    write_memtracebench(corpus, SPLITS)
    warehouse = tmp_path / "warehouse"
    assert build_warehouse(warehouse, [f"memtracebench={corpus}"]).ok
    return corpus, warehouse


# Kill while a partition is being written (a progress line names its first file), and while the
# checks, marts and database are being published.
@pytest.mark.parametrize("marker", ["  memtracebench__mem0: ", "checking tables"])
def test_killed_build_leaves_a_readable_warehouse_and_the_next_build_recovers(
    built, tmp_path: Path, marker: str
) -> None:
    corpus, warehouse = built
    before = query(warehouse, "select count(*), sum(n_nodes) from graphs")
    rewrite_corpus(corpus, seed=77)
    kill_when(start_build(corpus, warehouse), marker)

    assert query(warehouse, "select count(*) from graphs")[0][0] == before[0][0]
    assert_consistent(warehouse)
    if "mem0" in marker:
        assert list(warehouse.glob("tables/memtracebench__mem0/*.tmp")), "the kill should interrupt a write"

    proc = start_build(corpus, warehouse)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert not list(warehouse.glob("tables/*/*.tmp")) and not list(warehouse.glob(".*.tmp"))
    assert_consistent(warehouse)
    fresh = tmp_path / "fresh"
    build_warehouse(fresh, [f"memtracebench={corpus}"])
    for table in ("graphs", "nodes", "edges", "annotations"):
        sql = f"select * from {table} order by all"
        assert query(warehouse, sql) == query(fresh, sql), table


def test_sql_keeps_working_while_a_build_runs(built) -> None:
    corpus, warehouse = built
    graphs = query(warehouse, "select count(*) from graphs")[0][0]
    rewrite_corpus(corpus, seed=5)
    proc = start_build(corpus, warehouse)
    answers = 0
    try:
        while proc.poll() is None:
            result = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pipelines.cli",
                    "sql",
                    "--warehouse",
                    str(warehouse),
                    "--format",
                    "csv",
                    "select count(*) as n from graphs",
                ],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert result.returncode == 0, result.stderr
            assert result.stdout.splitlines() == ["n", str(graphs)]
            answers += 1
    finally:
        proc.communicate(timeout=300)
    assert proc.returncode == 0
    assert answers >= 2, "the build ended before any reader ran alongside it"


def test_a_second_concurrent_build_is_refused(built) -> None:
    corpus, warehouse = built
    rewrite_corpus(corpus, seed=9)
    first = start_build(corpus, warehouse)
    try:
        kill_marker_seen = False
        assert first.stderr is not None
        for line in first.stderr:
            if "flattening" in line:
                kill_marker_seen = True
                break
        assert kill_marker_seen
        second = start_build(corpus, warehouse)
        _, err = second.communicate(timeout=120)
        assert second.returncode == 1
        assert "another build is running" in err
    finally:
        first.communicate(timeout=300)
    assert first.returncode == 0


def test_ui_binds_to_loopback_by_default() -> None:
    from pipelines.cli import make_parser

    args = make_parser().parse_args(["ui"])
    assert args.host == "127.0.0.1"


def test_paths_inside_the_data_never_decide_where_files_go(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    graph = make_graph("../../../escape", "../../etc", "../evil")
    (corpus / "mem0").mkdir(parents=True)
    (corpus / "mem0" / "locomo_x.json").write_bytes(orjson.dumps(graph))
    warehouse = tmp_path / "w"
    build_warehouse(warehouse, [f"memtracebench={corpus}"])
    assert query(warehouse, "select graph_id from graphs") == [("../../../escape",)]
    written = {p.relative_to(tmp_path).parts[0] for p in tmp_path.rglob("*")}
    assert written == {"corpus", "w"}
    assert os.listdir(warehouse / "tables") == ["memtracebench__mem0"]
