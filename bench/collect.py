"""`tracehouse collect`, measured: acknowledged spans per second (issue 33), a crowd of 500 concurrent
exporters (issue 45), and the build over what it landed.

    make bench-collect                         # or: .venv/bin/python bench/collect.py (the "Collecting traces" section)
    .venv/bin/python bench/collect.py --quick      # fewer batches, results in --out only
    .venv/bin/python bench/collect.py --crowd-only # the crowd again, the other figures kept from the last run

receive  a `tracehouse collect` process (a fresh warehouse each round) on a free port of 127.0.0.1, and
         N client processes (--clients, e.g. 1, 4, 8) that each post their share of --batches (160)
         ExportTraceServiceRequest protobuf bodies of 512 spans (16 traces of 32 spans made by the real
         OpenTelemetry SDK: gen_ai attributes, input and output messages of ~300 bytes; every body with
         trace ids of its own) over one kept-alive connection, one request after the other, as an
         SDK's exporter does. Acknowledged spans/s = spans answered 200 / (last 200 - first post);
         the receiver's CPU (utime + stime from /proc) and peak RSS, its fsyncs (from its "stopped:"
         line); --repeat interleaved rounds, the median counts. Clients and receiver share the cores.
crowd    --crowd (500) exporters at once, on 127.0.0.1 against a fresh `tracehouse collect` with its
         defaults, and again with --max-connections half the crowd: --crowd-processes (4) client
         processes, each an asyncio loop of its share of exporters; on a signal every exporter opens
         its connection (all at once: the listen backlog's test) and posts --crowd-requests (10)
         protobuf bodies of 32 spans (one trace, ids of its own) one after another on it, as an SDK's
         exporter does; a 503 (with Retry-After) or a closed connection ends that exporter. Counted:
         answers by status, connection resets and other failures, acknowledged spans/s (from the
         signal to the last answer), the latency of the 200s, the receiver's most threads (polled from
         /proc every 50 ms) and peak RSS, and its stop line. Median of --crowd-rounds (3).
build    a plain `tracehouse build --warehouse W` (no --source: the recorded `collected` source) over
         what one round landed, as a new process (bench/run.py's run_process); the same build with
         nothing changed; then one more batch landed (spans of the traces already built: the
         partition is read again whole) and built; against bare DuckDB (sql/bench/duckdb_flatten_otlp.sql:
         read_json + unnest of the spans, COPY to Parquet) on the same files in its own process.

Writes bench/collect-results.json and the section between the collect markers of BENCHMARKS.md
(bench/report.py keeps it), or <out>/collect-results.json and <out>/BENCHMARKS.md with --quick.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import multiprocessing
import os
import queue
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from report import put_section
from run import BENCH, PYTHON, REPO, clean_env, git_commit, machine, run_process

TARGET = 5000  # acknowledged spans/s on 2 cores (issue 33)
BATCH = 512
CROWD_BATCH = 32  # spans per body of a crowd's exporter: one trace of an agent span and 31 children
MARKERS = ("<!-- collect:start -->", "<!-- collect:end -->")


# -- the bodies ---------------------------------------------------------------------------------------------


def template(n_traces: int = BATCH // 32) -> bytes:
    """One ExportTraceServiceRequest of ``n_traces`` traces of an agent span and 31 children (16: 512
    spans) made by the real SDK, serialized."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench.collect")
    for t in range(n_traces):
        with tracer.start_as_current_span("invoke_agent planner") as agent:
            agent.set_attribute("gen_ai.operation.name", "invoke_agent")
            agent.set_attribute("gen_ai.agent.name", "planner")
            agent.set_attribute("gen_ai.conversation.id", f"conv-{t}")
            for i in range(31):
                with tracer.start_as_current_span("chat m-1") as llm:
                    llm.set_attribute("gen_ai.operation.name", "chat")
                    llm.set_attribute("gen_ai.request.model", "m-1")
                    llm.set_attribute("gen_ai.usage.input_tokens", 120 + i)
                    llm.set_attribute("gen_ai.usage.output_tokens", 30 + i)
                    llm.set_attribute("gen_ai.input.messages", json.dumps(
                        [{"role": "user", "content": f"step {i} of task {t}: " + "what does the memory hold? " * 4}]))
                    llm.set_attribute("gen_ai.output.messages", json.dumps(
                        [{"role": "assistant", "content": f"answer {i}: " + "the memory holds a fact. " * 4}]))
    spans = exporter.get_finished_spans()
    assert len(spans) == 32 * n_traces
    return encode_spans(spans).SerializeToString()


def bodies(base: bytes, start: int, n: int) -> list[bytes]:
    """``n`` copies of the template whose 16 traces get ids of their own (body ``start + i``)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    out = []
    for b in range(start, start + n):
        request = ExportTraceServiceRequest.FromString(base)
        ids: dict[bytes, bytes] = {}
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    span.trace_id = ids.setdefault(span.trace_id, (b * 64 + len(ids) + 1).to_bytes(16, "big"))
        out.append(request.SerializeToString())
    return out


# -- one client process -------------------------------------------------------------------------------------


def client(port: int, payload: list[bytes], go, results) -> None:
    """Post every body on one kept-alive connection, one after the other; report (first post, last
    answer, statuses) in CLOCK_MONOTONIC seconds, which every process of the machine shares."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.connect()
    go.wait()
    first = time.monotonic()
    statuses = []
    for body in payload:
        conn.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"})
        response = conn.getresponse()
        response.read()
        statuses.append(response.status)
    results.put((first, time.monotonic(), statuses))
    conn.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+)", text).group(1)) / 1024


def start_collector(warehouse: Path, log: Path, *options: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    with open(log, "ab") as err:
        proc = subprocess.Popen([PYTHON, "-m", "pipelines.interfaces.cli",
                                 "collect", "--warehouse", str(warehouse), "--port",
                                 str(port), *options], cwd=REPO, stdout=subprocess.DEVNULL, stderr=err,
                                env=clean_env())
    deadline = time.monotonic() + 60
    while "listening on" not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"tracehouse collect did not start: {log.read_text()}")
        time.sleep(0.05)
    return proc, port


def stop_collector(proc: subprocess.Popen) -> int:
    os.kill(proc.pid, signal.SIGTERM)
    return proc.wait(timeout=120)


def receive(out: Path, n_clients: int, payload: list[bytes], round_: int) -> dict:
    """One round: a fresh warehouse, a receiver, ``n_clients`` client processes posting ``payload``."""
    warehouse = out / f"w-{n_clients}-{round_}"
    shutil.rmtree(warehouse, ignore_errors=True)
    log = out / f"collect-{n_clients}-{round_}.log"
    log.unlink(missing_ok=True)
    proc, port = start_collector(warehouse, log)
    try:
        context = multiprocessing.get_context("fork")  # the bodies are inherited, not pickled
        go, results = context.Event(), context.Queue()
        shares = [payload[i::n_clients] for i in range(n_clients)]
        workers = [context.Process(target=client, args=(port, share, go, results)) for share in shares]
        for w in workers:
            w.start()
        time.sleep(1.0)  # every client connected
        cpu_before = cpu_seconds(proc.pid)
        go.set()
        got = [results.get(timeout=600) for _ in workers]
        cpu = cpu_seconds(proc.pid) - cpu_before
        for w in workers:
            w.join()
        rss = peak_rss_mb(proc.pid)
    finally:
        code = stop_collector(proc)
    first, last = min(g[0] for g in got), max(g[1] for g in got)
    statuses = [s for g in got for s in g[2]]
    stopped = next(line for line in log.read_text().splitlines() if "stopped:" in line)
    fsyncs = int(re.search(r"(\d+) fsyncs?\b", stopped).group(1))
    acknowledged = statuses.count(200) * BATCH
    return {"clients": n_clients, "round": round_, "requests": len(statuses), "acknowledged": statuses.count(200),
            "spans": acknowledged, "seconds": last - first, "spans_per_s": acknowledged / (last - first),
            "receiver_cpu_s": cpu, "receiver_cores": cpu / (last - first), "receiver_peak_rss_mb": rss,
            "fsyncs": fsyncs, "exit": code, "warehouse": str(warehouse),
            "landed_mb": sum(p.stat().st_size for p in (warehouse / "collected").glob("*.jsonl")) / 2**20}


# -- a crowd of exporters --------------------------------------------------------------------------------------


async def exporter(port: int, payload: list[bytes], go: asyncio.Event) -> dict:
    """One exporter: once ``go`` is set, open a connection and post every body on it, one after the
    other; what each got (status, seconds) and how the exporter ended."""
    await go.wait()
    answers: list[tuple[int, float, bool]] = []  # status, seconds, Retry-After given
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        return {"answers": answers, "end": f"connect: {type(exc).__name__}"}
    end = "done"
    try:
        for body in payload:
            started = time.monotonic()
            writer.write(b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
                         + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            await writer.drain()
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:] if line)}
            await reader.readexactly(int(headers.get("content-length", "0")))
            status = int(head[0].split(" ")[1])
            answers.append((status, time.monotonic() - started, "retry-after" in headers))
            if status != 200 or headers.get("connection", "").lower() == "close":
                end = f"answered {status}" if status != 200 else "closed"
                break
    except ConnectionResetError:
        end = "reset"
    except (OSError, asyncio.IncompleteReadError) as exc:
        end = type(exc).__name__
    finally:
        writer.close()
    return {"answers": answers, "end": end}


def crowd_client(port: int, payloads: list[list[bytes]], go, results) -> None:
    """A client process: one asyncio loop of ``len(payloads)`` exporters, released by ``go``."""

    async def run() -> list[dict]:
        release = asyncio.Event()
        exporters = [asyncio.create_task(exporter(port, payload, release)) for payload in payloads]
        await asyncio.get_running_loop().run_in_executor(None, go.wait)
        results.put(("go", time.monotonic()))
        release.set()
        return await asyncio.gather(*exporters)

    ended = asyncio.run(run())
    results.put(("done", time.monotonic(), ended))


def threads_of(pid: int) -> int:
    return int(re.search(r"Threads:\s+(\d+)", Path(f"/proc/{pid}/status").read_text()).group(1))


def crowd_round(out: Path, payloads: list[list[bytes]], n_processes: int, round_: int,
                max_connections: int | None) -> dict:
    """One round: a fresh warehouse and receiver, every exporter released at once."""
    name = f"crowd-{len(payloads)}-{max_connections or 'default'}-{round_}"
    warehouse = out / f"w-{name}"
    shutil.rmtree(warehouse, ignore_errors=True)
    log = out / f"{name}.log"
    log.unlink(missing_ok=True)
    options = ["--max-connections", str(max_connections)] if max_connections else []
    proc, port = start_collector(warehouse, log, *options)
    try:
        context = multiprocessing.get_context("fork")
        go, results = context.Event(), context.Queue()
        workers = [context.Process(target=crowd_client, args=(port, payloads[i::n_processes], go, results))
                   for i in range(n_processes)]
        for w in workers:
            w.start()
        time.sleep(2.0)  # every client process is waiting
        threads_idle, cpu_before = threads_of(proc.pid), cpu_seconds(proc.pid)
        most_threads = threads_idle
        go.set()
        got: list = []
        while len([g for g in got if g[0] == "done"]) < n_processes:
            with contextlib.suppress(queue.Empty):
                got.append(results.get(timeout=0.05))
            most_threads = max(most_threads, threads_of(proc.pid))
        cpu = cpu_seconds(proc.pid) - cpu_before
        for w in workers:
            w.join()
        rss = peak_rss_mb(proc.pid)
    finally:
        code = stop_collector(proc)
    released = min(g[1] for g in got if g[0] == "go")
    exporters = [e for g in got if g[0] == "done" for e in g[2]]
    answers = [a for e in exporters for a in e["answers"]]
    ok = [seconds for status, seconds, _ in answers if status == 200]
    last = max(g[1] for g in got if g[0] == "done")
    ends: dict[str, int] = {}
    for e in exporters:
        ends[e["end"]] = ends.get(e["end"], 0) + 1
    statuses: dict[str, int] = {}
    for status, _, _ in answers:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    return {
        "exporters": len(exporters), "max_connections": max_connections, "round": round_,
        "requests_per_exporter": len(payloads[0]), "spans_per_request": CROWD_BATCH,
        "answers": statuses, "busy_with_retry_after": sum(1 for s, _, r in answers if s == 503 and r),
        "ends": ends, "resets": ends.get("reset", 0),
        "failures": sum(n for end, n in ends.items() if end not in ("done", "answered 503")),
        "seconds": last - released, "spans_per_s": len(ok) * CROWD_BATCH / (last - released),
        "latency_p50_s": statistics.median(ok) if ok else None,
        "latency_p99_s": statistics.quantiles(ok, n=100)[98] if len(ok) > 1 else None,
        "latency_max_s": max(ok) if ok else None,
        "receiver_threads_idle": threads_idle, "receiver_threads_most": most_threads,
        "receiver_cpu_s": cpu, "receiver_peak_rss_mb": rss, "exit": code,
        "stop_line": next(line for line in log.read_text().splitlines() if "stopped:" in line).split("stopped: ")[1],
    }


def measure_crowd(out: Path, n_exporters: int, n_requests: int, n_processes: int, rounds: int) -> list[dict]:
    """The crowd's rounds: with the receiver's defaults, then with --max-connections half the crowd."""
    payloads = crowd_payloads(template(1), n_exporters, n_requests)
    measured = []
    for round_ in range(rounds):
        for cap in (None, n_exporters // 2):
            r = crowd_round(out, payloads, n_processes, round_, cap)
            print(f"crowd of {n_exporters}, --max-connections {cap or 'default'}, round {round_}: {r['answers']}, "
                  f"{r['resets']} resets, {r['spans_per_s']:,.0f} spans/s, threads {r['receiver_threads_most']}",
                  file=sys.stderr, flush=True)
            measured.append(r)
    return measured


def crowd_payloads(base: bytes, n_exporters: int, n_requests: int) -> list[list[bytes]]:
    """Bodies of one trace each, ids of their own (after those of the receive rounds)."""
    flat = bodies(base, 10_000, n_exporters * n_requests)
    return [flat[i * n_requests:(i + 1) * n_requests] for i in range(n_exporters)]


# -- the build over the landed files -------------------------------------------------------------------------


DUCKDB_FLATTEN = """
import sys, time, duckdb
glob, parquet, sql = sys.argv[1], sys.argv[2], open(sys.argv[3]).read()
con = duckdb.connect()
con.execute("set enable_progress_bar = false")
con.execute("set variable otlp_glob = ?", [glob])
con.execute(sql)
con.execute(f"copy spans to '{parquet}' (format parquet, compression zstd)")
print(con.execute("select count(*) from spans").fetchone()[0])
"""


def builds(out: Path, warehouse: Path, extra: bytes) -> dict:
    files = list((warehouse / "collected").glob("*.jsonl"))
    spans = BATCH * sum(len(p.read_bytes().splitlines()) for p in files)
    mb = sum(p.stat().st_size for p in files) / 2**20
    build = [PYTHON, "-m", "pipelines.interfaces.cli", "build", "--warehouse", str(warehouse), "--quiet"]
    fresh = run_process(build)
    unchanged = run_process(build)
    log = out / "collect-extra.log"
    log.unlink(missing_ok=True)
    proc, port = start_collector(warehouse, log)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("POST", "/v1/traces", body=extra, headers={"Content-Type": "application/x-protobuf"})
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        stop_collector(proc)
    later = run_process(build)
    rows = subprocess.run([PYTHON, "-m", "pipelines.interfaces.cli",
                           "sql", "--warehouse", str(warehouse), "--format", "csv",
                           "select count(*) from operations where graph_id like 'otel:%'"], cwd=REPO,
                          capture_output=True, text=True, check=True).stdout.split()[-1]
    parquet = out / "duckdb-spans.parquet"
    duck = run_process([PYTHON, "-c", DUCKDB_FLATTEN, str(warehouse / "collected" / "*.jsonl"), str(parquet),
                        str(REPO / "sql" / "bench" / "duckdb_flatten_otlp.sql")])
    duck_rows = int(next(text for _, name, text in duck["lines"] if name == "stdout"))
    return {
        "spans": spans, "files": len(files), "mb": mb,
        "fresh_s": fresh["wall"], "fresh_exit": fresh["exit"], "fresh_tree_peak_mb": fresh["tree_peak_mb"],
        "unchanged_s": unchanged["wall"], "later_s": later["wall"], "later_exit": later["exit"],
        "operations": int(rows), "duckdb_s": duck["wall"], "duckdb_rows": duck_rows,
    }


# -- the report ----------------------------------------------------------------------------------------------


def section(results: dict) -> list[str]:
    m = results["machine"]
    rounds = results["receive"]
    by_n: dict[int, list[dict]] = {}
    for r in rounds:
        by_n.setdefault(r["clients"], []).append(r)
    b = results["build"]
    busiest = max(statistics.median(r["receiver_cores"] for r in rs) for rs in by_n.values())
    starved = busiest < 0.8 and m["load_at_start"][0] > m["cores"]
    lines = [
        MARKERS[0],
        "## Collecting traces (`tracehouse collect`)",
        "",
        f"Measured {results['date']} with `{results['command']}` (bench/collect.py, code {results['code']}; raw "
        f"numbers in {results['results_file']}). Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB; "
        f"load average {m['load_at_start'][0]:.1f} at the start. Clients and receiver share the cores; other "
        "processes may have been running.",
        "",
        f"Receiving: N client processes post {results['batches']} protobuf ExportTraceServiceRequests of {BATCH} "
        "spans (the SDK's own encoding of gen_ai spans with ~300-byte messages), one request after another on a "
        "kept-alive connection each; a 200 means the request's line is written and fsynced. Median of "
        f"{results['repeat']} rounds, a fresh warehouse each.",
        "",
        f"| clients | acknowledged spans/s (target {TARGET:,}) | runs, spans/s | requests per fsync | receiver CPU, "
        "cores | receiver peak RSS MB | landed MB |",
        "|---:|---:|---|---:|---:|---:|---:|",
    ]
    for n, rs in sorted(by_n.items()):
        med = statistics.median(r["spans_per_s"] for r in rs)
        verdict = "met" if med >= TARGET else "**missed**"
        lines.append(f"| {n} | **{med:,.0f}** ({verdict}) | {', '.join(f'{r['spans_per_s']:,.0f}' for r in rs)} | "
                     f"{statistics.median(r['requests'] / max(r['fsyncs'], 1) for r in rs):.1f} | "
                     f"{statistics.median(r['receiver_cores'] for r in rs):.2f} | "
                     f"{max(r['receiver_peak_rss_mb'] for r in rs):.0f} | "
                     f"{statistics.median(r['landed_mb'] for r in rs):.0f} |")
    lines += [
        "",
        "The receiver is one Python process: decoding the protobuf and writing it as OTLP/JSON can hold at most "
        f"about one core (the GIL); here it used {busiest:.2f} of one at most"
        + (f", on a machine whose load average was {m['load_at_start'][0]:.1f} on {m['cores']} cores: the "
           "machine's other processes, more than the receiver, set these figures" if starved else
           ", which is what bounds it") + "; the fsyncs are grouped (more requests per fsync as clients are added), "
        "so durability does not.",
        "",
        f"Building what one round landed ({b['spans']:,} spans in {b['files']} file(s), {b['mb']:.0f} MB of "
        "OTLP/JSON) with a plain `tracehouse build --warehouse W` (the recorded `collected` source), each a new "
        "process:",
        "",
        "| what | seconds | spans/s |",
        "|---|---:|---:|",
        f"| fresh build (flatten, checks, marts, dashboard, commit) | {b['fresh_s']:.1f} | "
        f"{b['spans'] / b['fresh_s']:,.0f} |",
        f"| the same, nothing changed | {b['unchanged_s']:.1f} | |",
        f"| one more batch of {BATCH} spans of traces already built, in a new file: the otlp partition is read "
        f"again whole ({b['operations']:,} operations after it) | "
        f"{b['later_s']:.1f} | {(b['spans'] + BATCH) / b['later_s']:,.0f} |",
        f"| bare DuckDB on the same files: read_json + unnest of the spans, COPY to Parquet "
        f"(sql/bench/duckdb_flatten_otlp.sql; "
        f"{b['duckdb_rows']:,} rows, no graph mapping) | {b['duckdb_s']:.1f} | "
        f"{b['duckdb_rows'] / b['duckdb_s']:,.0f} |",
        "",
        f"The build after the extra batch / bare DuckDB on the same files: {b['later_s'] / b['duckdb_s']:.1f}x.",
    ]
    if results.get("crowd"):
        lines += crowd_section(results)
    return lines + [MARKERS[1]]


def crowd_section(results: dict) -> list[str]:
    rounds = results["crowd"]
    first = rounds[0]
    m = results["crowd_machine"]
    by_cap: dict[int | None, list[dict]] = {}
    for r in rounds:
        by_cap.setdefault(r["max_connections"], []).append(r)
    lines = [
        "",
        f"A crowd: {first['exporters']} exporters at once, each opening its connection at the same signal and "
        f"posting {first['requests_per_exporter']} protobuf bodies of {first['spans_per_request']} spans one after "
        f"another on it (asyncio clients in {results['crowd_processes']} processes); a 503 ends an exporter. "
        f"Measured {results['crowd_date']} with `{results['crowd_command']}` (code {results['crowd_code']}; "
        f"load average {m['load_at_start'][0]:.1f} at the start); median of {len(by_cap[None])} rounds, every "
        "round's resets and failures summed.",
        "",
        "| `tracehouse collect` | answers | resets | other failures | acknowledged spans/s | latency of a 200, "
        "p50 / p99 / max s | receiver threads, most | receiver peak RSS MB |",
        "|---|---|---:|---:|---:|---|---:|---:|",
    ]
    for cap, rs in by_cap.items():
        answers: dict[str, int] = {}
        for r in rs:
            for status, n in r["answers"].items():
                answers[status] = answers.get(status, 0) + n
        said = ", ".join(f"{n:,} x {status}" for status, n in sorted(answers.items()))
        retry = sum(r["busy_with_retry_after"] for r in rs)
        if "503" in answers:
            said += f" ({'all' if retry == answers['503'] else retry} with Retry-After)"
        latency = " / ".join(f"{statistics.median(r[key] for r in rs):.2f}"
                             for key in ("latency_p50_s", "latency_p99_s", "latency_max_s"))
        lines.append(f"| {'defaults' if cap is None else f'--max-connections {cap}'} | {said} | "
                     f"**{sum(r['resets'] for r in rs)}** | {sum(r['failures'] - r['resets'] for r in rs)} | "
                     f"{statistics.median(r['spans_per_s'] for r in rs):,.0f} | {latency} | "
                     f"{max(r['receiver_threads_most'] for r in rs)} | "
                     f"{max(r['receiver_peak_rss_mb'] for r in rs):.0f} |")
    lines += [
        "",
        "The receiver holds every connection on one event loop (listen backlog 4096) and decodes on --workers (8) "
        "threads, so its threads stay few however many exporters connect; past --max-connections a new connection "
        "is answered 503 with Retry-After before its request is read"
        + (", and none is reset" if not any(r["resets"] for r in rounds) else "") + ". The stop line of the last "
        f"round: `{rs[-1]['stop_line']}`.",
    ]
    return lines


def write_section(path: Path, results: dict) -> None:
    """Replace only the block between the collect markers (or insert it before "## Notes")."""
    put_section(path, "\n".join(section(results)), MARKERS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="/tmp/tracehouse-bench-collect", help="working folder")
    parser.add_argument("--clients", default="1,4,8", help="client process counts (default 1,4,8)")
    parser.add_argument("--batches", type=int, default=160, help=f"bodies of {BATCH} spans per round (160)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds per client count, interleaved (3)")
    parser.add_argument("--quick", action="store_true", help="40 batches, 1 round; results in --out only")
    parser.add_argument("--builds-only", action="store_true",
                        help="keep the receive rounds of the last run in --out; measure the builds again")
    parser.add_argument("--crowd", type=int, default=500, help="exporters at once (500)")
    parser.add_argument("--crowd-requests", type=int, default=10, help="requests per exporter (10)")
    parser.add_argument("--crowd-processes", type=int, default=4, help="client processes of the crowd (4)")
    parser.add_argument("--crowd-rounds", type=int, default=3, help="rounds of the crowd, interleaved (3)")
    parser.add_argument("--crowd-only", action="store_true",
                        help="measure the crowd; keep the other figures of the last results file")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "collect-results.json" if args.quick else BENCH / "collect-results.json"
    crowd_rounds = 1 if args.quick else args.crowd_rounds
    crowd_args = {"crowd_command": " ".join(["bench/collect.py", *sys.argv[1:]]), "crowd_code": git_commit(),
                  "crowd_machine": machine(), "crowd_date": time.strftime("%Y-%m-%d %H:%M"),
                  "crowd_processes": args.crowd_processes}
    if args.crowd_only:
        results = json.loads(results_path.read_text()) | crowd_args
        results["crowd"] = measure_crowd(out, args.crowd, args.crowd_requests, args.crowd_processes, crowd_rounds)
        results_path.write_text(json.dumps(results, indent=1))
        write_section(out / "BENCHMARKS.md" if args.quick else REPO / "BENCHMARKS.md", results)
        return
    batches, repeat = (40, 1) if args.quick else (args.batches, args.repeat)
    counts = [int(n) for n in args.clients.split(",")]
    results = {"date": time.strftime("%Y-%m-%d %H:%M"), "command": " ".join(["bench/collect.py", *sys.argv[1:]]),
               "code": git_commit(), "machine": machine(), "batches": batches, "repeat": repeat, "receive": []}
    base = template()
    received = out / "receive-results.json"  # the receive stage's rounds, for --builds-only
    if args.builds_only:
        results["receive"] = json.loads(received.read_text())
    else:
        payload = bodies(base, 0, batches)
        for round_ in range(repeat):
            for n in counts:
                r = receive(out, n, payload, round_)
                print(f"{n} clients, round {round_}: {r['spans_per_s']:,.0f} spans/s acknowledged, "
                      f"{r['requests'] / max(r['fsyncs'], 1):.1f} requests per fsync", file=sys.stderr, flush=True)
                results["receive"].append(r)
        received.write_text(json.dumps(results["receive"], indent=1))
    middle = counts[len(counts) // 2]
    warehouse = Path(next(r["warehouse"] for r in results["receive"] if r["clients"] == middle))
    extra = bodies(base, 0, 1)[0]  # the first body's traces again, with new span ids: they extend those traces
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest.FromString(extra)
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for i, span in enumerate(ss.spans):
                span.span_id = (0x7F00000000000000 + i).to_bytes(8, "big")  # parents: spans already built
    results["build"] = builds(out, warehouse, request.SerializeToString())
    print(f"build: {results['build']}", file=sys.stderr)
    results |= crowd_args
    results["crowd"] = measure_crowd(out, args.crowd, args.crowd_requests, args.crowd_processes, crowd_rounds)
    results["results_file"] = str(results_path) if args.quick else "bench/collect-results.json"
    results_path.write_text(json.dumps(results, indent=1))
    write_section(out / "BENCHMARKS.md" if args.quick else REPO / "BENCHMARKS.md", results)


if __name__ == "__main__":
    main()
