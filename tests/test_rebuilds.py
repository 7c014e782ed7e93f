"""Change-only rebuilds: the sensor asks for exactly the partitions whose files changed, and the
incremental result equals a from-scratch build of the new corpus, row for row."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import orjson
import pyarrow.parquet as pq
import pytest
from conftest import REPO, build_warehouse, query
from smartcomment_graphs import make_graph, write_memtracebench

from pipelines import schema
from pipelines.builds import ingest
from pipelines.builds.run_history import instance_for
from pipelines.config import load_settings
from pipelines.defs import build_definitions
from pipelines.defs.automation import consistency_pass_schedule_name, source_files_sensor
from pipelines.defs.resources import TracehouseResource
from pipelines.defs.warehouse import BUILD_JOB, FULL_TAG
from pipelines.storage.state import KEEP_BUILDS, CommitLog
from pipelines.storage.warehouse import Warehouse
from pipelines.validation.checks import ASSET_CHECK


def table_rows(warehouse: Path, table: str) -> list[dict]:
    """Every row of a table over all published partitions, in key order."""
    rows = []
    for key in Warehouse(warehouse).partitions():
        for file in Warehouse(warehouse).current_files(key, table):
            rows += pq.read_table(file).to_pylist()
    keys = schema.PRIMARY_KEYS.get(table, ("source", "file", "kind", "position"))
    return sorted(rows, key=lambda r: tuple(str(r[k]) for k in keys))


def change_corpus(corpus: Path) -> None:
    """Add one file, modify one, delete one, and add a split no partition had."""
    (corpus / "rag" / "realmem_realmem-99.json").write_bytes(
        orjson.dumps(make_graph("graph-new", "realmem-99", "NaiveRAG"))
    )
    changed = corpus / "mem0" / "longmemeval_longmemeval-1.json"
    graph = make_graph("graph-mem0-0001", "longmemeval-1", "Mem0", seed=1234, queries=4)
    changed.write_bytes(orjson.dumps(graph))
    (corpus / "evermemos" / "locomo_locomo-0.json").unlink()
    (corpus / "long_context").mkdir()
    (corpus / "long_context" / "locomo_locomo-5.json").write_bytes(
        orjson.dumps(make_graph("graph-lc", "locomo-5", "Long-Context"))
    )


SPLITS = {"rag": 3, "mem0": 3, "evermemos": 2, "untouched": 2}


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    write_memtracebench(root, SPLITS)
    return root


@pytest.fixture(scope="module")
def first_build(tmp_path_factory: pytest.TempPathFactory):
    """The corpus and its first build, made once for the tests that start from them (a copy each)."""
    root = tmp_path_factory.mktemp("first-build")
    write_memtracebench(root / "corpus", SPLITS)
    summary = build_warehouse(root / "w", [f"memtracebench={root / 'corpus'}"])
    assert summary.ok and len(summary.partitions_built) == 4
    return root, summary


@pytest.fixture()
def built(first_build, tmp_path: Path):
    """(corpus, warehouse, first build's summary): a copy of the first build with its corpus beside it,
    as a warehouse moved together with its sources (file times kept, so nothing reads as changed)."""
    root, summary = first_build
    corpus = Path(shutil.copytree(root / "corpus", tmp_path / "corpus", symlinks=True))
    warehouse = Path(shutil.copytree(root / "w", tmp_path / "w", symlinks=True))
    return corpus, warehouse, summary


def test_sensor_requests_a_build_of_the_changes_and_its_run_equals_a_fresh_build(built, tmp_path: Path) -> None:
    """The sensor asks for one run of the build job naming the changed splits; that run, started by
    Dagster as the daemon would, flattens them, commits, and holds what a fresh CLI build holds."""
    corpus, warehouse, first = built
    assert first.ok and len(first.partitions_built) == 4
    change_corpus(corpus)

    settings = load_settings(str(warehouse), [f"memtracebench={corpus}"])
    resource = TracehouseResource.from_settings(settings)
    instance = instance_for(Warehouse(warehouse))
    context = dg.build_sensor_context(instance=instance, resources={"tracehouse": resource})
    result = source_files_sensor(context)
    changed = ["memtracebench__evermemos", "memtracebench__long_context", "memtracebench__mem0", "memtracebench__rag"]
    (request,) = result.run_requests
    assert request.tags["tracehouse/changed"] == ", ".join(changed)
    assert sorted(json.loads(result.cursor)) == changed

    job = build_definitions(resource).resolve_job_def(BUILD_JOB)
    run = job.execute_in_process(instance=instance, tags=request.tags, raise_on_error=False)
    assert run.success
    record = Warehouse(warehouse).committed()
    assert record.build == first.build + 1
    reported = {m.asset_key.to_user_string(): m.metadata
                for m in run.asset_materializations_for_node("flattened_tables")}
    assert sorted(reported) == sorted(schema.TABLES)
    for table, metadata in reported.items():  # what the run reported is what the committed data files hold
        held = sum(pq.ParquetFile(warehouse / path).metadata.num_rows for path in record.snapshot.table_files(table))
        assert metadata["rows"].value == held, table
        assert sorted(metadata["splits_changed"].value.split(", ")) == changed, table
        preview = metadata["preview"].value  # the first rows, as text.markdown_table makes them
        assert preview == "_empty_" if not metadata["rows_in_changed_splits"].value else (
            preview.startswith("| " + " | ".join(schema.TABLES[table].names) + " |\n|---|"))
        assert held > 0 or table in ("attributions", "attribution_scope", "ingest_errors"), table  # none here
    # nothing is left to do: a second evaluation requests no run
    again = source_files_sensor(dg.build_sensor_context(instance=instance, resources={"tracehouse": resource}))
    assert again.run_requests == []

    fresh = tmp_path / "fresh"
    assert build_warehouse(fresh, [f"memtracebench={corpus}"]).ok
    for table in schema.TABLES:
        assert table_rows(warehouse, table) == table_rows(fresh, table), table


def test_dagster_job_execute_builds_what_the_cli_builds(built, tmp_path: Path) -> None:
    """`dagster job execute` of the build job, through the code location and tracehouse.toml, is a
    whole build: it flattens, checks and commits the same tables a `tracehouse build` does (the
    module's first build, made by the CLI's build path from the same files)."""
    corpus, by_the_cli, _ = built
    warehouse = tmp_path / "job"
    config = tmp_path / "tracehouse.toml"
    config.write_text(f'warehouse = "{warehouse}"\n[[sources]]\nkind = "memtracebench"\npath = "{corpus}"\n')
    home = instance_for(Warehouse(warehouse)).root_directory  # the warehouse's own instance, configured
    dagster = str(Path(sys.executable).parent / "dagster")
    done = subprocess.run([dagster, "job", "execute", "-m", "pipelines.definitions", "-j", BUILD_JOB], cwd=REPO,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TRACEHOUSE_CONFIG": str(config), "DAGSTER_HOME": str(home)})
    assert done.returncode == 0, done.stderr[-3000:]
    record = Warehouse(warehouse).committed()
    assert record.build == 1 and len(record.snapshot.partitions) == 4
    for table in schema.TABLES:
        assert table_rows(warehouse, table) == table_rows(by_the_cli, table), table
    assert build_warehouse(warehouse, []).partitions_built == []  # the CLI finds the job's build standing


def test_incremental_build_parses_only_the_changed_file(built, tmp_path: Path) -> None:
    corpus, warehouse, _ = built
    pictures_before = Warehouse(warehouse).committed().outputs["drilldown"]["pictures"]
    target = corpus / "rag" / "locomo_locomo-0.json"
    target.write_bytes(orjson.dumps(make_graph("graph-rag-0000", "locomo-0", "NaiveRAG", seed=99)))
    summary = build_warehouse(warehouse, [f"memtracebench={corpus}"])
    assert summary.partitions_built == ["memtracebench__rag"]
    # drill-down pictures: only those of the changed graph are drawn again, not its whole split
    pictures_after = Warehouse(warehouse).committed().outputs["drilldown"]["pictures"]
    graph_of = dict(query(warehouse, "select annotation_id, graph_id from annotations"))
    kept = {a for a in pictures_before if graph_of.get(a) not in (None, "graph-rag-0000")}
    assert any(graph_of[a].startswith("graph-rag") for a in kept)
    assert all(pictures_after[a] == pictures_before[a] for a in kept)
    redrawn = {a for a in pictures_after if pictures_after[a] != pictures_before.get(a)}
    assert redrawn and {graph_of[a] for a in redrawn} == {"graph-rag-0000"}
    assert sorted(summary.partitions_unchanged) == [
        "memtracebench__evermemos",
        "memtracebench__mem0",
        "memtracebench__untouched",
    ]
    manifest = json.loads((Warehouse(warehouse).current("memtracebench__rag") / "manifest.json").read_text())
    assert {e["file"]: e["sha256"] for e in manifest["files"]}["rag/locomo_locomo-0.json"] == __import__(
        "hashlib"
    ).sha256(target.read_bytes()).hexdigest()
    # touching a file without changing it re-hashes it but does not re-read it
    os.utime(corpus / "rag" / "longmemeval_longmemeval-1.json")
    summary = build_warehouse(warehouse, [f"memtracebench={corpus}"])
    assert summary.partitions_built == ["memtracebench__rag"]
    fresh = tmp_path / "fresh"
    build_warehouse(fresh, [f"memtracebench={corpus}"], full=True)
    assert table_rows(warehouse, "nodes") == table_rows(fresh, "nodes")


def test_a_changed_file_rewrites_its_piece_and_the_others_are_kept_by_reference(
    corpus: Path, tmp_path: Path, monkeypatch
) -> None:
    """With one piece a file, a rebuild of a changed file writes one piece and takes the others over
    from the first build's generation, through more builds than garbage collection keeps (the
    folders they lie in stay); the views read every piece, and the rows equal a fresh build's."""
    monkeypatch.setattr(ingest, "PIECE_BYTES", 1)
    warehouse, key = tmp_path / "w", "memtracebench__rag"
    build_warehouse(warehouse, [f"memtracebench={corpus}"])
    first = Warehouse(warehouse).committed().snapshot.partitions[key]
    assert len(first.pieces) == 3
    target = corpus / "rag" / "locomo_locomo-0.json"
    manifest = json.loads((Warehouse(warehouse).path(first.manifest)).read_text())
    rewritten = first.pieces[next(e["piece"] for e in manifest["files"] if e["file"] == "rag/locomo_locomo-0.json")]
    for n in range(KEEP_BUILDS + 1):
        target.write_bytes(orjson.dumps(make_graph("graph-rag-0000", "locomo-0", "NaiveRAG", seed=100 + n)))
        assert build_warehouse(warehouse, [f"memtracebench={corpus}"]).partitions_built == [key]
    part = Warehouse(warehouse).committed().snapshot.partitions[key]
    assert [p for p in part.pieces if p.startswith(f"{first.generation}/")] == [p for p in first.pieces
                                                                               if p != rewritten]
    assert len(part.pieces) == 3 and all(Warehouse(warehouse).path(p).is_dir() for p in part.pieces)
    fresh = tmp_path / "fresh"
    build_warehouse(fresh, [f"memtracebench={corpus}"], full=True)
    for table in schema.TABLES:
        assert table_rows(warehouse, table) == table_rows(fresh, table), table
    counts = "select (select count(*) from nodes), (select count(*) from graphs where file like 'rag/%')"
    assert query(warehouse, counts) == query(fresh, counts) and query(warehouse, counts)[0][1] == 3


def test_a_build_with_nothing_changed_keeps_the_outputs(built, monkeypatch) -> None:
    from pipelines.interfaces import build

    corpus, warehouse, first = built
    mart = Warehouse(warehouse).mart_path("failure_rates")
    stamp = mart.stat().st_mtime_ns
    again = build_warehouse(warehouse, [f"memtracebench={corpus}"])
    assert first.checked and not again.checked and again.partitions_built == []
    assert again.rows == first.rows and again.exit_code == 0 and mart.stat().st_mtime_ns == stamp
    assert again.build == first.build  # nothing was committed
    monkeypatch.setattr(build, "code_fingerprint", lambda: "changed code")  # e.g. a change to a chart
    after_code_change = build_warehouse(warehouse, [f"memtracebench={corpus}"])
    assert after_code_change.checked and after_code_change.partitions_built == []
    assert after_code_change.build == first.build + 1
    # the mart's SQL and tables did not change: the new build refers to the same, untouched file
    assert Warehouse(warehouse).mart_path("failure_rates") == mart and mart.stat().st_mtime_ns == stamp


def test_every_build_is_a_run_of_the_warehouses_own_dagster_instance(built) -> None:
    """Each build is one run of the warehouse's instance: after two builds, the instance Dagster opens
    from DAGSTER_HOME=<warehouse>/.dagster lists their runs, successful; each table has one
    materialization per build, by its run, naming the splits it read, with the build's rows; the
    committed checks have their results there. A build with
    nothing to do starts no run."""
    corpus, warehouse, first = built
    change_corpus(corpus)
    second = build_warehouse(warehouse, [f"memtracebench={corpus}"])
    assert first.committed and second.committed and second.build == 2
    again = build_warehouse(warehouse, [f"memtracebench={corpus}"])
    assert not again.checked

    home = Warehouse(warehouse).dagster_home
    script = (
        "import json, dagster as dg\n"
        "i = dg.DagsterInstance.get()\n"
        "runs = [(r.dagster_run.run_id, r.dagster_run.job_name, r.dagster_run.status.value,\n"
        "         r.dagster_run.tags.get('tracehouse/build')) for r in i.get_run_records()]\n"
        "made = []\n"
        "for record in i.fetch_materializations(dg.AssetKey('nodes'), limit=1000).records:  # newest first\n"
        "    m = record.asset_materialization\n"
        "    made.append((record.run_id, m.metadata['splits_changed'].value, m.metadata['rows'].value))\n"
        "print(json.dumps({'runs': runs, 'made': made}))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], env={**os.environ, "DAGSTER_HOME": str(home)},
                         capture_output=True, text=True, check=True)
    seen = json.loads(out.stdout)
    runs = {run_id: (job, status, build) for run_id, job, status, build in seen["runs"]}
    assert sorted(runs.values()) == [("tracehouse_build", "SUCCESS", "1"),
                                     ("tracehouse_build", "SUCCESS", "2")]  # one run per build
    # one materialization of the table per build, by its run, naming the splits that build read
    made = [(runs[run_id][2], sorted(changed.split(", ")), rows) for run_id, changed, rows in seen["made"]]
    assert made == [("2", sorted(second.partitions_built), Warehouse(warehouse).committed().summary["rows"]["nodes"]),
                    ("1", sorted(first.partitions_built), made[1][2])]
    history = instance_for(Warehouse(warehouse))
    keys = {dg.AssetCheckKey(dg.AssetKey(c["asset"]), ASSET_CHECK)
            for c in Warehouse(warehouse).committed().checks}  # the checks, one asset check per table
    executions = history.event_log_storage.get_latest_asset_check_execution_by_key(list(keys))
    assert len(keys) == len(schema.TABLES) and all(executions.get(key) is not None for key in keys)


def test_the_instance_is_configured_through_its_documented_dagster_yaml(tmp_path: Path) -> None:
    """tracehouse writes its instance's dagster.yaml (one-file SQLite event log, no captured step
    output); a dagster.yaml of the user's own (say, PostgreSQL storages) is left as it is and used."""
    ours, users = Warehouse(tmp_path / "ours"), Warehouse(tmp_path / "users")
    assert type(instance_for(ours).event_log_storage).__name__ == "ConsolidatedSqliteEventLogStorage"
    assert type(instance_for(ours).compute_log_manager).__name__ == "NoOpComputeLogManager"
    assert (ours.dagster_home / "dagster.yaml").read_text().startswith("# Written by tracehouse")
    assert not instance_for(ours).telemetry_enabled and not instance_for(ours).nux_enabled  # no first-start dialog
    users.dagster_home.mkdir(parents=True)
    (users.dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    assert type(instance_for(users).run_storage).__name__ == "SqliteRunStorage"
    assert (users.dagster_home / "dagster.yaml").read_text() == "telemetry:\n  enabled: false\n"


def test_a_failed_build_is_kept_while_nothing_changes_only_when_asked(built, monkeypatch) -> None:
    """tracehouse watch passes keep_failed: a failed build is not run again every round."""
    import pyarrow as pa

    from pipelines.interfaces import build

    corpus, warehouse, _ = built
    sources = [f"memtracebench={corpus}"]
    (nodes,) = Warehouse(warehouse).current_files("memtracebench__rag", "nodes")
    table = pq.read_table(nodes)
    pq.write_table(pa.concat_tables([table, table.slice(0, 1)]), nodes)  # a duplicated node, behind its back
    monkeypatch.setattr(build, "code_fingerprint", lambda: "new code")  # so the next build checks again
    failed = build_warehouse(warehouse, sources)
    assert failed.checked and "nodes:duplicate_keys" in failed.failed_checks and failed.exit_code == 1
    kept = build_warehouse(warehouse, sources, keep_failed=True)
    assert not kept.checked and kept.failed_checks == failed.failed_checks and kept.exit_code == 1
    again = build_warehouse(warehouse, sources)  # the CLI's default: a failed build is run again
    assert again.checked and again.failed_checks == failed.failed_checks


def test_deleted_split_is_removed(built) -> None:
    corpus, warehouse, _ = built
    for path in (corpus / "untouched").iterdir():
        path.unlink()
    summary = build_warehouse(warehouse, [f"memtracebench={corpus}"])
    assert summary.partitions_removed == ["memtracebench__untouched"]
    assert "memtracebench__untouched" not in Warehouse(warehouse).partitions()
    assert {r["split"] for r in table_rows(warehouse, "graphs")} == {"rag", "mem0", "evermemos"}


def test_schedule_runs_a_build_that_rereads_every_split(built) -> None:
    """The consistency pass: a run of the build job tagged full, which reads every split again (no
    file changed) and commits."""
    corpus, warehouse, first = built
    resource = TracehouseResource.from_settings(load_settings(str(warehouse), [f"memtracebench={corpus}"]))
    defs = build_definitions(resource, cron="30 4 * * *")
    schedule = defs.resolve_schedule_def(consistency_pass_schedule_name)
    assert schedule.cron_schedule == "30 4 * * *" and schedule.job_name == BUILD_JOB
    instance = instance_for(Warehouse(warehouse))
    context = dg.build_schedule_context(
        instance=instance,
        resources={"tracehouse": resource},
        scheduled_execution_time=datetime(2026, 11, 30, 4, 30, tzinfo=UTC),
        repository_def=defs.get_repository_def(),
    )
    (request,) = schedule.evaluate_tick(context).run_requests
    assert request.tags[FULL_TAG] == "true"
    run = defs.resolve_job_def(BUILD_JOB).execute_in_process(instance=instance, tags=request.tags)
    assert run.success
    record = Warehouse(warehouse).committed()
    assert record.build == first.build + 1
    (graphs,) = [m for m in run.asset_materializations_for_node("flattened_tables")
                 if m.asset_key.to_user_string() == "graphs"]
    assert sorted(graphs.metadata["splits_changed"].value.split(", ")) == sorted(first.partitions_built)
    before = CommitLog(Warehouse(warehouse)).get(first.build).snapshot.partitions
    assert all(state.generation != before[key].generation for key, state in record.snapshot.partitions.items())


def _hub_cache(tmp_path: Path, shared_files: dict[str, bytes], sha: str) -> Path:
    """A local Hugging Face cache laid out as huggingface_hub writes it."""
    cache = tmp_path / "hf-cache"
    repo = cache / "datasets--Kevin355--Who_and_When"
    for rel, data in shared_files.items():
        path = repo / "snapshots" / sha / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(sha)
    return cache


def _fetch(args: list[str], cache: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache), HF_HOME=str(cache.parent / "hf-home"))
    return subprocess.run(
        [sys.executable, "-m", "pipelines.interfaces.cli", "fetch", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )


def test_fetch_takes_a_local_hub_cache_and_records_the_revision(tmp_path: Path) -> None:
    sha = "0123456789abcdef0123456789abcdef01234567"
    record = {
        "question": "q",
        "history": [{"content": "hi", "role": "human"}],
        "mistake_agent": "human",
        "mistake_step": "0",
        "mistake_reason": "r",
        "question_ID": "x",
        "ground_truth": "g",
    }
    cache = _hub_cache(tmp_path, {"Hand-Crafted/1.json": json.dumps(record).encode(), "README.md": b"card"}, sha)
    dest = tmp_path / "whowhen"
    result = _fetch(["whowhen", "--dest", str(dest)], cache)
    assert result.returncode == 0, result.stderr
    assert (dest / "Hand-Crafted" / "1.json").is_file() and not (dest / "README.md").exists()
    saved = json.loads((dest / ".tracehouse-fetch.json").read_text())
    assert (saved["repo_id"], saved["revision"], saved["files"]) == ("Kevin355/Who_and_When", sha, 1)
    summary = build_warehouse(tmp_path / "w", [f"whowhen={dest}"])
    assert summary.rows["annotations"] == 1


def test_fetch_offline_without_cache_says_what_to_do(tmp_path: Path) -> None:
    result = _fetch(["memtracebench", "--dest", str(tmp_path / "m")], tmp_path / "empty-cache")
    assert result.returncode == 1
    assert "zjunlp/MemTraceBench is not in the local Hugging Face cache and the Hub is offline" in result.stderr
    result = _fetch(["tracertraj", "--dest", str(tmp_path / "t")], tmp_path / "empty-cache")
    assert result.returncode == 1 and "--repo-id" in result.stderr


def test_watch_rebuilds_the_changed_split_and_stops_on_sigterm(corpus: Path, tmp_path: Path) -> None:
    """`tracehouse watch` builds, notices a changed file by itself, rebuilds, and exits 0 on SIGTERM."""
    import signal
    import time

    warehouse = tmp_path / "w"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipelines.interfaces.cli", "watch", "--interval", "0.5", "--quiet",
         "--source", f"memtracebench={corpus}", "--warehouse", str(warehouse)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "TRACEHOUSE_DRILLDOWN_LIMIT": "4"},
    )

    def nodes_of(graph_id: str) -> int | None:
        try:
            return query(warehouse, "select count(*) from nodes where graph_id = ?", [graph_id])[0][0]
        except FileNotFoundError:
            return None

    def wait_for(condition, what: str, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert proc.poll() is None, f"watch exited early: {proc.communicate()}"
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.3)

    try:
        wait_for(lambda: nodes_of("graph-rag-0000"), "the first build")
        before = nodes_of("graph-rag-0000")
        graph = make_graph("graph-rag-0000", "locomo-0", "NaiveRAG", seed=5, sessions=3, queries=4)
        assert len(graph["data"]["nodes"]) != before
        (corpus / "rag" / "locomo_locomo-0.json").write_bytes(orjson.dumps(graph))
        wait_for(lambda: nodes_of("graph-rag-0000") == len(graph["data"]["nodes"]), "the rebuild")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.count("status: ok") == 2, out  # the first build and the rebuild; idle rounds print nothing
    assert "partitions: 1 built, 3 unchanged, 0 removed" in out


def test_code_fingerprint_follows_every_change_of_a_code_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fingerprint is hashed again only when a file's size or mtime changed, and then changes
    with the file's bytes; a file of the same bytes keeps it."""
    from pipelines.analytics import db
    from pipelines.interfaces import build

    code = tmp_path / "pipelines" / "step.py"
    code.parent.mkdir()
    code.write_text("rows = 1\n")
    (tmp_path / "sql").mkdir()
    (tmp_path / "sql" / "mart.sql").write_text("select 1\n")
    monkeypatch.setattr(db, "REPO", tmp_path)
    first = build.code_fingerprint()
    assert build.code_fingerprint() == first
    code.write_text("rows = 2\n")  # same size: its mtime tells
    os.utime(code, ns=(code.stat().st_atime_ns, code.stat().st_mtime_ns + 1_000_000))
    second = build.code_fingerprint()
    assert second != first
    (tmp_path / "sql" / "mart.sql").write_text("select 22\n")
    assert build.code_fingerprint() not in (first, second)
    (tmp_path / "sql" / "mart.sql").write_text("select 1\n")
    code.write_text("rows = 1\n")
    assert build.code_fingerprint() == first  # the same bytes, the same fingerprint



def test_a_seed_rule_edit_makes_every_generation_another_format(tmp_path: Path, monkeypatch) -> None:
    """The readers classify with the seeds (step rules, agent roles, systems, datasets): a kept generation
    was classified with the seeds of its day, so a seed edit must change the format its fingerprint and
    its manifests carry (pipelines.builds.changes), and the same seeds give the same format again."""
    import shutil

    from pipelines import schema
    from pipelines.builds import changes

    seeds = tmp_path / "seeds"
    shutil.copytree(schema.SEEDS, seeds)
    monkeypatch.setattr(schema, "SEEDS", seeds)
    original_format = changes._format_version()
    assert original_format == changes.FORMAT_VERSION
    entries = [("Hand-Crafted/1.json", 10, 1)]
    original_fingerprint = changes.fingerprint("whowhen", entries)

    rules = seeds / "step_rules.csv"
    original = rules.read_bytes()
    rules.write_bytes(original.replace(b"planning", b"delegation", 1))
    assert rules.read_bytes() != original
    edited_format = changes._format_version()
    assert edited_format != original_format
    monkeypatch.setattr(changes, "FORMAT_VERSION", edited_format)
    assert changes.fingerprint("whowhen", entries) != original_fingerprint

    rules.write_bytes(original)
    assert changes._format_version() == original_format


def test_a_build_with_nothing_to_do_is_decided_without_dagster(corpus: Path, tmp_path: Path) -> None:
    """`tracehouse build` with nothing changed says so without importing Dagster or Great Expectations;
    a change, or a commit the Dagster instance does not hold yet (a build killed after its commit),
    takes the full build."""
    warehouse = tmp_path / "w"
    args = ["build", "--warehouse", str(warehouse), "--source", f"memtracebench={corpus}"]
    code = ("import sys; from pipelines.interfaces.cli import main; status = main(sys.argv[1:]); "
            "print(status, sorted(m for m in ('dagster', 'great_expectations', 'altair') if m in sys.modules))")

    def build() -> list[str]:
        done = subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    assert build()[-1].startswith("0 ['altair', 'dagster'")
    again = build()
    assert again[-1] == "0 []" and "nothing changed since build 1: its checks, marts and dashboard stand" in again
    (Warehouse(warehouse).dagster_home / "recorded.json").unlink()
    recorded = build()
    assert "dagster" in recorded[-1]
    assert "nothing changed since build 1: its checks, marts and dashboard stand" in recorded
    assert build()[-1] == "0 []"
    change_corpus(corpus)
    changed = build()
    assert "dagster" in changed[-1] and any("build 2 committed in" in line for line in changed)
