"""The real `tracehouse` commands, run as a user would run them."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import REPO, needs_shared_data

TRACEHOUSE = [sys.executable, "-m", "pipelines.interfaces.cli"]


def run(*args: str, cwd: Path = REPO, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([*TRACEHOUSE, *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    if check and result.returncode != 0:
        raise AssertionError(f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return result


def expected_annotation_counts(shared: Path) -> Counter:
    counts: Counter = Counter()
    for path in (shared / "whowhen").glob("*/*.json"):
        qid = json.loads(path.read_text())["question_ID"]
        system = "magentic-one" if path.parent.name == "Hand-Crafted" else "captainagent"
        counts[(system, "gaia" if len(qid) == 36 else "assistantbench")] += 1
    for path in (shared / "tracertraj").glob("*.parquet"):
        counts[("metagpt", "code")] += pq.ParquetFile(path).metadata.num_rows
    return counts


def build_shared(shared: Path, warehouse: Path, *flags: str) -> subprocess.CompletedProcess:
    """`tracehouse build` over the real Who&When and TracerTraj records."""
    sources = ["--source", f"whowhen={shared / 'whowhen'}", "--source", f"tracertraj={shared / 'tracertraj'}"]
    return run("build", *sources, "--warehouse", str(warehouse), *flags)


@pytest.fixture(scope="module")
def cli_warehouse(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    warehouse = tmp_path_factory.mktemp("cli") / "W"
    result = build_shared(shared_data, warehouse)
    assert "status: ok" in result.stdout
    assert "flattening whowhen__Hand-Crafted" in result.stderr  # progress while it runs
    return warehouse


@needs_shared_data()
def test_build_then_sql_counts_annotations_per_system_and_dataset(cli_warehouse: Path, shared_data: Path) -> None:
    result = run(
        "sql",
        "--warehouse",
        str(cli_warehouse),
        "--format",
        "csv",
        "select system, dataset, count(*) as n from annotations group by all order by all",
    )
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    got = Counter({(r["system"], r["dataset"]): int(r["n"]) for r in rows})
    assert got == expected_annotation_counts(shared_data)
    assert len(rows) == len(got)  # one row per (system, dataset)


@needs_shared_data()
def test_summary_reports_rows_per_table(cli_warehouse: Path) -> None:
    from pipelines.storage.warehouse import Warehouse

    record = Warehouse(cli_warehouse).committed().summary
    result = run(
        "sql",
        "--warehouse",
        str(cli_warehouse),
        "--format",
        "json",
        "select (select count(*) from graphs) as graphs, (select count(*) from nodes) as nodes",
    )
    assert json.loads(result.stdout) == [{"graphs": record["rows"]["graphs"], "nodes": record["rows"]["nodes"]}]
    assert record["files_found"] == 167
    assert run("sql", "--warehouse", str(cli_warehouse), "--format", "csv",
               "select count(*) as n from ingest_errors").stdout.splitlines() == ["n", "0"]


@needs_shared_data()
def test_warehouse_opens_after_being_moved_from_any_directory(cli_warehouse: Path, tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere" / "copy"
    shutil.copytree(cli_warehouse, moved, symlinks=True)
    result = run("sql", "--warehouse", str(moved), "--format", "csv", "select count(*) as n from graphs", cwd=tmp_path)
    assert result.stdout.splitlines() == ["n", "196"]
    # no absolute path of the original location is baked into the database
    assert str(cli_warehouse).encode() not in (moved / "tracehouse.duckdb").read_bytes()


@needs_shared_data()
def test_sql_is_read_only_by_default(cli_warehouse: Path) -> None:
    result = run("sql", "--warehouse", str(cli_warehouse), "create table scratch (a int)", check=False)
    assert result.returncode == 1
    assert "read-only" in result.stderr.lower()


@needs_shared_data()
def test_second_build_reuses_unchanged_partitions(cli_warehouse: Path, shared_data: Path) -> None:
    result = build_shared(shared_data, cli_warehouse, "--quiet")
    assert "partitions: 0 built, 3 unchanged, 0 removed" in result.stdout
    assert result.stderr.strip() == ""


def test_sql_interactive_prompt_reads_statements(tmp_path: Path, cli_warehouse: Path) -> None:
    proc = subprocess.run(
        [*TRACEHOUSE, "sql", "--warehouse", str(cli_warehouse), "--format", "csv"],
        input="select 40 +\n 2 as answer;\n.quit\n",
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert "answer\n42" in proc.stdout


def test_help_lists_every_command() -> None:
    out = run("--help").stdout
    for command in ("build", "sql", "sample", "ui"):
        assert command in out


def test_bad_source_is_a_usage_error_naming_the_problem(tmp_path: Path) -> None:
    result = run("build", "--source", "nosuchkind=.", "--warehouse", str(tmp_path / "w"), check=False)
    assert result.returncode == 2
    assert "unknown source kind 'nosuchkind'" in result.stderr
    result = run(
        "build", "--source", f"whowhen={tmp_path / 'missing'}", "--warehouse", str(tmp_path / "w"), check=False
    )
    assert result.returncode == 2 and "does not exist" in result.stderr


def test_build_without_sources_generates_the_default_corpus_once(tmp_path: Path) -> None:
    """What `make run` does: the embedded corpus is generated into the warehouse, then reused."""
    warehouse = tmp_path / "warehouse"
    first = run("build", "--warehouse", str(warehouse), cwd=tmp_path)
    assert "unpacking the shipped default sample corpus" in first.stderr  # pipelines/sample/archive.py
    corpus = warehouse / "corpus"
    faults = [json.loads(line) for line in (corpus / "injected_faults.jsonl").read_text().splitlines()]
    graphs = run("sql", "--warehouse", str(warehouse), "--format", "csv",
                 "select system, count(*) as n from graphs group by all order by all").stdout
    expected = Counter(f["split"] for f in {f["graph_id"]: f for f in faults}.values())
    assert graphs.splitlines()[1:] == [f"{system},{n}" for system, n in sorted(expected.items())]
    stamp = (corpus / "injected_faults.jsonl").stat().st_mtime_ns
    second = run("build", "--warehouse", str(warehouse), "--quiet", cwd=tmp_path)
    assert "6 unchanged" in second.stdout  # the four splits and the two simulated methods
    assert (corpus / "injected_faults.jsonl").stat().st_mtime_ns == stamp


def test_the_parser_and_the_config_load_no_reader() -> None:
    """The kinds the CLI's help and the config check come from pipelines.readers without importing a reader
    (the CLI answers usage errors before the heavy imports)."""
    code = ("import sys\nfrom pipelines import config\nfrom pipelines.interfaces import cli\n"
            "cli.make_parser()\nconfig.parse_source('whowhen=.')\n"
            "print(sorted(m for m in sys.modules if m.startswith('pipelines.readers.')))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                            check=True)
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(("option", "value", "message"), [
    ("positive_int", "0", "must be at least 1, got 0"),
    ("positive_int", "1.5", "'1.5' is not a whole number"),
    ("positive_float", "0", "must be a positive number, got 0"),
    ("positive_float", "inf", "must be a positive number, got inf"),
    ("positive_float", "nan", "must be a positive number, got nan"),
    ("positive_float", "x", "'x' is not a number"),
    ("max_rows", "-1", "must be 0 (every row) or more, got -1"),
])
def test_number_options_refuse_in_words(option: str, value: str, message: str) -> None:
    import argparse

    from pipelines.interfaces import arguments, shell

    check = shell.max_rows_arg if option == "max_rows" else getattr(arguments, option)
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        check(value)
    assert str(refused.value) == message
    assert arguments.positive_float("0.5") == 0.5 and shell.max_rows_arg("0") == 0
