"""The tracehouse benchmark: one command, one results file, every target of issue 16 side by side.

    make bench                                 # or: .venv/bin/python bench/run.py
    BENCH_QUICK=1 make bench                   # or: bench/run.py --quick (small corpora, ~3 min)
    bench/run.py --only fresh,rebuild          # rerun stages, merged into the existing results

Corpora (``tracehouse sample``, kept in --out between runs, regenerated only when their parameters
change): *large*, 388 graphs at --scale 3 plus 12 at --big-scale 40 (400 graphs, ~1.1 GB, single
files over 400 MB) in ``corpus/``; *small*, ``--graphs-per-split 8 --scale 8 --seed 11`` (32 graphs,
~58 MB) in ``corpus-small/``. Stages, each a new process per measured command (peak RSS of the
process tree polled from /proc, every output line time-stamped):

ingest       each ingest method on the large corpus in its own process, --repeat interleaved rounds
             (the median run counts), the clock started after the method's imports: read bytes, parse
             with orjson / msgspec (the floor), pure DuckDB, smartcomment, tracehouse's ingest engine.
fresh        `tracehouse build --warehouse W --source memtracebench=DIR` into a fresh warehouse,
             against bare DuckDB (sql/bench/duckdb_flatten.sql: read_json + unnest + COPY of the six
             tables, bench/methods.py) on the same files in its own process; both corpora, --repeat
             interleaved rounds. Also the build's peak memory and the longest gap between its
             progress lines.
rebuild      on the large warehouse: one file changed, as a new `tracehouse build` process (against
             the fresh build), then the file restored, then a build with nothing changed.
watch        the same change seen by a running `tracehouse watch`, and its idle rounds.
run_command  `make run`'s command (`tracehouse build`, no source: the embedded sample corpus,
             generated into the warehouse) on a fresh warehouse, the venv already made.
dagster      a fresh build of the small corpus with and without recording it in the warehouse's
             Dagster instance (bench/build_once.py: run_build(record_in_dagster=...)), the events
             its runs stored, and the steps of the build's Dagster runs.
queries      the large warehouse replicated under new partitions and graph ids into a committed build
             of >= --min-nodes nodes (values included); each mart's SQL computed over it
             (pipelines.analytics.marts.compute_mart), the marts committed, then the published marts and an
             upstream() lineage query timed.
executor     a fresh build of the small corpus in-process against `--executor dask --workers 1` and
             `--workers 2` (its graph partitions flattened as Dagster steps on a local Dask cluster the
             build starts), in interleaved rounds: wall time, process tree peak, and the flattening
             phase (cluster start, the steps, cluster stop) from the progress lines' times.

Writes <out>/results.json and the report: BENCHMARKS.md (its raw numbers in bench/results.json) for a
full run, <out>/BENCHMARKS.md for --quick, or --report FILE. Timings are never asserted in tests.
Object storage (S3, moto) against local disk: bench/scale.py (`make bench-scale`), its own section.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
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
sys.path.insert(0, str(REPO))  # pipelines, when run as a script from anywhere
PYTHON = sys.executable
METHODS = ["read_bytes", "parse_orjson", "parse_msgspec", "duckdb", "smartcomment", "tracehouse"]
STAGES = ["ingest", "fresh", "rebuild", "watch", "run_command", "dagster", "queries", "executor"]
ALIASES = {"builds": ["fresh", "rebuild", "watch"], "dashboard": ["dagster"]}  # the stages' earlier names
PAGE = os.sysconf("SC_PAGE_SIZE")

# tracehouse sample parameters: (graphs per split, scale, seed) per part of a corpus.
CORPORA = {
    "full": {
        "large": {"": (97, 3.0, 0), "big-": (3, 40.0, 1)},
        "small": {"": (8, 8.0, 11)},
    },
    "quick": {
        "large": {"": (10, 1.0, 0), "big-": (1, 10.0, 1)},
        "small": {"": (2, 2.0, 11)},
    },
}


# -- running one measured process ---------------------------------------------------------------------


def tree_rss(root: int) -> int:
    """Resident bytes of a process and all its descendants now (0 once it is gone)."""
    pids, total, i = [root], 0, 0
    while i < len(pids):
        pid = pids[i]
        i += 1
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
            for task in Path(f"/proc/{pid}/task").iterdir():
                pids.extend(int(child) for child in (task / "children").read_text().split())
        except (OSError, ValueError, IndexError):  # gone meanwhile
            continue
    return total


def clean_env(extra: dict | None = None) -> dict:
    """The environment of a measured command: no tracehouse settings of the caller's."""
    env = {k: v for k, v in os.environ.items() if k not in ("TRACEHOUSE_CONFIG", "TRACEHOUSE_WAREHOUSE")}
    env.setdefault("GX_ANALYTICS_ENABLED", "false")
    return env | (extra or {})


def run_process(command: list[str], cwd: Path = REPO, ok: tuple[int, ...] = (0, 3), poll: float = 0.05,
                env: dict[str, str] | None = None) -> dict:
    """Run ``command`` to its end (``env``: variables set for it besides :func:`clean_env`'s): wall
    seconds, exit code, peak RSS of the process (wait4: the largest of it and its reaped children) and
    of its whole process tree (the sum, polled every ``poll`` s), and every line of its stdout and
    stderr with the second it arrived at."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env(env))
    lines: list[tuple[float, str, str]] = []
    events: list[tuple[float, str, dict]] = []  # (second, event name, the event) of pipelines/progress.py
    done = threading.Event()
    tree_peak = [0]

    def read(stream, name: str) -> None:
        for raw in stream:
            text = raw.decode("utf-8", "replace").rstrip("\n")
            said = _event(text)
            if said is not None:  # a progress event (--progress json): its name and fields, and its line
                events.append((time.perf_counter() - started, said["event"], said))
                text = f"tracehouse: {said['text']}"
            lines.append((time.perf_counter() - started, name, text))

    def sample() -> None:
        while not done.is_set():
            tree_peak[0] = max(tree_peak[0], tree_rss(proc.pid))
            done.wait(poll)

    threads = [threading.Thread(target=read, args=(proc.stdout, "stdout"), daemon=True),
               threading.Thread(target=read, args=(proc.stderr, "stderr"), daemon=True),
               threading.Thread(target=sample, daemon=True)]
    for thread in threads:
        thread.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    done.set()
    for thread in threads:
        thread.join(timeout=30)  # a grandchild may hold the pipes a little longer
    proc.stdout.close()
    proc.stderr.close()
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    lines.sort(key=lambda line: line[0])
    record = {
        "wall": wall, "exit": code, "peak_rss_mb": usage.ru_maxrss / 1024, "tree_peak_mb": tree_peak[0] / 2**20,
        "lines": lines, "events": sorted(events, key=lambda e: e[0]),
        "stdout": "\n".join(t for _, s, t in lines if s == "stdout"),
    }
    if code not in ok:
        tail = "\n".join(t for _, _, t in lines[-40:])
        raise RuntimeError(f"{' '.join(map(str, command))} exited {code}:\n{tail}")
    return record


def progress_gaps(record: dict) -> dict:
    """How long the user of a build waits for the next line: from the start to its first line, the
    longest gap between two lines (with the lines on either side), and from its last line to its exit."""
    lines = [(t, text) for t, _, text in record["lines"] if text.strip()]
    if not lines:
        return {"lines": 0, "first_line_s": record["wall"], "longest_gap_s": record["wall"], "last_line_to_exit_s": 0}
    gap, after, before = 0.0, "", ""
    for (t0, a), (t1, b) in zip(lines, lines[1:], strict=False):
        if t1 - t0 > gap:
            gap, after, before = t1 - t0, a.strip(), b.strip()
    return {"lines": len(lines), "first_line_s": lines[0][0], "longest_gap_s": gap, "gap_after": after[:160],
            "gap_before": before[:160], "last_line_to_exit_s": record["wall"] - lines[-1][0]}


def timeline(record: dict) -> list[str]:
    return [f"{t:7.2f} {s[3]} {text[:200]}" for t, s, text in record["lines"]]


def median_run(records: list[dict], key: str = "wall") -> dict:
    return sorted(records, key=lambda r: r[key])[(len(records) - 1) // 2]


def tracehouse(*args: str) -> list[str]:
    return [str(Path(PYTHON).parent / "tracehouse"), *args]


def build_command(warehouse: Path, corpus: Path, *extra: str) -> list[str]:
    return tracehouse("build", "--progress", "json", "--warehouse", str(warehouse), "--source",
                      f"memtracebench={corpus}", *extra)


def _event(line: str) -> dict | None:
    """A progress event the build wrote as JSON (``--progress json``), else None."""
    if not line.startswith("{"):
        return None
    try:
        said = json.loads(line)
    except ValueError:
        return None
    return said if isinstance(said, dict) and "event" in said else None


def committed_rows(warehouse: Path) -> dict:
    from pipelines.storage.state import CommitLog
    from pipelines.storage.warehouse import Warehouse

    record = CommitLog(Warehouse(warehouse)).latest()
    return dict(record.summary.get("rows", {})) if record else {}


# -- corpora ------------------------------------------------------------------------------------------


def make_corpus(folder: Path, parts: dict[str, tuple[int, float, int]], stamp_params: dict) -> Path:
    """``tracehouse sample`` once per part (file names prefixed by the part), unless ``folder`` holds
    the corpus of the same parameters already."""
    stamp = folder / ".params.json"
    stamp_params = json.loads(json.dumps(stamp_params))  # as read back (tuples become lists)
    if stamp.is_file() and json.loads(stamp.read_text()) == stamp_params:
        return folder
    print(f"  generating {folder} ({stamp_params})", flush=True)
    shutil.rmtree(folder, ignore_errors=True)
    for prefix, (per_split, scale, seed) in parts.items():
        gen = folder.parent / f"{folder.name}.gen{prefix.strip('-')}"
        shutil.rmtree(gen, ignore_errors=True)
        subprocess.run([*tracehouse("sample", "--out", str(gen), "--scale", str(scale), "--graphs-per-split",
                                    str(per_split), "--seed", str(seed))], cwd=REPO, check=True, env=clean_env())
        for path in gen.glob("*/*.json"):
            target = folder / path.parent.name / f"{prefix}{path.name}"
            target.parent.mkdir(parents=True, exist_ok=True)
            path.rename(target)
        shutil.rmtree(gen)
    stamp.write_text(json.dumps(stamp_params))
    return folder


def mode_and_out(args: argparse.Namespace) -> tuple[str, Path]:
    """``quick`` or ``full``, and the working folder (made): --out, else bench/out (bench/out/quick)."""
    out = Path(args.out or BENCH / "out" / ("quick" if args.quick else "")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    return ("quick" if args.quick else "full"), out


def corpora(out: Path, mode: str, scale: float, big_scale: float) -> dict[str, Path]:
    parts = CORPORA[mode]
    large = dict(parts["large"])
    if mode == "full":  # stamped with these flags, as full corpora already made are, so those are kept
        large = {"": (97, scale, 0), "big-": (3, big_scale, 1)}
        stamp = {"scale": scale, "big_scale": big_scale, "quick": False}
    else:
        stamp = {"quick": True, "parts": large}
    return {
        "large": make_corpus(out / "corpus", large, stamp),
        "small": make_corpus(out / "corpus-small", parts["small"], {"parts": parts["small"]}),
    }


def corpus_facts(corpus: Path) -> dict:
    sizes = [p.stat().st_size for p in corpus.glob("*/*.json")]
    return {"path": str(corpus), "files": len(sizes), "total_mb": sum(sizes) / 1e6, "largest_mb": max(sizes) / 1e6}


# -- stages -------------------------------------------------------------------------------------------


def run_method(method: str, corpus: Path, target: Path) -> dict:
    """One ingest method in its own process (bench/methods.py); its JSON line plus wall and peak RSS."""
    shutil.rmtree(target, ignore_errors=True)
    try:
        record = run_process([PYTHON, str(BENCH / "methods.py"), method, str(corpus), str(target)], ok=(0,))
    finally:
        shutil.rmtree(target, ignore_errors=True)
    data = json.loads(record["stdout"].strip().splitlines()[-1])
    return data | {"wall": record["wall"], "peak_rss_mb": record["peak_rss_mb"], "tree_peak_mb": record["tree_peak_mb"]}


def bench_ingest(corpus: Path, out: Path, repeat: int) -> dict:
    """Every method ``repeat`` times, in interleaved rounds (a slow spell of this shared machine hits
    all methods alike); a method's time is its median run, its peak RSS the highest."""
    runs: dict[str, list[dict]] = {method: [] for method in METHODS}
    for round_no in range(1, repeat + 1):
        for method in METHODS:
            data = run_method(method, corpus, out / "ingest" / method)
            runs[method].append(data)
            print(f"  round {round_no}: {method:18s} {data['seconds']:7.2f} s  "
                  f"peak {data['peak_rss_mb']:7.0f} MB", flush=True)
    results = {}
    for method, records in runs.items():
        data = dict(median_run(records, "seconds"), runs_s=[r["seconds"] for r in records],
                    peak_rss_mb=max(r["peak_rss_mb"] for r in records))
        data["mb_per_s"] = data["bytes"] / 1e6 / data["seconds"]
        if "graphs" in data:
            data["graphs_per_s"] = data["graphs"] / data["seconds"]
        results[method] = data
        print(f"  {method:18s} median {data['seconds']:7.2f} s  {data['mb_per_s']:7.1f} MB/s  "
              f"peak {data['peak_rss_mb']:7.0f} MB", flush=True)
    return results


def bench_fresh(corpora_: dict[str, Path], out: Path, repeat: int) -> dict:
    """Target 1 (with 5 and 6): a fresh `tracehouse build` process against a bare DuckDB flatten of
    the same files in its own process, for each corpus, in interleaved rounds."""
    builds: dict[str, list[dict]] = {name: [] for name in corpora_}
    ducks: dict[str, list[dict]] = {name: [] for name in corpora_}
    for round_no in range(1, repeat + 1):
        for name, corpus in corpora_.items():
            warehouse = out / f"warehouse-{name}"
            shutil.rmtree(warehouse, ignore_errors=True)
            record = run_process(build_command(warehouse, corpus), cwd=out)
            record["progress"] = progress_gaps(record)
            builds[name].append(record)
            duck = run_method("duckdb", corpus, out / "duckdb-flatten")
            ducks[name].append(duck)
            print(f"  round {round_no}: {name:5s} build {record['wall']:7.2f} s (tree peak "
                  f"{record['tree_peak_mb']:.0f} MB, longest silence {record['progress']['longest_gap_s']:.1f} s); "
                  f"duckdb process {duck['wall']:6.2f} s -> {record['wall'] / duck['wall']:.1f}x", flush=True)
    results = {}
    for name, corpus in corpora_.items():
        build, duck = median_run(builds[name]), median_run(ducks[name])
        results[name] = {
            "corpus": corpus_facts(corpus),
            "build_s": build["wall"], "build_runs_s": [r["wall"] for r in builds[name]],
            "duckdb_process_s": duck["wall"], "duckdb_runs_s": [r["wall"] for r in ducks[name]],
            "duckdb_flatten_s": duck["seconds"], "duckdb_imports_s": duck["imports_s"],
            "duckdb_peak_rss_mb": max(r["peak_rss_mb"] for r in ducks[name]),
            "ratio": build["wall"] / duck["wall"],
            "peak_rss_mb": max(r["peak_rss_mb"] for r in builds[name]),
            "tree_peak_mb": max(r["tree_peak_mb"] for r in builds[name]),
            "progress": build["progress"],
            "longest_gap_runs_s": [r["progress"]["longest_gap_s"] for r in builds[name]],
            "rows": committed_rows(out / f"warehouse-{name}"),
            "summary": build["stdout"].splitlines()[-1] if build["stdout"] else "",
            "timeline": timeline(build),
        }
        print(f"  {name:5s} median build {build['wall']:7.2f} s, duckdb {duck['wall']:6.2f} s: "
              f"{results[name]['ratio']:.1f}x", flush=True)
    return results


EDIT = (b'"value":"', b'"value":"(edited) ')


def edit_backup(out: Path) -> Path:
    return out / ".edited-file.json"


def restore_edit(out: Path) -> None:
    """Put back a file an interrupted run left edited."""
    backup = edit_backup(out)
    if backup.is_file():
        data = json.loads(backup.read_text())
        Path(data["path"]).write_bytes(Path(data["copy"]).read_bytes())
        Path(data["copy"]).unlink()
        backup.unlink()


def edit_one_file(corpus: Path, out: Path) -> tuple[Path, bytes]:
    """Change one node's value in the first rag file (a corrected trace); returns what to restore."""
    changed = sorted(corpus.glob("rag/*.json"))[0]
    original = changed.read_bytes()
    assert EDIT[0] in original, f"{changed} holds no node value to edit"
    copy = out / ".edited-file.orig"
    copy.write_bytes(original)
    edit_backup(out).write_text(json.dumps({"path": str(changed), "copy": str(copy)}))
    changed.write_bytes(original.replace(*EDIT, 1))
    return changed, original


def put_back(changed: Path, original: bytes, out: Path) -> None:
    changed.write_bytes(original)
    (out / ".edited-file.orig").unlink(missing_ok=True)
    edit_backup(out).unlink(missing_ok=True)


def ensure_built(warehouse: Path, corpus: Path, out: Path) -> None:
    """A committed build of ``corpus`` in ``warehouse`` (built now, unmeasured, when missing)."""
    if not (warehouse / "builds").is_dir() or not any((warehouse / "builds").glob("*.json")):
        print(f"  building {warehouse} first (not measured)", flush=True)
        shutil.rmtree(warehouse, ignore_errors=True)
        run_process(build_command(warehouse, corpus, "--quiet"), cwd=out)


def built_line(record: dict) -> str:
    return next((line for line in record["stdout"].splitlines() if line.startswith("partitions:")), "")


# The libraries every `tracehouse build` process imports before it can run a Dagster step.
FLOOR_IMPORTS = "import dagster, duckdb, pyarrow.parquet"


def pieces_of(warehouse: Path) -> dict:
    """How the committed build's rows lie: data files of the eight piece tables, pieces, and the
    pieces the rebuilt partitions keep by reference from an earlier generation."""
    from pipelines.storage.warehouse import Warehouse

    record = Warehouse(warehouse).committed()
    parts = record.snapshot.partitions.values()
    return {"data_files": sum(len(p.pieces) for p in parts) * 8, "pieces": sum(len(p.pieces) for p in parts),
            "pieces_by_reference": sum(1 for p in parts for piece in p.pieces
                                       if not piece.startswith(f"{p.generation}/"))}


def one_file_rebuild(warehouse: Path, corpus: Path, out: Path) -> dict:
    """A build with one file changed, the build that puts it back and one with nothing changed, each
    a new process, after a build that leaves nothing to do."""
    ensure_built(warehouse, corpus, out)
    build = build_command(warehouse, corpus)
    run_process(build, cwd=out)  # whatever an earlier stage left: the next build starts from nothing changed
    changed, original = edit_one_file(corpus, out)
    try:
        incremental = run_process(build, cwd=out)
        layout = pieces_of(warehouse)
    finally:
        put_back(changed, original, out)
    restore = run_process(build, cwd=out)
    noop = run_process(build, cwd=out)
    return {"incremental": incremental, "restore": restore, "noop": noop, "layout": layout, "changed": changed,
            "original": original}


def bench_rebuild(corpus: Path, out: Path, full_s: float, small: Path | None = None,
                  small_full_s: float | None = None) -> dict:
    """Target 3: the rebuild after one changed file of the large corpus (and of the small one), as a
    new process."""
    warehouse = out / "warehouse-large"
    large = one_file_rebuild(warehouse, corpus, out)
    incremental, restore, noop, changed, original = (large[k] for k in ("incremental", "restore", "noop", "changed",
                                                                           "original"))
    # what any new process with a Dagster build in it pays before its first step (3 runs, the median)
    floor = sorted(run_process([PYTHON, "-c", FLOOR_IMPORTS], cwd=out)["wall"] for _ in range(3))[1]
    results = {
        "full_build_s": full_s,
        "incremental_s": incremental["wall"], "ratio": incremental["wall"] / full_s,
        "incremental_partitions": built_line(incremental),
        "incremental_tree_peak_mb": incremental["tree_peak_mb"],
        "incremental_progress": progress_gaps(incremental), "incremental_timeline": timeline(incremental),
        "restore_s": restore["wall"], "noop_s": noop["wall"], "noop_summary": noop["stdout"].splitlines()[-1],
        "floor_s": floor, "floor_ratio": floor / full_s, "floor_imports": FLOOR_IMPORTS,
        "edit": "one node value in " + changed.relative_to(corpus).as_posix(),
        "edited_file_mb": len(original) / 1e6, "files": len(list(corpus.glob("*/*.json"))),
        "layout_after_rebuild": large["layout"],
        "beyond_noop_ratio": (incremental["wall"] - noop["wall"]) / full_s,
    }
    if small is not None and small_full_s:
        got = one_file_rebuild(out / "warehouse-small-rebuild", small, out)
        results["small"] = {
            "full_build_s": small_full_s, "incremental_s": got["incremental"]["wall"], "noop_s": got["noop"]["wall"],
            "restore_s": got["restore"]["wall"], "incremental_partitions": built_line(got["incremental"]),
            "beyond_noop_ratio": (got["incremental"]["wall"] - got["noop"]["wall"]) / small_full_s,
            "layout_after_rebuild": got["layout"], "edited_file_mb": len(got["original"]) / 1e6,
            "files": len(list(small.glob("*/*.json"))),
        }
        print(f"  small corpus: 1-file rebuild {got['incremental']['wall']:.2f} s, nothing changed "
              f"{got['noop']['wall']:.2f} s, fresh {small_full_s:.2f} s: beyond a no-op "
              f"{results['small']['beyond_noop_ratio']:.1%}", flush=True)
    print(f"  1-file rebuild, new process {incremental['wall']:7.2f} s ({results['ratio']:.1%} of {full_s:.1f} s; "
          f"{results['incremental_partitions']}); restore {restore['wall']:.2f} s; nothing changed "
          f"{noop['wall']:.2f} s; a process importing only Dagster, DuckDB and PyArrow {floor:.2f} s "
          f"({results['floor_ratio']:.1%})", flush=True)
    return results


def bench_watch(corpus: Path, out: Path, full_s: float, interval: float = 0.5, idle: float = 10.0) -> dict:
    """The same 1-file change seen by a running `tracehouse watch`: the build time it reports
    (from noticing the change to the committed build), after its start-up is done."""
    warehouse = out / "warehouse-large"
    ensure_built(warehouse, corpus, out)
    command = tracehouse("watch", "--source", f"memtracebench={corpus}", "--warehouse", str(warehouse),
                         "--interval", str(interval), "--quiet")
    proc = subprocess.Popen(command, cwd=out, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=clean_env())
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
        first = _next_build(lines, errors, 0)
        changed, original = edit_one_file(corpus, out)
        try:
            rebuild = _next_build(lines, errors, first)
        finally:
            put_back(changed, original, out)
        _next_build(lines, errors, rebuild)
        time.sleep(2 * interval)
        cpu_before, started = _cpu_seconds(proc.pid), time.perf_counter()
        time.sleep(idle)  # idle rounds: list the files, find nothing changed
        idle_cpu = (_cpu_seconds(proc.pid) - cpu_before) / ((time.perf_counter() - started) / interval)
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    times = [float(line.split("build after ")[1].split(" s")[0]) for line in lines if "build after" in line]
    results = {"rebuild_s": times[1], "ratio": times[1] / full_s, "restore_s": times[2], "idle_round_cpu_s": idle_cpu,
               "interval_s": interval}
    print(f"  1-file rebuild in tracehouse watch {times[1]:7.2f} s ({results['ratio']:.1%}); restore {times[2]:.2f} s; "
          f"idle round {idle_cpu * 1000:.0f} ms CPU", flush=True)
    return results


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _next_build(lines: list[str], errors: list[str], seen: int, timeout: float = 300) -> int:
    """Wait until the watcher has reported one more build than ``seen``; returns the new count."""
    deadline = time.perf_counter() + timeout
    while sum("build after" in line for line in lines) <= seen:
        if time.perf_counter() > deadline:
            raise RuntimeError("tracehouse watch reported no build:\n" + "".join((lines + errors)[-20:]))
        time.sleep(0.05)
    return seen + 1


def bench_run_command(out: Path, repeat: int) -> dict:
    """Target 2: `make run`'s command on a fresh warehouse (the sample corpus generated into it)."""
    runs = []
    for round_no in range(1, repeat + 1):
        warehouse = out / "warehouse-run"
        shutil.rmtree(warehouse, ignore_errors=True)
        record = run_process(tracehouse("build", "--warehouse", str(warehouse)), cwd=out)
        record["progress"] = progress_gaps(record)
        runs.append(record)
        print(f"  round {round_no}: `tracehouse build` (sample corpus, fresh) {record['wall']:7.2f} s", flush=True)
    run = median_run(runs)
    return {"seconds": run["wall"], "runs_s": [r["wall"] for r in runs], "tree_peak_mb": run["tree_peak_mb"],
            "progress": run["progress"], "rows": committed_rows(out / "warehouse-run"),
            "timeline": timeline(run)}


def bench_dagster(corpus: Path, out: Path, repeat: int) -> dict:
    """The same fresh build with its runs in the warehouse's Dagster instance and in an ephemeral one
    that keeps nothing (bench/build_once.py), in interleaved rounds: the difference is what recording
    the build costs (issue 32: at most 1 s)."""
    runs: dict[str, list[dict]] = {"with": [], "without": []}
    for round_no in range(1, repeat + 1):
        for label, flags in (("with", []), ("without", ["--no-record"])):
            warehouse = out / f"warehouse-dagster-{label}"
            shutil.rmtree(warehouse, ignore_errors=True)
            record = run_process([PYTHON, str(BENCH / "build_once.py"), str(warehouse), f"memtracebench={corpus}",
                                  *flags], cwd=out, ok=(0,))
            data = json.loads(record["stdout"].strip().splitlines()[-1]) | {"wall": record["wall"]}
            runs[label].append(data)
            print(f"  round {round_no}: build {label:7s} recording: process {data['wall']:6.2f} s, build "
                  f"{data['build_s']:6.2f} s, {data['events']} events stored", flush=True)
    with_, without = median_run(runs["with"]), median_run(runs["without"])
    return {
        "corpus": corpus_facts(corpus),
        "with_s": with_["wall"], "without_s": without["wall"],
        "with_runs_s": [r["wall"] for r in runs["with"]], "without_runs_s": [r["wall"] for r in runs["without"]],
        "with_build_s": statistics.median(r["build_s"] for r in runs["with"]),
        "without_build_s": statistics.median(r["build_s"] for r in runs["without"]),
        "with_build_runs_s": [r["build_s"] for r in runs["with"]],
        "without_build_runs_s": [r["build_s"] for r in runs["without"]],
        "recording_s": statistics.median(r["build_s"] for r in runs["with"])
        - statistics.median(r["build_s"] for r in runs["without"]),
        "events": with_["events"],
        "steps_s": with_["steps_s"],
    }


EXECUTORS = {  # case -> the build's extra flags
    "in_process": [],
    "dask_1": ["--executor", "dask", "--workers", "1"],
    "dask_2": ["--executor", "dask", "--workers", "2"],
}
# phase -> (the progress events that start it, the ones that end it; pipelines/progress.py); a
# missing event leaves the phase out; "end" is the process's exit
PHASES = {
    "flatten": (("cluster_starting", "fanout_started", "partition_flattening"), ("checks_started",)),
    "cluster_start": (("cluster_starting",), ("cluster_up",)),
    "steps": (("fanout_started",), ("fanout_done",)),
    "after": (("checks_started",), ("end",)),
}


def phases(record: dict) -> dict[str, float]:
    """Seconds between the progress events that open and close each of PHASES (the first opening
    event, then the last closing one after it)."""
    found = {}
    events = [*record["events"], (record["wall"], "end", {})]
    for name, (starts, ends) in PHASES.items():
        begin = next((t for t, event, _ in events if event in starts), None)
        end = [t for t, event, _ in events if begin is not None and t >= begin and event in ends]
        if begin is not None and end:
            found[name] = end[-1] - begin
    return found


def bench_executor(corpus: Path, out: Path, repeat: int) -> dict:
    """A fresh build in-process and with its flattening fanned out on a local Dask cluster of 1 and 2
    worker processes, in interleaved rounds; the committed rows of every case must agree."""
    runs: dict[str, list[dict]] = {name: [] for name in EXECUTORS}
    rows: dict[str, dict] = {}
    for round_no in range(1, repeat + 1):
        for name, flags in EXECUTORS.items():
            warehouse = out / f"warehouse-executor-{name}"
            shutil.rmtree(warehouse, ignore_errors=True)
            load = os.getloadavg()[0]
            record = run_process(build_command(warehouse, corpus, *flags), cwd=out)
            record |= {"phases": phases(record), "load": load}
            runs[name].append(record)
            rows[name] = committed_rows(warehouse)
            print(f"  round {round_no}: {name:10s} {record['wall']:6.2f} s (flattening "
                  f"{record['phases'].get('flatten', 0):5.2f} s, tree peak {record['tree_peak_mb']:.0f} MB, "
                  f"load {load:.1f})", flush=True)
    params = json.loads((corpus / ".params.json").read_text())["parts"][""]  # make_corpus's stamp
    results: dict = {"corpus": corpus_facts(corpus), "same_rows": all(r == rows["in_process"] for r in rows.values()),
                     "corpus_command": "tracehouse sample --out DIR --graphs-per-split {} --scale {:g} --seed {}"
                     .format(*params), "date": time.strftime("%Y-%m-%d %H:%M"), "code": git_commit(), "cases": {}}
    for name, flags in EXECUTORS.items():
        median = median_run(runs[name])
        results["cases"][name] = {
            "command": " ".join(["tracehouse", "build", "--warehouse", "W", "--source", "memtracebench=DIR", *flags]),
            "wall_s": median["wall"], "runs_s": [r["wall"] for r in runs[name]],
            "tree_peak_mb": max(r["tree_peak_mb"] for r in runs[name]),
            "phases": median["phases"],
            "flatten_runs_s": [r["phases"].get("flatten") for r in runs[name]],
            "loads": [r["load"] for r in runs[name]],
            "timeline": timeline(median),
        }
    return results


# -- queries at >= 10 M nodes -------------------------------------------------------------------------

SCALED_STAMP = ".bench-scaled.json"
SCALED_FORMAT = 2  # bump when scale_warehouse writes something else


def _content_digest(warehouse, record) -> str:
    """What a build's tables hold: the code that made them and the sha256 of every input file per
    partition (generation names and mtimes change from build to build; this does not)."""
    from pipelines.builds.plan import manifest_of

    parts = []
    for key, part in sorted(record.snapshot.partitions.items()):
        manifest = manifest_of(warehouse, part.generation) or {"files": []}
        parts.append([key, part.kind, [[e["file"], e.get("sha256")] for e in manifest["files"]]])
    return hashlib.sha256(json.dumps([record.code, parts]).encode()).hexdigest()[:32]


def warm_up(warehouse, record) -> float:
    """Read every table file of the build once, so each mart is timed on a warm page cache whether the
    scaled warehouse was just written or kept from an earlier run; returns the seconds it took."""
    from pipelines import schema

    started = time.perf_counter()
    for table in schema.TABLES:
        for rel in record.snapshot.table_files(table):
            with open(warehouse.path(rel), "rb") as handle:
                while handle.read(16 << 20):
                    pass
    return time.perf_counter() - started


def _copy_table(src: Path, dst: Path, suffix: str) -> None:
    """One table file with every graph-id-like column suffixed, in the source's own row groups and the
    warehouse's own Parquet settings (storage.parquet_options), so the copy is shaped like the original."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from pipelines.readers.base import graph_key
    from pipelines.storage.warehouse import parquet_options, write_atomic

    source = pq.ParquetFile(src)
    schema = source.schema_arrow
    renamed = [i for i, f in enumerate(schema) if f.name in ("graph_id", "annotation_id")]
    keyed = schema.get_field_index("graph_key")  # the digest of graph_id: a copy's own, from its new id

    def write(tmp: Path) -> None:
        with pq.ParquetWriter(tmp, schema, **parquet_options(schema)) as writer:
            for group in range(source.num_row_groups):
                table = source.read_row_group(group)
                for i in renamed:
                    column = table.column(i)
                    suffixed = pc.binary_join_element_wise(column, pa.scalar(suffix, column.type), "")
                    table = table.set_column(i, schema.field(i), suffixed)
                if keyed >= 0:
                    ids = table.column("graph_id")
                    unique = pc.unique(ids)
                    keys = pa.array([graph_key(g) for g in unique.to_pylist()], pa.int64())
                    copied = pc.take(keys, pc.index_in(ids, value_set=unique))
                    table = table.set_column(keyed, schema.field(keyed), copied)
                writer.write_table(table, row_group_size=max(table.num_rows, 1))

    write_atomic(dst, write)


def _copy_manifest(src: Path, dst: Path, key: str, suffix: str, pieces: list[str]) -> None:
    data = json.loads(src.read_text())
    data["partition"] = key
    data["pieces"] = pieces
    for entry in data["files"]:
        entry["graph_ids"] = [gid + suffix for gid in entry.get("graph_ids", [])]
        entry["claimed"] = {gid + suffix: first for gid, first in entry.get("claimed", {}).items()}
    dst.write_text(json.dumps(data, indent=1, sort_keys=True))


def scale_warehouse(source: Path, target: Path, min_nodes: int) -> dict:
    """A committed build of >= ``min_nodes`` nodes in ``target``: the source warehouse's last build
    (its generations hard-linked: files are immutable) plus copies of every partition under new
    partition keys (``<key>.copyNNN``) whose graph ids (and annotation ids) carry the suffix
    ``#copyNNN``, node values included. Kept between runs while the source build is the same."""
    from concurrent.futures import ThreadPoolExecutor

    from pipelines import schema
    from pipelines.analytics import db
    from pipelines.config import from_recorded, recorded_form
    from pipelines.storage.records import GENERATION_TABLE, BuildRecord, PartitionState, Snapshot
    from pipelines.storage.state import CommitLog, committed_rows, inputs_digest
    from pipelines.storage.warehouse import Warehouse, new_id

    src = Warehouse(source)
    record = CommitLog(src).latest()
    if record is None:
        raise RuntimeError(f"{source} has no committed build to scale")
    base_nodes = committed_rows(src, record)["nodes"]
    copies = max(1, math.ceil(min_nodes / max(base_nodes, 1)))
    stamp = {"format": SCALED_FORMAT, "tables": _content_digest(src, record), "copies": copies}
    stamp_path = target / SCALED_STAMP
    kept = json.loads(stamp_path.read_text()) if stamp_path.is_file() else {}
    if {k: kept.get(k) for k in stamp} == stamp and CommitLog(Warehouse(target)).latest():
        print(f"  {target} holds these tables already ({copies} copies): kept", flush=True)
        return kept | {"reused": True}
    shutil.rmtree(target, ignore_errors=True)
    dst = Warehouse(target)
    started = time.perf_counter()
    partitions: dict[str, PartitionState] = {}
    with ThreadPoolExecutor(max_workers=2) as pool:  # pyarrow releases the GIL: one file per core
        for k in range(copies):
            suffix = f"#copy{k:03d}" if k else ""
            jobs, pending = [], []
            for key, part in sorted(record.snapshot.partitions.items()):
                new_key = f"{key}.copy{k:03d}" if k else key
                staging = dst.new_generation(new_key)
                final = f"{dst.rel(staging.parent)}/{staging.with_suffix('').name}"
                pieces = [f"{final}/{i}" for i in range(len(part.pieces))]  # the copy's own, one per piece
                for table in schema.TABLES:
                    for i, rel in enumerate(part.files(table)):
                        folder = staging if table == GENERATION_TABLE else staging / str(i)
                        folder.mkdir(exist_ok=True)
                        src_file, dst_file = src.path(rel), folder / f"{table}.parquet"
                        if k == 0:
                            os.link(src_file, dst_file)
                        else:
                            jobs.append(pool.submit(_copy_table, src_file, dst_file, suffix))
                jobs.append(pool.submit(_copy_manifest, src.path(part.manifest), staging / "manifest.json", new_key,
                                        suffix, pieces))
                pending.append((new_key, part, staging, pieces))
            for job in jobs:
                job.result()
            for new_key, part, staging, pieces in pending:
                final = dst.finish_generation(staging)
                partitions[new_key] = PartitionState(new_key, part.source, part.kind, part.split, dst.rel(final),
                                                     part.fingerprint, tuple(pieces))
            if k % 10 == 0 or k == copies - 1:
                print(f"  copy {k + 1}/{copies} ({time.perf_counter() - started:.0f} s)", flush=True)
    sources = [recorded_form(from_recorded(s, src.root), dst.root) for s in record.sources]
    scaled = BuildRecord(
        build=1, parent=None, attempt=f"bench-scale-{new_id()}",
        committed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), code=record.code,
        inputs=inputs_digest(record.code, sources, {k: p.fingerprint for k, p in partitions.items()}),
        sources=sources, snapshot=Snapshot(partitions),
        summary={"scaled_from": str(source), "scaled_from_build": record.build, "copies": copies},
    )
    scaled.summary["rows"] = committed_rows(dst, scaled)
    CommitLog(dst).commit(scaled)
    db.publish_database(dst, scaled)
    stamp |= {"nodes": scaled.summary["rows"]["nodes"], "rows": scaled.summary["rows"],
              "partitions": len(partitions), "seconds": time.perf_counter() - started,
              "gb": sum(p.stat().st_size for p in dst.tables_dir.rglob("*.parquet")) / 1e9}
    stamp_path.write_text(json.dumps(stamp))
    return stamp | {"reused": False}


def timed(con, sql: str, params: list | None = None, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        con.execute(sql, params or []).fetchall()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def bench_queries(corpus: Path, out: Path, min_nodes: int, repeat: int) -> dict:
    """Target 4: each mart's SQL over a committed build of >= ``min_nodes`` nodes, then reading the
    marts once committed, and an upstream() lineage query."""
    from pipelines.analytics import catalog, db, marts
    from pipelines.storage.records import BuildRecord, Snapshot
    from pipelines.storage.state import CommitLog
    from pipelines.storage.warehouse import Warehouse, new_id, write_parquet_atomic

    ensure_built(out / "warehouse-large", corpus, out)
    big = out / "warehouse-10m"
    scaled = scale_warehouse(out / "warehouse-large", big, min_nodes)
    warehouse = Warehouse(big)
    log = CommitLog(warehouse)
    first = log.get(log.numbers()[0])  # the tables (a reused warehouse also holds the marts' build)
    results: dict = {"nodes": first.summary["rows"]["nodes"], "rows": first.summary["rows"], "scaled": scaled,
                     "partitions": len(first.snapshot.partitions), "marts": {}}
    results["warm_up_s"] = warm_up(warehouse, first)
    print(f"  {results['nodes']:,} nodes in {results['partitions']} partitions (files read in "
          f"{results['warm_up_s']:.0f} s)", flush=True)
    originals = {k: p for k, p in first.snapshot.partitions.items() if ".copy" not in k}
    files: dict[str, str] = {}
    declared = catalog.marts()
    for name in catalog.mart_order():  # a mart that reads marts after them, on the files written here
        runs = []
        for _ in range(repeat):
            started = time.perf_counter()
            rows = marts.compute_mart(warehouse, Snapshot(first.snapshot.partitions, dict(files)), name)
            runs.append(time.perf_counter() - started)
        fragments = {}
        if declared[name].compute == "per_partition":  # a build computes one fragment per rebuilt partition
            for key, part in sorted(originals.items()):
                con = db.connection(warehouse, Snapshot({key: part}))
                try:
                    started = time.perf_counter()
                    con.sql(declared[name].sql).to_arrow_table()
                    fragments[key] = time.perf_counter() - started
                finally:
                    con.close()
        digest = hashlib.sha256(f"{marts.mart_code(name)} {first.snapshot.tables_digest()}".encode()).hexdigest()[:20]
        path = warehouse.marts_dir / name / f"{digest}.parquet"
        write_parquet_atomic(rows, path)
        files[name] = warehouse.rel(path)
        results["marts"][name] = {"compute_s": statistics.median(runs), "runs_s": runs, "rows": rows.num_rows,
                                  "compute": declared[name].compute, "reads": list(catalog.marts_read(name))}
        print(f"  compute {name:28s} {statistics.median(runs):7.2f} s  ({rows.num_rows} rows)", flush=True)
        if fragments:
            results["marts"][name] |= {"fragment_s": fragments, "fragments_total_est_s":
                                       sum(fragments.values()) * len(first.snapshot.partitions) / len(fragments)}
            print("    one partition's fragment: " + ", ".join(f"{k} {v:.2f} s" for k, v in fragments.items()),
                  flush=True)
    last = log.latest()
    record = BuildRecord(
        build=last.build + 1, parent=last.build, attempt=f"bench-marts-{new_id()}",
        committed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), code=first.code, inputs=first.inputs,
        sources=first.sources, snapshot=Snapshot(dict(first.snapshot.partitions), files),
        summary=dict(first.summary),
    )
    log.commit(record)
    db.publish_database(warehouse, record)
    reader = db.connect(warehouse)
    try:
        for name in files:
            results["marts"][name]["query_s"] = timed(reader, f'select * from "{name}"')
        found = reader.execute(
            "select graph_id, full_node_id from nodes where class_name = 'prediction' order by graph_id limit 1"
        ).fetchone()
        if found:
            results["upstream_s"] = timed(reader, "select count(*) from upstream(?, ?)", list(found))
            print(f"  upstream() of a prediction  {results['upstream_s']:7.3f} s", flush=True)
    finally:
        reader.close()
    return results


# -- the run ------------------------------------------------------------------------------------------


def machine() -> dict:
    mem = Path("/proc/meminfo").read_text().split("\n")[0].split()[1]
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gb": round(int(mem) / 1024 / 1024, 1),
            "python": platform.python_version(), "os": platform.platform(), "load_at_start": os.getloadavg()}


def git_commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", default=os.environ.get("BENCH_QUICK", "") not in ("", "0"),
                        help="small corpora, one round, 200k nodes: every stage in a few minutes "
                        "(also BENCH_QUICK=1); writes under bench/out/quick only")
    parser.add_argument("--out", help="working folder (default bench/out, bench/out/quick with --quick)")
    parser.add_argument("--scale", type=float, default=3.0, help="the large corpus' --scale (3)")
    parser.add_argument("--big-scale", type=float, default=40.0, help="its 12 big files' --scale (40)")
    parser.add_argument("--min-nodes", type=int, help="nodes of the mart warehouse (10 M; 200 k with --quick)")
    parser.add_argument("--repeat", type=int, help="rounds of the ingest methods, fresh builds, make-run and "
                        "Dagster builds; the median counts (3; 1 with --quick)")
    parser.add_argument("--mart-repeat", type=int, default=1, help="computations of each mart at 10 M nodes (1)")
    parser.add_argument("--watch-idle", type=float, help="seconds of idle watch rounds measured (10; 3 with --quick)")
    parser.add_argument("--only", metavar="STAGES", help=f"comma-separated stages to run ({', '.join(STAGES)}), "
                        "merged into the existing results file")
    parser.add_argument("--report", metavar="FILE", help="where the report goes (default BENCHMARKS.md; "
                        "<out>/BENCHMARKS.md with --quick)")
    args = parser.parse_args()
    mode, out = mode_and_out(args)
    repeat = args.repeat or (1 if args.quick else 3)
    min_nodes = args.min_nodes or (200_000 if args.quick else 10_000_000)
    watch_idle = args.watch_idle or (3.0 if args.quick else 10.0)
    only = [s for name in args.only.split(",") for s in ALIASES.get(name, [name])] if args.only else STAGES
    unknown = [s for s in only if s not in STAGES]
    if unknown:
        parser.error(f"unknown stage(s) {', '.join(unknown)}; stages: {', '.join(STAGES)}")
    results_path = out / "results.json"
    default_report = out / "BENCHMARKS.md" if args.quick else REPO / "BENCHMARKS.md"
    report_path = Path(args.report) if args.report else default_report

    started = time.perf_counter()
    restore_edit(out)
    print("corpora", flush=True)
    corpus = corpora(out, mode, args.scale, args.big_scale)
    # --only reruns stages into the results there are: this output folder's, else (a fresh folder,
    # the full report) the committed bench/results.json, so the other stages' figures stay, dated
    earlier = results_path if results_path.is_file() else None
    if earlier is None and not args.quick and (BENCH / "results.json").is_file():
        earlier = BENCH / "results.json"
    results = json.loads(earlier.read_text()) if args.only and earlier is not None else {}
    before = {k: results.get(k) for k in ("date", "code")}
    results |= {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": machine(), "code": git_commit(),
                "corpus": corpus_facts(corpus["large"]), "small_corpus": corpus_facts(corpus["small"]),
                "command": "make bench" + (" (quick)" if args.quick else ""), "quick": args.quick,
                "repeat": repeat}
    if args.only and before["date"]:
        results["command"] = (f"bench/run.py --only {','.join(only)} (the other stages: {before['date']}, "
                              f"code {before['code']})")
    print(f"  large: {results['corpus']}\n  small: {results['small_corpus']}", flush=True)

    def stage(name: str, run) -> None:
        if name in only:
            print(name, flush=True)
            t = time.perf_counter()
            results[name] = run()
            results.setdefault("stage_seconds", {})[name] = time.perf_counter() - t
            results_path.write_text(json.dumps(results, indent=1))  # a later stage's failure keeps these

    def full_build_s() -> float:
        fresh = results.get("fresh", {}).get("large")
        if fresh:
            return fresh["build_s"]
        if "fresh_build_s" not in results:  # measured once now: the rebuild's ratio needs one
            warehouse = out / "warehouse-large"
            shutil.rmtree(warehouse, ignore_errors=True)
            results["fresh_build_s"] = run_process(build_command(warehouse, corpus["large"]), cwd=out)["wall"]
        return results["fresh_build_s"]

    stage("ingest", lambda: bench_ingest(corpus["large"], out, repeat))
    stage("fresh", lambda: bench_fresh({"small": corpus["small"], "large": corpus["large"]}, out, repeat))
    stage("rebuild", lambda: bench_rebuild(corpus["large"], out, full_build_s(), corpus["small"],
                                           results.get("fresh", {}).get("small", {}).get("build_s")))
    stage("watch", lambda: bench_watch(corpus["large"], out, full_build_s(), idle=watch_idle))
    stage("run_command", lambda: bench_run_command(out, repeat))
    stage("dagster", lambda: bench_dagster(corpus["small"], out, repeat))
    stage("queries", lambda: bench_queries(corpus["large"], out, min_nodes, args.mart_repeat))
    stage("executor", lambda: bench_executor(corpus["small"], out, repeat))
    results["total_s"] = time.perf_counter() - started
    if report_path.resolve() == (REPO / "BENCHMARKS.md").resolve():  # the report's raw numbers go beside it
        results["results_file"] = "bench/results.json"
        (BENCH / "results.json").write_text(json.dumps(results, indent=1))
    else:
        results["results_file"] = str(results_path)
    results_path.write_text(json.dumps(results, indent=1))
    from report import write_report

    write_report(results, report_path)
    print(f"done in {results['total_s'] / 60:.1f} min: {results_path}, {report_path}", flush=True)


if __name__ == "__main__":
    main()
