"""No source file is dropped without a word: a link whose target vanished, a loop of links and a
hidden name are named in ingest_errors (and in the build's summary), a source whose every file
vanished behind links is refused as an emptied one, and the summary counts a trace source's
records in spans, in the units of its ingest_errors rows. Real builds, real links."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from conftest import REPO, build_warehouse, query
from smartcomment_graphs import make_graph

from pipelines.builds.summary import format_summary

CLI = [sys.executable, "-m", "pipelines.interfaces.cli"]


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRACEHOUSE_DRILLDOWN_LIMIT": "2"}
    env.pop("TRACEHOUSE_CONFIG", None)
    return subprocess.run([*CLI, *args], cwd=REPO, capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def graphs() -> dict[str, bytes]:
    """Four small real smartcomment graphs (made once: tracing them is the slow part)."""
    return {f"g{i}": orjson.dumps(make_graph(f"graph-link-{i}", f"locomo-l{i}", "Mem0", seed=70 + i, queries=1))
            for i in range(4)}


def test_a_file_behind_a_vanished_link_is_named_and_its_graph_goes_as_a_deleted_files(
        graphs: dict[str, bytes], tmp_path: Path) -> None:
    source, disk = tmp_path / "mem", tmp_path / "disk"
    (source / "mem0").mkdir(parents=True)
    disk.mkdir()
    for name in ("g0", "g1"):
        (source / "mem0" / f"{name}.json").write_bytes(graphs[name])
    (disk / "g2.json").write_bytes(graphs["g2"])
    (source / "mem0" / "g2.json").symlink_to(disk / "g2.json")  # the file lives on another disk
    warehouse = tmp_path / "w"
    first = build_warehouse(warehouse, [f"mem:memtracebench={source}"])
    assert first.exit_code == 0, format_summary(first)
    assert query(warehouse, "select count(*) from graphs") == [(3,)]

    disk.rename(tmp_path / "unmounted")  # the disk behind the link goes away
    second = build_warehouse(warehouse, [f"mem:memtracebench={source}"])
    text = format_summary(second)
    assert second.exit_code == 3, text  # built, with input it could not load: said, not silent
    assert [(r["file"], r["kind"]) for r in second.files_rejected] == [("mem0/g2.json", "broken_link")], text
    assert "rejected mem/mem0/g2.json: broken_link: the link's target" in text
    assert str(disk / "g2.json") in text and "files: 3 found: 2 loaded, 0 partly loaded, 1 rejected" in text
    # its graph is gone as a deleted file's is, and ingest_errors says which file it was
    assert query(warehouse, "select graph_id from graphs order by all") == [("graph-link-0",), ("graph-link-1",)]
    assert query(warehouse, "select file, kind, rejected from ingest_errors") == [("mem0/g2.json", "broken_link", True)]
    assert query(warehouse, "select outcome from input_files where file = 'mem0/g2.json'") == [("rejected",)]
    # the next build (its source recorded) says it again
    again = cli("build", "--warehouse", str(warehouse))
    assert again.returncode == 3, again.stdout + again.stderr
    assert "rejected mem/mem0/g2.json: broken_link" in again.stdout

    (tmp_path / "unmounted").rename(disk)  # mounted again: the graph is back, the row gone
    third = build_warehouse(warehouse, [f"mem:memtracebench={source}"])
    assert third.exit_code == 0 and not third.files_rejected, format_summary(third)
    assert query(warehouse, "select count(*) from graphs") == [(3,)]


def test_a_source_whose_every_file_vanished_behind_links_is_refused_as_an_emptied_one(
        graphs: dict[str, bytes], tmp_path: Path) -> None:
    kept, linked, disk = tmp_path / "kept", tmp_path / "linked", tmp_path / "disk"
    (kept / "rag").mkdir(parents=True)
    (kept / "rag" / "g0.json").write_bytes(graphs["g0"])
    (linked / "mem0").mkdir(parents=True)
    disk.mkdir()
    for name in ("g1", "g2"):
        (disk / f"{name}.json").write_bytes(graphs[name])
        (linked / "mem0" / f"{name}.json").symlink_to(disk / f"{name}.json")
    warehouse = tmp_path / "w"
    assert build_warehouse(warehouse, [f"kept:memtracebench={kept}", f"linked:memtracebench={linked}"]).ok
    before = query(warehouse, "select graph_id from graphs order by all")
    assert len(before) == 3

    disk.rename(tmp_path / "unmounted")
    done = cli("build", "--warehouse", str(warehouse))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"source linked: {linked} lists no memtracebench files it can read (2 it cannot" in done.stderr
    assert "the link's target" in done.stderr and "nothing was removed" in done.stderr
    assert "--remove-source linked" in done.stderr and "Traceback" not in done.stderr
    assert query(warehouse, "select graph_id from graphs order by all") == before


def test_a_link_loop_a_hidden_name_and_a_linked_folder_are_not_dropped_without_a_word(
        graphs: dict[str, bytes], tmp_path: Path) -> None:
    source, elsewhere = tmp_path / "mem", tmp_path / "elsewhere"
    (source / "rag").mkdir(parents=True)
    elsewhere.mkdir()
    (source / "rag" / "g0.json").write_bytes(graphs["g0"])
    (source / "rag" / "..json").write_bytes(graphs["g1"])  # a valid graph under a hidden name
    (source / "rag" / "loop.json").symlink_to(source / "rag" / "loop.json")
    (source / "rag" / "a.json").symlink_to(source / "rag" / "b.json")
    (source / "rag" / "b.json").symlink_to(source / "rag" / "a.json")
    (source / "rag" / "up").symlink_to(source)  # a folder link back up: not walked for ever
    (elsewhere / "g3.json").write_bytes(graphs["g3"])
    (source / "rag" / "more").symlink_to(elsewhere)  # a linked folder is read
    (source / ".tracehouse-fetch.json").write_text(json.dumps({"repo_id": "x"}))  # tracehouse fetch's own
    warehouse = tmp_path / "w"
    summary = build_warehouse(warehouse, [f"mem:memtracebench={source}"])
    text = format_summary(summary)
    assert summary.exit_code == 3, text
    assert query(warehouse, "select file, kind, rejected from ingest_errors order by file") == [
        ("rag/..json", "hidden_name", True),
        ("rag/a.json", "broken_link", True),
        ("rag/b.json", "broken_link", True),
        ("rag/loop.json", "broken_link", True),
    ]
    assert query(warehouse, "select graph_id, file from graphs order by all") == [
        ("graph-link-0", "rag/g0.json"), ("graph-link-3", "rag/more/g3.json")]
    assert "rejected mem/rag/..json: hidden_name: names starting with '.' are not read" in text
    assert "rejected mem/rag/loop.json: broken_link: the link leads to itself (a loop of links)" in text
    assert "files: 6 found: 2 loaded, 0 partly loaded, 4 rejected" in text


def _otlp_line(spans: list[dict]) -> str:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]}
    return json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": {"name": "t"},
                                                                                 "spans": spans}]}]})


def _span(trace: str, span_id: str, parent: str = "") -> dict:
    return {"traceId": trace, "spanId": span_id, "parentSpanId": parent, "name": f"s{span_id[-1]}", "kind": 1,
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000500000000",
            "status": {"code": 1}}


@pytest.mark.parametrize("kind", ["otlp", "otel_spans"])
def test_a_trace_file_with_one_bad_span_of_six_is_summarized_in_spans(kind: str, tmp_path: Path) -> None:
    trace = "0af7651916cd43dd8448eb211c80319c"
    ids = [f"{i:016x}" for i in range(1, 7)]
    spans = [_span(trace, ids[0])] + [_span(trace, s, ids[0]) for s in ids[1:]]
    spans[3]["spanId"] = "zz"  # one bad span among six
    source = tmp_path / "traces"
    (source / "run").mkdir(parents=True)
    if kind == "otlp":
        (source / "run" / "batch.jsonl").write_text(_otlp_line(spans) + "\n")
    else:  # the SDK's span JSON
        sdk = [{"name": s["name"], "context": {"trace_id": f"0x{trace}", "span_id": f"0x{s['spanId']}"},
                "parent_id": f"0x{s['parentSpanId']}" if s["parentSpanId"] else None, "kind": "SpanKind.INTERNAL",
                "start_time": "2023-11-14T22:13:20.000000Z", "end_time": "2023-11-14T22:13:20.500000Z",
                "status": {"status_code": "OK"}, "attributes": {}} for s in spans]
        (source / "run" / "batch.json").write_text(json.dumps({"spans": sdk}))
    warehouse = tmp_path / "w"
    summary = build_warehouse(warehouse, [f"traces:{kind}={source}"])
    text = format_summary(summary)
    assert query(warehouse, "select sum(n_operations) from graphs") == [(5,)]
    assert query(warehouse, "select kind, rejected from ingest_errors") == [("invalid_id", True)]
    assert "files: 1 found: 0 loaded, 1 partly loaded, 0 rejected; 1 rejected in ingest_errors" in text, text
    assert f"traces ({kind}): 1 file: 1 partly loaded; 5 spans loaded; rejected: 1 span" in text, text
    assert "1 found, 1 rejected" not in text
