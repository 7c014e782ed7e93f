"""Readers during rebuilds and one writer at a time, with real subprocesses. (A build killed at any
point: tests/test_commit.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from conftest import REPO, build_warehouse, query
from smartcomment_graphs import make_graph, write_memtracebench

SPLITS = {"rag": 25, "mem0": 25, "evermemos": 25, "long_context": 25}


def start_build(corpus: Path, warehouse: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipelines.interfaces.cli",
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


def rewrite_corpus(corpus: Path, seed: int) -> None:
    """Change every file, so a rebuild has to replace every partition."""
    for path in sorted(corpus.glob("*/*.json")):
        graph = orjson.loads(path.read_bytes())
        fresh = make_graph(graph["graph_id"], graph["user_id"], graph["project_id"], seed=seed, queries=3)
        path.write_bytes(orjson.dumps(fresh))


@pytest.fixture()
def built(tmp_path: Path) -> tuple[Path, Path]:
    corpus = tmp_path / "corpus"
    write_memtracebench(corpus, SPLITS)
    warehouse = tmp_path / "warehouse"
    assert build_warehouse(warehouse, [f"memtracebench={corpus}"]).ok
    return corpus, warehouse


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
                    "pipelines.interfaces.cli",
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
    from pipelines.interfaces.cli import make_parser

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
