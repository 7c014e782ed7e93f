"""The OpenTelemetry sources (otlp, otel_spans): real builds of the shared traces, of traces split
over files and folders, gzip and base64 ids, bad and hostile input, and OTLP written by the real
OpenTelemetry SDK. Every expected count is computed from the files here, independently of the readers."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from conftest import SHARED_DATA, build_warehouse, query
from fuzzing import FUZZ, byte_mutated, dump, mutated, read_everything, write
from hypothesis import given
from otlp_files import otlp_line, otlp_span, write_lines

OTEL = SHARED_DATA / "otel"
OTLP_SAMPLE = OTEL / "otlp-sample" / "otlp"
ANYAGENT = OTEL / "anyagent"


def needs_otel_data() -> pytest.MarkDecorator:
    return pytest.mark.skipif(not (OTLP_SAMPLE.is_dir() and ANYAGENT.is_dir()),
                              reason="../shared/data/otel (any-agent and OTLP/JSON sample traces) is not present")


def otlp_spans(lines: list[str]) -> list[dict]:
    """Every span of OTLP/JSON request lines, with its resource attributes, as plain dicts."""
    spans = []
    for line in lines:
        if not line.strip():
            continue
        for rs in json.loads(line)["resourceSpans"]:
            resource = {a["key"]: a["value"] for a in rs.get("resource", {}).get("attributes", [])}
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    spans.append({**span, "_resource": resource})
    return spans


def to_hex(value: str, nbytes: int) -> str:
    return value if len(value) == 2 * nbytes else base64.b64decode(value).hex()


def per_trace(spans: list[dict]) -> dict[str, list[dict]]:
    traces: dict[str, list[dict]] = {}
    for span in spans:
        traces.setdefault(to_hex(span["traceId"], 16), []).append(span)
    return traces


def attribute(span: dict, key: str):
    value = next((a["value"] for a in span.get("attributes", []) if a["key"] == key), None)
    if value is None:
        return None
    if "intValue" in value:
        return int(value["intValue"])
    return next(iter(value.values()))


def counts(warehouse: Path) -> dict[str, tuple]:
    return {gid[5:]: (n_ops, n_nodes, n_edges, n_sessions, file, files) for gid, n_ops, n_nodes, n_edges, n_sessions,
            file, files in query(warehouse, "select graph_id, n_operations, n_nodes, n_edges, n_sessions, file, files "
                                            "from graphs where graph_id like 'otel:%'")}


@needs_otel_data()
def test_the_shared_traces_load_one_graph_per_trace_one_operation_per_span(tmp_path: Path) -> None:
    warehouse = tmp_path / "w"
    summary = build_warehouse(warehouse, [f"otlp={OTLP_SAMPLE}", f"anyagent:otel_spans={ANYAGENT}"])
    assert sorted(summary.partitions_built) == ["anyagent__anyagent", "otlp__traces"]
    assert query(warehouse, "select count(*) from ingest_errors") == [(0,)]

    # OTLP/JSON: two files, the spans of nine of the ten traces in both
    files = {p.name: p.read_text().splitlines() for p in sorted(OTLP_SAMPLE.glob("*.jsonl"))}
    spans = [dict(s, _file=name) for name, lines in files.items() for s in otlp_spans(lines)]
    traces = per_trace(spans)
    got = counts(warehouse)
    for trace_id, trace in traces.items():
        names = sorted({s["_file"] for s in trace})
        n_ops, _, _, n_sessions, file, in_files = got[trace_id]
        assert n_ops == len(trace), trace_id
        assert (file, in_files) == (names[0], names)
        assert n_sessions == len({attribute(s, "session.id") for s in trace} - {None})
    assert sum(1 for t in traces.values() if len({s["_file"] for s in t}) == 2) == 9
    # per span: parent, status, tokens, model, exceptions as the files say
    rows = {(g[5:], op): rest for g, op, *rest in query(
        warehouse, "select graph_id, op_id, parent_op_id, status, status_message, input_tokens, output_tokens, model, "
                   "category, span_kind from operations where graph_id like 'otel:%' and graph_id in "
                   "(select graph_id from graphs where source = 'otlp')")}
    assert len(rows) == len(spans)
    codes = {0: "unset", 1: "ok", 2: "error"}
    for span in spans:
        parent, status, message, tokens_in, tokens_out, model, category, kind = rows[(span["traceId"], span["spanId"])]
        assert parent == (span.get("parentSpanId") or None)
        assert status == codes[span.get("status", {}).get("code", 0)]
        assert message == (span.get("status", {}).get("message") or None)
        assert tokens_in == attribute(span, "llm.token_count.prompt")
        assert tokens_out == attribute(span, "llm.token_count.completion")
        assert model == (attribute(span, "llm.model_name") or attribute(span, "gen_ai.request.model")
                         or attribute(span, "embedding.model_name"))
        assert category == attribute(span, "openinference.span.kind")
        assert kind == "internal"
    exceptions = sum(1 for s in spans for e in s.get("events", []) if e["name"] == "exception")
    assert query(warehouse, "select count(*) from nodes where category = 'exception' and graph_id in "
                            "(select graph_id from graphs where source = 'otlp')") == [(exceptions,)]
    documents = sum(1 for s in spans for a in s.get("attributes", []) if a["key"].endswith(".document.content"))
    assert query(warehouse, "select count(*) from nodes where class_name = 'document'") == [(documents,)]
    # a trace from two files: its sha256 digests both files
    split = next(t for t, trace in traces.items() if len({s["_file"] for s in trace}) == 2)
    digest = "".join(f"{name}\0{hashlib.sha256((OTLP_SAMPLE / name).read_bytes()).hexdigest()}\n"
                     for name in sorted(files))
    assert query(warehouse, "select file_sha256, system from graphs where graph_id = ?", [f"otel:{split}"]) == [
        (hashlib.sha256(digest.encode()).hexdigest(), "heldout-agent")]
    # the span kinds take their operation types from the seed
    types = dict(query(warehouse, "select distinct category, operation_type(system, op_name, category) "
                                  "from operations where graph_id like 'otel:%'"))
    assert types["LLM"] == "response" and types["RETRIEVER"] == "retrieval" and types["TOOL"] == "tool_use"
    assert types["EMBEDDING"] == "embedding" and types["AGENT"] == "delegation"
    assert types["call_llm"] == "response" and types["execute_tool"] == "tool_use"
    assert types["invoke_agent"] == "delegation"

    # the SDK's span JSON (any-agent): one trace per file, 128-bit integer ids exact
    for path in sorted(ANYAGENT.glob("*.json")):
        record = json.loads(path.read_text())
        trace_id = f"{record['spans'][0]['context']['trace_id']:032x}"
        n_ops, _, _, _, file, in_files = got[trace_id]
        assert (n_ops, file, in_files) == (len(record["spans"]), path.name, None)
        ops = query(warehouse, "select op_id, parent_op_id, input_tokens, status, actor from operations "
                               "where graph_id = ? order by step", [f"otel:{trace_id}"])
        by_id = {f"{s['context']['span_id']:016x}": s for s in record["spans"]}
        assert {op for op, *_ in ops} == set(by_id)
        for op, parent, tokens, status, actor in ops:
            span = by_id[op]
            parent_id = (span["parent"] or {}).get("span_id")
            assert parent == (None if parent_id is None else f"{parent_id:016x}")
            assert tokens == span["attributes"].get("gen_ai.usage.input_tokens")
            assert status == span["status"]["status_code"]
            assert actor == "any_agent"
    assert query(warehouse, "select distinct system from graphs where source = 'anyagent'") == [("anyagent",)]


def base64_ids(line: str) -> str:
    """The same request with its ids in base64, as protobuf's generic JSON mapping writes them."""
    request = json.loads(line)
    for rs in request["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return json.dumps(request)


@needs_otel_data()
def test_a_trace_split_over_folders_gzip_and_base64_is_one_graph_and_a_later_batch_extends_it(tmp_path: Path) -> None:
    lines = (OTLP_SAMPLE / "traces-0.jsonl").read_text().splitlines() + \
        (OTLP_SAMPLE / "traces-1.jsonl").read_text().splitlines()
    traces = per_trace(otlp_spans(lines))
    source = tmp_path / "landing"
    half = len(lines) // 2
    write_lines(source / "a" / "batch-1.jsonl", lines[:half])
    write_lines(source / "b" / "deeper" / "batch-2.jsonl.gz", [base64_ids(x) for x in lines[half:-1]], gz=True)
    warehouse = tmp_path / "w"
    build_warehouse(warehouse, [f"otlp={source}"])
    assert query(warehouse, "select count(*) from ingest_errors where rejected") == [(0,)]
    last = per_trace(otlp_spans(lines[-1:]))
    before = per_trace(otlp_spans(lines[:-1]))
    got = counts(warehouse)
    assert {t: got[t][0] for t in got} == {t: len(s) for t, s in before.items()}
    assert query(warehouse, "select distinct split from graphs") == [("traces",)]
    assert any(files == ["a/batch-1.jsonl", "b/deeper/batch-2.jsonl.gz"] for *_, files in got.values())
    # every file is accounted for by the blocking check, and the build committed
    assert query(warehouse, "select file, n_graphs > 0, outcome from input_files order by file") == [
        ("a/batch-1.jsonl", True, "loaded"), ("b/deeper/batch-2.jsonl.gz", True, "loaded")]

    # nothing changed: the partition is kept
    again = build_warehouse(warehouse, [])
    assert (again.partitions_unchanged, again.partitions_built) == (["otlp__traces"], [])

    # the last batch arrives later, in another folder: its traces grow on the next build
    write_lines(source / "c" / "late.json", lines[-1:])
    later = build_warehouse(warehouse, [])
    assert later.partitions_built == ["otlp__traces"]
    got = counts(warehouse)
    assert {t: got[t][0] for t in got} == {t: len(s) for t, s in traces.items()}
    for trace_id in last:
        assert "c/late.json" in got[trace_id][5]
    assert query(warehouse, "select sum(n_operations) from graphs") == [(sum(len(s) for s in traces.values()),)]


HOSTILE = "<script>alert('x')</script> <b>bold</b> \x01\x1b[31m 日本語のテキスト \u202e & \"quotes\""


def test_bad_lines_and_spans_go_to_ingest_errors_and_hostile_text_survives(tmp_path: Path) -> None:
    trace = "0af7651916cd43dd8448eb211c80319c"
    source = tmp_path / "otlp"
    good = otlp_line([
        otlp_span(trace, "b7ad6b7169203331", name=HOSTILE, input__value=HOSTILE, output__value="ok",
             session__id="sess-1", openinference__span__kind="LLM", llm__token_count__prompt=12),
        otlp_span(trace, "00f067aa0ba902b7", "b7ad6b7169203331", name="tool", openinference__span__kind="TOOL",
             tool__parameters='{"q": 1}'),
        otlp_span(trace, "00f067aa0ba902b7", "b7ad6b7169203331", name="tool", openinference__span__kind="TOOL",
             tool__parameters='{"q": 1}'),  # an exporter's retry: identical, kept once
    ], service="unknown_service:python")
    no_ids = otlp_line([{"name": "no ids"}])
    bad_id = otlp_line([otlp_span("xyz", "b7ad6b7169203331")])
    orphan = otlp_line([otlp_span(trace, "1111111111111111", "2222222222222222", name="orphan")])
    zero_parent = otlp_line([otlp_span("1" * 32, "aaaaaaaaaaaaaaaa", "0" * 16, name="root")])  # zeros: no parent
    write_lines(source / "x.jsonl", [good, "{not json", no_ids, "", bad_id, orphan, zero_parent])
    write_lines(source / "empty.json", ['{"resourceSpans": []}'])
    warehouse = tmp_path / "w"
    build_warehouse(warehouse, [f"otlp={source}"])
    errors = query(warehouse, "select file, kind, position, rejected from ingest_errors order by file, position, kind")
    assert errors == [
        ("empty.json", "no_records", None, True),
        ("x.jsonl", "duplicate_key", "line 1: resourceSpans[0].scopeSpans[0].spans[2]", False),
        ("x.jsonl", "invalid_json", "line 2 column 2", True),
        ("x.jsonl", "missing_key", "line 3: resourceSpans[0].scopeSpans[0].spans[0]", True),
        ("x.jsonl", "invalid_id", "line 5: resourceSpans[0].scopeSpans[0].spans[0]", True),
        ("x.jsonl", "dangling_reference", "line 6: resourceSpans[0].scopeSpans[0].spans[0]", False),
    ]
    assert query(warehouse, "select graph_id, n_operations, n_sessions, system from graphs order by all") == [
        (f"otel:{trace}", 3, 1, "otlp"), (f"otel:{'1' * 32}", 1, 0, "svc")]
    assert query(warehouse, "select parent_op_id from operations where op_id = 'aaaaaaaaaaaaaaaa'") == [(None,)]
    # an agent's trace is attributed as a trajectory is (every label a case)
    assert query(warehouse, "select distinct graph_kind from graph_kinds()") == [("multi_agent",)]
    assert query(warehouse, "select op_name, status, input_tokens, session_id from operations where op_id = ?",
                 ["b7ad6b7169203331"]) == [(HOSTILE, "ok", 12, "sess-1")]
    assert query(warehouse, "select value from nodes where full_node_id = ?", ["input:b7ad6b7169203331@1"]) == [
        (HOSTILE,)]
    edges = query(warehouse, "select source_full_node_id, target_full_node_id, category from edges order by all")
    assert ("input:b7ad6b7169203331@1", "output:b7ad6b7169203331@1", "span") in edges
    assert ("input:b7ad6b7169203331@1", "tool_parameters:00f067aa0ba902b7@1", "parent_input") in edges
    page = (warehouse / "dashboards" / "index.html").read_text()
    assert "<script>alert('x')</script>" not in page


def test_the_sdk_writes_what_both_readers_read(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk (the dev extra) is not installed")
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Status, StatusCode

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "sdk-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.otel")

    def run(task: str) -> None:
        with tracer.start_as_current_span("invoke_agent helper") as agent:
            agent.set_attribute("gen_ai.operation.name", "invoke_agent")
            agent.set_attribute("gen_ai.agent.name", "helper")
            agent.set_attribute("gen_ai.conversation.id", f"conv-{task}")
            with tracer.start_as_current_span("chat") as llm:
                llm.set_attribute("gen_ai.operation.name", "chat")
                llm.set_attribute("gen_ai.request.model", "m-1")
                llm.set_attribute("gen_ai.usage.input_tokens", 100)
                llm.set_attribute("gen_ai.usage.output_tokens", 7)
                llm.set_attribute("gen_ai.input.messages", json.dumps([{"role": "user", "content": task}]))
                llm.set_attribute("gen_ai.output.messages", json.dumps([{"role": "assistant", "content": "call"}]))
            with tracer.start_as_current_span("execute_tool search") as tool:
                tool.set_attribute("gen_ai.operation.name", "execute_tool")
                tool.set_attribute("gen_ai.tool.call.arguments", '{"q": "x"}')
                tool.set_attribute("scores", [0.5, 1.5])
                try:
                    raise TimeoutError("search timed out")
                except TimeoutError as exc:
                    tool.record_exception(exc)
                    tool.set_status(Status(StatusCode.ERROR, "search timed out"))

    run("first")
    first = list(exporter.get_finished_spans())
    exporter.clear()
    run("second")
    second = list(exporter.get_finished_spans())

    # the first trace as OTLP/JSON, ids converted to hex (the OTLP spec), one batch per span
    otlp = tmp_path / "otlp"
    lines = []
    for i, one in enumerate(first):  # the last with protobuf's own field names (trace_id, string_value, ...)
        request = MessageToDict(encode_spans([one]), use_integers_for_enums=True,
                                preserving_proto_field_name=i == len(first) - 1)
        lines.append(json.dumps(request))
    assert '"trace_id"' in lines[-1]
    write_lines(otlp / "spans.jsonl", [base64_ids_to_hex(x) for x in lines[:1]] + lines[1:])  # base64 kept after
    # the second as the SDK's own span JSON, to_json() per span
    spans_dir = tmp_path / "spans"
    spans_dir.mkdir()
    (spans_dir / "trace.json").write_text(json.dumps({"spans": [json.loads(s.to_json()) for s in second]}))

    warehouse = tmp_path / "w"
    build_warehouse(warehouse, [f"otlp={otlp}", f"sdk:otel_spans={spans_dir}"])
    assert query(warehouse, "select count(*) from ingest_errors") == [(0,)]
    for spans, source in ((first, "otlp"), (second, "sdk")):
        gid = f"otel:{spans[0].context.trace_id:032x}"
        assert query(warehouse, "select source, system, n_operations, n_sessions from graphs where graph_id = ?",
                     [gid]) == [(source, "sdk-agent", 3, 1)]
        ops = query(warehouse, "select op_id, parent_op_id, category, status, status_message, model, input_tokens, "
                               "output_tokens, actor, epoch_us(end_time) - epoch_us(start_time) "
                               "from operations where graph_id = ?", [gid])
        by_id = {f"{s.context.span_id:016x}": s for s in spans}
        assert {row[0] for row in ops} == set(by_id)
        for op_id, parent, category, status, message, model, tokens_in, tokens_out, actor, duration in ops:
            s = by_id[op_id]
            assert parent == (f"{s.parent.span_id:016x}" if s.parent else None)
            assert category == s.attributes["gen_ai.operation.name"]
            assert status == s.status.status_code.name.lower()
            assert message == s.status.description
            assert (model, tokens_in, tokens_out) == (s.attributes.get("gen_ai.request.model"),
                                                      s.attributes.get("gen_ai.usage.input_tokens"),
                                                      s.attributes.get("gen_ai.usage.output_tokens"))
            assert actor == "helper"
            if source == "otlp":  # nanoseconds, cut to microseconds
                assert duration == s.end_time // 1000 - s.start_time // 1000
            else:  # to_json() writes ISO times, rounded to microseconds through a float
                written = json.loads(s.to_json())
                assert duration == (datetime.fromisoformat(written["end_time"])
                                    - datetime.fromisoformat(written["start_time"])) // timedelta(microseconds=1)
        assert query(warehouse, "select count(*) from nodes where category = 'exception' and graph_id = ?", [gid]) == [
            (1,)]
        first_message = "select value from nodes where graph_id = ? and full_node_id like 'message:%/input/0@1'"
        assert query(warehouse, first_message, [gid]) == [("first" if source == "otlp" else "second",)]


def base64_ids_to_hex(line: str) -> str:
    """MessageToDict writes ids in base64; the OTLP spec (and the Collector) writes hex."""
    request = json.loads(line)
    for rs in request["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if s.get(key):
                        s[key] = base64.b64decode(s[key]).hex()
    return json.dumps(request)


# -- fuzzing: a mutated file yields canonical rows or IngestErrors, never another exception --------

BASE_OTLP = json.loads(otlp_line([
    {**otlp_span("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", name="llm", session__id="s",
            openinference__span__kind="LLM", llm__input_messages__0__message__content="hi",
            llm__token_count__prompt=3, input__value="q", output__value="a"),
     "events": [{"timeUnixNano": "1700000000100000000", "name": "exception",
                 "attributes": [{"key": "exception.message", "value": {"stringValue": "boom"}}]}],
     "links": [{"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "00f067aa0ba902b7"}]},
    otlp_span("0af7651916cd43dd8448eb211c80319c", "00f067aa0ba902b7", "b7ad6b7169203331", name="tool",
         gen_ai__operation__name="execute_tool", gen_ai__tool__call__arguments="{}"),
]))
BASE_SDK_SPANS = {"spans": [
    {"name": "call_llm", "kind": "SpanKind.INTERNAL", "parent_id": "0x00f067aa0ba902b7",
     "context": {"trace_id": "0x0af7651916cd43dd8448eb211c80319c", "span_id": "0xb7ad6b7169203331"},
     "start_time": "2026-01-01T00:00:00.000001Z", "end_time": 1767225600000002000,
     "status": {"status_code": "ERROR", "description": "x"},
     "attributes": {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 5,
                    "gen_ai.input.messages": "[{\"role\": \"user\", \"content\": \"hi\"}]"},
     "events": [{"name": "exception", "timestamp": "2026-01-01T00:00:00Z", "attributes": {"exception.type": "E"}}],
     "links": [], "resource": {"attributes": {"service.name": "svc"}}},
    {"name": "invoke_agent", "kind": "internal", "parent": None,
     "context": {"trace_id": 14576827793038113322513871894673895836, "span_id": 67667974448284343},
     "start_time": 1767225600000000000, "end_time": 1767225600000009000, "status": {"status_code": "unset"},
     "attributes": {"gen_ai.agent.name": "a"}, "resource": {"attributes": {}}},
], "final_output": "done"}


def test_the_fuzz_bases_load_whole(tmp_path: Path) -> None:
    write(tmp_path / "a", "x.jsonl", dump(BASE_OTLP))
    write(tmp_path / "b", "x.json", dump(BASE_SDK_SPANS))
    for kind, root, n in (("otlp", tmp_path / "a", 2), ("otel_spans", tmp_path / "b", 2)):
        (graph,) = read_everything(kind, root)
        assert graph.tables["operations"].num_rows == n and not graph.defects


@FUZZ
@given(doc=mutated(BASE_OTLP))
def test_otlp_reader_survives_structural_mutations(doc) -> None:
    with tempfile.TemporaryDirectory() as folder:
        write(Path(folder), "x.jsonl", dump(doc) + b"\n" + dump(BASE_OTLP))
        read_everything("otlp", Path(folder))


@FUZZ
@given(data=byte_mutated(dump(BASE_OTLP) + b"\n" + dump(BASE_OTLP)))
def test_otlp_reader_survives_byte_mutations(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        write(Path(folder), "x.jsonl", data)
        write(Path(folder), "y.jsonl.gz", gzip.compress(data))
        read_everything("otlp", Path(folder))


@pytest.mark.parametrize("field", ["events", "links", "attributes", "status", "resource"])
@pytest.mark.parametrize("value", [True, 7, "text"])
def test_a_span_field_of_the_wrong_type_is_an_ingest_error(tmp_path: Path, field: str, value: object) -> None:
    """A span's container field holding a scalar rejects that span with a reason naming the field,
    never a reader crash (the fuzzer found `"events": true` raising TypeError)."""
    doc = json.loads(dump(BASE_SDK_SPANS))
    doc["spans"][0][field] = value
    write(tmp_path, "x.json", dump(doc))
    errors = [item for item in read_everything("otel_spans", tmp_path) if not hasattr(item, "tables")]
    assert any(field in (error.position or "") + error.reason for error in errors), errors


@FUZZ
@given(doc=mutated(BASE_SDK_SPANS))
def test_otel_spans_reader_survives_structural_mutations(doc) -> None:
    with tempfile.TemporaryDirectory() as folder:
        write(Path(folder), "x.json", dump(doc))
        read_everything("otel_spans", Path(folder))


@FUZZ
@given(data=byte_mutated(dump(BASE_SDK_SPANS)))
def test_otel_spans_reader_survives_byte_mutations(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        write(Path(folder), "x.json", data)
        read_everything("otel_spans", Path(folder))
