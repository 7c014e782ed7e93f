"""Source kind ``phoenix``: Arize Phoenix's spans and span annotations, from the dataframes its client
saves (the shared sample, and frames saved here from a real Phoenix) and from a running Phoenix's
REST API (``pipelines.readers.phoenix.snapshot``). The real Phoenix runs from a second environment
(tests/second_env.py, tests/compat/phoenix.txt), started on 127.0.0.1 and stopped by its pid."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import REPO, SHARED_DATA, build_warehouse, query
from fuzzing import FUZZ, dump, mutated
from hypothesis import given
from hypothesis import strategies as st
from second_env import python_for

from pipelines import schema
from pipelines.readers import phoenix
from pipelines.readers.base import GraphRows, IngestError, Labels

SAMPLE = SHARED_DATA / "platforms" / "phoenix"
REQUIREMENTS = REPO / "tests" / "compat" / "phoenix.txt"
SEND = REPO / "tests" / "fixtures" / "phoenix" / "send.py"
needs_sample = pytest.mark.skipif(not SAMPLE.is_dir(), reason=f"{SAMPLE} (Phoenix's saved frames) is not present")


def read_folder(folder: Path, source: str = "phx") -> tuple[list[GraphRows], list[tuple[str, IngestError]], int]:
    """Every graph, every (file, error) and the labels the reader yields for a folder."""
    graphs, errors, labels = [], [], 0
    for file in phoenix.discover(folder, source):
        for item in phoenix.read(file):
            if isinstance(item, GraphRows):
                graphs.append(item)
                errors += [(file.relpath, defect) for defect in item.defects]
            elif isinstance(item, Labels):
                labels += item.n
            else:
                errors.append((file.relpath, item))
    return graphs, errors, labels


def rows(graphs: list[GraphRows], table: str) -> list[dict[str, Any]]:
    return [row for graph in graphs for row in graph.tables[table].to_pylist()]


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@needs_sample
def test_the_saved_sample_frames_load_every_span_and_annotation() -> None:
    spans = pq.read_table(SAMPLE / "spans.parquet").to_pylist()
    notes = jsonl(SAMPLE / "span_annotations.jsonl")
    graphs, errors, labels = read_folder(SAMPLE)
    assert errors == []
    operations = rows(graphs, "operations")
    assert len(operations) == len(spans)
    assert {(f"otel:{s['context.trace_id']}", s["context.span_id"], s["parent_id"], s["span_kind"], s["name"])
            for s in spans} == {(o["graph_id"], o["op_id"], o["parent_op_id"], o["category"], o["op_name"])
                                for o in operations}
    assert len(graphs) == len({s["context.trace_id"] for s in spans})
    annotations = rows(graphs, "annotations")
    assert labels == len(annotations) == len(notes)
    trace_of = {s["context.span_id"]: s["context.trace_id"] for s in spans}
    loaded = [(a["graph_id"], a["faulty_op_id"], a["error_type"], a["taxonomy"], a["reason"], a["annotator_kind"],
               json.loads(a["extra"])["annotator_kind"], json.loads(a["extra"])["id"]) for a in annotations]
    assert sorted(loaded) == sorted(
        (f"otel:{trace_of[n['span_id']]}", n["span_id"], n["result.label"], n["annotation_name"],
         n["result.explanation"], phoenix.ANNOTATOR_KINDS[n["annotator_kind"]], n["annotator_kind"], n["id"])
        for n in notes)
    # a graph counts its own annotations
    assert {g.graph_id: g.tables["graphs"]["n_annotations"][0].as_py() for g in graphs} == {
        g.graph_id: sum(a["graph_id"] == g.graph_id for a in annotations) for g in graphs}


@needs_sample
def test_a_build_puts_the_annotations_in_the_warehouse(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    summary = build_warehouse(warehouse, [f"phx:phoenix={SAMPLE}"])
    assert summary.failed_checks == []
    notes = jsonl(SAMPLE / "span_annotations.jsonl")
    n_spans = pq.read_metadata(SAMPLE / "spans.parquet").num_rows
    assert query(warehouse, "select count(*) from operations") == [(n_spans,)]
    assert sorted(query(warehouse, "select faulty_op_id, error_type, taxonomy, reason, annotator_kind, provenance, "
                                   "json_extract_string(extra, '$.source') from annotations")) == sorted(
        (n["span_id"], n["result.label"], n["annotation_name"], n["result.explanation"], "human", "phoenix",
         n["source"]) for n in notes)
    # every annotation sits on an operation of its own graph
    assert query(warehouse, "select count(*) from annotations a join operations o "
                            "on o.graph_id = a.graph_id and o.op_id = a.faulty_op_id") == [(len(notes),)]
    assert query(warehouse, "select count(*) from ingest_errors") == [(0,)]


def annotation_line(span_id: str, **fields: Any) -> dict[str, Any]:
    return {"span_id": span_id, "id": f"note-{span_id}", "annotation_name": "failure_mode", "annotator_kind": "LLM",
            "metadata": {}, "identifier": "", "source": "API", "result.label": "Timeout", "result.score": 0.5,
            "result.explanation": "slow", **fields}


@needs_sample
def test_what_cannot_be_read_is_named_and_the_rest_loads(tmp_path: Path) -> None:
    folder = tmp_path / "phoenix"
    folder.mkdir()
    shutil.copy(SAMPLE / "spans.parquet", folder / "saved-spans.parquet")  # recognised by columns, not by name
    span = pq.read_table(SAMPLE / "spans.parquet").to_pylist()[0]["context.span_id"]
    lines = [annotation_line(span), annotation_line("1234567890abcdef"), annotation_line("not-an-id"),
             annotation_line(span, id="other", **{"result.label": 7}), annotation_line(span)]
    (folder / "labels.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    (folder / "other.json").write_text(json.dumps([{"trace": "x", "value": 1}]))
    without_index = {k: v for k, v in annotation_line(span).items() if k != "span_id"}
    (folder / "no_index.jsonl").write_text(json.dumps(without_index) + "\n")
    graphs, errors, labels = read_folder(folder)
    found = sorted((file, error.kind, error.position) for file, error in errors)
    assert found == [
        ("labels.jsonl", "dangling_reference", "line 2 $.span_id"),
        ("labels.jsonl", "invalid_id", "line 3 $.span_id"),
        ("labels.jsonl", "wrong_field_type", "line 4 $.result.label"),
        ("no_index.jsonl", "missing_key", "line 1"),
        ("other.json", "missing_key", "$[0]"),
        # an identical repeat: kept once, noted with the graph it belongs to
        ("saved-spans.parquet", "duplicate_key", "labels.jsonl line 5"),
    ]
    reasons = {error.kind: error.reason for _, error in errors}
    assert "1234567890abcdef" in reasons["dangling_reference"]
    assert "reset_index" in next(e.reason for f, e in errors if f == "no_index.jsonl")
    assert "context.span_id" in next(e.reason for f, e in errors if f == "other.json")
    assert [(a["faulty_op_id"], a["annotator_kind"], json.loads(a["extra"])["score"])
            for a in rows(graphs, "annotations")] == [(span, "llm", 0.5)]
    assert labels == 1 and len(rows(graphs, "operations")) == pq.read_metadata(SAMPLE / "spans.parquet").num_rows


def test_nested_attributes_and_pandas_json_times(tmp_path: Path) -> None:
    """Phoenix's frames hold OpenInference's lists nested (a list of message objects); pandas writes
    a JSON frame's times as integer ms. Both read as the OTel spans they came from."""
    messages = pa.array([[{"message.role": "user", "message.content": "hi"},
                          {"message.role": "assistant", "message.content": "hello"}], None],
                        pa.list_(pa.struct([("message.role", pa.string()), ("message.content", pa.string())])))
    table = pa.table({
        "name": ["llm", "agent"], "span_kind": ["LLM", "AGENT"], "parent_id": ["00000000000000aa", None],
        "start_time": pa.array([1_700_000_000_123_456_789, 1_700_000_000_000_000_000], pa.timestamp("ns", "UTC")),
        "end_time": pa.array([1_700_000_001_000_000_000, 1_700_000_002_000_000_000], pa.timestamp("ns", "UTC")),
        "status_code": ["ERROR", "OK"], "status_message": ["boom", ""],
        "context.span_id": ["00000000000000bb", "00000000000000aa"], "context.trace_id": ["0" * 31 + "1"] * 2,
        "attributes.llm.input_messages": messages, "attributes.llm.token_count.prompt": [12.0, float("nan")],
    })
    (tmp_path / "parquet").mkdir()
    pq.write_table(table, tmp_path / "parquet" / "spans.parquet")
    graphs, errors, _ = read_folder(tmp_path / "parquet")
    assert errors == []
    assert phoenix.discover(tmp_path / "parquet" / "spans.parquet", "phx") == []  # a source is a folder
    nodes = rows(graphs, "nodes")
    assert [(n["full_node_id"], n["value"]) for n in nodes if n["class_name"] == "message"] == [
        ("message:00000000000000bb/input/0@1", "hi"), ("message:00000000000000bb/input/1@1", "hello")]
    by_op = {o["op_id"]: o for o in rows(graphs, "operations")}
    assert by_op["00000000000000bb"]["input_tokens"] == 12 and by_op["00000000000000aa"]["input_tokens"] is None
    assert by_op["00000000000000bb"]["status"] == "error" and by_op["00000000000000bb"]["category"] == "LLM"
    assert by_op["00000000000000bb"]["start_time"].microsecond == 123_456
    # the same frame as pandas' to_json writes it: times in ms
    (tmp_path / "json").mkdir()
    records = table.drop_columns(["start_time", "end_time"]).to_pylist()
    for record, start in zip(records, (1_700_000_000_123, 1_700_000_000_000), strict=True):
        record.update(start_time=start, end_time=start + 1000)
    (tmp_path / "json" / "spans.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    graphs, errors, _ = read_folder(tmp_path / "json")
    assert errors == []
    assert {o["op_id"]: o["start_time"].isoformat() for o in rows(graphs, "operations")} == {
        "00000000000000bb": "2023-11-14T22:13:20.123000", "00000000000000aa": "2023-11-14T22:13:20"}


def test_a_phoenix_url_is_a_source_other_kinds_refuse(tmp_path: Path) -> None:
    """A phoenix source may be a running Phoenix's project: its snapshot folder is under the cache,
    and a build record keeps its URL (a rebuild without --source syncs it again). Another kind given
    an http URL is refused naming it and the kinds that take one, not looked for on disk as "http:/..."."""
    from pipelines.config import from_recorded, parse_source, recorded_form
    from pipelines.errors import ConfigError
    from pipelines.storage.remote import StoreOptions

    storage = StoreOptions(cache=tmp_path / "cache")
    source = parse_source("phx:phoenix=http://127.0.0.1:6006/my%20project/", storage=storage)
    assert (source.url, source.kind) == ("http://127.0.0.1:6006/my%20project", "phoenix")
    assert source.path.parent == tmp_path / "cache" / "http"
    assert source.path.name.startswith("127_0_0_1_6006_my_20project-")
    other = parse_source("phx:phoenix=http://127.0.0.1:6006/other", storage=storage)
    assert other.path != source.path and other.path.parent == source.path.parent
    entry = recorded_form(source, tmp_path / "warehouse")
    assert (entry["path"], entry["url"]) == (source.url, source.url)
    assert from_recorded(entry, tmp_path / "warehouse", storage) == source

    with pytest.raises(ConfigError, match=r"^source o: a otlp source is a folder or an s3:// prefix, not "
                                          r"http://127\.0\.0\.1:4318/x; only phoenix sources take an http\(s\) URL"):
        parse_source("o:otlp=http://127.0.0.1:4318/x")
    with pytest.raises(ConfigError, match=r"source phx: 'http://127\.0\.0\.1:6006' is not a Phoenix project URL"):
        parse_source("phx:phoenix=http://127.0.0.1:6006")
    assert phoenix.project_url("http://127.0.0.1:6006/prefix/my%20project/") == (
        "http://127.0.0.1:6006/prefix", "my project")


def test_a_phoenix_that_does_not_answer_stops_the_sync_in_one_line(tmp_path: Path) -> None:
    """The dispatcher saves a Phoenix source from its server; none listening on the port is one line
    naming the source and the URL, and the folder is left as it was."""
    from pipelines.builds.source_sync import SourceUnreachable, sync_source
    from pipelines.config import parse_source
    from pipelines.storage.remote import StoreOptions

    storage = StoreOptions(cache=tmp_path / "cache")
    url = f"http://127.0.0.1:{free_port()}/demo"  # bound and released: nothing listens there
    source = parse_source(f"px:phoenix={url}", storage=storage)
    source.path.mkdir(parents=True)
    (source.path / "spans.jsonl").write_text('{"kept": true}\n')
    with pytest.raises(SourceUnreachable) as raised:
        sync_source(source, storage)
    said = str(raised.value)
    assert said.startswith(f"source px: Phoenix at {url}: ") and "\n" not in said, said
    assert said.endswith("nothing was built from it, and the last committed build stands"), said
    assert (source.path / "spans.jsonl").read_text() == '{"kept": true}\n'


FRAME_SPAN = {"name": "llm", "span_kind": "LLM", "parent_id": None, "start_time": 1_700_000_000_123,
              "end_time": 1_700_000_000_456, "status_code": "ERROR", "status_message": "x",
              "events": [{"name": "exception", "timestamp": "2023-11-14T22:13:20Z",
                          "attributes": {"exception.message": "boom"}}],
              "context.span_id": "00000000000000bb", "context.trace_id": "0" * 31 + "1",
              "attributes.llm.input_messages": [{"message.role": "user", "message.content": "hi"}],
              "attributes.llm.token_count.prompt": 3.0}
REST_SPAN = {"id": "U3Bhbjox", "name": "tool", "context": {"trace_id": "0" * 31 + "1", "span_id": "00000000000000cc"},
             "span_kind": "TOOL", "parent_id": "00000000000000bb", "start_time": "2023-11-14T22:13:20.5+00:00",
             "end_time": "2023-11-14T22:13:21+00:00", "status_code": "OK", "status_message": "",
             "attributes": {"input.value": "q", "output.value": "r"}, "events": []}
FRAME_NOTE = annotation_line("00000000000000bb")
REST_NOTE = {"id": "n2", "span_id": "00000000000000cc", "name": "judge", "annotator_kind": "CODE",
             "result": {"label": None, "score": 1.0, "explanation": None}, "metadata": {"k": 1}, "identifier": ""}


@FUZZ
@given(spans=st.lists(st.sampled_from([FRAME_SPAN, REST_SPAN]).flatmap(mutated), min_size=1, max_size=3),
       notes=st.lists(st.sampled_from([FRAME_NOTE, REST_NOTE]).flatmap(mutated), min_size=1, max_size=3))
def test_the_reader_survives_mutated_records(spans: list[Any], notes: list[Any]) -> None:
    """Whatever the records hold, the reader yields canonical rows, labels or named ingest errors."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "spans.jsonl").write_bytes(b"\n".join(dump(record) for record in spans))
        (root / "span_annotations.jsonl").write_bytes(b"\n".join(dump(record) for record in notes))
        graphs, errors, labels = read_folder(root)
        for graph in graphs:
            for name, table in graph.tables.items():
                assert table.schema.equals(schema.GRAPH_TABLES[name])
                table.validate(full=True)
        assert all(error.kind and error.reason for _, error in errors)
        assert labels == len(rows(graphs, "annotations"))


# -- a real Phoenix ----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def phoenix_server(tmp_path: Path):
    """``python -m phoenix.server.main serve`` from the second environment, its SQLite database in
    tmp_path; yields (its base URL, its Python, its process: a test may stop it first)."""
    python = python_for(REQUIREMENTS)
    port, grpc_port = free_port(), free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(tmp_path / "phoenix-home"), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(grpc_port), "PHOENIX_TELEMETRY_ENABLED": "false"}
    log_path = tmp_path / "phoenix.log"
    with log_path.open("w") as log:
        server = subprocess.Popen([str(python), "-m", "phoenix.server.main", "serve"], env=env, stdout=log,
                                  stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300  # a slow start on a busy machine; not a measurement
        while True:
            try:
                urllib.request.urlopen(f"{base}/healthz", timeout=2).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"Phoenix did not start on {base}:\n{log_path.read_text()[-3000:]}") from None
                time.sleep(0.5)
        yield base, python, server
    finally:
        if server.poll() is None:
            os.kill(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(server.pid, signal.SIGKILL)
                server.wait(timeout=30)


@pytest.mark.slow
def test_a_running_phoenix_and_its_saved_frames(phoenix_server, tmp_path: Path) -> None:
    base, python, _ = phoenix_server
    project = "tracehouse-test"
    frames = tmp_path / "frames"
    sent = json.loads(subprocess.run([str(python), str(SEND), base, project, str(frames)], check=True,
                                     capture_output=True, text=True, timeout=900).stdout)
    live = tmp_path / "live"
    said = subprocess.run([sys.executable, "-m", "pipelines.readers.phoenix", f"{base}/{project}", str(live)],
                          check=True, capture_output=True, text=True, cwd=REPO).stdout
    assert said == f"{live}: {len(sent['spans'])} spans, {len(sent['annotations'])} span annotations\n"
    again = phoenix.snapshot(f"{base}/{project}", live)
    assert (again.spans, again.annotations, again.changed) == (len(sent["spans"]), len(sent["annotations"]), False)
    with pytest.raises(phoenix.PhoenixUnavailable, match="404"):
        phoenix.snapshot(f"{base}/no-such-project", tmp_path / "none")

    sent_ops = {(f"otel:{s['trace_id']}", s["span_id"], s["kind"]) for s in sent["spans"]}
    sent_notes = sorted((n["span_id"], n.get("label"), n["annotation_name"], n.get("explanation"),
                         n["annotator_kind"].lower(), n.get("score")) for n in sent["annotations"])
    seen = {}
    for name, folder in (("live", live), ("parquet", frames / "parquet"), ("jsonl", frames / "jsonl")):
        graphs, errors, labels = read_folder(folder)
        assert errors == [], name
        operations = rows(graphs, "operations")
        assert {(o["graph_id"], o["op_id"], o["category"]) for o in operations} == sent_ops, name
        assert len(operations) == len(sent["spans"])
        annotations = rows(graphs, "annotations")
        assert labels == len(annotations) == len(sent["annotations"]), name
        assert sorted((a["faulty_op_id"], a["error_type"], a["taxonomy"], a["reason"], a["annotator_kind"],
                       json.loads(a["extra"])["score"]) for a in annotations) == sent_notes, name
        nodes = rows(graphs, "nodes")
        seen[name] = (
            sorted(a["annotation_id"] for a in annotations),
            sorted((n["graph_id"], n["full_node_id"], n["value"]) for n in nodes),
            sorted((o["op_id"], o["parent_op_id"], o["status"], o["model"], o["input_tokens"], o["session_id"])
                   for o in operations))
        # the failing tool spans' exception events and the LLM spans' messages are nodes
        failing = {o["op_id"] for o in operations if o["status"] == "error"}
        assert failing and {n["full_node_id"].split(":")[1].split("/")[0] for n in nodes
                            if n["class_name"] == "exception"} == failing, name
        assert sum(n["class_name"] == "message" for n in nodes) == 3 * sum(s["kind"] == "LLM" for s in sent["spans"])
    # the server's records and the client's frames give the same annotation ids, nodes and operations
    assert seen["live"] == seen["parquet"] == seen["jsonl"]


# a label added in Phoenix after a build, with its Python client (argv: base URL, span id)
ADD_ANNOTATION = ("import sys\nfrom phoenix.client import Client\n"
                  "Client(base_url=sys.argv[1]).spans.add_span_annotation(sync=True, span_id=sys.argv[2], "
                  "annotation_name='failure_mode', annotator_kind='HUMAN', label='Premature Termination', "
                  "explanation='added after the first build')\n")


def tracehouse_build(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`tracehouse build` as a user runs it, its source mirrors under ``cwd``'s cache."""
    env = {**os.environ, "TRACEHOUSE_CACHE": str(cwd / "cache"), "GX_ANALYTICS_ENABLED": "false"}
    env.pop("TRACEHOUSE_CONFIG", None)
    env.pop("TRACEHOUSE_WAREHOUSE", None)
    return subprocess.run([sys.executable, "-m", "pipelines.interfaces.cli",
                           "build", "--warehouse", str(cwd / "warehouse"),
                           *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def built_labels(warehouse: Path) -> list[tuple]:
    return query(warehouse, "select faulty_op_id, error_type, taxonomy, reason, annotator_kind from annotations "
                            "where provenance = 'phoenix' order by all")


@pytest.mark.slow
def test_a_running_phoenix_is_a_source_of_builds(phoenix_server, tmp_path: Path) -> None:
    """`--source px:phoenix=http://HOST:PORT/PROJECT`: the build saves the project and builds its spans
    and annotations; a rebuild without the flag (the record keeps the URL) brings a label added since;
    a project that holds nothing now, or a server that is down, stops the build in one line and the
    last build stands whole."""
    base, python, server = phoenix_server
    project = "live-source"
    sent = json.loads(subprocess.run([str(python), str(SEND), base, project, str(tmp_path / "frames")], check=True,
                                     capture_output=True, text=True, timeout=900).stdout)
    url = f"{base}/{project}"
    warehouse = tmp_path / "warehouse"

    first = tracehouse_build(tmp_path, "--source", f"px:phoenix={url}")
    assert first.returncode == 0, first.stderr
    assert f"source px: {len(sent['spans'])} spans and {len(sent['annotations'])} span annotations from {url}" \
        in first.stderr
    assert query(warehouse, "select g.source, count(*) from operations join graphs g using (graph_id) "
                            "group by all") == [("px", len(sent["spans"]))]
    assert {op for (op,) in query(warehouse, "select op_id from operations")} == {s["span_id"] for s in sent["spans"]}
    labels = built_labels(warehouse)
    assert len(labels) == len(sent["annotations"])
    assert sorted((n["span_id"], n.get("label"), n["annotation_name"], n.get("explanation"),
                   n["annotator_kind"].lower()) for n in sent["annotations"]) == sorted(labels)
    record = json.loads(max((warehouse / "builds").glob("*.json")).read_text())
    assert [(s["name"], s["kind"], s.get("url")) for s in record["sources"]] == [("px", "phoenix", url)]

    agent = next(s["span_id"] for s in sent["spans"] if s["kind"] == "AGENT")
    subprocess.run([str(python), "-c", ADD_ANNOTATION, base, agent], check=True, capture_output=True, timeout=300)
    second = tracehouse_build(tmp_path)  # no --source: the recorded URL is saved again
    assert second.returncode == 0, second.stderr
    assert "2 files rewritten" not in second.stderr and "1 files rewritten" in second.stderr, second.stderr
    after = built_labels(warehouse)
    assert sorted(set(after) - set(labels)) == [
        (agent, "Premature Termination", "failure_mode", "added after the first build", "human")]
    assert len(after) == len(labels) + 1
    standing = (query(warehouse, "select count(*) from operations"), after)
    builds = sorted(p.name for p in (warehouse / "builds").glob("*.json"))

    # a project that holds no spans (Phoenix's own empty default) given as the source's new place:
    # refused as an emptied source, nothing removed
    emptied = tracehouse_build(tmp_path, "--source", f"px:phoenix={base}/default")
    assert emptied.returncode == 2, emptied.stderr
    refusal = [line for line in emptied.stderr.splitlines() if line.startswith("tracehouse:")]
    assert len(refusal) == 1 and "Traceback" not in emptied.stderr, emptied.stderr
    assert refusal[0].startswith(f"tracehouse: source px: {base}/default lists no phoenix files, but build "), refusal

    os.kill(server.pid, signal.SIGTERM)
    server.wait(timeout=60)
    down = tracehouse_build(tmp_path)
    assert down.returncode == 1, down.stderr
    errors = [line for line in down.stderr.splitlines() if line.startswith("tracehouse:")]
    assert len(errors) == 1 and "Traceback" not in down.stderr, down.stderr
    assert errors[0].startswith(f"tracehouse: source px: Phoenix at {url}: "), errors
    assert errors[0].endswith("nothing was built from it, and the last committed build stands"), errors
    assert sorted(p.name for p in (warehouse / "builds").glob("*.json")) == builds
    assert (query(warehouse, "select count(*) from operations"), built_labels(warehouse)) == standing
