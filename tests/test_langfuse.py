"""The langfuse source kind: Langfuse's blob-storage export read as its field reference documents it.

No Langfuse server can run here (it needs ClickHouse, Redis and PostgreSQL), so the export files are
written by this test to the reference ("Blob storage export field reference"; the field groups of
"Export to blob storage"): each field group on and off, JSON lines, JSON, CSV and Parquet, gzip or
not, and the legacy traces/ + observations/ layout. The shared sample (../shared/data/platforms/
langfuse) is read too, and one build shows the scores as annotations in SQL.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from conftest import SHARED_DATA, build_warehouse, query
from langfuse_exports import FIELD_GROUPS, OTHER_TRACE, TRACE, enriched_observations, export, scores, write

from pipelines import schema
from pipelines.readers import langfuse
from pipelines.readers.base import GraphRows, IngestError

SAMPLE = SHARED_DATA / "platforms" / "langfuse"

def read_all(root: Path) -> tuple[dict[str, GraphRows], list[tuple[str, IngestError, bool]]]:
    files = langfuse.discover(root, "lf")
    graphs: dict[str, GraphRows] = {}
    problems = []
    for file, item, rejected, _ in langfuse.read_traces(files):
        if isinstance(item, IngestError):
            problems.append((file.relpath, item, rejected))
        else:
            graphs[item.graph_id] = item
    return graphs, problems


def rows_of(graphs: dict[str, GraphRows], name: str) -> dict[str, dict[str, Any]]:
    key = {"operations": "op_id", "annotations": "annotation_id", "nodes": "full_node_id", "graphs": "graph_id"}[name]
    return {row[key]: row for g in graphs.values() for row in g.tables[name].to_pylist()}


# -- field groups and formats ---------------------------------------------------------------------------


FORMATS = ("jsonl", "jsonl.gz", "json", "json.gz", "csv", "csv.gz", "parquet")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("groups", [tuple(FIELD_GROUPS), ("core",)], ids=["all-groups", "core-only"])
def test_every_format_with_all_groups_and_core_only(tmp_path: Path, fmt: str, groups: tuple[str, ...]) -> None:
    graphs, problems = read_all(export(tmp_path, fmt, groups))
    assert problems == []
    assert sorted(graphs) == [f"langfuse:{OTHER_TRACE}", f"langfuse:{TRACE}"]
    ops = rows_of(graphs, "operations")
    assert sorted(ops) == ["obs-llm", "obs-root", "obs-solo", "obs-tool"]
    assert ops["obs-llm"]["parent_op_id"] == "obs-root" and ops["obs-root"]["parent_op_id"] is None
    assert [ops[o]["step"] for o in ("obs-root", "obs-llm", "obs-tool")] == [0, 1, 2]
    assert ops["obs-llm"]["category"] == "GENERATION"
    assert str(ops["obs-llm"]["start_time"]) == "2026-11-30 10:00:01"
    assert str(ops["obs-llm"]["end_time"]) == "2026-11-30 10:00:02.500000"
    full = groups != ("core",)
    assert ops["obs-llm"]["op_name"] == ("chat" if full else None)
    assert ops["obs-llm"]["model"] == ("gpt-4o" if full else None)
    assert (ops["obs-llm"]["input_tokens"], ops["obs-llm"]["output_tokens"]) == ((120, 30) if full else (None, None))
    assert (ops["obs-tool"]["status"], ops["obs-tool"]["status_message"]) == (
        ("error", "search timed out") if full else ("unset", None))
    assert ops["obs-tool"]["actor"] == ("planner" if full else None)
    nodes = rows_of(graphs, "nodes")
    edges = [row for g in graphs.values() for row in g.tables["edges"].to_pylist()]
    if full:  # io: each observation's input and output; obs-solo's output is empty (not set)
        assert len(nodes) == 7 and nodes["input:obs-llm@1"]["value"] == "input of obs-llm"
        assert "output:obs-solo@1" not in nodes
        assert ("input:obs-root@1", "input:obs-llm@1", "parent_input") in {
            (e["source_full_node_id"], e["target_full_node_id"], e["category"]) for e in edges}
        assert graphs[f"langfuse:{TRACE}"].tables["sessions"]["session_id"].to_pylist() == ["session-3"]
    else:
        assert nodes == {} and edges == []
    metadata = json.loads(ops["obs-llm"]["metadata"])
    assert metadata["scores"][0]["name"] == "helpfulness" and metadata["scores"][0]["value"] == 0.25
    if full:
        assert metadata["usage_details"] == {"input": 120, "output": 30, "total": 150}
        assert metadata["total_cost"] == 0.003 and metadata["level"] == "DEFAULT"
    annotations = rows_of(graphs, "annotations")
    assert sorted((a["taxonomy"], a["error_type"], a["faulty_op_id"]) for a in annotations.values()) == [
        ("failure_mode", "tool_timeout", "obs-tool"), ("hallucination", "True", None)]
    graph_metadata = json.loads(rows_of(graphs, "graphs")[f"langfuse:{OTHER_TRACE}"]["metadata"])
    assert graph_metadata["scores"][0]["string_value"] == "looks fine"  # a TEXT score is kept, not a label


@pytest.mark.parametrize("off", [group for group in FIELD_GROUPS if group != "core"])
def test_each_field_group_off(tmp_path: Path, off: str) -> None:
    """A group left out removes its columns from the rows, nothing else: the graphs still load."""
    groups = tuple(g for g in FIELD_GROUPS if g != off)
    graphs, problems = read_all(export(tmp_path, "jsonl", groups))
    assert problems == []
    ops = rows_of(graphs, "operations")
    assert len(ops) == 4 and len(rows_of(graphs, "annotations")) == 2
    llm, tool = ops["obs-llm"], ops["obs-tool"]
    assert (llm["op_name"] is None) == (off == "basic")
    assert (tool["status"] == "unset") == (off == "basic")
    assert (llm["model"] is None) == (off == "model")
    assert (llm["input_tokens"] is None) == (off == "usage")
    assert (len(rows_of(graphs, "nodes")) == 0) == (off == "io")
    graph = rows_of(graphs, "graphs")[f"langfuse:{TRACE}"]
    assert graph["system"] == ("lf" if off == "trace_context" else "support-agent")
    assert (graph["user_id"] is None) == (off == "basic")
    metadata = json.loads(llm["metadata"])
    for field in FIELD_GROUPS[off]:
        assert field not in metadata


@pytest.mark.parametrize("fmt", ["jsonl.gz", "csv", "parquet"])
def test_legacy_layout(tmp_path: Path, fmt: str) -> None:
    """traces/ + observations/: the trace context comes from the traces file (its name is the
    trace's name); a root's parent is null."""
    graphs, problems = read_all(export(tmp_path, fmt, legacy=True))
    assert problems == []
    assert len(rows_of(graphs, "operations")) == 4 and len(rows_of(graphs, "annotations")) == 2
    graph = rows_of(graphs, "graphs")[f"langfuse:{TRACE}"]
    assert (graph["system"], graph["user_id"], graph["project_id"]) == ("support-agent", "user-7", "proj-x")
    assert graph["files"] == ["proj-x/observations/20261130T100000Z." + fmt, "proj-x/observations/20261130T110000Z."
                              + fmt, f"proj-x/scores/20261130T120000Z.{fmt}", f"proj-x/traces/20261130T100000Z.{fmt}"]
    metadata = json.loads(graph["metadata"])
    assert metadata["trace"]["input"] == "the question" and metadata["trace"]["metadata"] == {"team": "blue"}
    assert graphs[f"langfuse:{TRACE}"].tables["sessions"]["session_id"].to_pylist() == ["session-3"]


def test_a_record_exported_again_loads_once_as_last_updated(tmp_path: Path) -> None:
    """Adjacent windows share their boundary, and an updated record is exported again: one row, the latest."""
    root = export(tmp_path, "jsonl")
    newer = enriched_observations()[2] | {"status_message": "fixed later", "updated_at": "2026-11-30 13:00:00.000000"}
    older = enriched_observations()[2] | {"status_message": "stale copy", "updated_at": "2026-11-30 09:00:00.000000"}
    write(root / "proj-x" / "observations_v2" / "20261130T130000Z.jsonl", [newer])
    write(root / "proj-x" / "observations_v2" / "20261130T140000Z.jsonl", [older])
    write(root / "proj-x" / "scores" / "20261130T130000Z.jsonl", scores()[:1])
    graphs, problems = read_all(root)
    assert problems == []
    assert rows_of(graphs, "operations")["obs-tool"]["status_message"] == "fixed later"
    assert len(rows_of(graphs, "operations")) == 4 and len(rows_of(graphs, "annotations")) == 2


def test_what_cannot_be_read_is_named(tmp_path: Path) -> None:
    root = export(tmp_path, "jsonl")
    bad = enriched_observations()[0] | {"id": "obs-bad", "start_time": "yesterday"}
    orphan = scores()[0] | {"id": "s-orphan", "trace_id": None, "session_id": "session-3"}
    lost = scores()[0] | {"id": "s-lost", "observation_id": "obs-missing"}
    write(root / "proj-x" / "observations_v2" / "20261130T150000Z.jsonl",
          [bad, {k: v for k, v in enriched_observations()[0].items() if k != "trace_id"}])
    write(root / "proj-x" / "scores" / "20261130T150000Z.jsonl", [orphan, lost])
    (root / "proj-x" / "scores" / "20261130T160000Z.jsonl.gz").write_bytes(b"\x1f\x8bnot gzip")
    graphs, problems = read_all(root)
    named = {(path, e.kind, e.position, rejected) for path, e, rejected in problems}
    assert named == {
        ("proj-x/observations_v2/20261130T150000Z.jsonl", "wrong_field_type", "line 1", True),
        ("proj-x/observations_v2/20261130T150000Z.jsonl", "missing_key", "line 2", True),
        ("proj-x/scores/20261130T150000Z.jsonl", "dangling_reference", "line 1", True),
        ("proj-x/scores/20261130T150000Z.jsonl", "dangling_reference", "line 2", True),
        ("proj-x/scores/20261130T160000Z.jsonl.gz", "unreadable", None, True),
    }
    reasons = " | ".join(e.reason for _, e, _ in problems)
    assert "field 'start_time'" in reasons and "'trace_id'" in reasons and "obs-missing" in reasons
    assert len(rows_of(graphs, "operations")) == 4  # the rest loads


# -- the shared sample -------------------------------------------------------------------------------------


def _file_records(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".parquet":
        return pq.read_table(path).to_pylist()
    return [json.loads(line) for line in gzip.open(path, "rt") if line.strip()]


@pytest.mark.skipif(not SAMPLE.is_dir(), reason="../shared/data/platforms/langfuse is not present in this clone")
@pytest.mark.parametrize("project", ["proj-a", "proj-b"])
def test_shared_sample_counts_equal_the_files_records(project: str) -> None:
    observations = [r for p in sorted((SAMPLE / project / "observations_v2").iterdir()) for r in _file_records(p)]
    score_rows = [r for p in sorted((SAMPLE / project / "scores").iterdir()) for r in _file_records(p)]
    files = [f for f in langfuse.discover(SAMPLE, "lf") if f.split == project]
    assert len(files) == len(list((SAMPLE / project).glob("*/*")))
    graphs: dict[str, GraphRows] = {}
    for _, item, _, _ in langfuse.read_traces(files):
        assert not isinstance(item, IngestError), item
        graphs[item.graph_id] = item
    assert sorted(rows_of(graphs, "operations")) == sorted(r["id"] for r in observations)
    assert len(graphs) == len({r["trace_id"] for r in observations})
    labels = {r["id"]: r for r in score_rows if r["data_type"] in ("CATEGORICAL", "BOOLEAN")}
    annotations = rows_of(graphs, "annotations")
    assert sorted(a["extra"] and json.loads(a["extra"])["score_id"] for a in annotations.values()) == sorted(labels)
    for a in annotations.values():
        score = labels[json.loads(a["extra"])["score_id"]]
        assert (a["error_type"], a["taxonomy"], a["faulty_op_id"], a["reason"]) == (
            score["string_value"], score["name"], score["observation_id"], score["comment"])
    kept = [s for g in graphs.values() for s in json.loads(g.tables["graphs"]["metadata"][0].as_py()).get("scores", [])]
    kept += [s for op in rows_of(graphs, "operations").values() for s in json.loads(op["metadata"]).get("scores", [])]
    assert len(kept) == len(score_rows) - len(labels)  # the NUMERIC ones, none dropped


# -- end to end ---------------------------------------------------------------------------------------------


def test_build_shows_the_scores_as_annotations(tmp_path: Path) -> None:
    export(tmp_path / "export", "parquet")
    warehouse = tmp_path / "warehouse"
    summary = build_warehouse(warehouse, [f"lf:langfuse={tmp_path / 'export'}"])
    assert summary.exit_code == 0, summary
    columns = "annotator_kind, " if "annotator_kind" in schema.ANNOTATIONS.names else ""
    got = query(warehouse, f"select graph_id, error_type, taxonomy, faulty_op_id, reason, provenance, {columns}"
                "json_extract_string(extra, '$.source') from annotations order by annotation_id")
    kinds = (["llm"], ["human"]) if columns else ([], [])
    assert got == [
        (f"langfuse:{TRACE}", "True", "hallucination", None, "judge says so", "langfuse", *kinds[0], "EVAL"),
        (f"langfuse:{TRACE}", "tool_timeout", "failure_mode", "obs-tool", "the tool never answered", "langfuse",
         *kinds[1], "ANNOTATION"),
    ]
    assert query(warehouse, "select count(*), count(distinct graph_id) from operations") == [(4, 2)]
    assert query(warehouse, "select count(*) from ingest_errors") == [(0,)]
