"""MLflow traces with their assessments (source kind mlflow): the shared sample read span for span and
assessment for assessment (every expected value computed here from the JSON files, ids decoded with
the standard library), malformed records each named in an IngestError, one build over the sample,
and, marked slow, traces made by the real MLflow (tests/compat/mlflow.txt, a second environment)
with its tracing API and assessments, exported with its CLI and its search_traces, read back whole.
"""

from __future__ import annotations

import base64
import copy
import gzip
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, SHARED_DATA, build_warehouse, query
from fuzzing import FUZZ, byte_mutated, dump, mutated, read_everything
from hypothesis import given
from second_env import python_for

from pipelines.readers import GRAPH_KINDS, mlflow
from pipelines.readers.base import GraphRows, IngestError

SAMPLE = SHARED_DATA / "platforms" / "mlflow" / "traces"
REQUIREMENTS = REPO / "tests" / "compat" / "mlflow.txt"
MAKE_TRACES = REPO / "tests" / "fixtures" / "mlflow" / "make_traces.py"
KINDS = {"HUMAN": "human", "LLM_JUDGE": "llm", "CODE": "code"}

needs_sample = pytest.mark.skipif(not SAMPLE.is_dir(),
                                  reason="../shared/data/platforms/mlflow (MLflow traces as its CLI writes them) "
                                         "is not present in this clone")


def b64_to_hex(value: str) -> str:
    return base64.b64decode(value).hex()


def hex_to_b64(value: str) -> str:
    return base64.b64encode(bytes.fromhex(value)).decode()


def read_source(root: Path) -> tuple[list[GraphRows], list[tuple[str, IngestError]]]:
    """Every graph and every error the reader gives for the files under ``root``."""
    graphs, errors = [], []
    for file in mlflow.discover(root, "mlf"):
        try:
            for item in mlflow.read(file):
                if isinstance(item, GraphRows):
                    graphs.append(item)
                else:
                    errors.append((file.relpath, item))
        except IngestError as error:
            errors.append((file.relpath, error))
    return graphs, errors


def rows(graphs: list[GraphRows], table: str) -> list[dict[str, Any]]:
    return [row for graph in graphs for row in graph.tables[table].to_pylist()]


def expected_of(traces: list[dict]) -> tuple[dict, dict]:
    """(operations, annotations) that MLflow traces as written must give: (graph id, op id) ->
    (name, parent, status) and annotation id -> what its columns hold."""
    ops: dict[tuple[str, str], tuple] = {}
    annotations: dict[str, tuple] = {}
    for trace in traces:
        spans = trace["data"]["spans"]
        gid = "otel:" + b64_to_hex(spans[0]["trace_id"])
        for span in spans:
            parent = span.get("parent_span_id")
            ops[(gid, b64_to_hex(span["span_id"]))] = (
                span["name"], parent and b64_to_hex(parent),
                span["status"]["code"].removeprefix("STATUS_CODE_").lower())
        for a in trace["info"].get("assessments", []):
            body = a.get("feedback") or a.get("expectation")
            value = body["value"] if "value" in body else json.loads(body["serialized_value"]["value"])
            annotations[f"{gid}#{a['assessment_id']}"] = (
                gid, a["assessment_name"],
                value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False),
                a.get("rationale"), a.get("span_id"), KINDS[a["source"]["source_type"]], a["source"].get("source_id"))
    return ops, annotations


def got_of(graphs: list[GraphRows]) -> tuple[dict, dict]:
    ops = {(r["graph_id"], r["op_id"]): (r["op_name"], r["parent_op_id"], r["status"])
           for r in rows(graphs, "operations")}
    annotations = {}
    for r in rows(graphs, "annotations"):
        extra = json.loads(r["extra"])
        annotations[r["annotation_id"]] = (r["graph_id"], r["taxonomy"], r["error_type"], r["reason"],
                                           r["faulty_op_id"], r["annotator_kind"], extra["source_id"])
    return ops, annotations


# -- the shared sample -------------------------------------------------------------------------------


@needs_sample
def test_sample_every_span_and_assessment() -> None:
    files = sorted(SAMPLE.glob("*.json"))
    traces = [json.loads(path.read_text()) for path in files]
    graphs, errors = read_source(SAMPLE)
    assert errors == []
    assert len(graphs) == len(files) == 6
    want_ops, want_annotations = expected_of(traces)
    got_ops, got_annotations = got_of(graphs)
    assert got_ops == want_ops
    assert len(got_ops) == sum(len(t["data"]["spans"]) for t in traces) == 44
    assert got_annotations == want_annotations
    assert len(got_annotations) == sum(len(t["info"].get("assessments", [])) for t in traces) == 7
    # each graph's counts, its MLflow trace id kept, inputs and outputs as nodes
    for graph, trace in zip(graphs, traces, strict=True):
        row = graph.tables["graphs"].to_pylist()[0]
        assert row["n_annotations"] == len(trace["info"].get("assessments", []))
        assert row["n_operations"] == len(trace["data"]["spans"])
        assert json.loads(row["metadata"])["mlflow"]["trace_id"] == trace["info"]["trace_id"]
        assert graph.graph_id == "otel:" + trace["info"]["trace_id"].removeprefix("tr-")
        values = {(n["name"], n["value"]) for n in graph.tables["nodes"].to_pylist()}
        for span in trace["data"]["spans"]:
            for key, name in (("mlflow.spanInputs", "input.value"), ("mlflow.spanOutputs", "output.value")):
                if key in span["attributes"]:
                    assert (name, span["attributes"][key]) in values
    categories = {r["category"] for r in rows(graphs, "operations")}
    assert categories == {json.loads(s["attributes"]["mlflow.spanType"]) for t in traces for s in t["data"]["spans"]}
    extras = [json.loads(r["extra"]) for r in rows(graphs, "annotations")]
    assert {(e["assessment_type"], e["value_type"], e["source_type"]) for e in extras} == {
        ("feedback", "string", "HUMAN")}
    assert all(e["assessment_id"].startswith("a-") and e["valid"] is True for e in extras)


@needs_sample
def test_sample_one_id_whichever_spelling(tmp_path: Path) -> None:
    """Span ids in hex (and 0x hex) and assessment span ids in base64 give the same graph and ops."""
    original = json.loads(next(iter(sorted(SAMPLE.glob("*.json")))).read_text())
    respelled = copy.deepcopy(original)
    for i, span in enumerate(respelled["data"]["spans"]):
        prefix = "0x" if i % 2 else ""
        span["trace_id"] = prefix + b64_to_hex(span["trace_id"])
        span["span_id"] = prefix + b64_to_hex(span["span_id"])
        if span["parent_span_id"]:
            span["parent_span_id"] = b64_to_hex(span["parent_span_id"])
    for a in respelled["info"]["assessments"]:
        a["span_id"] = hex_to_b64(a["span_id"])
    respelled["info"]["request_id"] = respelled["info"].pop("trace_id")  # MLflow 2's spelling
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "trace.json").write_text(json.dumps(original))
    (tmp_path / "b" / "trace.json").write_text(json.dumps(respelled))
    first, second = read_source(tmp_path / "a"), read_source(tmp_path / "b")
    assert first[1] == second[1] == []
    assert got_of(first[0]) == got_of(second[0])
    assert first[0][0].graph_id == second[0][0].graph_id
    faulty = {r["faulty_op_id"] for r in rows(second[0], "annotations")}
    assert faulty and faulty <= {r["op_id"] for r in rows(second[0], "operations")}


@needs_sample
def test_sample_as_json_lines_gzip_and_search_page(tmp_path: Path) -> None:
    """The same traces one a line (gzip), as a search page ({"traces": [...]}) and as a list."""
    traces = [json.loads(path.read_text()) for path in sorted(SAMPLE.glob("*.json"))]
    (tmp_path / "lines.jsonl.gz").write_bytes(gzip.compress("".join(json.dumps(t) + "\n" for t in traces).encode()))
    for name, document in (("page.json", {"traces": traces, "next_page_token": None}), ("list.json", traces)):
        folder = tmp_path / name.removesuffix(".json")
        folder.mkdir()
        (folder / name).write_text(json.dumps(document, indent=2))
    want = expected_of(traces)
    for root in (tmp_path / "lines.jsonl.gz", tmp_path / "page", tmp_path / "list"):
        graphs, errors = read_source(root)
        assert errors == [] and len(graphs) == 6 and got_of(graphs) == want, root.name


def test_registered() -> None:
    assert "mlflow" in GRAPH_KINDS


# -- malformed records ---------------------------------------------------------------------------------

TRACE = "0123456789abcdef0123456789abcdef"


def span(span_id: str, parent: str | None, trace: str = TRACE, **fields: Any) -> dict[str, Any]:
    """A span as MLflow 3 writes it."""
    return {"trace_id": hex_to_b64(trace), "span_id": hex_to_b64(span_id),
            "parent_span_id": parent and hex_to_b64(parent),
            "name": f"step-{span_id[-2:]}", "start_time_unix_nano": 1_700_000_000_000_000_000 + int(span_id[-2:], 16),
            "end_time_unix_nano": 1_700_000_000_000_000_100 + int(span_id[-2:], 16), "events": [],
            "status": {"code": "STATUS_CODE_OK", "message": ""},
            "attributes": {"mlflow.spanType": "\"TOOL\"", "mlflow.spanInputs": "{\"q\": 1}",
                           "mlflow.spanOutputs": "\"done\""}, "links": [], **fields}


def feedback(aid: str, span_id: str | None, value: Any = "Timeout", **fields: Any) -> dict[str, Any]:
    return {"assessment_id": aid, "assessment_name": "failure_mode", "trace_id": f"tr-{TRACE}", "span_id": span_id,
            "source": {"source_type": "HUMAN", "source_id": "me"}, "feedback": {"value": value},
            "rationale": "why", **fields}


def trace(spans: list[dict], assessments: list[Any], trace_id: str = TRACE) -> dict[str, Any]:
    return {"info": {"trace_id": f"tr-{trace_id}", "state": "OK", "assessments": assessments},
            "data": {"spans": spans}}


ROOT, CHILD = "00000000000000a1", "00000000000000b2"


def test_malformed_records_named_and_the_rest_loaded(tmp_path: Path) -> None:
    other = "fedcba9876543210fedcba9876543210"
    good = trace([span(ROOT, None), span(CHILD, ROOT), {"name": "no ids"}], [
        feedback("a-1", CHILD),
        feedback("a-2", None, value=False),                              # trace level, boolean
        feedback("a-3", "00000000000000ff"),                             # a span the trace does not hold
        {"assessment_id": "a-4", "source": {"source_type": "CODE"}, "feedback": {"value": 1}},  # no name
        {"assessment_id": "a-5", "assessment_name": "x", "source": {"source_type": "LLM_JUDGE"}},  # no value
        "not an assessment",
        feedback("a-1", ROOT),                                           # a repeated id
        feedback("a-6", "not-an-id"),
        {"assessment_id": "a-7", "assessment_name": "expected", "span_id": ROOT,
         "source": {"source_type": "LLM_JUDGE"},
         "expectation": {"serialized_value": {"serialization_format": "JSON_FORMAT", "value": "{\"b\": [1, 2]}"}}},
    ])
    no_spans = trace([], [feedback("a-9", None)], trace_id=other)
    lines = [json.dumps(good), "{not json", json.dumps({"something": "else"}), json.dumps([1, 2]), json.dumps(no_spans)]
    (tmp_path / "traces.jsonl").write_text("\n".join(lines) + "\n")
    graphs, errors = read_source(tmp_path)
    said = {(e.kind, e.position): e.reason for _, e in errors}
    assert set(said) == {
        ("missing_key", "line 1: $.data.spans[2].trace_id"),
        ("dangling_reference", "line 1: $.info.assessments[2].span_id"),
        ("missing_key", "line 1: $.info.assessments[3].assessment_name"),
        ("missing_key", "line 1: $.info.assessments[4]"),
        ("wrong_field_type", "line 1: $.info.assessments[5]"),
        ("duplicate_key", "line 1: $.info.assessments[6]"),
        ("invalid_id", "line 1: $.info.assessments[7].span_id"),
        ("invalid_json", "line 2 column 2"),
        ("missing_key", "line 3: $"),
        ("wrong_top_level_type", "line 4: $"),
        ("no_records", "line 5: $.data.spans"),
    }
    assert "00000000000000ff" in said[("dangling_reference", "line 1: $.info.assessments[2].span_id")]
    assert "its 1 assessment not loaded" in said[("no_records", "line 5: $.data.spans")]
    assert f"tr-{other}" in said[("no_records", "line 5: $.data.spans")]
    assert [g.graph_id for g in graphs] == [f"otel:{TRACE}"]
    got = {r["annotation_id"]: r for r in rows(graphs, "annotations")}
    assert set(got) == {f"otel:{TRACE}#a-1", f"otel:{TRACE}#a-2", f"otel:{TRACE}#a-7"}
    assert (got[f"otel:{TRACE}#a-1"]["faulty_op_id"], got[f"otel:{TRACE}#a-1"]["error_type"]) == (CHILD, "Timeout")
    assert (got[f"otel:{TRACE}#a-2"]["faulty_op_id"], got[f"otel:{TRACE}#a-2"]["error_type"]) == (None, "false")
    seven = got[f"otel:{TRACE}#a-7"]
    assert (seven["error_type"], seven["taxonomy"], seven["annotator_kind"]) == ('{"b":[1,2]}', "expected", "llm")
    assert json.loads(seven["extra"])["value"] == {"b": [1, 2]}
    assert json.loads(seven["extra"])["assessment_type"] == "expectation"
    assert graphs[0].tables["graphs"]["n_annotations"][0].as_py() == 3
    assert graphs[0].tables["graphs"]["n_operations"][0].as_py() == 2


def test_whole_file_problems(tmp_path: Path) -> None:
    pretty = json.dumps(trace([span(ROOT, None)], [feedback("a-1", ROOT)]), indent=2).encode()
    cases = {"empty.json": b"  \n", "broken.json.gz": b"\x1f\x8b not gzip", "page.json": b'{"traces": {}}',
             "none.json": b'{"traces": []}', "cut.json": pretty[:300]}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    _, errors = read_source(tmp_path)
    # a cut document is one error where it breaks off, not one per line
    last_line = pretty[:300].count(b"\n") + 1
    assert {(file, e.kind, e.position and e.position.partition(" column")[0]) for file, e in errors} == {
        ("empty.json", "empty_file", None), ("broken.json.gz", "unreadable", None),
        ("page.json", "wrong_field_type", "$.traces"), ("page.json", "no_records", None),
        ("none.json", "no_records", None), ("cut.json", "invalid_json", f"line {last_line}")}


def test_what_python_json_writes_and_orjson_refuses(tmp_path: Path) -> None:
    """NaN and integers past 64 bits, as Python's json.dumps writes them, in a pretty-printed trace."""
    record = trace([span(ROOT, None)], [feedback("a-1", ROOT, value=float("nan")),
                                         feedback("a-2", None, value=1 << 70)])
    (tmp_path / "t.json").write_text(json.dumps(record, indent=2))
    graphs, errors = read_source(tmp_path)
    assert errors == []
    assert sorted((r["error_type"], json.loads(r["extra"])["value_type"]) for r in rows(graphs, "annotations")) == [
        (str(1 << 70), "number"), ("NaN", "number")]


def test_a_span_of_another_trace_is_rejected_alone(tmp_path: Path) -> None:
    stray = span("00000000000000c3", ROOT, trace="11111111111111111111111111111111")
    (tmp_path / "t.json").write_text(json.dumps(trace([span(ROOT, None), stray], [feedback("a-1", ROOT)])))
    graphs, errors = read_source(tmp_path)
    assert [(e.kind, e.position) for _, e in errors] == [("wrong_field_type", "$.data.spans[1].trace_id")]
    assert [r["op_id"] for r in rows(graphs, "operations")] == [ROOT]
    assert len(rows(graphs, "annotations")) == 1


def test_mlflow2_spans_and_frame_rows(tmp_path: Path) -> None:
    """MLflow 2's span shape (context with 0x hex ids, parent_id, start_time, status_code) and a row of
    search_traces()'s frame without its trace column."""
    v2 = {"info": {"request_id": "5f0c1a2b3c4d4e5f8a9b0c1d2e3f4a5b", "experiment_id": "0", "status": "ERROR"},
          "data": {"request": "{\"q\": 1}", "response": None, "spans": [
              {"name": "root", "context": {"trace_id": f"0x{TRACE}", "span_id": f"0x{ROOT}"}, "parent_id": None,
               "start_time": 1_700_000_000_000_000_000, "end_time": 1_700_000_000_000_001_000,
               "status_code": "ERROR", "status_message": "boom", "span_type": "CHAIN",
               "attributes": {"mlflow.spanType": "\"CHAIN\"", "mlflow.spanInputs": "\"hi\""},
               "events": [{"name": "exception", "timestamp": 1_700_000_000_000_000_500,
                           "attributes": {"exception.message": "42"}}]}]}}
    frame_row = {"trace_id": "tr-x", "state": "OK", "spans": [span(ROOT, None, trace="22" * 16)],
                 "assessments": [feedback("a-1", ROOT)]}
    (tmp_path / "v2.json").write_text(json.dumps(v2))
    (tmp_path / "frame.jsonl").write_text(json.dumps(frame_row) + "\n")
    graphs, errors = read_source(tmp_path)
    assert errors == []
    by_id = {g.graph_id: g for g in graphs}
    v2_ops = by_id[f"otel:{TRACE}"].tables["operations"].to_pylist()
    assert [(o["op_id"], o["status"], o["status_message"], o["category"]) for o in v2_ops] == [
        (ROOT, "error", "boom", "CHAIN")]
    nodes = {n["name"]: n["value"] for n in by_id[f"otel:{TRACE}"].tables["nodes"].to_pylist()}
    assert nodes == {"input.value": "hi", "exception.0": "42"}  # event attributes are not JSON text
    metadata = json.loads(by_id[f"otel:{TRACE}"].tables["graphs"]["metadata"][0].as_py())["mlflow"]
    assert metadata["request_id"] == v2["info"]["request_id"] and metadata["data"]["request"] == "{\"q\": 1}"
    assert [r["faulty_op_id"] for r in rows([by_id["otel:" + "22" * 16]], "annotations")] == [ROOT]


FUZZ_TRACE = trace([span(ROOT, None), span(CHILD, ROOT, events=[
    {"name": "exception", "time_unix_nano": 1_700_000_000_000_000_050, "attributes": {"exception.message": "x"}}])],
    [feedback("a-1", CHILD), feedback("a-2", None, value=True),
     {"assessment_id": "a-3", "assessment_name": "e", "source": {"source_type": "CODE"},
      "expectation": {"serialized_value": {"serialization_format": "JSON_FORMAT", "value": "[1]"}}}])


@FUZZ
@given(doc=mutated(FUZZ_TRACE))
def test_reader_survives_structural_mutations(doc: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A mutated trace yields canonical rows or IngestErrors, never another exception."""
    root = tmp_path_factory.mktemp("fuzz")
    (root / "t.json").write_bytes(dump(doc))
    (root / "t.jsonl").write_bytes(dump(doc) + b"\n" + dump(FUZZ_TRACE) + b"\n")
    read_everything("mlflow", root)


@FUZZ
@given(data=byte_mutated(json.dumps(FUZZ_TRACE, indent=1).encode()))
def test_reader_survives_byte_mutations(data: bytes, tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.mktemp("fuzz")
    (root / "t.json").write_bytes(data)
    read_everything("mlflow", root)


# -- a build over the shared sample ------------------------------------------------------------------


@needs_sample
def test_build_shows_the_assessments(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    summary = build_warehouse(warehouse, [f"mlflow={SAMPLE}"])
    assert summary.failed_checks == []
    _, want = expected_of([json.loads(path.read_text()) for path in sorted(SAMPLE.glob("*.json"))])
    got = query(warehouse, "select annotation_id, graph_id, taxonomy, error_type, reason, faulty_op_id, annotator_kind,"
                           " json_extract_string(extra, '$.source_id') from annotations")
    assert {r[0]: r[1:] for r in got} == want
    assert query(warehouse, "select count(*), sum(n_annotations), sum(n_operations) from graphs") == [(6, 7, 44)]
    # each label located at its span in the failure views' source
    located = query(warehouse, "select count(*) from failures() f join operations o "
                               "on o.graph_id = f.graph_id and o.op_id = f.faulty_op_id")
    assert located == [(7,)]
    assert query(warehouse, "select count(*) from ingest_errors") == [(0,)]


# -- the real MLflow (slow: a second environment) ------------------------------------------------------


def mlflow_env(workdir: Path) -> dict[str, str]:
    return {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{workdir / 'mlflow.db'}",
            "PYTHONIOENCODING": "utf-8", "MLFLOW_ENABLE_ASYNC_TRACE_LOGGING": "false"}


def run(command: list[str], workdir: Path) -> str:
    done = subprocess.run(command, cwd=workdir, env=mlflow_env(workdir), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{command} failed:\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.slow
def test_real_mlflow_traces_and_assessments(tmp_path: Path) -> None:
    python = python_for(REQUIREMENTS)
    cli = python.parent / "mlflow"
    workdir = tmp_path / "mlflow"
    workdir.mkdir()
    exports = tmp_path / "exports"
    run([str(python), str(MAKE_TRACES), str(exports / "api")], workdir)
    made = json.loads((exports / "api" / "made.json").read_text())
    (exports / "api" / "made.json").rename(tmp_path / "made.json")
    (exports / "get").mkdir()
    for t in made["traces"]:
        text = run([str(cli), "traces", "get", "--trace-id", t["trace_id"]], workdir)
        (exports / "get" / f"{t['trace_id']}.json").write_text(text)
    (exports / "search").mkdir()
    (exports / "search" / "page.json").write_text(
        run([str(cli), "traces", "search", "--experiment-id", made["experiment_id"], "--output", "json"], workdir))

    want_ops = {(f"otel:{t['trace_id'].removeprefix('tr-')}", s["span_id"]): (s["name"], s["parent_id"])
                for t in made["traces"] for s in t["spans"]}
    want_annotations = {
        f"otel:{t['trace_id'].removeprefix('tr-')}#{a['assessment_id']}": (
            a["name"], a["value"] if isinstance(a["value"], str) else json.dumps(a["value"], separators=(",", ":"),
                                                                   ensure_ascii=False),
            a["rationale"], a["span_id"], KINDS[a["source_type"]])
        for t in made["traces"] for a in t["assessments"]}
    assert len(want_ops) == 15 and len(want_annotations) == 11
    for name in ("get", "search", "api/search_list.jsonl", "api/search_frame.jsonl"):
        graphs, errors = read_source(exports / name)
        assert errors == [], name
        ops = {(r["graph_id"], r["op_id"]): (r["op_name"], r["parent_op_id"]) for r in rows(graphs, "operations")}
        assert ops == want_ops, name
        got = {r["annotation_id"]: (r["taxonomy"], r["error_type"], r["reason"], r["faulty_op_id"], r["annotator_kind"])
               for r in rows(graphs, "annotations")}
        assert got == want_annotations, name
        # the failing step and its exception, the token usage, the sessions of the traces that have one
        failed = [r for r in rows(graphs, "operations") if r["status"] == "error"]
        assert [(r["op_name"], r["status_message"]) for r in failed] == [
            ("retriever.step2", "RuntimeError: the tool timed out")]
        exceptions = [n["value"] for n in rows(graphs, "nodes") if n["class_name"] == "exception"]
        assert exceptions == ["the tool timed out"]
        assert {r["input_tokens"] for r in rows(graphs, "operations") if r["category"] == "LLM"} == {10}
        assert sorted(r["session_id"] for r in rows(graphs, "sessions")) == ["session-0", "session-1"]
        assert sorted(u for u in (r["user_id"] for r in rows(graphs, "graphs")) if u) == ["user-0", "user-2"]
