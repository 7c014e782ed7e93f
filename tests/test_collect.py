"""tracehouse collect: the OpenTelemetry SDK's own exporter sends spans to a real receiver, which is
then killed; a plain build holds every acknowledged span. Bodies as protobuf, JSON and gzip; the
answers to malformed, oversized, unauthorized and misdirected requests; a landing file that cannot
grow (a real file-size limit) gets 503 and loses nothing acknowledged; the otlp reader reads what the
receiver writes, and leaves a line being appended for the next build."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import io
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO, build_warehouse, query

from pipelines.config import added_sources
from pipelines.interfaces.collect import SOURCE_NAME, CollectOptions, Collector
from pipelines.readers import otlp
from pipelines.readers.base import IngestError

pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk (the dev extra) is not installed")

from opentelemetry import trace  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

CLI = [sys.executable, "-m", "pipelines.interfaces.cli"]


# -- helpers ---------------------------------------------------------------------------------------------


def sdk_spans(n_traces: int, spans_per_trace: int, service: str = "agent") -> list:
    """Finished spans of the real SDK: ``n_traces`` traces of a root and its children."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.collect")
    for t in range(n_traces):
        with tracer.start_as_current_span(f"invoke_agent {t}") as root:
            root.set_attribute("gen_ai.operation.name", "invoke_agent")
            for i in range(spans_per_trace - 1):
                with tracer.start_as_current_span("chat") as llm:
                    llm.set_attribute("gen_ai.operation.name", "chat")
                    llm.set_attribute("gen_ai.input.messages", json.dumps([{"role": "user", "content": f"q{t}.{i}"}]))
    provider.shutdown()
    return list(exporter.get_finished_spans())


def protobuf_body(spans: list) -> bytes:
    return encode_spans(spans).SerializeToString()


def post(url: str, body: bytes, content_type: str = "application/x-protobuf", **headers: str) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": content_type, **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def landed_spans(folder: Path) -> dict[str, set[str]]:
    """trace id -> span ids, as the otlp reader reads the landing folder (failing on any problem)."""
    files = otlp.discover(folder, SOURCE_NAME)
    traces: dict[str, set[str]] = {}
    for _, item, _ in otlp.read_partition(files):
        assert not isinstance(item, IngestError), item
        traces[item.tables["graphs"]["graph_id"][0].as_py()[5:]] = set(item.tables["operations"]["op_id"].to_pylist())
    return traces


def sent(spans: list) -> dict[str, set[str]]:
    traces: dict[str, set[str]] = {}
    for s in spans:
        traces.setdefault(f"{s.context.trace_id:032x}", set()).add(f"{s.context.span_id:016x}")
    return traces


@pytest.fixture()
def collector(tmp_path: Path):
    """A receiver in this process on a free port of 127.0.0.1, stopped after the test."""
    started: list[Collector] = []

    def start(**options) -> Collector:
        one = Collector(tmp_path / "w", CollectOptions(port=0, **options), log=io.StringIO()).start()
        started.append(one)
        return one

    yield start
    for one in started:
        one.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Process:
    """``tracehouse collect`` as a process of its own, stderr in a file; killed by its pid at the end."""

    def __init__(self, warehouse: Path, port: int, log: Path, *args: str, preexec_fn=None) -> None:
        self.log = log
        with open(log, "ab") as err:
            self.proc = subprocess.Popen([*CLI, "collect", "--warehouse", str(warehouse), "--port", str(port), *args],
                                         cwd=REPO, stdout=subprocess.DEVNULL, stderr=err, preexec_fn=preexec_fn)
        deadline = time.monotonic() + 60
        while "listening on" not in log.read_text():
            assert self.proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{port}/v1/traces"

    def signal(self, signum: int) -> int:
        os.kill(self.proc.pid, signum)
        return self.proc.wait(timeout=60)

    def close(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


@pytest.fixture()
def processes():
    started: list[Process] = []

    def start(*args, **kwargs) -> Process:
        started.append(Process(*args, **kwargs))
        return started[-1]

    yield start
    for one in started:
        one.close()


# -- the SDK's exporter, a killed receiver, a plain build --------------------------------------------------


@pytest.mark.slow
def test_every_span_the_sdk_was_told_is_kept_survives_a_kill_and_a_later_batch_extends_its_trace(
        tmp_path: Path, processes) -> None:
    warehouse, port = tmp_path / "w", free_port()
    receiver = processes(warehouse, port, tmp_path / "collect.log")
    record = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "sdk-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(record))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=receiver.url), max_export_batch_size=512,
                                                   schedule_delay_millis=50))
    tracer = provider.get_tracer("tests.collect")
    for t in range(30):  # 30 traces of 1 to 30 spans, 465 in all
        with tracer.start_as_current_span(f"invoke_agent {t}"):
            for _ in range(t):
                with tracer.start_as_current_span("chat") as llm:
                    llm.set_attribute("gen_ai.operation.name", "chat")
    # a trace whose root is still open: its children now, the rest after the first build
    root = tracer.start_span("invoke_agent late")
    late_trace = f"{root.get_span_context().trace_id:032x}"
    with trace.use_span(root, end_on_exit=False):
        for _ in range(3):
            with tracer.start_as_current_span("execute_tool"):
                pass
    assert provider.force_flush(30_000)
    receiver.signal(signal.SIGKILL)  # no clean shutdown: only what was fsynced before each 200 is there
    first = sent(record.get_finished_spans())
    assert sum(len(s) for s in first.values()) == 465 + 3

    done = subprocess.run([*CLI, "build", "--warehouse", str(warehouse), "--quiet"], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    got = dict(query(warehouse, "select graph_id[6:], n_operations from graphs where source = 'collected'"))
    assert got == {t: len(s) for t, s in first.items()}
    for trace_id, span_ids in first.items():
        assert set(r[0] for r in query(warehouse, "select op_id from operations where graph_id = ?",
                                       [f"otel:{trace_id}"])) == span_ids
    assert query(warehouse, "select count(*) from ingest_errors where rejected") == [(0,)]

    # a receiver on the same folder again (what the killed one left is whole), then the rest of the late trace
    receiver = processes(warehouse, port, tmp_path / "collect.log")
    with trace.use_span(root, end_on_exit=True), tracer.start_as_current_span("chat"):
        pass
    assert provider.force_flush(30_000)
    provider.shutdown()
    assert receiver.signal(signal.SIGTERM) == 0
    assert "stopped: " in (tmp_path / "collect.log").read_text()
    summary = build_warehouse(warehouse, [])
    assert summary.exit_code == 0
    assert query(warehouse, "select n_operations, len(files) from graphs where graph_id = ?", [f"otel:{late_trace}"]) \
        == [(5, 2)]
    every = sent(record.get_finished_spans())
    assert dict(query(warehouse, "select graph_id[6:], n_operations from graphs")) == {
        t: len(s) for t, s in every.items()}


# -- bodies and answers -----------------------------------------------------------------------------------


def test_protobuf_json_and_gzip_bodies_land_as_otlp_json_the_reader_reads(collector) -> None:
    receiver = collector()
    spans = sdk_spans(3, 4)
    as_json = sdk_spans(2, 2, service="json-agent")
    gzipped = sdk_spans(1, 5)
    assert post(receiver.url, protobuf_body(spans)) == (200, b"")
    from google.protobuf.json_format import MessageToDict

    request = MessageToDict(encode_spans(as_json), use_integers_for_enums=True)
    for rs in request["resourceSpans"]:  # OTLP/JSON: ids as hex
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in s:
                        s[key] = base64.b64decode(s[key]).hex()
    assert post(receiver.url, json.dumps(request, indent=1).encode(), "application/json") == (200, b"{}")
    assert post(receiver.url, gzip.compress(protobuf_body(gzipped)), **{"Content-Encoding": "gzip"}) == (200, b"")
    assert post(receiver.url, protobuf_body([])) == (200, b"")  # nothing to keep, nothing written

    lines = b"".join(p.read_bytes() for p in sorted(receiver.folder.glob("*.jsonl"))).splitlines()
    assert len(lines) == 3
    first = json.loads(lines[0])["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert first["traceId"] == f"{spans[0].context.trace_id:032x}"  # hex, not protobuf's base64
    assert first["kind"] == 1  # enums as integers
    assert landed_spans(receiver.folder) == sent(spans + as_json + gzipped)
    assert receiver.receiver.counters.spans == len(spans + as_json + gzipped)
    assert added_sources(receiver.warehouse) == [{"name": "collected", "kind": "otlp", "path": "collected",
                                                  "absolute": str(receiver.folder.resolve())}]


def test_bad_requests_get_their_status_and_reason_and_change_nothing(collector) -> None:
    receiver = collector(token="s3cret", max_body_mb=0.01)  # 10,485 bytes
    body = protobuf_body(sdk_spans(1, 2))
    auth = {"Authorization": "Bearer s3cret"}

    def reason(answer: tuple[int, bytes]) -> tuple[int, str]:
        return answer[0], json.loads(answer[1])["message"]

    assert reason(post(receiver.url, body))[0] == 401
    assert reason(post(receiver.url, body, Authorization="Bearer nope")) == (401, "the bearer token is wrong")
    assert reason(post(receiver.url, b"\xff\x00garbage", **auth))[0] == 400
    assert "not a protobuf ExportTraceServiceRequest" in reason(post(receiver.url, b"\xff\x00garbage", **auth))[1]
    assert reason(post(receiver.url, b'{"resourceSpans": [', "application/json", **auth))[1].startswith(
        "the body is not JSON")
    assert reason(post(receiver.url, b'[1, 2]', "application/json", **auth)) == (
        400, "expected an ExportTraceServiceRequest object, got a JSON list")
    assert reason(post(receiver.url, b'{"resourceSpans": {}}', "application/json", **auth)) == (
        400, "resourceSpans must be a list")
    assert reason(post(receiver.url, gzip.compress(body)[:-8], **auth, **{"Content-Encoding": "gzip"}))[0] == 400
    assert reason(post(receiver.url, body, "text/plain", **auth))[0] == 415
    assert reason(post(receiver.url, os.urandom(20_000), **auth))[0] == 413
    bomb = gzip.compress(b"\0" * 1_000_000)  # 1 KB on the wire, 1 MB inflated
    assert reason(post(receiver.url, bomb, **auth, **{"Content-Encoding": "gzip"}))[0] == 413
    assert reason(post(receiver.url.replace("/v1/traces", "/v1/metrics"), body, **auth))[0] == 404
    with pytest.raises(urllib.error.HTTPError) as got:
        urllib.request.urlopen(receiver.url, timeout=10)
    assert got.value.code == 405
    assert not list(receiver.folder.glob("*.jsonl*"))  # nothing landed
    assert post(receiver.url, body, **auth)[0] == 200  # and the receiver still serves
    assert len(list(receiver.folder.glob("*.jsonl"))) == 1


def test_concurrent_requests_share_fsyncs_and_every_one_lands_whole(collector) -> None:
    receiver = collector()
    bodies = [[protobuf_body(sdk_spans(2, 8)) for _ in range(10)] for _ in range(8)]
    answers: list[int] = []

    def client(i: int) -> None:
        for body in bodies[i]:
            answers.append(post(receiver.url, body)[0])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == [200] * 80
    lines = [json.loads(x) for p in sorted(receiver.folder.glob("*.jsonl")) for x in p.read_bytes().splitlines()]
    assert len(lines) == 80
    assert receiver.receiver.landing.fsyncs <= 80
    assert sum(len(s) for s in landed_spans(receiver.folder).values()) == 80 * 16
    print(f"{receiver.receiver.landing.fsyncs} fsyncs for 80 requests")


def test_files_roll_and_a_later_receiver_cuts_what_a_crash_left_half_written(collector, tmp_path: Path) -> None:
    receiver = collector(roll_mb=0.001)  # a new file after ~1 KB
    for _ in range(3):
        assert post(receiver.url, protobuf_body(sdk_spans(1, 4)))[0] == 200
    files = sorted(receiver.folder.glob("*.jsonl"))
    assert len(files) == 3 and [p.name for p in files] == sorted(p.name for p in files)
    receiver.stop()
    with open(files[-1], "ab") as f:  # a write a crash cut short: never acknowledged
        f.write(b'{"resourceSpans": [{"scopeSp')
    noted = [(item.kind, rejected) for _, item, rejected in otlp.read_partition(otlp.discover(receiver.folder, "c"))
             if isinstance(item, IngestError)]
    assert noted == [("invalid_json", False)]  # noted, not rejected: the file's whole lines load
    collector()
    assert files[-1].read_bytes().endswith(b"}\n")
    assert len(landed_spans(receiver.folder)) == 3


def test_a_second_receiver_on_the_same_warehouse_is_refused(collector) -> None:
    from pipelines.interfaces.collect import LandingFailed

    collector()
    with pytest.raises(LandingFailed, match="another tracehouse collect"):
        collector()


# -- the warehouse's record -------------------------------------------------------------------------------


def test_an_empty_landing_folder_is_no_reason_to_fail_or_refuse(tmp_path: Path, collector) -> None:
    receiver = collector()
    receiver.stop()
    warehouse = receiver.warehouse
    # a warehouse never built, whose only source is the empty landing folder: nothing to build, not a failure
    done = subprocess.run([*CLI, "build", "--warehouse", str(warehouse), "--quiet"], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "nothing built yet" in done.stdout
    assert not (warehouse / "builds").exists() or not any((warehouse / "builds").iterdir())
    # another source beside it: built, the empty landing folder neither refused nor lost
    other = tmp_path / "otlp"
    other.mkdir()
    (other / "t.jsonl").write_bytes(otlp_line(sdk_spans(1, 3)))
    with pytest.raises(Exception, match="also holds source"):  # the recorded 'collected' must be named
        build_warehouse(warehouse, [f"otlp={other}"])
    summary = build_warehouse(warehouse, [f"otlp={other}", f"collected:otlp={receiver.folder}"])
    assert summary.exit_code == 0
    assert summary.build == 1
    again = build_warehouse(warehouse, [])  # the two recorded sources, the landing folder still empty
    assert again.exit_code == 0 and again.partitions_unchanged == ["otlp__traces"]
    # spans arrive: the next plain build reads them
    receiver = collector()
    assert post(receiver.url, protobuf_body(sdk_spans(2, 2)))[0] == 200
    later = build_warehouse(warehouse, [])
    assert later.partitions_built == ["collected__traces"]
    assert query(warehouse, "select source, count(*) from graphs group by all order by all") == [
        ("collected", 2), ("otlp", 1)]
    # --remove-source drops the landing folder's record too: it does not come back
    receiver.stop()
    removed = build_warehouse(warehouse, [], remove_sources=["collected"])
    assert removed.exit_code == 0 and added_sources(warehouse) == []
    assert query(warehouse, "select distinct source from graphs") == [("otlp",)]
    assert build_warehouse(warehouse, []).partitions_unchanged == ["otlp__traces"]


def otlp_line(spans: list) -> bytes:
    from pipelines.interfaces.collect import otlp_json

    return json.dumps(otlp_json(encode_spans(spans))).encode() + b"\n"


# -- a landing file that cannot grow: 503, nothing acknowledged lost -----------------------------------------


@pytest.mark.slow
def test_a_write_that_fails_gets_503_and_loses_nothing_acknowledged(tmp_path: Path, processes) -> None:
    limit = 64 * 1024  # a real limit on the size of any file the receiver writes (RLIMIT_FSIZE): EFBIG past it

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    receiver = processes(tmp_path / "w", free_port(), tmp_path / "collect.log", preexec_fn=small_files)
    acknowledged, statuses = [], []
    for _ in range(40):
        spans = sdk_spans(1, 12)
        status, body = post(receiver.url, protobuf_body(spans))
        statuses.append(status)
        if status == 200:
            acknowledged += spans
        else:
            assert status == 503 and "File too large" in json.loads(body)["message"]
    assert 503 in statuses and statuses[0] == 200
    assert statuses.index(503) < len(statuses) - 1 and statuses[statuses.index(503) + 1] == 200  # serving on
    folder = tmp_path / "w" / "collected"
    for path in folder.glob("*.jsonl"):
        assert path.read_bytes().endswith(b"\n")  # no half-written line left behind
    assert landed_spans(folder) == sent(acknowledged)
    assert receiver.signal(signal.SIGTERM) == 0
    assert "503: could not land the request" in (tmp_path / "collect.log").read_text()
    n_ok, n_failed = statuses.count(200), statuses.count(503)
    assert stop_line(tmp_path / "collect.log").startswith(
        f"requests: {n_ok} accepted, {n_failed} rejected ({n_failed} x 503); spans: {12 * n_ok:,} accepted, "
        f"{12 * n_failed:,} rejected (in the {n_failed} rejected request{'s' if n_failed > 1 else ''} that were "
        "decoded)")


def test_another_host_than_loopback_is_said_with_a_warning(collector) -> None:
    from pipelines.interfaces.collect import is_loopback

    assert [is_loopback(h) for h in ("127.0.0.1", "::1", "localhost", "127.0.0.2", "0.0.0.0", "10.1.2.3")] == [
        True, True, True, True, False, False]
    quiet = collector()
    assert "WARNING" not in quiet.log.getvalue()
    quiet.stop()
    loud = collector(host="0.0.0.0")
    said = loud.log.getvalue()
    assert "WARNING: listening on 0.0.0.0, reachable from other machines" in said and "set a token" in said


def test_the_dagster_sensor_sees_what_landed_in_a_warehouse_never_built(collector) -> None:
    import dagster as dg

    from pipelines.builds.run_history import instance_for
    from pipelines.config import load_settings
    from pipelines.defs.automation import source_files_sensor
    from pipelines.defs.resources import TracehouseResource
    from pipelines.storage.warehouse import Warehouse

    receiver = collector()
    resource = TracehouseResource.from_settings(load_settings(str(receiver.warehouse), None))  # recorded sources
    assert [(s.name, s.kind, s.path) for s in resource.resolved_sources()] == [
        ("collected", "otlp", receiver.folder.resolve())]  # not the sample corpus
    instance = instance_for(Warehouse(receiver.warehouse))
    idle = source_files_sensor(dg.build_sensor_context(instance=instance, resources={"tracehouse": resource}))
    assert idle.run_requests == []  # an empty landing folder: nothing to do, nothing refused
    assert post(receiver.url, protobuf_body(sdk_spans(1, 2)))[0] == 200
    result = source_files_sensor(dg.build_sensor_context(instance=instance, resources={"tracehouse": resource}))
    assert [r.tags["tracehouse/changed"] for r in result.run_requests] == ["collected__traces"]  # one build


def test_a_landing_file_that_grows_between_builds_extends_its_traces(collector) -> None:
    receiver = collector()
    spans = sdk_spans(1, 4)  # children first, the root last, as the SDK ends them
    trace_id = f"otel:{spans[0].context.trace_id:032x}"
    assert post(receiver.url, protobuf_body(spans[:2]))[0] == 200
    first = build_warehouse(receiver.warehouse, [])
    assert first.exit_code == 0
    assert query(receiver.warehouse, "select n_operations from graphs where graph_id = ?", [trace_id]) == [(2,)]
    assert post(receiver.url, protobuf_body(spans[2:]))[0] == 200  # appended to the same file
    files = list(receiver.folder.glob("*.jsonl"))
    assert len(files) == 1
    later = build_warehouse(receiver.warehouse, [])
    assert later.exit_code == 0 and later.partitions_built == ["collected__traces"]
    assert query(receiver.warehouse, "select n_operations, files from graphs where graph_id = ?", [trace_id]) == [
        (4, [files[0].name])]
    assert query(receiver.warehouse, "select count(*) from ingest_errors") == [(0,)]


# -- a crowd, a slow client, the counts of the stop line -----------------------------------------------------


def raw_request(body: bytes, path: str = "/v1/traces", method: str = "POST", **headers: str) -> bytes:
    fields = {"Host": "127.0.0.1", "Content-Type": "application/x-protobuf", "Content-Length": str(len(body)),
              **headers}
    return (f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n").encode() \
        + body


async def _answer_of(port: int, request: bytes) -> tuple[str, int | None, dict[str, str]]:
    """('answered', status, headers) for one request on a connection of its own, or what went wrong
    ('reset', 'eof', ...) instead."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(request)
            await writer.drain()
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:] if line)}
            await reader.readexactly(int(headers.get("content-length", "0")))
            return "answered", int(head[0].split(" ")[1]), headers
        finally:
            writer.close()
    except ConnectionResetError:
        return "reset", None, {}
    except asyncio.IncompleteReadError:
        return "eof", None, {}
    except OSError as exc:
        return type(exc).__name__, None, {}


def crowd(port: int, requests: list[bytes]) -> list[tuple[str, int | None, dict[str, str]]]:
    """Every request at once, each on a connection of its own (asyncio: one thread opens them all)."""
    async def all_at_once() -> list:
        async with asyncio.timeout(600):
            return await asyncio.gather(*(_answer_of(port, r) for r in requests))

    return asyncio.run(all_at_once())


def stop_line(log: Path) -> str:
    return next(line for line in log.read_text().splitlines() if "stopped: " in line).split("stopped: ", 1)[1]


def bodies_of_one_trace(n: int, spans_per_trace: int) -> tuple[list[bytes], list[list]]:
    spans = sdk_spans(n, spans_per_trace)
    by_trace: dict[int, list] = {}
    for s in spans:
        by_trace.setdefault(s.context.trace_id, []).append(s)
    traces = list(by_trace.values())
    return [protobuf_body(t) for t in traces], traces


def test_500_concurrent_requests_are_all_answered_without_a_reset(tmp_path: Path, processes) -> None:
    receiver = processes(tmp_path / "w", free_port(), tmp_path / "collect.log")
    bodies, traces = bodies_of_one_trace(500, 3)
    port = int(receiver.url.split(":")[2].split("/")[0])
    answers = crowd(port, [raw_request(b) for b in bodies])
    outcomes = {outcome for outcome, _, _ in answers}
    assert outcomes == {"answered"}, [a for a in answers if a[0] != "answered"][:5]
    statuses = [status for _, status, _ in answers]
    assert set(statuses) <= {200, 503}
    assert all("retry-after" in headers for _, status, headers in answers if status == 503)
    acknowledged = [s for (_, status, _), trace_spans in zip(answers, traces, strict=True) if status == 200
                    for s in trace_spans]
    assert receiver.signal(signal.SIGTERM) == 0
    assert landed_spans(tmp_path / "w" / "collected") == sent(acknowledged)
    n_ok, n_busy = statuses.count(200), statuses.count(503)
    assert stop_line(receiver.log).startswith(
        f"requests: {n_ok} accepted, {n_busy} rejected" + (f" ({n_busy} x 503)" if n_busy else "")
        + f"; spans: {3 * n_ok:,} accepted")


def test_past_max_connections_a_new_one_gets_503_with_retry_after_and_the_stop_line_counts_every_answer(
        tmp_path: Path, processes) -> None:
    port = free_port()
    receiver = processes(tmp_path / "w", port, tmp_path / "collect.log", "--max-connections", "20",
                         "--token", "s3cret", "--max-body-mb", "0.01")
    auth = {"Authorization": "Bearer s3cret"}
    bodies, traces = bodies_of_one_trace(212, 4)
    # answers of every kind, on connections of their own
    sent_statuses = [status for _, status, _ in crowd(port, [
        raw_request(bodies[0]), raw_request(bodies[1]), raw_request(bodies[2], Authorization="Bearer nope"),
        raw_request(b"\xff\x00garbage", **auth), raw_request(b"{", **auth, **{"Content-Type": "application/json"}),
        raw_request(os.urandom(20_000), **auth), raw_request(bodies[3], "/v1/metrics", **auth),
        raw_request(b"", method="GET", **auth)])]
    assert sent_statuses == [401, 401, 401, 400, 400, 413, 404, 405]
    # 20 connections held open without a request: the 21st gets 503 and Retry-After, and so does a crowd
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
    probes = 0
    for _ in range(200):  # until the receiver has accepted the 20
        probes += 1
        outcome, status, headers = crowd(port, [raw_request(bodies[4], **auth)])[0]
        assert outcome == "answered"
        if status == 503:
            break
        time.sleep(0.1)
    assert status == 503 and headers["retry-after"].isdigit()
    turned_away = crowd(port, [raw_request(b, **auth) for b in bodies[5:205]])
    assert {(outcome, status) for outcome, status, _ in turned_away} == {("answered", 503)}
    assert all(h["retry-after"].isdigit() for _, _, h in turned_away)
    for sock in held:
        sock.close()
    accepted = []
    for i in range(205, 212):
        for _ in range(200):  # until the receiver has closed the held connections
            if (status := post(receiver.url, bodies[i], **auth)[0]) == 200:
                accepted += traces[i]
                break
            assert status == 503
            probes += 1
            time.sleep(0.1)
        assert status == 200
    assert receiver.signal(signal.SIGTERM) == 0
    assert landed_spans(tmp_path / "w" / "collected") == sent(accepted)
    n_busy = probes + 200
    assert stop_line(receiver.log) == (
        f"requests: 7 accepted, {8 + n_busy} rejected (2 x 400, 3 x 401, 1 x 404, 1 x 405, 1 x 413, {n_busy} x 503); "
        "spans: 28 accepted (no rejected request was decoded: their spans are not counted); 1 file, 7 fsyncs; "
        "0 connections open")


def test_a_slow_client_is_cut_off_by_the_request_deadline_and_holds_no_worker(tmp_path: Path, processes) -> None:
    port = free_port()
    receiver = processes(tmp_path / "w", port, tmp_path / "collect.log", "--request-seconds", "6", "--workers", "1")
    body = protobuf_body(sdk_spans(1, 2))
    progress: list[dict] = [{"sent": 0, "answer": b""} for _ in range(5)]

    def trickle(state: dict) -> None:
        """The request's head, then its body a byte every 2 s, reading whatever the receiver answers."""
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(raw_request(body)[:-len(body)])
            for byte in body[:30]:  # 30 bytes: 60 s, ten times the deadline
                try:
                    sock.send(bytes([byte]))
                except OSError:
                    break
                state["sent"] += 1
                if select.select([sock], [], [], 2.0)[0]:
                    break
            with contextlib.suppress(OSError):
                sock.settimeout(10)
                state["answer"] = sock.recv(4096)

    threads = [threading.Thread(target=trickle, args=(state,)) for state in progress]
    for t in threads:
        t.start()
    for _ in range(300):
        if all(state["sent"] for state in progress):
            break
        time.sleep(0.02)
    # the one worker decodes this request while five slow ones are being read
    assert post(receiver.url, protobuf_body(sdk_spans(1, 3)))[0] == 200
    assert all(not state["answer"] for state in progress)
    for t in threads:
        t.join()
    for state in progress:
        assert state["answer"].startswith(b"HTTP/1.1 408 "), state
        assert state["sent"] < 30
    assert receiver.signal(signal.SIGTERM) == 0
    assert stop_line(receiver.log).startswith("requests: 1 accepted, 5 rejected (5 x 408); spans: 3 accepted")
