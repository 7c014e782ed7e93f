"""A team's own taxonomy crosswalk (pipelines.analytics.crosswalk, docs/MARTS.md): labels the seed lacks count
as 'unmapped' until the team maps them in taxonomy_crosswalk.csv beside tracehouse.toml; real builds
of TRAIL-form labels over smartcomment traces, read back through DuckDB."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from conftest import query

from pipelines.analytics.crosswalk import COLUMNS, CrosswalkError, digest, read_rows
from pipelines.builds.flattening import build_inputs
from pipelines.config import load_settings
from pipelines.errors import ConfigError
from pipelines.interfaces.build import run_build
from pipelines.storage.warehouse import Warehouse

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPANS = ["00f067aa0ba902b7", "b7ad6b7169203331", "53995c3f42cd8ad8"]
HEADER = ",".join(COLUMNS)


def project(tmp_path: Path, warehouse: str = "warehouse") -> Path:
    """A project folder: tracehouse.toml naming the warehouse and two sources, one trace with a label
    the seed maps (Formatting Errors), and a team's own label twice (Looped Forever)."""
    from benchmark_inputs import error, trace_graph

    traces, labels = tmp_path / "traces" / "agents", tmp_path / "labels"
    traces.mkdir(parents=True)
    labels.mkdir()
    trace_graph(traces, TRACE, SPANS)
    (labels / "labels.json").write_text(json.dumps({"trace_id": TRACE, "errors": [
        error("Formatting Errors", SPANS[0]), error("Looped Forever", SPANS[1]), error("Looped Forever", SPANS[2])]}))
    config = tmp_path / "tracehouse.toml"
    config.write_text(f'warehouse = "{warehouse}"\n\n[[sources]]\nkind = "smartcomment"\npath = "traces"\n\n'
                      '[[sources]]\nname = "trail"\nkind = "trail_labels"\npath = "labels"\n')
    return config


def build(config: Path):
    return run_build(load_settings(None, None, str(config)), progress=False)


def categories(warehouse: Path) -> dict[str, int]:
    rows = query(warehouse, "select common_category, sum(n)::int from failure_modes_common "
                            "where taxonomy = 'trail' group by all")
    return dict(rows)


def unmapped_check(warehouse: Path) -> list[tuple]:
    """The rows of the check taxonomy_labels_unmapped, as its SQL file selects them."""
    sql = (Path(__file__).resolve().parent.parent / "sql" / "checks" / "taxonomy_labels_unmapped.sql").read_text()
    return query(warehouse, f"select taxonomy, error_type, n_annotations::int from ({sql}) order by all")


def warned(summary) -> list[str]:
    return summary.warned_checks


def failing(warehouse: Path, check: str) -> int:
    """How many rows the committed build's check ``asset:name`` found failing."""
    asset, name = check.split(":")
    checks = Warehouse(warehouse).committed().checks
    [found] = [c["failing"] for c in checks if (c["asset"], c["name"]) == (asset, name)]
    return found


def labels_outside_the_set(warehouse: Path, run_gx: bool = True) -> int:
    """The annotations whose error_type the Great Expectations warning on ``error_type`` (value set
    ``taxonomy_labels``, expectations/annotations.json) finds outside the labels, over the committed
    build, from the validation cache the build left; ``run_gx=False``: a result GX would have to make
    now (none cached under the key the build's checks use) fails the test."""
    from pipelines.validation.cache import table_results
    from pipelines.validation.checks import load_suites, parameters
    from pipelines.validation.gx_runner import runner_for

    home = Warehouse(warehouse)
    suites = load_suites()
    doc = suites["annotations"]
    files = [(f, key) for key, part in sorted(home.committed().snapshot.partitions.items())
             for f in part.files("annotations")]

    def runner():
        assert run_gx, "no result was kept under the key the build's checks look for"
        return runner_for(suites)

    index = next(i for i, e in enumerate(doc["expectations"]) if e["kwargs"].get("column") == "error_type")
    parts = table_results(home, "annotations", doc, files, parameters(home.root), runner)
    return sum(part[index]["unexpected_count"] for part in parts)


def test_a_team_label_is_unmapped_until_the_team_crosswalk_maps_it(tmp_path: Path) -> None:
    config = project(tmp_path)
    warehouse = tmp_path / "warehouse"
    first = build(config)
    assert first.ok, (first.failed_checks, first.failed_steps)
    assert categories(warehouse) == {"output_format": 1, "unmapped": 2}
    assert "annotations:taxonomy_labels_unmapped" in warned(first)
    assert unmapped_check(warehouse) == [("trail", "Looped Forever", 2)]
    assert labels_outside_the_set(warehouse) == 2  # the GX warning on error_type: Looped Forever twice
    warnings_before = failing(warehouse, "annotations:expectations_warning")
    # TRAIL's labels are a benchmark's published labels (annotations.annotator_kind)
    assert query(warehouse, "select provenance, annotator_kind, count(*)::int from annotations group by all") == [
        ("trail", "benchmark", 3)]

    # the team maps its label, and moves a seed label onto another category (its row replaces the seed's)
    team = tmp_path / "taxonomy_crosswalk.csv"
    team.write_text(f"{HEADER}\ntrail,Looped Forever,Looped Forever,reasoning,our own label\n"
                    "trail,Formatting Errors,Formatting Errors,instruction_adherence,\n")
    second = build(config)
    assert second.ok, (second.failed_checks, second.failed_steps)
    assert second.build == first.build + 1  # a changed crosswalk is a changed input
    assert categories(warehouse) == {"reasoning": 2, "instruction_adherence": 1}
    assert "annotations:taxonomy_labels_unmapped" not in warned(second)
    assert unmapped_check(warehouse) == []
    # a label the team maps no longer warns in GX either: the unchanged annotations file is validated
    # again, as the crosswalk's labels are part of the validation cache's key
    assert second.partitions_built == [] and labels_outside_the_set(warehouse) == 0
    assert failing(warehouse, "annotations:expectations_warning") == warnings_before - 2
    # every connection sees the same crosswalk: the seed's other rows stay, the team's are over them
    assert query(warehouse, "select common_category, note from taxonomy_crosswalk "
                            "where taxonomy = 'trail' and label in ('Looped Forever', 'Formatting Errors') "
                            "order by label") == [("instruction_adherence", ""),
                                                  ("reasoning", "our own label")]
    assert query(warehouse, "select count(*) from taxonomy_crosswalk where taxonomy = 'mast'")[0][0] > 0

    # the crosswalk is one of the build's inputs: a build of the same code and files but another
    # crosswalk is no "nothing changed"
    record = Warehouse(warehouse).committed()
    assert record.inputs == build_inputs(record.code, record.sources, record.snapshot, "none", digest(warehouse))
    assert record.inputs != build_inputs(record.code, record.sources, record.snapshot, "none")

    team.unlink()  # without the team's file the seed alone maps again
    third = build(config)
    assert third.ok and third.build == second.build + 1
    assert not (warehouse / "crosswalk.csv").exists()
    assert categories(warehouse) == {"output_format": 1, "unmapped": 2}


def test_a_malformed_team_crosswalk_stops_the_build_naming_file_line_and_column(tmp_path: Path) -> None:
    config = project(tmp_path)
    team = tmp_path / "taxonomy_crosswalk.csv"
    team.write_text(f"{HEADER}\ntrail,Looped Forever,Looped Forever,loops,\n")
    with pytest.raises(ConfigError, match=r"taxonomy_crosswalk\.csv, line 2, column 4 \(common_category\): "
                                          r"'loops' is not a common category"):
        build(config)
    assert not (tmp_path / "warehouse" / "builds").exists() or not list((tmp_path / "warehouse" / "builds").iterdir())


@pytest.mark.parametrize(("text", "message"), [
    ("taxonomy,label,common_category\n", r"line 1 \(header\): missing column\(s\) canonical_label, note"),
    (f"{HEADER},owner\n", r"line 1 \(header\): unknown column\(s\) owner"),
    (f"{HEADER}\ntrail,A,A,hallucination\n", r"line 2: 4 fields, the header names 5"),
    (f"{HEADER}\ntrail,,A,hallucination,\n", r"line 2, column 2 \(label\): empty"),
    (f"{HEADER}\n\ntrail,A,A,hallucination,\ntrail,A,A,hallucination,x\n", r"line 4: .* also on line 3"),
    (f"{HEADER}\ntrail,\"A\nB\",A,hallucination,\ntrail,C,,hallucination,\n", r"line 4, column 3 \(canonical_label\)"),
    ("", r"empty file"),
])
def test_each_malformation_is_named_by_line_and_column(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "taxonomy_crosswalk.csv"
    path.write_text(text)
    with pytest.raises(CrosswalkError, match=message) as caught:
        read_rows(path)
    assert str(path) in str(caught.value)


def test_columns_may_come_in_any_order(tmp_path: Path) -> None:
    path = tmp_path / "taxonomy_crosswalk.csv"
    path.write_text("label,taxonomy,note,common_category,canonical_label\nLooped,trail,,hallucination,Looped\n")
    assert read_rows(path) == [{"taxonomy": "trail", "label": "Looped", "canonical_label": "Looped",
                                "common_category": "hallucination", "note": ""}]


def test_the_gx_worker_validates_with_the_warehouse_crosswalk(tmp_path: Path) -> None:
    """What the GX worker process does with each batch of splits (validation_worker.prevalidate, run
    here on the build's files) keeps its results under the key the build's checks look them up by,
    the team's labels among the expectation's set: the checks then find them and run no GX."""
    from pipelines.validation.cache import CACHE_DIR
    from pipelines.validation.worker import prevalidate

    config = project(tmp_path)
    (tmp_path / "taxonomy_crosswalk.csv").write_text(f"{HEADER}\ntrail,Looped Forever,Looped Forever,reasoning,\n")
    assert build(config).ok
    warehouse = Warehouse(tmp_path / "warehouse")
    shutil.rmtree(warehouse.reports_dir / CACHE_DIR)
    assert prevalidate(str(warehouse.root), list(warehouse.committed().snapshot.partitions.values())) > 0
    assert labels_outside_the_set(warehouse.root, run_gx=False) == 0


def test_a_run_dagster_starts_installs_the_team_crosswalk(tmp_path: Path) -> None:
    """A build run started by Dagster itself (the UI's, the sensor's, the schedule's: the resource made
    from tracehouse.toml) checks and installs the team's file as `tracehouse build` does, and its
    marts map by it."""
    import dagster as dg

    from pipelines.builds.run_history import instance_for
    from pipelines.builds.step_errors import cause
    from pipelines.defs import build_definitions
    from pipelines.defs.resources import TracehouseResource
    from pipelines.defs.warehouse import BUILD_JOB

    config = project(tmp_path)
    warehouse = tmp_path / "warehouse"
    first = build(config)
    assert first.ok and categories(warehouse) == {"output_format": 1, "unmapped": 2}
    team = tmp_path / "taxonomy_crosswalk.csv"
    team.write_text(f"{HEADER}\ntrail,Looped Forever,Looped Forever,reasoning,\n")
    resource = TracehouseResource.from_settings(load_settings(None, None, str(config)))
    assert resource.config_file == str(config.resolve())
    job = build_definitions(resource).resolve_job_def(BUILD_JOB)

    run = job.execute_in_process(instance=instance_for(Warehouse(warehouse)), raise_on_error=False)
    assert run.success
    record = Warehouse(warehouse).committed()
    assert record.build == first.build + 1
    assert (warehouse / "crosswalk.csv").read_bytes() == team.read_bytes()
    assert categories(warehouse) == {"output_format": 1, "reasoning": 2}
    assert record.inputs == build_inputs(record.code, record.sources, record.snapshot, "none", digest(warehouse))
    assert labels_outside_the_set(warehouse) == 0

    # a malformed file stops the run before it reads anything, naming the file, line and column
    team.write_text(f"{HEADER}\ntrail,Looped Forever,Looped Forever,loops,\n")
    failed = job.execute_in_process(instance=instance_for(Warehouse(warehouse)), raise_on_error=False)
    assert not failed.success
    [failure] = [e for e in failed.all_events if e.event_type_value == dg.DagsterEventType.STEP_FAILURE.value]
    assert failure.step_key == "flattened_tables"
    assert "taxonomy_crosswalk.csv, line 2, column 4 (common_category)" in cause(failure.event_specific_data.error)
    assert Warehouse(warehouse).committed().build == record.build


def test_an_s3_warehouse_carries_the_team_crosswalk_to_readers_elsewhere(s3_endpoint: str, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """On an s3:// warehouse (moto's S3 server, tests/s3server.py) the crosswalk a build used reaches
    the store with the build's files, so a working copy on another machine (another cache) reads the
    team's rows; and each build keeps its own: the one before the team removed its file still maps."""
    from conftest import s3_client, s3_environment

    from pipelines.analytics import db
    from pipelines.config import warehouse_for_reading

    s3_environment(monkeypatch, s3_endpoint, tmp_path / "builder-cache")
    bucket = f"th-{uuid.uuid4().hex[:10]}"
    client = s3_client(s3_endpoint)
    client.create_bucket(Bucket=bucket)
    url = f"s3://{bucket}/warehouse"
    config = project(tmp_path, url)
    team = tmp_path / "taxonomy_crosswalk.csv"
    team.write_text(f"{HEADER}\ntrail,Looped Forever,Looped Forever,reasoning,our own label\n")
    first = build(config)
    assert first.ok and first.remote == url
    stored = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix="warehouse/marts/taxonomy_crosswalk/")
              .get("Contents", [])]
    assert len(stored) == 1
    assert client.get_object(Bucket=bucket, Key=stored[0])["Body"].read() == team.read_bytes()

    monkeypatch.setenv("TRACEHOUSE_CACHE", str(tmp_path / "reader-cache"))  # a reader elsewhere
    reader = warehouse_for_reading(url, None)
    assert reader.is_relative_to(tmp_path / "reader-cache") and not (reader / "crosswalk.csv").exists()
    mapped = ("select common_category, note from taxonomy_crosswalk "
              "where taxonomy = 'trail' and label = 'Looped Forever'")
    assert query(reader, mapped) == [("reasoning", "our own label")]
    assert categories(reader) == {"output_format": 1, "reasoning": 2}

    team.unlink()
    monkeypatch.setenv("TRACEHOUSE_CACHE", str(tmp_path / "builder-cache"))
    second = build(config)
    assert second.ok and second.build == first.build + 1
    monkeypatch.setenv("TRACEHOUSE_CACHE", str(tmp_path / "reader-cache"))
    reader = warehouse_for_reading(url, None)
    assert query(reader, mapped) == [] and categories(reader) == {"output_format": 1, "unmapped": 2}
    con = db.connect(Warehouse(reader), build=first.build)  # the build before still maps by its crosswalk
    try:
        assert con.execute(mapped).fetchall() == [("reasoning", "our own label")]
    finally:
        con.close()
