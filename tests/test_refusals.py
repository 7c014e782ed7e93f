"""Refusals a user meets first: a build asked to drop or leave out what it cannot is refused before
Dagster, Great Expectations and DuckDB are loaded, and a damaged build record stops every command
with one line naming the file and the way on, never a traceback."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, build_warehouse
from smartcomment_graphs import write_memtracebench

CLI = [sys.executable, "-m", "pipelines.interfaces.cli"]
HEAVY = ("dagster", "great_expectations", "duckdb", "altair")

# Runs the CLI's entry in a fresh interpreter and reports its exit status and which heavy modules
# were imported by the time the command was decided.
DRIVER = f"""\
import json, sys
from pipelines.interfaces.cli import main
code = main(sys.argv[1:])
print(json.dumps({{"code": code, "loaded": [m for m in {HEAVY!r} if m in sys.modules]}}))
"""


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=REPO, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("refusals")
    write_memtracebench(root / "corpus", {"rag": 2})
    assert build_warehouse(root / "w", [f"mine:memtracebench={root / 'corpus'}"]).ok
    return {"warehouse": root / "w", "corpus": root / "corpus", "root": root}


def decided(*args: str) -> tuple[int, list[str], str]:
    """(exit status, heavy modules imported, stderr) of ``tracehouse ARGS`` run through the CLI's entry."""
    done = subprocess.run([sys.executable, "-c", DRIVER, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert done.stdout.strip(), done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["code"], result["loaded"], done.stderr


def test_build_refusals_are_decided_before_the_heavy_imports(built: dict[str, Path]) -> None:
    warehouse, corpus = str(built["warehouse"]), built["corpus"]
    other = built["root"] / "other"
    write_memtracebench(other, {"mem0": 1})
    cases = {  # the refusal -> what its one line says
        ("--remove-source", "nosuch"): "--remove-source nosuch: the warehouse has no source named 'nosuch' "
                                       "(recorded: mine)",
        ("--source", f"theirs:memtracebench={other}"): "the warehouse also holds source(s) mine, which this build "
                                                       "does not name",
        ("--source", f"mine:memtracebench={corpus}", "--remove-source", "mine"): "'mine' is also given as a --source",
    }
    for args, said in cases.items():
        code, loaded, stderr = decided("build", "--warehouse", warehouse, *args)
        assert code == 2, (args, stderr)
        assert said in stderr and stderr.count("\n") == 1 and "Traceback" not in stderr, (args, stderr)
        assert loaded == [], (args, loaded)


def test_a_recorded_source_whose_folder_is_gone_is_refused_before_the_heavy_imports(
        built: dict[str, Path], tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    write_memtracebench(corpus, {"rag": 1})
    warehouse = tmp_path / "w"
    assert build_warehouse(warehouse, [f"memtracebench={corpus}"]).ok
    shutil.rmtree(corpus)
    code, loaded, stderr = decided("build", "--warehouse", str(warehouse))
    assert code == 2 and f"source memtracebench: {corpus} does not exist" in stderr, stderr
    assert loaded == []


def damage(record: Path, how: str) -> None:
    text = record.read_text()
    damaged = {"truncated": text[: len(text) // 2], "empty object": "{}",
               "another format": json.dumps({**json.loads(text), "format": 99})}
    record.write_text(damaged[how])


@pytest.mark.parametrize("how", ["truncated", "empty object", "another format"])
def test_a_damaged_latest_record_is_one_line_naming_it(built: dict[str, Path], tmp_path: Path, how: str) -> None:
    """The latest record damaged (build 2 here, build 1 before it): build, sql and dashboard each say
    so in one line naming the file and the build that still opens, exit 1, and build 1 still opens."""
    warehouse = tmp_path / "w"
    shutil.copytree(built["warehouse"], warehouse, symlinks=True)
    first = warehouse / "builds" / "00000001.json"
    latest = warehouse / "builds" / "00000002.json"
    latest.write_text(json.dumps({**json.loads(first.read_text()), "build": 2, "parent": 1}))
    damage(latest, how)
    for command in (["build"], ["sql", "select 1"], ["dashboard"], ["show", "x#a0"]):
        done = cli(*command, "--warehouse", str(warehouse))
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, (command, done.stderr)
        assert done.stderr.startswith(f"tracehouse: the record of build 2, {latest}, is damaged ("), done.stderr
        assert "build 1 still opens (tracehouse sql --build 1)" in done.stderr, done.stderr
    done = cli("sql", "--warehouse", str(warehouse), "--build", "1", "--format", "csv",
               "select build from tracehouse_build")
    assert done.returncode == 0 and done.stdout.split() == ["build", "1"], done.stderr


def test_a_damaged_only_record_says_there_is_no_earlier_build(built: dict[str, Path], tmp_path: Path) -> None:
    warehouse = tmp_path / "w"
    shutil.copytree(built["warehouse"], warehouse, symlinks=True)
    record = warehouse / "builds" / "00000001.json"
    damage(record, "truncated")
    done = cli("sql", "--warehouse", str(warehouse), "select 1")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"no earlier build is kept: move {record.name} out of {record.parent} and build again" in done.stderr
