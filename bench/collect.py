"""`tracehouse collect`, measured (issue 33): acknowledged spans per second, and the build over what it landed.

    make bench-collect                         # or: .venv/bin/python bench/collect.py (the "Collecting traces" section)
    .venv/bin/python bench/collect.py --quick      # fewer batches, results in --out only

receive  a `tracehouse collect` process (a fresh warehouse each round) on a free port of 127.0.0.1, and
         N client processes (--clients, e.g. 1, 4, 8) that each post their share of --batches (160)
         ExportTraceServiceRequest protobuf bodies of 512 spans (16 traces of 32 spans made by the real
         OpenTelemetry SDK: gen_ai attributes, input and output messages of ~300 bytes; every body with
         trace ids of its own) over one kept-alive connection, one request after the other, as an
         SDK's exporter does. Acknowledged spans/s = spans answered 200 / (last 200 - first post);
         the receiver's CPU (utime + stime from /proc) and peak RSS, its fsyncs (from its "stopped:"
         line); --repeat interleaved rounds, the median counts. Clients and receiver share the cores.
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
import http.client
import json
import multiprocessing
import os
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
MARKERS = ("<!-- collect:start -->", "<!-- collect:end -->")


# -- the bodies ---------------------------------------------------------------------------------------------


def template() -> bytes:
    """One ExportTraceServiceRequest of 512 spans (16 traces of an agent span and 31 children) made by
    the real SDK, serialized."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench.collect")
    for t in range(16):
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
    assert len(spans) == BATCH
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


def start_collector(warehouse: Path, log: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    with open(log, "ab") as err:
        proc = subprocess.Popen([PYTHON, "-m", "pipelines.cli", "collect", "--warehouse", str(warehouse), "--port",
                                 str(port)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=err, env=clean_env())
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
    fsyncs = int(re.search(r"with (\d+) fsyncs", stopped).group(1))
    acknowledged = statuses.count(200) * BATCH
    return {"clients": n_clients, "round": round_, "requests": len(statuses), "acknowledged": statuses.count(200),
            "spans": acknowledged, "seconds": last - first, "spans_per_s": acknowledged / (last - first),
            "receiver_cpu_s": cpu, "receiver_cores": cpu / (last - first), "receiver_peak_rss_mb": rss,
            "fsyncs": fsyncs, "exit": code, "warehouse": str(warehouse),
            "landed_mb": sum(p.stat().st_size for p in (warehouse / "collected").glob("*.jsonl")) / 2**20}


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
    build = [PYTHON, "-m", "pipelines.cli", "build", "--warehouse", str(warehouse), "--quiet"]
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
    rows = subprocess.run([PYTHON, "-m", "pipelines.cli", "sql", "--warehouse", str(warehouse), "--format", "csv",
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
        "The receiver is one Python process: decoding the protobuf and writing it as OTLP/JSON holds about one core "
        "(the GIL), which is what bounds it here; the fsyncs are grouped (more requests per fsync as clients are "
        "added), so durability does not.",
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
        MARKERS[1],
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
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
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
    results_path = out / "collect-results.json" if args.quick else BENCH / "collect-results.json"
    results["results_file"] = str(results_path) if args.quick else "bench/collect-results.json"
    results_path.write_text(json.dumps(results, indent=1))
    write_section(out / "BENCHMARKS.md" if args.quick else REPO / "BENCHMARKS.md", results)


if __name__ == "__main__":
    main()
