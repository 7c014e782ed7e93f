"""No Python traceback for any input: each bad input gets a clear message and its documented exit
status; `tracehouse ui` stops with every child process it started."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, build_warehouse, wait_for_ui
from smartcomment_graphs import write_memtracebench

CLI = [sys.executable, "-m", "pipelines.interfaces.cli"]


def cli(*args: str, stdin: str | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=300, input=stdin)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("robust")
    write_memtracebench(root / "corpus", {"rag": 2})
    assert build_warehouse(root / "w", [f"memtracebench={root / 'corpus'}"]).ok
    return root / "w"


def test_version() -> None:
    from importlib.metadata import version

    done = cli("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"tracehouse {version('tracehouse')}"


@pytest.mark.parametrize("statement", [";", "  ;  ; ", "-- only a comment", "/* a block */", ""])
def test_empty_statements_are_no_error(warehouse: Path, statement: str) -> None:
    done = cli("sql", "--warehouse", str(warehouse), statement)
    assert done.returncode == 0 and done.stdout == "" and "Traceback" not in done.stderr


def test_every_statement_is_run_and_shown(warehouse: Path) -> None:
    done = cli("sql", "--warehouse", str(warehouse), "--format", "csv", "select 1 as a; select 2 as b;")
    assert done.returncode == 0 and done.stdout.splitlines() == ["a", "1", "b", "2"]


def test_a_script_on_a_pipe_stops_at_the_first_error_without_prompts(warehouse: Path) -> None:
    script = "select 1 as first;\nselect * from no_such_table;\nselect 3 as never;\n"
    done = cli("sql", "--warehouse", str(warehouse), "--format", "csv", stdin=script)
    assert done.returncode == 1
    assert done.stdout.splitlines() == ["first", "1"]
    assert "no_such_table" in done.stderr and "tracehouse>" not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    ok = cli("sql", "--warehouse", str(warehouse), "--format", "csv", stdin="select 40 +\n 2 as answer;\n.quit\n")
    assert ok.returncode == 0 and ok.stdout.splitlines() == ["answer", "42"] and ok.stderr == ""


def test_sql_on_a_folder_with_no_build(tmp_path: Path) -> None:
    done = cli("sql", "--warehouse", str(tmp_path), "select 1")
    assert done.returncode == 1 and "run `tracehouse build` first" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--graphs-per-split", "0"], "must be at least 1"),
        (["--graphs-per-split", "-3"], "must be at least 1"),
        (["--graphs-per-split", "many"], "is not a whole number"),
        (["--scale", "0"], "at least 0.01"),
        (["--scale", "-1"], "at least 0.01"),
        (["--scale", "nan"], "at least 0.01"),
    ],
)
def test_sample_refuses_numbers_it_cannot_use(tmp_path: Path, args: list[str], message: str) -> None:
    done = cli("sample", "--out", str(tmp_path / "out"), *args)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_sample_refuses_an_out_that_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("keep me")
    done = cli("sample", "--out", str(target), "--graphs-per-split", "1")
    assert done.returncode == 2 and "is a file" in done.stderr and "Traceback" not in done.stderr
    assert target.read_text() == "keep me"


@pytest.mark.parametrize("args", [["--no-such-flag"], ["build", "--frobnicate"], ["nosuchcommand"], ["sql", "--format",
                                                                                                       "xml", "x"]])
def test_unknown_options_are_usage_errors(args: list[str]) -> None:
    done = cli(*args)
    assert done.returncode == 2 and "usage:" in done.stderr and "Traceback" not in done.stderr


# What each command returns; its --help must list exactly these (pipelines/interfaces/cli.py and shell.py).
EXIT_STATUSES = {
    "build": {0, 1, 2, 3, 4, 130},
    "watch": {0, 1, 2},
    "sql": {0, 1, 2, 130},
    "sample": {0, 1, 2, 130},
    "fetch": {0, 1, 2, 130},
    "dashboard": {0, 1, 2, 130},
    "show": {0, 1, 2, 130},
    "ui": {0, 1, 2},
    "collect": {0, 1, 2},
}


def documented_exit_statuses(help_text: str) -> set[int]:
    """The codes of the help's "exit status:" paragraph (``0 ok, 1 ...``, or one code a line)."""
    found = re.search(r"(?im)^exit status[^:\n]*:", help_text)
    assert found, help_text
    paragraph = help_text[found.end():].split("\n\n")[0]
    return {int(code) for code in re.findall(r"(?:^|[:,])\s*(\d+)\s", paragraph, re.MULTILINE)}


def test_every_help_lists_the_exit_statuses_its_command_returns() -> None:
    from pipelines.interfaces.cli import COMMANDS

    assert set(EXIT_STATUSES) == set(COMMANDS)
    top = cli("--help")
    assert top.returncode == 0 and documented_exit_statuses(top.stdout) == {0, 1, 2, 3, 4, 130}
    for command, statuses in EXIT_STATUSES.items():
        done = cli(command, "--help")
        assert done.returncode == 0, done.stderr
        assert documented_exit_statuses(done.stdout) == statuses, (command, done.stdout)
        wrong = cli(command, "--no-such-flag")  # the 2 they all list
        assert wrong.returncode == 2 and "usage:" in wrong.stderr, command


@pytest.fixture(scope="module")
def rejected_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse whose committed build rejected rag/zz_bad.json (exit 3, without --strict), built
    once in this process, its corpus beside it."""
    root = tmp_path_factory.mktemp("rejected")
    corpus = root / "corpus"
    write_memtracebench(corpus, {"rag": 2, "mem0": 1})
    (corpus / "rag" / "zz_bad.json").write_text('{"graph_id": "cut", "data": {"nodes": [')
    first = build_warehouse(root / "w", [f"memtracebench={corpus}"])
    assert first.exit_code == 3 and first.files_rejected, first
    return root


@pytest.fixture()
def rejected_before(rejected_once: Path, tmp_path: Path) -> dict:
    """A copy of that warehouse and its corpus (moved together, file times kept), for a test to change."""
    corpus = Path(shutil.copytree(rejected_once / "corpus", tmp_path / "corpus", symlinks=True))
    warehouse = Path(shutil.copytree(rejected_once / "w", tmp_path / "w", symlinks=True))
    return {"corpus": corpus, "warehouse": warehouse}


def test_strict_refuses_a_file_an_earlier_build_rejected(rejected_before: dict) -> None:
    from pipelines.storage.warehouse import Warehouse

    corpus, warehouse = rejected_before["corpus"], rejected_before["warehouse"]
    build = Warehouse(warehouse).committed().build
    # nothing changed: the rejected file is still part of what would stand, so --strict refuses (1, as documented)
    done = cli("build", "--strict", "--quiet", "--warehouse", str(warehouse))
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.strip() == ("tracehouse: --strict: stopped at memtracebench/rag/zz_bad.json: invalid_json: "
                                   "the JSON is truncated at byte 39 (rejected when an earlier build read it; "
                                   "unchanged since)")
    # a changed split beside it: still refused, and nothing is committed
    (corpus / "mem0" / "locomo_locomo-0.json").touch()
    done = cli("build", "--strict", "--quiet", "--warehouse", str(warehouse))
    assert done.returncode == 1 and "memtracebench/rag/zz_bad.json: invalid_json" in done.stderr, done.stderr
    assert Warehouse(warehouse).committed().build == build
    # once the file is mended, --strict commits
    (corpus / "rag" / "zz_bad.json").unlink()
    done = cli("build", "--strict", "--quiet", "--warehouse", str(warehouse))
    assert done.returncode == 0, done.stdout + done.stderr
    assert Warehouse(warehouse).committed().build == build + 1


def test_strict_names_the_file_without_a_class_name(rejected_before: dict) -> None:
    corpus, warehouse = rejected_before["corpus"], rejected_before["warehouse"]
    bad = corpus / "mem0" / "zz_bad.json"  # split mem0 is flattened before rag, where the older one is
    bad.write_text('{"graph_id": "cut-too", "data": {')
    done = cli("build", "--strict", "--quiet", "--warehouse", str(warehouse))
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.startswith(f"tracehouse: --strict: stopped at {bad}: invalid_json: ")
    assert "StrictIngestError" not in done.stderr and "pipelines." not in done.stderr
    assert "Traceback" not in done.stderr


def test_a_flattening_that_cannot_write_names_its_split_and_the_error(tmp_path: Path) -> None:
    """A build that cannot write a split's generation (here its folder is a file) stops at that split,
    says which and why in one line, exits 1 and commits nothing."""
    corpus, warehouse = tmp_path / "corpus", tmp_path / "w"
    write_memtracebench(corpus, {"rag": 1, "mem0": 1})
    (warehouse / "tables").mkdir(parents=True)
    (warehouse / "tables" / "memtracebench__rag").write_text("not a folder")
    done = cli("build", "--quiet", "--warehouse", str(warehouse), "--source", f"memtracebench={corpus}")
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.fullmatch(r"tracehouse: partition memtracebench__rag: flattening failed: NotADirectoryError: .*"
                        r"memtracebench__rag/g-[^ ]+\n", done.stderr), done.stderr
    assert not (warehouse / "builds").is_dir() or not list((warehouse / "builds").iterdir())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _session(pid: int) -> list[int]:
    """Processes of the session led by ``pid`` (dagster dev runs in a session of its own)."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,sid="], capture_output=True, text=True).stdout
    return [int(p) for p, s in (line.split() for line in out.splitlines()) if int(s) == pid]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_ui_stops_with_its_children(warehouse: Path, tmp_path: Path, signum: int) -> None:
    """Started as a shell starts a background job (SIGINT ignored), it still stops on SIGINT or SIGTERM,
    and takes the Dagster webserver, daemon and code server with it."""
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "unused")}

    def background() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    proc = subprocess.Popen([*CLI, "ui", "--warehouse", str(warehouse), "--port", str(port)], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, preexec_fn=background)
    try:
        wait_for_ui(proc, port)
        children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        assert len(children) == 1
        group = _session(int(children[0]))
        assert len(group) >= 2  # dagster dev and at least the webserver
        proc.send_signal(signum)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 30
        while _session(int(children[0])) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _session(int(children[0])) == []
        assert proc.returncode == 0
        assert (warehouse / ".dagster" / "dagster.yaml").is_file()
    finally:
        if proc.poll() is None:
            proc.kill()
