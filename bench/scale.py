"""Object storage against local disk (issue 19, "Scale, measured"): one command, one results file.

    make bench-scale                      # or: .venv/bin/python bench/scale.py
    .venv/bin/python bench/scale.py --quick   # the quick small corpus (8 graphs), 100 and 1,000 objects

Starts moto's S3 server (``python -m moto.server``, an in-memory S3 written in Python) on 127.0.0.1
in its own process, stopped by its process id at the end, also on an error; the child processes get
AWS_ENDPOINT_URL and test credentials. Two parts:

builds   bench/run.py's *small* corpus (32 graphs, ~58 MB, reused from <out>/corpus-small; --quick:
         its quick corpus), uploaded once to ``s3://BUCKET/corpus``; then, as new processes measured
         by bench/run.py's run_process (wall, peak RSS of the process tree), --repeat interleaved
         rounds (the median counts; a case whose runs spread by more than --spread gets extra rounds):
         a fresh `tracehouse build` on local disk, the same build with nothing changed, `tracehouse
         sql`; a fresh build with warehouse and source on S3 and an empty TRACEHOUSE_CACHE (a new
         machine), the same build again with the cache kept, and `tracehouse sql` from a second
         working copy with an empty cache, then warm. The build's stderr gives the commit's phases
         ("commit: uploading N files (X MB)" to the next "commit:" line: the uploads and the
         conditional PUT); moto's request log gives the requests each process made.
commit   in this process, with pipelines.storage.remote.ObjectStore against the same server, for stores of
         100, 1,000 and 10,000 objects (--quick: 100, 1,000), one bucket each: list() of the whole
         prefix (what remote.push, pull and collect_garbage do once per commit), one put_if_absent
         of a build record, and uploading that many new 4 KB files one after another (what
         remote.push does) and from 8 threads.

moto answers on the same machine and shares its 2 cores with the build: a request costs less than on
real S3 and bandwidth is CPU-bound. The real-S3 figures are estimates: requests counted x a typical
latency (REAL_S3_LATENCY_MS, cited). Writes bench/scale-results.json and the "Scale-out: object
storage" section of BENCHMARKS.md (between its scale markers only; bench/report.py keeps it), or
<out>/scale-results.json and <out>/BENCHMARKS.md with --quick.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import signal
import statistics
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the S3 server the tests start
from run import (  # noqa: E402
    BENCH,
    CORPORA,
    REPO,
    build_command,
    corpus_facts,
    git_commit,
    machine,
    make_corpus,
    mode_and_out,
    run_process,
    tracehouse,
)
from s3server import CREDENTIALS, S3Server, s3_client  # noqa: E402

BUCKET = "tracehouse-bench"
QUERY = "select count(*) from nodes"
SIZES = {"full": (100, 1_000, 10_000), "quick": (100, 1_000)}
FILE_BYTES = 4096
THREADS = 8
# Real S3: "small requests (for example, less than 512 KB), where median latencies are often in the tens
# of milliseconds range" (AWS, Best Practices Design Patterns: Optimizing Amazon S3 Performance).
REAL_S3_LATENCY_MS = (20, 50)
REAL_S3_SOURCE = ("https://docs.aws.amazon.com/whitepapers/latest/s3-optimizing-performance-best-practices/"
                  "timeouts-and-retries-for-latency-sensitive-applications.html")
AWS = CREDENTIALS

# The cases of one round, in their order: (name, label).
CASES = [
    ("local_fresh", "fresh build, local disk"),
    ("local_noop", "build again, nothing changed, local disk"),
    ("local_sql", f'`tracehouse sql "{QUERY}"`, local disk'),
    ("s3_fresh", "fresh build, warehouse and source on S3, empty cache (a new machine)"),
    ("s3_noop", "build again, nothing changed, S3, cache kept"),
    ("s3_sql_cold", f'`tracehouse sql "{QUERY}"`, S3, second working copy, empty cache'),
    ("s3_sql_warm", "the same query again, S3, cache warm"),
]


# S3 cases against their local counterparts, round by round (the same round: the same load, more or less).
PAIRS = [("local_fresh", "s3_fresh"), ("local_noop", "s3_noop"), ("local_sql", "s3_sql_cold"),
         ("local_sql", "s3_sql_warm")]


# -- moto's server --------------------------------------------------------------------------------------


class Moto(S3Server):
    """tests/s3server.py's server; its request log (one line per request) counts requests."""

    LINE = re.compile(r'"(GET|PUT|POST|DELETE|HEAD) (\S+) HTTP/[\d.]+" (\d{3})')

    def mark(self) -> int:
        self.log.flush()
        return self.log_path.stat().st_size

    def requests(self, since: int) -> dict[str, int]:
        """The requests answered since ``since`` (a mark), by kind."""
        time.sleep(0.05)  # the server logs a request after answering it
        with self.log_path.open("rb") as log:
            log.seek(since)
            text = log.read().decode("utf-8", "replace")
        counts: Counter[str] = Counter()
        for method, path, status in self.LINE.findall(text):
            if method == "GET":
                kind = "LIST" if "list-type=" in path else "GET"
            elif method == "PUT":
                kind = "conditional PUT" if re.search(r"/builds/\d+\.json$", path) else "PUT"
                if status == "412":
                    kind += " refused"
            elif method == "POST" and "delete" in path:
                kind = "DELETE batch"
            else:
                kind = method
            counts[kind] += 1
        return dict(sorted(counts.items()))


def delete_prefix(endpoint: str, bucket: str, prefix: str) -> None:
    client = s3_client(endpoint)
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys})


# -- part 1: the same corpus, local disk and S3 ----------------------------------------------------------

PATTERNS = {
    "source_sync": re.compile(r"downloading (\d+) changed of (\d+) objects \(([\d.]+) MB\)"),
    "source_done": re.compile(r"source \S+: \d+ objects downloaded"),
    "pull": re.compile(r"downloading (\d+) files of build \d+ \(([\d.]+) MB\)"),
    "writing": re.compile(r"commit: writing build"),
    "uploading": re.compile(r"commit: uploading (\d+) files \(([\d.]+) MB\)"),
    "committed": re.compile(r"commit: build \d+ committed"),
    "published": re.compile(r"commit: published"),
}


def phases(record: dict) -> dict:
    """The seconds between a build's progress lines that bound its object-storage work, and the sizes
    those lines name."""
    marks: dict[str, tuple[float, re.Match]] = {}
    for t, _, text in record["lines"]:
        for name, pattern in PATTERNS.items():
            found = pattern.search(text)
            if found and name not in marks:
                marks[name] = (t, found)
    facts: dict[str, float] = {}

    def gap(key: str, start: str, end: str) -> None:
        if start in marks and end in marks:
            facts[key] = marks[end][0] - marks[start][0]

    gap("source_download_s", "source_sync", "source_done")
    gap("commit_before_upload_s", "writing", "uploading")  # os.sync, fsync, LIST of the whole store
    gap("upload_and_put_s", "uploading", "committed")  # the uploads and the conditional PUT
    gap("commit_s", "writing", "committed")
    gap("publish_s", "committed", "published")  # database, root copies (uploaded), garbage collection
    if "published" in marks:
        facts["after_published_s"] = record["wall"] - marks["published"][0]
    if "source_sync" in marks:
        found = marks["source_sync"][1]
        facts |= {"source_objects": int(found[1]), "source_mb": float(found[3])}
    if "uploading" in marks:
        found = marks["uploading"][1]
        facts |= {"uploaded_files": int(found[1]), "uploaded_mb": float(found[2])}
    if "pull" in marks:
        found = marks["pull"][1]
        facts |= {"pulled_files": int(found[1]), "pulled_mb": float(found[2])}
    return facts


def query_answer(record: dict) -> int | None:
    numbers = [line for line in record["stdout"].splitlines() if line.strip().isdigit()]
    return int(numbers[-1]) if numbers else None


def commands(corpus: Path, work: Path, round_no: int) -> dict[str, tuple[list[str], str | None, str]]:
    """Each case's command, its TRACEHOUSE_CACHE (None: an unused one) and how the report names that cache."""
    local = work / f"local-{round_no}"
    url = f"s3://{BUCKET}/run-{round_no}"
    build_cache, read_cache = str(work / f"cache-build-{round_no}"), str(work / f"cache-read-{round_no}")

    def sql(warehouse: str) -> list[str]:
        return tracehouse("sql", "--warehouse", warehouse, "--format", "csv", QUERY)

    return {
        "local_fresh": (build_command(local, corpus), None, ""),
        "local_noop": (build_command(local, corpus), None, ""),
        "local_sql": (sql(str(local)), None, ""),
        "s3_fresh": (build_command(url, f"s3://{BUCKET}/corpus"), build_cache, "NEW"),
        "s3_noop": (build_command(url, f"s3://{BUCKET}/corpus"), build_cache, "SAME"),
        "s3_sql_cold": (sql(url), read_cache, "NEW2"),
        "s3_sql_warm": (sql(url), read_cache, "NEW2"),
    }


def shown(command: list[str], cache_note: str) -> str:
    """A command as the report shows it: the venv's path cut, the round's folders generic."""
    text = " ".join(f'"{w}"' if " " in w else w for w in [Path(command[0]).name, *command[1:]])
    text = re.sub(r"[^\s=]*/local-\d+", "W", text)
    text = re.sub(r"[^\s=]*/corpus-small", "DIR", text)
    text = re.sub(r"run-\d+", "run-N", text)
    return f"TRACEHOUSE_CACHE={cache_note} {text}" if cache_note else text


def run_round(moto: Moto, corpus: Path, work: Path, round_no: int, runs: dict[str, list[dict]], keep: dict) -> None:
    cmds = commands(corpus, work, round_no)
    for path in (work / f"local-{round_no}", work / f"cache-build-{round_no}", work / f"cache-read-{round_no}"):
        shutil.rmtree(path, ignore_errors=True)
    load = os.getloadavg()[0]
    for name, _ in CASES:
        command, cache, cache_note = cmds[name]
        os.environ["TRACEHOUSE_CACHE"] = cache or str(work / "cache-local")
        mark = moto.mark()
        record = run_process(command, cwd=work)
        data = {"round": round_no, "wall": record["wall"], "peak_rss_mb": record["peak_rss_mb"],
                "tree_peak_mb": record["tree_peak_mb"], "exit": record["exit"], "load_at_round": load,
                "requests": moto.requests(mark), **phases(record)}
        if "sql" in name:
            data["answer"] = query_answer(record)
        if name == "s3_sql_cold":  # what the pull brought (its message counts only generation folders' bytes)
            data["working_copy_mb"] = sum(f.stat().st_size for f in Path(cache).rglob("*") if f.is_file()) / 1e6
        runs[name].append(data)
        keep.setdefault("commands", {})[name] = shown(command, cache_note)
        extra = ""
        if "uploaded_files" in data:
            extra = (f"; uploaded {data['uploaded_files']} files ({data['uploaded_mb']:.1f} MB) in "
                     f"{data['upload_and_put_s']:.2f} s")
        print(f"  round {round_no}: {name:12s} {record['wall']:6.2f} s  tree peak {record['tree_peak_mb']:5.0f} MB  "
              f"requests {sum(data['requests'].values()):4d}{extra}", flush=True)
    if "record_body" not in keep:  # a real build record, for part 2's put_if_absent
        copy = work / f"cache-build-{round_no}" / "s3" / BUCKET / f"run-{round_no}"
        copies = sorted((copy / "builds").glob("*.json"))
        if copies:
            keep["record_body"] = copies[-1].read_bytes()
    if "store_objects" not in keep:
        from pipelines.storage.remote import ObjectStore

        objects = ObjectStore(f"s3://{BUCKET}/run-{round_no}").list()
        keep["store_objects"] = {"objects": len(objects), "mb": sum(o.size for o in objects.values()) / 1e6}
    # the round's warehouse leaves the store (later rounds list a bucket of the same size) and the disk
    delete_prefix(moto.endpoint, BUCKET, f"run-{round_no}/")
    for path in (work / f"local-{round_no}", work / f"cache-build-{round_no}", work / f"cache-read-{round_no}"):
        shutil.rmtree(path, ignore_errors=True)


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values) if len(values) > 1 else 0.0


def median_of(records: list[dict], key: str) -> float | None:
    values = [r[key] for r in records if key in r]
    return statistics.median(values) if values else None


def bench_builds(moto: Moto, corpus: Path, work: Path, repeat: int, max_spread: float, max_extra: int
                 ) -> tuple[dict, bytes]:
    """Part 1; also a real build record's bytes (for part 2's put_if_absent)."""
    from pipelines.storage.remote import ObjectStore

    s3_client(moto.endpoint).create_bucket(Bucket=BUCKET)
    store = ObjectStore(f"s3://{BUCKET}/corpus")
    files = sorted(corpus.glob("*/*.json"))
    started = time.perf_counter()
    for path in files:
        store.upload(path, path.relative_to(corpus).as_posix())
    upload_s = time.perf_counter() - started
    print(f"  corpus uploaded once: {len(files)} objects in {upload_s:.2f} s", flush=True)
    runs: dict[str, list[dict]] = {name: [] for name, _ in CASES}
    keep: dict = {}
    round_no = 0
    for round_no in range(1, repeat + 1):
        run_round(moto, corpus, work, round_no, runs, keep)
    extra = 0
    while extra < max_extra and any(spread([r["wall"] for r in rs]) > max_spread for rs in runs.values()):
        wide = [n for n, rs in runs.items() if spread([r["wall"] for r in rs]) > max_spread]
        extra += 1
        round_no += 1
        print(f"  spread over {max_spread:.0%} in {', '.join(wide)}: extra round {round_no}", flush=True)
        run_round(moto, corpus, work, round_no, runs, keep)
    cases = {}
    for name, label in CASES:
        records = runs[name]
        middle = sorted(records, key=lambda r: r["wall"])[(len(records) - 1) // 2]
        numeric = {k for r in records for k, v in r.items() if isinstance(v, float) and k.endswith("_s")}
        cases[name] = {
            "label": label, "command": keep["commands"][name],
            "median_s": statistics.median(r["wall"] for r in records), "runs_s": [r["wall"] for r in records],
            "spread": spread([r["wall"] for r in records]),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in records),
            "tree_peak_mb": max(r["tree_peak_mb"] for r in records),
            "requests": middle["requests"], "requests_runs": [sum(r["requests"].values()) for r in records],
            "phases": {k: median_of(records, k) for k in sorted(numeric)},
            "phase_runs": {k: [r.get(k) for r in records] for k in sorted(numeric)},
            "sizes": {k: middle[k] for k in ("source_objects", "source_mb", "uploaded_files", "uploaded_mb",
                                             "pulled_files", "pulled_mb", "working_copy_mb") if k in middle},
            "answers": sorted({r["answer"] for r in records if r.get("answer") is not None}),
            "loads": [round(r["load_at_round"], 2) for r in records],
        }
    for local, remote in PAIRS:
        by_round = {r["round"]: r["wall"] for r in runs[local]}
        cases[remote]["minus_local_runs_s"] = [r["wall"] - by_round[r["round"]] for r in runs[remote]]
        cases[remote]["minus_local_s"] = statistics.median(cases[remote]["minus_local_runs_s"])
        cases[remote]["local_case"] = local
    record_body = keep.get("record_body", b"{}" * 4096)
    return {"corpus": corpus_facts(corpus), "corpus_upload_s": upload_s, "corpus_objects": len(files),
            "rounds": round_no, "extra_rounds": extra, "cases": cases, "store_after_build": keep.get("store_objects"),
            "record_bytes": len(record_body)}, record_body


# -- part 2: a commit's cost as the store grows ------------------------------------------------------------


def bench_commit(moto: Moto, work: Path, sizes: tuple[int, ...], repeat: int, record_body: bytes) -> dict:
    results: dict = {}
    for n in sizes:
        results[str(n)] = c = commit_cost(moto, work, n, repeat, record_body)
        print(f"  {n:6d} objects: list {c['list_ms']:8.1f} ms ({c['list_pages']} pages)  put_if_absent "
              f"{c['put_if_absent_ms']:5.1f} ms  upload {c['uploads']['sequential']['per_file_ms']:5.2f} ms/file one "
              f"at a time, {c['uploads'][f'{THREADS}_threads']['per_file_ms']:5.2f} ms/file from {THREADS} threads",
              flush=True)
    return results


def commit_cost(moto: Moto, work: Path, n: int, repeat: int, record_body: bytes) -> dict:
    """A store of ``n`` objects (its own bucket): list() of it, put_if_absent of a build record, and
    ``n`` new 4 KB files uploaded one at a time and from THREADS threads."""
    from pipelines.storage.remote import ObjectStore
    from pipelines.storage.state import KEEP_BUILDS as KEEP  # the build records collect_garbage reads

    bucket = f"commit-cost-{n}"
    s3_client(moto.endpoint).create_bucket(Bucket=bucket)
    store = ObjectStore(f"s3://{bucket}/wh")
    store.put("warm-up", b"x")  # the connection, not counted
    store.delete(["warm-up"])
    payload = os.urandom(FILE_BYTES)
    started = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda i: store.put(f"tables/p{i // 10:05d}/g/{i % 10}.parquet", payload), range(n)))
    populate_s = time.perf_counter() - started

    lists, list_requests = [], {}
    for _ in range(max(repeat, 3)):
        mark = moto.mark()
        started = time.perf_counter()
        found = store.list()
        lists.append((time.perf_counter() - started) * 1000)
        list_requests = moto.requests(mark)
        if len(found) != n:
            raise RuntimeError(f"list() of s3://{bucket}/wh found {len(found)} objects, not {n}")
    puts = []
    for k in range(max(repeat, 3) * 3):
        started = time.perf_counter()
        if not store.put_if_absent(f"builds/{k + 1:08d}.json", record_body):
            raise RuntimeError(f"put_if_absent of a new build record in s3://{bucket}/wh was refused")
        puts.append((time.perf_counter() - started) * 1000)
    gets = []
    for _ in range(3):
        started = time.perf_counter()
        store.get("builds/00000001.json")
        gets.append((time.perf_counter() - started) * 1000)
    refusals = []
    for _ in range(3):
        started = time.perf_counter()
        if store.put_if_absent("builds/00000001.json", record_body):
            raise RuntimeError(f"put_if_absent over an existing build record in s3://{bucket}/wh was not refused")
        refusals.append((time.perf_counter() - started) * 1000)

    uploads = {}
    for how, threads in (("sequential", 1), (f"{THREADS}_threads", THREADS)):
        folder = work / f"files-{n}-{how}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        paths = []
        for i in range(n):
            path = folder / f"{i:06d}.parquet"
            path.write_bytes(os.urandom(FILE_BYTES))
            paths.append(path)

        def upload(path: Path, how: str = how) -> None:
            store.upload(path, f"tables/new-{how}/{path.name}")

        mark = moto.mark()
        started = time.perf_counter()
        if threads == 1:
            for path in paths:  # as remote.push does: one file after another
                upload(path)
        else:
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(upload, paths))
        seconds = time.perf_counter() - started
        uploads[how] = {"seconds": seconds, "per_file_ms": seconds * 1000 / n, "requests": moto.requests(mark)}
        shutil.rmtree(folder, ignore_errors=True)
    delete_prefix(moto.endpoint, bucket, "")
    pages = math.ceil(n / 1000)
    list_ms, put_ms, get_ms = statistics.median(lists), statistics.median(puts), statistics.median(gets)
    # a commit of n new files into a store of n objects: to the commit point (remote.push) one PUT a file
    # and the conditional PUT; after it (remote.collect_garbage) the whole prefix listed, KEEP records read
    point, after = n + 1, pages + KEEP
    return {
        "objects": n, "populate_s": populate_s, "list_ms": list_ms, "list_runs_ms": lists,
        "list_pages": pages, "list_requests": list_requests, "put_if_absent_ms": put_ms,
        "put_if_absent_runs_ms": puts, "refused_ms": statistics.median(refusals), "refused_runs_ms": refusals,
        "get_record_ms": get_ms, "get_record_runs_ms": gets, "uploads": uploads,
        "commit_point_requests": point, "after_commit_requests": after,
        "commit_point_measured_s": uploads["sequential"]["seconds"] + put_ms / 1000,
        "after_commit_measured_s": (list_ms + KEEP * get_ms) / 1000,
        "commit_point_real_s3_estimate_s": [point * ms / 1000 for ms in REAL_S3_LATENCY_MS],
        "after_commit_real_s3_estimate_s": [after * ms / 1000 for ms in REAL_S3_LATENCY_MS],
    }


# -- the run ----------------------------------------------------------------------------------------------


def moto_version() -> str:
    from importlib.metadata import version

    return version("moto")


def remote_transfers() -> int:
    from pipelines.storage.remote import TRANSFERS

    return TRANSFERS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the quick small corpus and 100, 1,000 objects; "
                        "writes under <out> only")
    parser.add_argument("--out", help="working folder (default bench/out, bench/out/quick with --quick); the "
                        "corpus is its corpus-small")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds; the median counts (3)")
    parser.add_argument("--spread", type=float, default=0.25, help="a case whose runs spread by more than this "
                        "fraction of their median gets extra rounds (0.25)")
    parser.add_argument("--max-extra", type=int, default=2, help="extra rounds at most (2)")
    parser.add_argument("--report", metavar="FILE", help="where the section goes (default BENCHMARKS.md; "
                        "<out>/BENCHMARKS.md with --quick)")
    args = parser.parse_args()
    mode, out = mode_and_out(args)
    work = out / "scale"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    results_path = out / "scale-results.json" if args.quick else BENCH / "scale-results.json"
    report_path = Path(args.report or (out / "BENCHMARKS.md" if args.quick else REPO / "BENCHMARKS.md"))

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)  # through the finally below: the server is stopped

    signal.signal(signal.SIGTERM, stop)
    started = time.perf_counter()
    parts = CORPORA[mode]["small"]
    corpus = make_corpus(out / "corpus-small", parts, {"parts": parts})
    results: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": machine(), "code": git_commit(),
                     "command": "make bench-scale" if not args.quick else "bench/scale.py --quick",
                     "quick": args.quick, "repeat": args.repeat, "moto": moto_version(),
                     "transfers": remote_transfers(),
                     "real_s3_latency_ms": list(REAL_S3_LATENCY_MS), "real_s3_latency_source": REAL_S3_SOURCE,
                     "results_file": "bench/scale-results.json" if not args.quick else str(results_path)}
    remote_py = REPO / "pipelines" / "storage" / "remote.py"
    results["remote_py"] = {"sha256": hashlib.sha256(remote_py.read_bytes()).hexdigest()[:16],
                            "modified": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(remote_py.stat().st_mtime))}
    moto = Moto(work)
    try:
        os.environ |= AWS | {"AWS_ENDPOINT_URL": moto.endpoint}
        print(f"moto {results['moto']} on {moto.endpoint} (pid {moto.proc.pid})\nbuilds", flush=True)
        results["builds"], record_body = bench_builds(moto, corpus, work, args.repeat, args.spread, args.max_extra)
        results_path.write_text(json.dumps(results, indent=1))
        print("commit", flush=True)
        results["commit"] = bench_commit(moto, work, SIZES[mode], args.repeat, record_body)
        results["load_at_end"] = os.getloadavg()
    finally:
        moto.stop()
    results["total_s"] = time.perf_counter() - started
    results_path.write_text(json.dumps(results, indent=1))
    shutil.rmtree(work / "cache-local", ignore_errors=True)
    from report import write_scale_section

    write_scale_section(report_path, results)
    print(f"done in {results['total_s'] / 60:.1f} min: {results_path}, {report_path}", flush=True)


if __name__ == "__main__":
    main()
