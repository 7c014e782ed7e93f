"""A team's own taxonomy crosswalk (pipelines.crosswalk, docs/MARTS.md): labels the seed lacks count
as 'unmapped' until the team maps them in taxonomy_crosswalk.csv beside tracehouse.toml; real builds
of TRAIL-form labels over smartcomment traces, read back through DuckDB."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import query

from pipelines.build import run_build
from pipelines.config import load_settings
from pipelines.crosswalk import COLUMNS, CrosswalkError, digest, read_rows
from pipelines.errors import ConfigError
from pipelines.flattening import build_inputs
from pipelines.storage import Warehouse

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPANS = ["00f067aa0ba902b7", "b7ad6b7169203331", "53995c3f42cd8ad8"]
HEADER = ",".join(COLUMNS)


def project(tmp_path: Path) -> Path:
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
    config.write_text('warehouse = "warehouse"\n\n[[sources]]\nkind = "smartcomment"\npath = "traces"\n\n'
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


def test_a_team_label_is_unmapped_until_the_team_crosswalk_maps_it(tmp_path: Path) -> None:
    config = project(tmp_path)
    warehouse = tmp_path / "warehouse"
    first = build(config)
    assert first.ok, (first.failed_checks, first.failed_steps)
    assert categories(warehouse) == {"output_format": 1, "unmapped": 2}
    assert "annotations:taxonomy_labels_unmapped" in warned(first)
    assert unmapped_check(warehouse) == [("trail", "Looped Forever", 2)]
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
