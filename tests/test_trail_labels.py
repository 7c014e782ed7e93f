"""TRAIL-form failure labels (source kind trail_labels) on traces another source holds, on real builds.

The traces here are smartcomment graphs written by the real smartcomment library with the ids an
OpenTelemetry source gives (graph ``otel:<32 hex>``, operations named by 16-hex span ids): the label
source resolves against whatever graph source holds ``otel:`` graphs."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from benchmark_inputs import error, trace_graph
from conftest import REPO, SHARED_DATA, build_warehouse, query

TRACE_1, TRACE_2, UNKNOWN_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c", "f" * 32
SPAN_A, SPAN_B, SPAN_C = "00f067aa0ba902b7", "b7ad6b7169203331", "53995c3f42cd8ad8"


@pytest.fixture
def sources(tmp_path: Path) -> tuple[Path, Path]:
    traces, labels = tmp_path / "traces" / "agents", tmp_path / "labels"
    traces.mkdir(parents=True)
    labels.mkdir()
    trace_graph(traces, TRACE_1, [SPAN_A, SPAN_B])
    trace_graph(traces, TRACE_2, [SPAN_C])
    lines = [
        {"trace_id": TRACE_1, "errors": [error("Formatting Errors", SPAN_A), error("Goal Deviation", SPAN_B.upper()),
                                         error("Timeout Issues", "1234567890abcdef")], "scores": [{"overall": 2}]},
        {"trace_id": UNKNOWN_TRACE, "errors": [error("Tool Selection Errors", SPAN_A)]},
    ]
    (labels / "trail_labels.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    (labels / "trace2.json").write_text(json.dumps({"trace_id": TRACE_2.upper(), "errors": [
        error("Tool Output Misinterpretation", SPAN_C, "LOW"), error("Rate Limiting", SPAN_A)]}))
    return tmp_path / "traces", labels


def test_labels_become_annotations_of_their_traces_and_unknown_ones_ingest_errors(sources, tmp_path: Path) -> None:
    traces, labels = sources
    warehouse = tmp_path / "warehouse"
    summary = build_warehouse(warehouse, [f"smartcomment={traces}", f"trail:trail_labels={labels}"])
    assert summary.failed_checks == []  # graph_row_counts_mismatch counts the labels' annotations too
    rows = query(warehouse, "select graph_id, error_type, taxonomy, faulty_op_id, reason, system, "
                            "json_extract_string(extra, '$.impact') from annotations order by graph_id, faulty_op_id")
    assert rows == [
        (f"otel:{TRACE_2}", "Tool Output Misinterpretation", "trail", SPAN_C,
         f"Tool Output Misinterpretation at {SPAN_C}", "agents", "LOW"),
        (f"otel:{TRACE_1}", "Formatting Errors", "trail", SPAN_A, f"Formatting Errors at {SPAN_A}", "agents", "HIGH"),
        (f"otel:{TRACE_1}", "Goal Deviation", "trail", SPAN_B, f"Goal Deviation at {SPAN_B.upper()}", "agents",
         "HIGH")]
    # graphs.n_annotations counts the annotations across sources
    assert dict(query(warehouse, "select graph_id, n_annotations from graphs")) == {
        f"otel:{TRACE_1}": 2, f"otel:{TRACE_2}": 1}
    errors = query(warehouse, "select file, kind, position, reason from ingest_errors order by file, position")
    assert [e[:3] for e in errors] == [
        ("trace2.json", "dangling_reference", "$.errors[1].location"),
        ("trail_labels.jsonl", "dangling_reference", "line 1 $.errors[2].location"),
        ("trail_labels.jsonl", "dangling_reference", "line 2 $.trace_id")]
    assert SPAN_A in errors[0][3] and TRACE_2 in errors[0][3]
    assert "1234567890abcdef" in errors[1][3] and TRACE_1 in errors[1][3]
    assert UNKNOWN_TRACE in errors[2][3]
    assert query(warehouse, "select file, n_labels, outcome from input_files where source = 'trail' order by file") \
        == [("trace2.json", 1, "partly loaded"), ("trail_labels.jsonl", 1, "partly loaded")]
    assert query(warehouse, "select common_category, n from failure_modes_common where taxonomy = 'trail' "
                            "order by all") == [("instruction_adherence", 1), ("output_format", 1),
                                                ("output_misinterpretation", 1)]
    # a per-partition mart sees the labels, which sit in a partition of their own, beside their traces
    assert query(warehouse, "select graph_id, annotation_id from failure_propagation order by all") == query(
        warehouse, "select graph_id, annotation_id from annotations order by all")


def test_a_rebuild_of_the_traces_re_reads_the_labels(sources, tmp_path: Path) -> None:
    traces, labels = sources
    warehouse = tmp_path / "warehouse"
    specs = [f"smartcomment={traces}", f"trail:trail_labels={labels}"]
    build_warehouse(warehouse, specs)
    trace_graph(traces / "agents", TRACE_1, [SPAN_A])  # the trace loses span B: its label no longer has a place
    summary = build_warehouse(warehouse, specs)
    assert summary.failed_checks == []
    assert "trail__labels" in summary.partitions_built
    assert query(warehouse, "select n_annotations from graphs where graph_id = ?", [f"otel:{TRACE_1}"]) == [(1,)]
    assert query(warehouse, "select count(*) from ingest_errors where reason like ?", [f"%span {SPAN_B}%"]) == [(1,)]
    assert query(warehouse, "select graph_id, annotation_id from failure_propagation order by all") == query(
        warehouse, "select graph_id, annotation_id from annotations order by all")
    assert query(warehouse, "select count(*) from failure_propagation") == [(2,)]


def test_predictions_can_name_the_labels(sources, tmp_path: Path) -> None:
    """Prediction sources read after the label sources: an attribution_jsonl prediction of a TRAIL
    annotation is matched to it."""
    traces, labels = sources
    warehouse = tmp_path / "warehouse"
    build_warehouse(warehouse, [f"smartcomment={traces}", f"trail:trail_labels={labels}"])
    (aid,) = query(warehouse, "select annotation_id from annotations where faulty_op_id = ?", [SPAN_C])[0]
    predictions = tmp_path / "predictions"
    predictions.mkdir()
    (predictions / "run.jsonl").write_text(json.dumps({"annotation_id": aid, "error_type": "Rate Limiting",
                                                       "op_id": SPAN_C}) + "\n")
    summary = build_warehouse(warehouse, [f"smartcomment={traces}", f"trail:trail_labels={labels}",
                                          f"m1:attribution_jsonl={predictions}"])
    assert summary.failed_checks == []
    assert query(warehouse, "select method, annotation_id, predicted_op_id from attributions") == [("m1", aid, SPAN_C)]
    # the label's failure view scores it as TRAIL does: the span right, the category wrong
    from dashboards.failure_view import failure_view_path
    from pipelines.storage.warehouse import Warehouse

    home = Warehouse(warehouse)
    html = failure_view_path(home, home.committed(), aid).read_text()
    row = html[html.index('<tr data-method="m1">'):]
    row = row[:row.index("</tr>")]
    assert "<th>category</th><th>span</th>" in html
    assert '<td class="wrong">Rate Limiting</td>' in row and f'<td class="right"><code>{SPAN_C}</code></td>' in row


OTLP_SAMPLE = SHARED_DATA / "otel" / "otlp-sample"
PUBLISHED = REPO / "sql" / "seeds" / "published_results.csv"


@pytest.mark.skipif(not (OTLP_SAMPLE / "labels").is_dir(),
                    reason="../shared/data (the OTLP sample with TRAIL-form labels) is not present in this clone")
def test_a_split_folder_gives_the_labels_their_trail_split_beside_the_papers(tmp_path: Path) -> None:
    """TRAIL keeps each split in a folder of its own: labels read from GAIA/ are of TRAIL's GAIA split
    (provenance trail/GAIA), so a method scored on them is set beside the paper's GAIA numbers of the same
    model (seed published_results), said not comparable only because the paper's record count is unknown."""
    labels = tmp_path / "TRAIL" / "GAIA"
    labels.mkdir(parents=True)
    shutil.copy(OTLP_SAMPLE / "labels" / "trail_labels.jsonl", labels)
    sources = [f"otlp={OTLP_SAMPLE / 'otlp'}", f"trail:trail_labels={tmp_path / 'TRAIL'}"]
    warehouse = tmp_path / "warehouse"
    assert build_warehouse(warehouse, sources).failed_checks == []
    rows = query(warehouse, "select annotation_id, faulty_op_id, error_type, provenance, dataset from annotations "
                            "where taxonomy = 'trail'")
    n_errors = sum(len(json.loads(line)["errors"]) for line in
                   (OTLP_SAMPLE / "labels" / "trail_labels.jsonl").read_text().splitlines() if line.strip())
    assert len(rows) == n_errors and {(p, d) for *_, p, d in rows} == {("trail/GAIA", "unknown")}
    method = "gemini-2.5-pro-preview-05-06"  # the paper's GEMINI-2.5-PRO-PREVIEW-05-06, every label found
    guess = tmp_path / "guess.jsonl"
    guess.write_text("".join(json.dumps({"annotation_id": a, "op_id": o, "error_type": e}) + "\n"
                             for a, o, e, *_ in rows))
    summary = build_warehouse(warehouse, [*sources, f"{method}:attribution_jsonl={guess}"])
    assert summary.ok, summary.failed_steps + summary.failed_checks

    with PUBLISHED.open(newline="") as f:
        paper = {r["leaderboard_metric"]: r for r in csv.DictReader(f)
                 if r["benchmark"] == "trail" and r["split"] == "GAIA" and r["model"] == method.upper()}
    got = query(warehouse, "select metric, split, benchmark, accuracy, n_reported, reported, comparability, comparable "
                           "from attribution_published where method = ? order by metric", [method])
    assert [m for m, *_ in got] == sorted(paper) == ["TRAIL category F1", "TRAIL joint", "TRAIL location"]
    for metric, split, benchmark, accuracy, n_reported, reported, comparability, comparable in got:
        row = paper[metric]
        assert (split, benchmark, accuracy, n_reported) == ("GAIA", "trail", 1.0, 1)
        assert reported == (f"{row['method']}, {row['model']}: {float(row['value']):.2f}% {row['setting']} "
                            f"({row['metric']}, {row['paper_table']}, arXiv:{row['arxiv_id']})")
        assert row["split_records"] == ""  # TRAIL's table says not how many traces each split scored
        assert (comparability, comparable) == (
            "not comparable: how many records the paper scored is not known here", False)
