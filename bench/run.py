"""The tracehouse benchmark: one command, one results file.

    make bench                         # or: .venv/bin/python bench/run.py [--quick]

1. Generates a corpus with ``tracehouse sample``: 388 graphs at --scale 3 plus 12 at --big-scale 40
   (400 graphs, over 1 GB, single files over 200 MB), kept in bench/out/corpus between runs.
2. Ingest, each method in its own process on the same files (peak RSS from wait4), --repeat times
   in interleaved rounds (the median run counts), the clock started after the method's imports:
   (a) read bytes / parse with orjson and with msgspec (the floor: the faster, one core; and msgspec
   again with glibc keeping freed memory as tracehouse does, a stricter reference),
   (b) pure DuckDB read_json + unnest + COPY, (c) smartcomment.ExecNetwork.import_graph + DataFrames,
   (d) tracehouse's ingest engine.
3. `tracehouse build --full` end to end, then the rebuild after changing 1 file of 400 (a new process,
   and a running `tracehouse watch`).
4. A warehouse of >= 10 M nodes (the built partitions replicated under new graph ids): latency of
   each mart query, of the mart views, and of an upstream() lineage query.
5. The README run command end to end on a fresh warehouse.
Writes bench/results.json and BENCHMARKS.md. Timings are never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PYTHON = sys.executable
METHODS = ["read_bytes", "parse_orjson", "parse_msgspec", "duckdb", "smartcomment", "tracehouse"]


def run_measured(command: list[str], env: dict | None = None) -> dict:
    """Run a command; return its wall time, peak RSS (MB) and stdout."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    stdout, stderr = proc.communicate()
    seconds = time.perf_counter() - started
    # wait4 is gone once communicate() reaped the child; RUSAGE_CHILDREN's max is per process tree,
    # so each measured command runs through `measure_rss` below instead.
    if proc.returncode not in (0, 3):
        raise RuntimeError(f"{' '.join(command)} failed ({proc.returncode}):\n{stderr[-3000:]}")
    return {"seconds": seconds, "stdout": stdout, "stderr": stderr}


def measure(command: list[str]) -> dict:
    """Run ``command`` as a child of a fresh Python that reports the child's peak RSS."""
    wrapper = (
        "import json, os, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)\n"
        "out = p.stdout.read()\n"
        "_, status, usage = os.wait4(p.pid, 0)\n"
        "print(json.dumps({'wall': time.perf_counter() - t, 'peak_rss_mb': usage.ru_maxrss / 1024,"
        " 'status': os.waitstatus_to_exitcode(status), 'out': out.decode()}))\n"
    )
    result = run_measured([PYTHON, "-c", wrapper, *command])
    record = json.loads(result["stdout"])
    if record["status"] not in (0, 3):
        raise RuntimeError(f"{' '.join(command)} exited {record['status']}: {result['stderr'][-2000:]}")
    return record


def make_corpus(out: Path, scale: float, big_scale: float, quick: bool) -> Path:
    corpus = out / "corpus"
    stamp = corpus / ".params.json"
    params = {"scale": scale, "big_scale": big_scale, "quick": quick}
    if stamp.is_file() and json.loads(stamp.read_text()) == params:
        return corpus
    shutil.rmtree(corpus, ignore_errors=True)
    base, big = out / "gen-base", out / "gen-big"
    per_split, big_per_split = (22, 3) if quick else (97, 3)
    for folder, s, n, seed in ((base, scale, per_split, 0), (big, big_scale, big_per_split, 1)):
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run([PYTHON, "-m", "pipelines.cli", "sample", "--out", str(folder), "--scale", str(s),
                        "--graphs-per-split", str(n), "--seed", str(seed)], cwd=REPO, check=True)
    for folder, prefix in ((base, ""), (big, "big-")):
        for path in folder.glob("*/*.json"):
            target = corpus / path.parent.name / f"{prefix}{path.name}"
            target.parent.mkdir(parents=True, exist_ok=True)
            path.rename(target)
        shutil.rmtree(folder)
    stamp.write_text(json.dumps(params))
    return corpus


def corpus_facts(corpus: Path) -> dict:
    sizes = [p.stat().st_size for p in corpus.glob("*/*.json")]
    return {"files": len(sizes), "total_mb": sum(sizes) / 1e6, "largest_mb": max(sizes) / 1e6}


def bench_ingest(corpus: Path, out: Path, repeat: int) -> dict:
    """Every method ``repeat`` times, in interleaved rounds (a slow spell of this shared machine hits
    all methods alike); a method's time is its median run, its peak RSS the highest."""
    runs: dict[str, list[dict]] = {method: [] for method in METHODS}
    for round_no in range(1, repeat + 1):
        for method in METHODS:
            target = out / "ingest" / method
            shutil.rmtree(target, ignore_errors=True)
            record = measure([PYTHON, str(BENCH / "methods.py"), method, str(corpus), str(target)])
            data = json.loads(record["out"].strip().splitlines()[-1])
            data["peak_rss_mb"] = record["peak_rss_mb"]
            runs[method].append(data)
            print(f"  round {round_no}: {method:18s} {data['seconds']:7.2f} s  "
                  f"peak {data['peak_rss_mb']:7.0f} MB", flush=True)
            shutil.rmtree(target, ignore_errors=True)
    results = {}
    for method, records in runs.items():
        data = sorted(records, key=lambda r: r["seconds"])[(len(records) - 1) // 2]  # the median run
        data = dict(data, runs_s=[r["seconds"] for r in records],
                    peak_rss_mb=max(r["peak_rss_mb"] for r in records))
        data["mb_per_s"] = data["bytes"] / 1e6 / data["seconds"]
        if "graphs" in data:
            data["graphs_per_s"] = data["graphs"] / data["seconds"]
        results[method] = data
        print(f"  {method:18s} median {data['seconds']:7.2f} s  {data['mb_per_s']:7.1f} MB/s  "
              f"peak {data['peak_rss_mb']:7.0f} MB", flush=True)
    return results


def tracehouse(*args: str) -> list[str]:
    return [str(REPO / ".venv" / "bin" / "tracehouse"), *args]


EDIT = (b'"value":"', b'"value":"(edited) ')


def edit_one_file(corpus: Path) -> tuple[Path, bytes]:
    """Change one node's value in the first rag file (a corrected trace); returns what to restore."""
    changed = sorted(corpus.glob("rag/*.json"))[0]
    original = changed.read_bytes()
    assert EDIT[0] in original, f"{changed} holds no node value to edit"
    changed.write_bytes(original.replace(*EDIT, 1))
    return changed, original


def bench_builds(corpus: Path, out: Path) -> dict:
    warehouse = out / "warehouse"
    shutil.rmtree(warehouse, ignore_errors=True)
    source = f"memtracebench={corpus}"
    build = tracehouse("build", "--source", source, "--warehouse", str(warehouse), "--quiet")
    full = measure([*build, "--full"])
    print(f"  full build     {full['wall']:7.2f} s  peak {full['peak_rss_mb']:.0f} MB", flush=True)
    changed, original = edit_one_file(corpus)
    try:
        incremental = measure(build)
    finally:
        changed.write_bytes(original)
    print(f"  1-file rebuild, new process {incremental['wall']:7.2f} s ({incremental['wall'] / full['wall']:.1%})",
          flush=True)
    restore = measure(build)
    noop = measure(build)
    warm = bench_watch(corpus, warehouse)
    print(f"  1-file rebuild in tracehouse watch {warm['rebuild_s']:7.2f} s ({warm['rebuild_s'] / full['wall']:.1%})",
          flush=True)
    summary = json.loads((warehouse / "last_build.json").read_text())
    return {
        "full_build_s": full["wall"], "full_build_peak_rss_mb": full["peak_rss_mb"],
        "incremental_1_of_400_s": incremental["wall"], "incremental_ratio": incremental["wall"] / full["wall"],
        "rebuild_after_restore_s": restore["wall"], "noop_build_s": noop["wall"],
        "watch_rebuild_1_of_400_s": warm["rebuild_s"], "watch_ratio": warm["rebuild_s"] / full["wall"],
        "watch_restore_s": warm["restore_s"], "watch_idle_round_s": warm["idle_round_s"],
        "edit": "one node value in " + changed.relative_to(corpus).as_posix(), "rows": summary["rows"],
    }


def bench_watch(corpus: Path, warehouse: Path, interval: float = 0.5) -> dict:
    """The same 1-file change seen by a running `tracehouse watch`: the build time it reports
    (from noticing the change to the published dashboard), after its start-up is done."""
    command = tracehouse("watch", "--source", f"memtracebench={corpus}", "--warehouse", str(warehouse),
                         "--interval", str(interval), "--quiet")
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    errors: list[str] = []
    for stream, sink in ((proc.stdout, lines), (proc.stderr, errors)):
        threading.Thread(target=lambda st=stream, si=sink: si.extend(st), daemon=True).start()
    try:
        deadline = time.perf_counter() + 300
        while not any("ready" in line for line in errors):
            if proc.poll() is not None or time.perf_counter() > deadline:
                raise RuntimeError("tracehouse watch did not get ready:\n" + "".join(errors[-20:]))
            time.sleep(0.05)
        first = _next_build(lines, 0)
        changed, original = edit_one_file(corpus)
        try:
            rebuild = _next_build(lines, first)
        finally:
            changed.write_bytes(original)
        _next_build(lines, rebuild)
        time.sleep(2 * interval)
        cpu_before, started = _cpu_seconds(proc.pid), time.perf_counter()
        time.sleep(10)  # idle rounds: list the files, find nothing changed
        idle_cpu = (_cpu_seconds(proc.pid) - cpu_before) / ((time.perf_counter() - started) / interval)
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    times = [float(line.split("build after ")[1].split(" s")[0]) for line in lines if "build after" in line]
    return {"rebuild_s": times[1], "restore_s": times[2], "idle_round_s": idle_cpu, "interval_s": interval}


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _next_build(lines: list[str], seen: int, timeout: float = 300) -> int:
    """Wait until the watcher has reported one more build than ``seen``; returns the new count."""
    deadline = time.perf_counter() + timeout
    while sum("build after" in line for line in lines) <= seen:
        if time.perf_counter() > deadline:
            raise RuntimeError("tracehouse watch reported no build:\n" + "".join(lines[-20:]))
        time.sleep(0.05)
    return seen + 1


def scale_warehouse(source: Path, target: Path, min_nodes: int) -> int:
    """Copy the built partitions under new graph ids until the warehouse holds >= min_nodes nodes."""
    import duckdb

    from pipelines import db, schema
    from pipelines.storage import Warehouse, write_parquet_atomic

    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, symlinks=True, ignore=shutil.ignore_patterns(".dagster", "corpus"))
    warehouse = Warehouse(target)
    base = warehouse.partitions()
    con = db.scratch(warehouse, with_marts=False)
    nodes = con.execute("select count(*) from nodes").fetchone()[0]
    copies = max(0, -(-min_nodes // max(nodes, 1)) - 1)
    for k in range(1, copies + 1):
        for key in base:
            staging = warehouse.new_generation(f"copy{k}__{key}")
            current = warehouse.current(key)
            for table in schema.TABLES:
                src = str(current / f"{table}.parquet")
                dst = str(staging / f"{table}.parquet")
                # every id that must stay unique across graphs gets the copy's suffix
                renamed = "graph_id || $suffix as graph_id"
                if table == "annotations":
                    renamed += ", annotation_id || $suffix as annotation_id"
                select = f"select * replace ({renamed}) from read_parquet($src)"
                params = {"suffix": f"#copy{k}", "src": src}
                if table == "ingest_errors":
                    select, params = "select * from read_parquet($src)", {"src": src}
                rows = duckdb.sql(select, params=params).to_arrow_table()
                write_parquet_atomic(rows, Path(dst))
            shutil.copy(current / "manifest.json", staging / "manifest.json")
            warehouse.publish(f"copy{k}__{key}", staging)
    db.publish_database(warehouse)
    con = db.connect(warehouse)
    return con.execute("select count(*) from nodes").fetchone()[0]


def timed(con, sql: str, params: list | None = None, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        con.execute(sql, params or []).fetchall()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def bench_queries(out: Path, min_nodes: int) -> dict:
    from pipelines import db
    from pipelines.storage import Warehouse, write_parquet_atomic

    big = out / "warehouse-10m"
    nodes = scale_warehouse(out / "warehouse", big, min_nodes)
    warehouse = Warehouse(big)
    con = db.scratch(warehouse, with_marts=False)
    results: dict = {"nodes": nodes, "mart_compute_s": {}, "mart_view_s": {}}
    for mart in db.mart_names():  # computed once, timed, and materialized so its view exists
        started = time.perf_counter()
        rows = con.sql(db.sql_file("marts", f"{mart}.sql")).to_arrow_table()
        results["mart_compute_s"][mart] = seconds = time.perf_counter() - started
        write_parquet_atomic(rows, warehouse.mart_path(mart))
        print(f"  compute {mart:28s} {seconds:7.3f} s", flush=True)
    db.publish_database(warehouse)
    reader = db.connect(warehouse)
    for mart in db.mart_names():
        results["mart_view_s"][mart] = timed(reader, f'select * from "{mart}"')
    gid, node = reader.execute(
        "select graph_id, full_node_id from nodes where class_name = 'prediction' order by graph_id limit 1"
    ).fetchone()
    results["upstream_s"] = timed(reader, "select count(*) from upstream(?, ?)", [gid, node])
    print(f"  upstream() of a prediction  {results['upstream_s']:7.3f} s", flush=True)
    return results


def bench_dashboard(out: Path) -> float | None:
    """Time the dashboard assets alone on the benchmark warehouse."""
    script = (
        "import time, dagster as dg\n"
        "from pipelines.config import load_settings\n"
        "from pipelines.defs import build_definitions\n"
        "from pipelines.defs.resources import TracehouseResource\n"
        f"s = load_settings({str(out / 'warehouse')!r}, ['memtracebench={out / 'corpus'}'])\n"
        "resource = TracehouseResource.from_settings(s)\n"
        "defs = build_definitions(resource)\n"
        "assets = list(defs.assets)\n"
        "t = time.perf_counter()\n"
        "r = dg.materialize(assets, selection=dg.AssetSelection.groups('dashboard'),"
        " instance=dg.DagsterInstance.ephemeral(), resources={'tracehouse': resource})\n"
        "print(time.perf_counter() - t if r.success else -1)\n"
    )
    try:
        result = run_measured([PYTHON, "-c", script])
    except RuntimeError as exc:
        print(f"  dashboard: not measured ({str(exc).splitlines()[0]})")
        return None
    seconds = float(result["stdout"].strip().splitlines()[-1])
    print(f"  dashboard assets {seconds:7.2f} s", flush=True)
    return seconds if seconds >= 0 else None


def bench_run_command(out: Path) -> float:
    warehouse = out / "run-command"
    shutil.rmtree(warehouse, ignore_errors=True)
    record = measure(tracehouse("build", "--warehouse", str(warehouse), "--quiet"))
    print(f"  README run command (fresh) {record['wall']:7.2f} s", flush=True)
    return record["wall"]


def machine() -> dict:
    mem = Path("/proc/meminfo").read_text().split("\n")[0].split()[1]
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gb": round(int(mem) / 1024 / 1024, 1),
            "python": platform.python_version(), "os": platform.platform()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(BENCH / "out"))
    parser.add_argument("--scale", type=float, default=3.0)
    parser.add_argument("--big-scale", type=float, default=40.0)
    parser.add_argument("--min-nodes", type=int, default=10_000_000)
    parser.add_argument("--quick", action="store_true", help="small corpus, for trying the script out")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each ingest method (the median counts)")
    parser.add_argument("--only", metavar="STAGES", help="comma-separated stages to rerun (ingest, builds, "
                        "dashboard, queries, run_command), merged into the existing results file")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    big_scale = 8.0 if args.quick else args.big_scale
    min_nodes = 200_000 if args.quick else args.min_nodes

    results_path = BENCH / ("results-quick.json" if args.quick else "results.json")
    stages = ["ingest", "builds", "dashboard", "queries", "run_command"]
    only = args.only.split(",") if args.only else stages
    print("corpus", flush=True)
    corpus = make_corpus(out, args.scale, big_scale, args.quick)
    results = json.loads(results_path.read_text()) if args.only and results_path.is_file() else {}
    results |= {"date": time.strftime("%Y-%m-%d"), "machine": machine(), "corpus": corpus_facts(corpus),
                "command": "make bench" + (" (--quick)" if args.quick else "")}
    print(f"  {results['corpus']}", flush=True)
    if "ingest" in only:
        print("ingest", flush=True)
        results["ingest"] = bench_ingest(corpus, out, args.repeat)
    if "builds" in only:
        print("builds", flush=True)
        results["builds"] = bench_builds(corpus, out)
    if "dashboard" in only:
        results["dashboard_s"] = bench_dashboard(out)
    if "queries" in only:
        print("queries", flush=True)
        results["queries"] = bench_queries(out, min_nodes)
    if "run_command" in only:
        results["run_command_s"] = bench_run_command(out)
    results_path.write_text(json.dumps(results, indent=1))
    if not args.quick:
        from report import write_report

        write_report(results, REPO / "BENCHMARKS.md")
    print("done", flush=True)


if __name__ == "__main__":
    main()
