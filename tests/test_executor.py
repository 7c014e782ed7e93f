"""`tracehouse build --executor dask`: the changed graph partitions flattened as Dagster steps on a real
Dask cluster (dagster-dask, a LocalCluster of worker processes) give the in-process build's warehouse,
row for row in every table and mart; a worker killed with SIGKILL mid-step costs time, never the
previous build; and nothing of the cluster outlives the build.

The corpus repeats one graph in a later split, so the claim the cluster's step for that split assumed
(nothing loaded before it) does not hold, and the build flattens it again in-process, and it has
prediction sources, which only the sequential pass flattens.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pgserver
import pytest
from conftest import REPO, build_warehouse, every_row
from processes import alive

from pipelines.builds.executors import ExecutorSettings, executor_settings
from pipelines.config import ConfigError, load_settings
from pipelines.storage.warehouse import Warehouse

DASK = ExecutorSettings("dask", workers=2)
DUPLICATE = "rag/evermemos-copy.json"  # a copy of an evermemos graph: quarantined as duplicate_graph_id


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from pipelines.sample.corpus import generate_corpus
    from pipelines.sample.predictions import simulate_predictions

    root = tmp_path_factory.mktemp("executor")
    generate_corpus(root / "corpus", seed=5, graphs_per_split=2)
    simulate_predictions(root / "corpus", root / "predictions", seed=5)
    first = sorted((root / "corpus" / "evermemos").glob("*.json"))[0]
    shutil.copy(first, root / "corpus" / DUPLICATE)
    sources = [f"sample:memtracebench={root / 'corpus'}",
               f"careful:memtrace_attribution={root / 'predictions' / 'simulated-careful'}"]
    return {"root": root, "sources": sources}


@pytest.fixture(scope="module")
def reference(corpus: dict) -> dict:
    """The in-process build of the corpus: what every other build must equal."""
    warehouse = corpus["root"] / "in-process"
    summary = build_warehouse(warehouse, corpus["sources"])
    assert summary.ok and summary.exit_code == 3, summary  # 3: the duplicate graph is rejected
    return {"warehouse": warehouse, "rows": every_row(warehouse)}


def test_a_dask_build_equals_the_in_process_build_row_for_row(corpus: dict, reference: dict) -> None:
    warehouse = corpus["root"] / "dask"
    settings = load_settings(str(warehouse), corpus["sources"], config=None)
    out = io.StringIO()
    from pipelines.interfaces.build import run_build

    summary = run_build(settings, executor=DASK, out=out)
    log = out.getvalue()
    assert summary.ok and summary.exit_code == 3, log
    rows = every_row(warehouse)
    assert rows == reference["rows"]
    assert all(rows[name] for name in ("graphs", "nodes", "attributions", "failure_propagation", "failure_rates"))
    assert [r for r in rows["ingest_errors"] if r[3] == "duplicate_graph_id"], rows["ingest_errors"]
    # every partition was built by this build (none "taken from an unfinished build")
    assert sorted(summary.partitions_built) == sorted(Warehouse(warehouse).partitions())
    assert summary.partitions_adopted == []
    graph_keys = [k for k in summary.partitions_built if k.startswith("sample__")]
    assert "Dask cluster up at tcp://127.0.0.1:" in log
    for key in graph_keys:
        assert f"flattened {key} on a worker" in log, log
    # rag's step assumed no graph id was loaded before it; evermemos loads the one it repeats
    assert "sample__rag: the cluster's generation assumed other graph ids" in log
    assert "flattening sample__rag (" in log
    assert "stopping the Dask cluster" in log
    # the cluster's steps are runs of the warehouse's own Dagster instance (what `tracehouse ui` shows)
    from pipelines.builds.run_history import instance_for

    runs = instance_for(Warehouse(warehouse)).get_runs()
    assert [run.job_name for run in runs if run.job_name == "flatten_partitions"] == ["flatten_partitions"]
    assert all(run.is_success for run in runs) and "tracehouse_build" in {r.job_name for r in runs}


def test_a_step_that_fails_on_a_worker_is_reported_with_its_cause(corpus: dict, tmp_path: Path) -> None:
    """--strict, and a split holding a file that is not JSON: its step fails on the worker with the
    file's name, which the build says (the cause, not Dagster's wrapper), then its sequential pass
    stops the build at that file as in-process; the other splits' steps still flattened."""
    source = tmp_path / "corpus"
    shutil.copytree(corpus["root"] / "corpus", source)
    (source / "rag" / DUPLICATE.split("/")[1]).unlink()  # no duplicate graph: only the broken file stops it
    (source / "mem0" / "broken.json").write_text("{not json")
    settings = load_settings(str(tmp_path / "w"), [f"sample:memtracebench={source}"], config=None)
    out = io.StringIO()
    from pipelines.interfaces.build import StrictBuildError, run_build

    with pytest.raises(StrictBuildError, match="broken.json: invalid_json"):
        run_build(settings, executor=DASK, strict=True, out=out)
    log = out.getvalue()
    failed = re.search(r"flattening sample__mem0 failed on the cluster \((.*)\); it is flattened here", log)
    assert failed, log
    assert "broken.json" in failed.group(1) and "Dagster" not in failed.group(1), failed.group(1)
    for key in ("sample__evermemos", "sample__long_context", "sample__rag"):
        assert f"flattened {key} on a worker" in log, log
    assert "flattened sample__mem0 on a worker" not in log
    assert Warehouse(tmp_path / "w").committed() is None  # a failed build commits nothing


def test_a_worker_killed_mid_step_leaves_the_previous_build_or_finishes(corpus: dict, reference: dict) -> None:
    """SIGKILL one worker while it flattens a partition (its generation folder still .tmp): Dask runs the
    step again on a worker that lives, or the build flattens it in-process; if the build failed instead,
    the previous build stands. No worker outlived its build, and the next build, on an existing cluster
    (--scheduler), equals the in-process one."""
    warehouse = corpus["root"] / "killed"
    shutil.copytree(reference["warehouse"], warehouse, symlinks=True)  # build 1 (a warehouse can be copied)
    args = ["build", "--warehouse", str(warehouse), "--full", "--executor", "dask", "--workers", "2"]
    for source in corpus["sources"]:
        args += ["--source", source]
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.interfaces.cli", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "GX_ANALYTICS_ENABLED": "false"})
    lines: list[str] = []
    address = threading.Event()
    reader = threading.Thread(target=_read, args=(proc.stderr, lines, address), daemon=True)
    reader.start()
    try:
        assert address.wait(120), "".join(lines)
        scheduler = re.search(r"up at (tcp://\S+)", "".join(lines)).group(1)
        killed, pids = _kill_a_worker_mid_step(scheduler, warehouse, lines)
        stdout, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10)
    log = "".join(lines)
    assert killed in pids
    assert proc.returncode in (1, 3), log + stdout
    record = Warehouse(warehouse).committed()
    if proc.returncode == 1:  # nothing was committed: build 1 stands, whole
        assert record.build == 1
    else:
        assert record.build == 2 and "flattened" in log
    assert every_row(warehouse) == reference["rows"]
    for pid in pids:  # the workers (the killed one, its replacement, the others) left with the build
        assert not alive(pid), (pid, log)

    # the next build, every split again, on a cluster it did not start (--scheduler), which it leaves running
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, processes=True, threads_per_worker=1, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        existing = ExecutorSettings("dask", scheduler=cluster.scheduler_address)
        again = build_warehouse(warehouse, corpus["sources"], full=True, executor=existing)
        assert len(cluster.scheduler_info["workers"]) == 1
    assert again.ok and again.exit_code == 3 and again.build == Warehouse(warehouse).committed().build
    assert every_row(warehouse) == reference["rows"]
    assert not list(warehouse.glob("tables/*/*.tmp"))  # the killed step's unfinished generation is gone


def test_the_workers_exit_when_the_build_is_killed(corpus: dict) -> None:
    """SIGKILL the build itself while its cluster is up: its worker processes go with it."""
    from distributed import Client

    args = ["build", "--warehouse", str(corpus["root"] / "build-killed"), "--executor", "dask", "--workers", "2"]
    for source in corpus["sources"]:
        args += ["--source", source]
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.interfaces.cli",
                             *args], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "GX_ANALYTICS_ENABLED": "false"})
    try:
        lines: list[str] = []
        for line in proc.stderr:
            lines.append(line)
            if "Dask cluster up at" in line:
                break
        scheduler = re.search(r"up at (tcp://\S+)", "".join(lines))
        assert scheduler, "".join(lines)
        with Client(scheduler.group(1), timeout=30) as client:
            pids = set(client.run(os.getpid).values())
        assert len(pids) == 2
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in pids)


def _read(stream, lines: list[str], address: threading.Event) -> None:
    for line in stream:
        lines.append(line)
        if "Dask cluster up at" in line:
            address.set()


def _kill_a_worker_mid_step(
    scheduler: str, warehouse: Path, lines: list[str], seconds: float = 120
) -> tuple[int, set[int]]:
    """Wait until a step is writing a generation (a g-*.tmp folder) and SIGKILL the worker running the
    step of that partition; returns its pid and every worker pid the cluster had until the build said
    it stops the cluster (``lines``: the build's progress so far)."""
    from distributed import Client

    deadline = time.monotonic() + seconds
    with Client(scheduler, timeout=30) as client:
        pids = set(client.run(os.getpid).values())
        killed = None
        while killed is None and time.monotonic() < deadline:
            staging = [p.parent.name for p in warehouse.glob("tables/*/g-*.tmp")]
            busy = {worker: keys for worker, keys in client.processing().items() if keys}
            for key in staging:
                worker = next((w for w, keys in busy.items() if any(key in str(k) for k in keys)), None)
                if worker is not None:
                    killed = client.run(os.getpid, workers=[worker])[worker]
                    os.kill(killed, signal.SIGKILL)
                    break
            time.sleep(0.002)
        assert killed is not None, "no step was seen writing a generation"
        while time.monotonic() < deadline and not any("stopping the Dask cluster" in line for line in lines):
            try:
                pids |= set(client.run(os.getpid, on_error="ignore").values())  # the replacement worker too
            except OSError:  # the scheduler stopped meanwhile
                break
            time.sleep(0.05)
    return killed, pids


# -- choosing the executor ------------------------------------------------------------------------------


def test_flags_override_the_config_file_and_contradictions_are_refused(tmp_path: Path) -> None:
    config = tmp_path / "tracehouse.toml"
    config.write_text('[executor]\nkind = "dask"\nworkers = 3\n')
    assert executor_settings(config) == ExecutorSettings("dask", 3)
    assert executor_settings(config, workers=4) == ExecutorSettings("dask", 4)
    assert executor_settings(config, "in_process").kind == "in_process"
    assert executor_settings(None) == ExecutorSettings()
    assert executor_settings(None, "dask") == ExecutorSettings("dask", 2)
    assert executor_settings(None, "dask", scheduler="10.0.0.5:8786").scheduler == "tcp://10.0.0.5:8786"
    for flags in ({"kind": "in_process", "workers": 2}, {"scheduler": "tcp://x:1"},
                  {"kind": "dask", "workers": 2, "scheduler": "tcp://x:1"}):
        with pytest.raises(ConfigError):
            executor_settings(None, **flags)
    config.write_text('[executor]\nkind = "ray"\n')
    with pytest.raises(ConfigError, match="kind must be one of"):
        executor_settings(config)
    config.write_text('[executor]\nkind = "dask"\nworker = 3\n')
    with pytest.raises(ConfigError, match="unknown key 'worker' in executor"):
        load_settings(config=str(config))


@pytest.mark.skipif(pgserver.available() is not None, reason=f"no PostgreSQL server: {pgserver.available()}")
def test_the_fan_out_run_is_recorded_in_the_dagster_instance_named_by_the_config(corpus: dict, reference: dict,
                                                                                tmp_path: Path) -> None:
    """[executor] dagster_home: a Dagster instance every worker reaches (here on a PostgreSQL server
    the test starts): the run of the cluster's steps and their events land there, not in the
    warehouse's SQLite instance, and the build equals the in-process one."""
    from pipelines.builds.run_history import instance_for
    from pipelines.interfaces.fanout import instance_at

    with pgserver.PostgresServer() as server:
        home = tmp_path / "dagster-home"
        home.mkdir()
        url = server.url  # SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3, which is not installed
        (home / "dagster.yaml").write_text(  # as docs/SCALE.md shows it: no captured output (no `tail -F` left)
            f"telemetry:\n  enabled: false\nstorage:\n  postgres:\n    postgres_url: \"{url}\"\n"
            "compute_logs:\n  module: dagster.core.storage.noop_compute_log_manager\n  class: NoOpComputeLogManager\n")
        config = tmp_path / "tracehouse.toml"
        config.write_text(f'[executor]\nkind = "dask"\nworkers = 2\ndagster_home = "{home}"\n')
        executor = executor_settings(config)
        assert executor.dagster_home == home
        warehouse = tmp_path / "w"
        summary = build_warehouse(warehouse, corpus["sources"], executor=executor)
        assert summary.ok and every_row(warehouse) == reference["rows"]
        with instance_at(home) as shared:
            runs = [run for run in shared.get_runs() if run.job_name == "flatten_partitions"]
            assert len(runs) == 1 and runs[0].is_success
            steps = {e.step_key for e in shared.all_logs(runs[0].run_id) if e.is_dagster_event
                     and e.dagster_event.event_type_value == "STEP_SUCCESS"}
            assert len(steps) >= 3
        own = instance_for(Warehouse(warehouse)).get_runs()
        assert not [run for run in own if run.job_name == "flatten_partitions"]
    (home / "dagster.yaml").unlink()
    with pytest.raises(ConfigError, match="holds no dagster.yaml"):
        executor_settings(config)


def test_the_cli_does_not_import_dask_unless_asked() -> None:
    code = ("import sys; from pipelines.interfaces.cli import make_parser; "
            "import pipelines.interfaces.build, pipelines.defs; "
            "make_parser().parse_args(['build', '--executor', 'dask', '--workers', '3']); "
            "print(sorted(m for m in ('dask', 'distributed', 'dagster_dask') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr
    help_text = subprocess.run([sys.executable, "-m", "pipelines.interfaces.cli", "build", "--help"], cwd=REPO,
                               capture_output=True, text=True, timeout=120).stdout
    assert "--executor {in_process,dask}" in help_text and "--workers N" in help_text and "--scheduler" in help_text


def test_the_warehouse_instance_captures_no_step_output(tmp_path: Path) -> None:
    """Dagster's default output capture starts two `tail -F` processes per step on a Dask worker,
    which could outlive the worker and hold the build's stderr open: the warehouse's instance
    captures nothing, also when its dagster.yaml was written by an earlier tracehouse; a
    dagster.yaml of the user's own is left as it is."""
    from pipelines.builds.run_history import instance_for

    def captures_nothing(instance) -> bool:  # dagster exports no name for its no-op compute log manager
        return type(instance.compute_log_manager).__name__ == "NoOpComputeLogManager"

    ours = Warehouse(tmp_path / "ours")
    ours.dagster_home.mkdir(parents=True)
    (ours.dagster_home / "dagster.yaml").write_text(
        "# Written by tracehouse: the instance `tracehouse ui` and `tracehouse build` record builds in.\n"
        "telemetry:\n  enabled: false\n")
    assert captures_nothing(instance_for(ours))
    assert captures_nothing(instance_for(Warehouse(tmp_path / "fresh")))
    users = Warehouse(tmp_path / "users")
    users.dagster_home.mkdir(parents=True)
    own = "telemetry:\n  enabled: false\n"
    (users.dagster_home / "dagster.yaml").write_text(own)
    instance_for(users)
    assert (users.dagster_home / "dagster.yaml").read_text() == own
