"""Render a results file of bench/run.py as BENCHMARKS.md, with each target checked against the numbers.

    python bench/report.py [RESULTS.json [OUT.md]]   # default: bench/results.json -> BENCHMARKS.md

The text between ``<!-- notes -->`` and ``<!-- /notes -->`` in the existing report is kept, so the
discussion written by people survives a rerun. Stages missing from the results (``--only``, or one
that failed) are left out of the report. The section "Scale-out: object storage" (between
``<!-- scale:start -->`` and ``<!-- scale:end -->``) is bench/scale.py's: rendered from the
scale-results.json beside the report (bench/scale-results.json for BENCHMARKS.md) when there is one,
else kept as the existing report has it; bench/scale.py replaces only that block
(:func:`write_scale_section`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

NOTES = ("<!-- notes -->", "<!-- /notes -->")
SCALE = ("<!-- scale:start -->", "<!-- scale:end -->")
COLLECT = ("<!-- collect:start -->", "<!-- collect:end -->")  # bench/collect.py's section

# Issue 16's targets.
FRESH_RATIO = 5.0  # a fresh build's process vs bare DuckDB's process, same files
RUN_COMMAND_S = 10.0  # `make run` on a fresh warehouse, venv made
REBUILD_RATIO = 0.10  # rebuild after 1 changed file vs the fresh build
MART_S = 10.0  # each mart computed at >= 10 M nodes
NAMES = {
    "read_bytes": "(a) read bytes",
    "parse_orjson": "(a) read + orjson parse, one core",
    "parse_msgspec": "(a) read + msgspec parse (untyped), one core",
    "duckdb": "(b) pure DuckDB: read_json + unnest + COPY",
    "smartcomment": "(c) smartcomment import_graph + DataFrames",
    "tracehouse": "(d) tracehouse ingest",
}


def _verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def _corpus(facts: dict) -> str:
    return f"{facts['files']} graphs, {facts['total_mb']:.0f} MB, largest file {facts['largest_mb']:.0f} MB"


def _runs(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def _ingest(results: dict) -> list[str]:
    ingest = results.get("ingest")
    if not ingest:
        return []
    th, duck, naive = (ingest[k] for k in ("tracehouse", "duckdb", "smartcomment"))
    floor_key = min((k for k in ("parse_orjson", "parse_msgspec") if k in ingest), key=lambda k: ingest[k]["seconds"])
    floor = ingest[floor_key]
    lines = [
        "## Ingest (same files, each method in its own process)",
        "",
        f"The large corpus. Each method ran {len(th['runs_s'])} times in interleaved rounds; the median run counts "
        "(all runs in the last columns). The clock starts once the method's modules are imported; the imports, "
        "timed apart, are a fixed cost per process.",
        "",
        "| method | seconds | MB/s | graphs/s | peak RSS MB | runs, s | imports, s |",
        "|---|---:|---:|---:|---:|---|---:|",
    ]
    for key, label in NAMES.items():
        if key not in ingest:
            continue
        r = ingest[key]
        label += " (floor)" if key == floor_key else ""
        gps = f"{r['graphs_per_s']:.1f}" if "graphs_per_s" in r else ""
        imports = f"{r['imports_s']:.2f}" if "imports_s" in r else ""
        lines.append(f"| {label} | {r['seconds']:.2f} | {r['mb_per_s']:.1f} | {gps} | {r['peak_rss_mb']:.0f} "
                     f"| {_runs(r['runs_s'])} | {imports} |")
    with_imports = (th["seconds"] + th.get("imports_s", 0)) / (floor["seconds"] + floor.get("imports_s", 0))
    lines += [
        "",
        "| ingest target | result | |",
        "|---|---|---|",
        f"| at least as fast as (b) | {duck['seconds'] / th['seconds']:.2f}x | "
        f"{_verdict(th['seconds'] <= duck['seconds'])} |",
        f"| at least 3x faster than (c) | {naive['seconds'] / th['seconds']:.2f}x | "
        f"{_verdict(naive['seconds'] >= 3 * th['seconds'])} |",
        f"| within 2x of the parse floor (a) | {th['seconds'] / floor['seconds']:.2f}x its time "
        f"({with_imports:.2f}x counting imports) | {_verdict(th['seconds'] <= 2 * floor['seconds'])} |",
        "",
    ]
    return lines


def _targets(results: dict) -> list[str]:
    rows = []
    fresh = results.get("fresh", {})
    for name in ("small", "large"):
        f = fresh.get(name)
        if f:
            rows.append(
                f"| 1. fresh `tracehouse build` process <= {FRESH_RATIO:g}x a bare DuckDB flatten process, "
                f"{_corpus(f['corpus'])} | {f['build_s']:.1f} s / {f['duckdb_process_s']:.1f} s = "
                f"**{f['ratio']:.1f}x** | {_verdict(f['ratio'] <= FRESH_RATIO)} |")
    run = results.get("run_command")
    if run:
        rows.append(f"| 2. `make run` (`tracehouse build`, embedded sample corpus) on a fresh warehouse < "
                    f"{RUN_COMMAND_S:g} s | **{run['seconds']:.1f} s** | {_verdict(run['seconds'] < RUN_COMMAND_S)} |")
    rebuild = results.get("rebuild")
    if rebuild:
        watch = results.get("watch")
        in_watch = (f"; in a running `tracehouse watch` {watch['rebuild_s']:.1f} s = {watch['ratio']:.1%}"
                    if watch else "")
        if "floor_s" in rebuild:  # the part no build can shed: a new process importing Dagster at all
            in_watch += (f"; a process that only imports Dagster, DuckDB and PyArrow {rebuild['floor_s']:.1f} s = "
                         f"{rebuild['floor_ratio']:.1%}")
        rows.append(
            f"| 3. rebuild after 1 changed file of {rebuild['files']}, new `tracehouse build` process, <= "
            f"{REBUILD_RATIO:.0%} of the fresh build | {rebuild['incremental_s']:.1f} s / "
            f"{rebuild['full_build_s']:.1f} s = **{rebuild['ratio']:.1%}**{in_watch} | "
            f"{_verdict(rebuild['ratio'] <= REBUILD_RATIO)} |")
    queries = results.get("queries")
    if queries:
        slowest = max(queries["marts"], key=lambda m: queries["marts"][m]["compute_s"])
        worst = queries["marts"][slowest]["compute_s"]
        verdict = _verdict(worst <= MART_S) if queries["nodes"] >= 10_000_000 else "not tested (under 10 M nodes)"
        rows.append(
            f"| 4. each mart computed at >= 10 M nodes ({queries['nodes']:,} nodes) <= {MART_S:g} s | slowest "
            f"{slowest} **{worst:.1f} s**; "
            f"{sum(m['compute_s'] > MART_S for m in queries['marts'].values())} of {len(queries['marts'])} over | "
            f"{verdict} |")
    corpus = results["corpus"]
    budget = 3 * corpus["largest_mb"] + 500
    ingest_peak = results.get("ingest", {}).get("tracehouse", {}).get("peak_rss_mb")
    build_peak = fresh.get("large", {}).get("tree_peak_mb")
    if ingest_peak or build_peak:
        parts = [f"ingest {ingest_peak:.0f} MB" if ingest_peak else "",
                 f"whole build (process tree) {build_peak:.0f} MB" if build_peak else ""]
        peak = max(p for p in (ingest_peak, build_peak) if p)
        rows.append(f"| 5. peak memory < 3x largest file + 500 MB = {budget:.0f} MB | "
                    f"{', '.join(p for p in parts if p)} | {_verdict(peak < budget)} |")
    gaps = [(label, r["progress"]) for label, r in (
        ("fresh build, large corpus", fresh.get("large")), ("fresh build, small corpus", fresh.get("small")),
        ("`make run`", run), ("1-file rebuild", rebuild and {"progress": rebuild["incremental_progress"]}))
        if r]
    if gaps:
        text = "; ".join(f"{label} {p['longest_gap_s']:.1f} s (start to first line {p['first_line_s']:.1f} s)"
                         for label, p in gaps)
        rows.append(f"| 6. longest gap between two progress lines | {text} | |")
    dagster = results.get("dagster")
    if dagster:
        rows.append(
            f"| recording a build's runs in the warehouse's Dagster instance <= 1 s (small corpus) | "
            f"{dagster['recording_s']:.2f} s ({dagster['events']} events; `run_build` {dagster['with_build_s']:.1f} s "
            f"against {dagster['without_build_s']:.1f} s in an ephemeral instance) | "
            f"{'met' if dagster['recording_s'] <= 1.0 else '**missed**'} |")
    if not rows:
        return []
    return ["## Targets (issue 16)", "", "| target | result | |", "|---|---|---|", *rows, ""]


def _details(results: dict) -> list[str]:
    lines = ["## Details", ""]
    fresh = results.get("fresh", {})
    for name, f in fresh.items():
        p = f["progress"]
        lines.append(
            f"- Fresh build, {name} corpus ({_corpus(f['corpus'])}): runs {_runs(f['build_runs_s'])} s; peak RSS "
            f"{f['peak_rss_mb']:.0f} MB (largest process), {f['tree_peak_mb']:.0f} MB (process tree). DuckDB process "
            f"runs {_runs(f['duckdb_runs_s'])} s ({f['duckdb_flatten_s']:.2f} s flattening after "
            f"{f['duckdb_imports_s']:.2f} s of imports, peak {f['duckdb_peak_rss_mb']:.0f} MB). {p['lines']} output "
            f"lines; the longest silence {p['longest_gap_s']:.1f} s, after `{p.get('gap_after', '')}`; "
            f"longest silences of all runs {_runs(f['longest_gap_runs_s'])} s. Rows: "
            + ", ".join(f"{k} {v:,}" for k, v in f["rows"].items()) + ".")
    rebuild = results.get("rebuild")
    if rebuild:
        lines.append(
            f"- Rebuild after changing 1 file ({rebuild['edit']}, {rebuild['edited_file_mb']:.0f} MB) as a new "
            f"process: {rebuild['incremental_s']:.1f} s (`{rebuild['incremental_partitions']}`); after restoring it: "
            f"{rebuild['restore_s']:.1f} s; a build with nothing changed: {rebuild['noop_s']:.1f} s.")
    watch = results.get("watch")
    if watch:
        lines.append(
            f"- The same change seen by a running `tracehouse watch` (the build time it reports, polling every "
            f"{watch['interval_s']:g} s): {watch['rebuild_s']:.1f} s; restoring: {watch['restore_s']:.1f} s; an "
            f"idle round (list the files, nothing changed): {watch['idle_round_cpu_s'] * 1000:.0f} ms of CPU.")
    run = results.get("run_command")
    if run:
        lines.append(f"- `make run` on a fresh warehouse: runs {_runs(run['runs_s'])} s, process tree peak "
                     f"{run['tree_peak_mb']:.0f} MB; longest silence {run['progress']['longest_gap_s']:.1f} s after "
                     f"`{run['progress'].get('gap_after', '')}`.")
    dagster = results.get("dagster")
    if dagster:
        steps = sorted(dagster["steps_s"].items(), key=lambda kv: -kv[1])[:8]
        lines.append(
            f"- Dagster recording, fresh build of the small corpus ({_corpus(dagster['corpus'])}): process with "
            f"recording {_runs(dagster['with_runs_s'])} s, without {_runs(dagster['without_runs_s'])} s; "
            f"`run_build` itself {dagster['with_build_s']:.1f} s with, {dagster['without_build_s']:.1f} s without; "
            f"{dagster['events']} events stored. Slowest steps of that build: "
            + ", ".join(f"{k} {v:.2f} s" for k, v in steps) + ".")
    queries = results.get("queries")
    if queries:
        scaled = queries["scaled"]
        made = "reused" if scaled.get("reused") else f"made in {scaled.get('seconds', 0):.0f} s"
        lines += [
            f"- Marts: the large warehouse's build replicated {scaled['copies']} times under new partitions and graph "
            f"ids ({queries['nodes']:,} nodes in {queries['partitions']} partitions, "
            f"{scaled.get('gb', 0):.2f} GB of Parquet, {made}), committed as a build; its files read once "
            f"({queries.get('warm_up_s', 0):.0f} s), then each mart's SQL computed over all of it "
            "(`pipelines.marts.compute_mart`), the marts committed and read back."
            + (f" `upstream()` of a prediction node: {queries['upstream_s'] * 1000:.0f} ms."
               if "upstream_s" in queries else ""),
            "",
            "A mart computed `per_partition` is made by builds from one fragment per partition generation, so a "
            "rebuild computes only the rebuilt partitions' fragments; its last column gives the slowest fragment of "
            "the original partitions (what rebuilding one split costs) and, in brackets, all fragments of this "
            "warehouse estimated from them. A mart that reads marts (second column) is computed after them and reads "
            "their files: its time leaves theirs out, as in a build, where each is a step of its own.",
            "",
            "| mart | computed in builds | compute at scale (s) | runs, s | rows | query the committed mart (ms) "
            "| one partition's fragment (s) |",
            "|---|---|---:|---|---:|---:|---:|",
        ]
        for name, m in queries["marts"].items():
            query = f"{m['query_s'] * 1000:.1f}" if "query_s" in m else ""
            fragment = (f"{max(m['fragment_s'].values()):.2f} ({m['fragments_total_est_s']:.0f})"
                        if m.get("fragment_s") else "")
            reads = f", reads {', '.join(m['reads'])}" if m.get("reads") else ""
            lines.append(f"| {name} | {m['compute']}{reads} | {m['compute_s']:.2f} | {_runs(m['runs_s'])} "
                         f"| {m['rows']:,} | {query} | {fragment} |")
    return [*lines, ""] if len(lines) > 2 else []


def _executor(results: dict) -> list[str]:
    """The fan-out section: fresh builds in-process and on a local Dask cluster (bench/run.py's executor stage)."""
    fanout = results.get("executor")
    if not fanout:
        return []
    cases, labels = fanout["cases"], {"in_process": "in-process", "dask_1": "Dask, 1 worker",
                                      "dask_2": "Dask, 2 workers"}
    loads = [load for c in cases.values() for load in c["loads"]]
    busy = " (other processes were running)" if max(loads) >= 1.0 else ""
    lines = [
        "## Fan-out on Dask",
        "",
        f"A fresh `tracehouse build` of the small corpus ({_corpus(fanout['corpus'])}, 4 partitions: "
        f"`{fanout.get('corpus_command', 'tracehouse sample')}`) in-process and "
        "with `--executor dask` (each changed graph partition a Dagster step of dagster-dask's executor, on a "
        "`LocalCluster` of single-threaded worker processes the build starts and stops), each a new process, "
        f"medians of {len(cases['in_process']['runs_s'])} interleaved rounds, measured {fanout.get('date', '?')} "
        f"(code {fanout.get('code', '?')}) with `bench/run.py --only executor`; load average before the runs "
        f"{min(loads):.1f} to {max(loads):.1f}{busy}. *Flattening* runs from the first flattening line to "
        "`checking tables`: with Dask it holds starting the cluster, the steps, stopping the cluster and the "
        "sequential pass that adopts the steps' generations. Committed rows equal in every case: "
        + ("yes." if fanout["same_rows"] else "**NO**."),
        "",
        "| case | build s | runs, s | flattening s | of which cluster start s | steps s | process tree peak MB "
        "| command |",
        "|---|---:|---|---:|---:|---:|---:|---|",
    ]
    for name, c in cases.items():
        ph = c["phases"]
        lines.append(f"| {labels.get(name, name)} | {c['wall_s']:.2f} | {_runs(c['runs_s'])} | "
                     f"{ph.get('flatten', 0):.2f} | {_opt(ph.get('cluster_start'))} | {_opt(ph.get('steps'))} | "
                     f"{c['tree_peak_mb']:.0f} | `{c['command']}` |")
    base = cases["in_process"]
    said = [f"{labels.get(n, n)} {c['wall_s'] / base['wall_s']:.2f}x the build "
            f"({c['phases'].get('flatten', 0) - base['phases'].get('flatten', 0):+.2f} s of flattening)"
            for n, c in cases.items() if n != "in_process"]
    return [*lines, "", "Against in-process: " + "; ".join(said) + ".", ""]


def _opt(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def write_report(results: dict, path: Path) -> None:
    m = results["machine"]
    load = m.get("load_at_start")
    lines = [
        "# Benchmarks",
        "",
        f"Measured {results['date']} with `{results['command']}` (bench/run.py, code {results.get('code', '?')}; "
        f"raw numbers in {results.get('results_file', 'bench/results.json')}).",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB, Python {m['python']}, {m['os']}"
        + (f"; load average at start {load[0]:.1f}" if load else "") + ".",
        f"Large corpus: {_corpus(results['corpus'])}; small corpus: {_corpus(results['small_corpus'])} "
        "(MemTraceBench format, `tracehouse sample`). Files are read from the page cache (warm) by every "
        f"method alike. Every measured command is a new process; medians of {results.get('repeat', 1)} "
        "interleaved rounds.",
        "",
        *_targets(results),
        *_ingest(results),
        *_details(results),
        *_executor(results),
    ]
    notes = ""
    text = path.read_text() if path.is_file() else ""
    if NOTES[0] in text and NOTES[1] in text:
        notes = text[text.index(NOTES[0]) : text.index(NOTES[1]) + len(NOTES[1])]
    scale = _scale_block(path, text)
    collect = _block(text, COLLECT)  # bench/collect.py's section, kept as it wrote it
    lines += [*([scale, ""] if scale else []), *([collect, ""] if collect else []), "## Notes", "",
              notes or f"{NOTES[0]}\n{NOTES[1]}", ""]
    path.write_text("\n".join(lines))


# -- the scale-out section (bench/scale.py) ----------------------------------------------------------------


def _block(text: str, markers: tuple[str, str]) -> str:
    """The text from the first marker to the end of the second, or ""."""
    if markers[0] in text and markers[1] in text[text.index(markers[0]):]:
        start = text.index(markers[0])
        return text[start : text.index(markers[1], start) + len(markers[1])]
    return ""


def _scale_block(path: Path, text: str) -> str:
    """The scale section for the report at ``path``: from the scale-results.json beside it (or in
    bench/ beside it), else the block its current ``text`` holds, else ""."""
    for results in (path.parent / "scale-results.json", path.parent / "bench" / "scale-results.json"):
        if results.is_file():
            return "\n".join([SCALE[0], *scale_section(json.loads(results.read_text())), SCALE[1]])
    return _block(text, SCALE)


def write_scale_section(path: Path, scale: dict) -> None:
    """Put the scale section into the report at ``path`` (:func:`put_section`)."""
    put_section(path, "\n".join([SCALE[0], *scale_section(scale), SCALE[1]]), SCALE)


def put_section(path: Path, block: str, markers: tuple[str, str]) -> None:
    """Put ``block`` into the report at ``path``, replacing only what lies between ``markers`` (or
    inserting it before "## Notes", or at the end); nothing else of the file changes."""
    text = path.read_text() if path.is_file() else ""
    old = _block(text, markers)
    if old:
        text = text.replace(old, block, 1)
    elif "\n## Notes\n" in text:
        at = text.index("\n## Notes\n") + 1
        text = text[:at] + block + "\n\n" + text[at:]
    else:
        text = (text.rstrip("\n") + "\n\n" if text else "") + block + "\n"
    path.write_text(text)


def _s(value: float | None, digits: int = 2) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _requests(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in counts.items()) if counts else "none"


def scale_section(scale: dict) -> list[str]:
    """Markdown lines of bench/scale.py's results: the same corpus on local disk and on S3 (moto), and
    a commit's cost as the store grows, with the real-S3 figures estimated from counted requests."""
    m = scale["machine"]
    low, high = scale["real_s3_latency_ms"]
    builds, commit = scale.get("builds"), scale.get("commit", {})
    remote_py = scale.get("remote_py", {})
    small = sorted(c["put_if_absent_ms"] for c in commit.values())
    answered = f"{small[0]:.0f}-{small[-1]:.0f} ms" if small else "a few milliseconds"
    lines = [
        "## Scale-out: object storage",
        "",
        f"Measured {scale['date']} with `{scale['command']}` (bench/scale.py, code {scale.get('code', '?')}"
        + (f", pipelines/remote.py sha256 {remote_py['sha256']}" if remote_py else "")
        + f"; raw numbers in {scale.get('results_file', 'bench/scale-results.json')}). Machine: {m['cpu']}, "
        f"{m['cores']} cores, {m['memory_gb']} GB; load average {m['load_at_start'][0]:.1f} at the start"
        + (f", {scale['load_at_end'][0]:.1f} at the end" if scale.get("load_at_end") else "")
        + ". Other processes (other engineers' test runs) may have been running; the load average before each "
        "round is in the raw numbers, and a case whose runs spread by more than 25% got extra rounds.",
        "",
        f"**The S3 here is moto {scale['moto']}** (`python -m moto.server`), an in-memory S3 server written in "
        f"Python, on 127.0.0.1 of the same machine: no network, a small request answered in {answered} (measured "
        "below) where real S3's median for small requests is in the tens of milliseconds "
        f"([AWS, S3 performance guidelines]({scale['real_s3_latency_source']})), and the server's CPU shares the "
        "machine's cores with the build, so its throughput is CPU-bound. The *estimates* below are the counted "
        f"requests x {low}-{high} ms, one after another: an upper bound, since pipelines/remote.py moves files "
        f"{scale.get('transfers', 8)} at a time (`remote.TRANSFERS`), which overlaps their latency up to that many "
        "times; they leave out transfer time (the bytes moved are given).",
        "",
    ]
    if builds:
        cases = builds["cases"]
        lines += [
            "### The same corpus on local disk and on S3",
            "",
            f"Corpus: {_corpus(builds['corpus'])} (bench/run.py's small corpus), uploaded once to "
            f"`s3://BUCKET/corpus` ({builds['corpus_objects']} objects in {builds['corpus_upload_s']:.1f} s). Each "
            "case is a new process (bench/run.py's run_process: wall time, peak RSS of the process tree), in "
            f"{builds['rounds']} interleaved rounds ({builds['extra_rounds']} of them extra, for spread), a fresh "
            "warehouse each round; the median run counts. *S3 - local* is the difference within each round "
            "(median, then the rounds). Requests are those of the median run, from moto's request log. `NEW` is "
            "an empty TRACEHOUSE_CACHE (a new machine), `SAME` the fresh build's cache, `NEW2` a second, empty "
            "working copy, kept for the warm query.",
            "",
            f"| case | median s | runs, s | S3 - local, s (rounds) | process tree peak MB | requests to the store "
            f"| + {low}-{high} ms a request (estimate), s | command |",
            "|---|---:|---|---|---:|---|---:|---|",
        ]
        for name, c in cases.items():
            n = sum(c["requests"].values())
            estimate = f"+{n * low / 1000:.2f} to +{n * high / 1000:.2f}" if n else ""
            sizes = c.get("sizes", {})
            moved = [f"{sizes[k]:.1f} MB {way}" for k, way in (("source_mb", "down"), ("uploaded_mb", "up"),
                                                                  ("working_copy_mb", "in the working copy after"))
                     if k in sizes]
            requests = _requests(c["requests"]) + (f" ({', '.join(moved)})" if moved else "")
            wide = f" (spread {c['spread']:.0%})" if c.get("spread", 0) > 0.25 else ""
            paired = (f"{c['minus_local_s']:+.2f} ({', '.join(f'{v:+.2f}' for v in c['minus_local_runs_s'])})"
                      if "minus_local_s" in c else "")
            lines.append(f"| {c['label']} | {c['median_s']:.2f} | {_runs(c['runs_s'])}{wide} | {paired} | "
                         f"{c['tree_peak_mb']:.0f} | {requests if name.startswith('s3') else ''} | {estimate} | "
                         f"`{c['command']}` |")
        lines.append("")
        answers = sorted({a for c in cases.values() for a in c.get("answers", [])})
        if len(answers) == 1:
            lines += [f"Every query answered {answers[0]:,} nodes, on local disk and on S3 alike.", ""]
        elif answers:
            lines += [f"**The queries' answers differ: {answers}.**", ""]
        fresh, local = cases.get("s3_fresh", {}), cases.get("local_fresh", {})
        ph, lph, sizes = fresh.get("phases", {}), local.get("phases", {}), fresh.get("sizes", {})
        runs = fresh.get("phase_runs", {})

        def row(label: str, key: str, local_too: bool = False) -> str:
            return (f"| {label} | {_s(lph.get(key)) if local_too else ''} | {_s(ph.get(key))} | "
                    f"{_runs([v for v in runs.get(key, []) if v is not None])} |")

        if ph:
            store = builds.get("store_after_build") or {}
            lines += [
                "Where the fresh S3 build's own object-storage time goes, from the time-stamps of its progress lines "
                "(medians; the rest of the build is the same work as on local disk):",
                "",
                "| phase (between the build's progress lines) | local disk, s | S3, s | S3 runs, s |",
                "|---|---:|---:|---|",
                row(f"source mirrored: {sizes.get('source_objects', '?')} objects, "
                    f"{sizes.get('source_mb', 0):.1f} MB downloaded (`downloading ... changed` to `source ...`)",
                    "source_download_s"),
                row("commit: `commit: writing build` to `commit: uploading` (the record written, os.sync)",
                    "commit_before_upload_s"),
                row(f"commit: `commit: uploading {sizes.get('uploaded_files', '?')} files "
                    f"({sizes.get('uploaded_mb', 0):.1f} MB)` to `commit: build N committed` (the uploads, one at "
                    "a time, then the conditional PUT)", "upload_and_put_s"),
                row("commit, whole (`commit: writing` to `committed`)", "commit_s", True),
                row("publishing (`committed` to `published`: database, 3 root copies uploaded, the store listed "
                    "for garbage)", "publish_s", True),
                row("`commit: published` to the process's exit (summary, workers stopped)", "after_published_s", True),
                "",
                f"After a build the warehouse's prefix held {store.get('objects', '?')} objects "
                f"({store.get('mb', 0):.1f} MB); its build record is {builds.get('record_bytes', 0):,} bytes.",
                "",
            ]
    if commit:
        first = next(iter(commit.values()))
        seq, par = "sequential", next(k for k in first["uploads"] if k != "sequential")
        threads = par.split("_")[0]
        record = f"{builds['record_bytes']:,}-byte " if builds else ""
        lines += [
            "### A commit's cost as the store grows",
            "",
            "In one process (`make bench-scale`), `pipelines.remote.ObjectStore` against the same server, one bucket "
            "per size holding that many 4 KB objects under the warehouse's prefix. `list()` of the whole prefix is "
            "what `remote.collect_garbage` does after every commit; `put_if_absent` creates a "
            f"{record}build record (the commit point; *refused*: the number taken); the uploads are that many new "
            f"4 KB files, one after another and from {threads} threads (as `remote.push` sends them). A commit of N "
            "new files costs, up to its commit point (`remote.push`), N PUTs + 1 conditional PUT, whatever the "
            "store holds; after it, `collect_garbage` lists the whole prefix (ceil(objects / 1000) LIST pages) and "
            "reads up to 3 build records. The two right-hand pairs of columns are for a commit of as many new files "
            "as the store holds.",
            "",
            f"| objects in the store | `list()` ms (LIST pages) | list runs, ms | `put_if_absent` ms (runs; "
            f"refused) | upload ms per file: one at a time / {threads} threads | to the commit point: requests, "
            f"measured s, real S3 s (estimate) | after it: requests, measured s, real S3 s (estimate) |",
            "|---:|---:|---|---:|---:|---|---|",
        ]
        for n, c in commit.items():
            u = c["uploads"]
            if "commit_point_requests" in c:
                point = (f"{c['commit_point_requests']:,}, {c['commit_point_measured_s']:.2f}, "
                         f"{c['commit_point_real_s3_estimate_s'][0]:.1f}-{c['commit_point_real_s3_estimate_s'][1]:.1f}")
                after = (f"{c['after_commit_requests']:,}, {c['after_commit_measured_s']:.2f}, "
                         f"{c['after_commit_real_s3_estimate_s'][0]:.2f}-{c['after_commit_real_s3_estimate_s'][1]:.2f}")
            else:  # results of the first version of bench/scale.py
                point, after = "", ""
            lines.append(
                f"| {int(n):,} | {c['list_ms']:.1f} ({c['list_pages']}) | {_runs(c['list_runs_ms'])} | "
                f"{c['put_if_absent_ms']:.1f} ({len(c['put_if_absent_runs_ms'])} runs; {c['refused_ms']:.1f}) | "
                f"{u[seq]['per_file_ms']:.2f} / {u[par]['per_file_ms']:.2f} | {point} | {after} |")
        lines.append("")
        biggest = commit[max(commit, key=int)]
        per_page = biggest["list_ms"] / biggest["list_pages"]
        put = sorted(c["uploads"][seq]["per_file_ms"] for c in commit.values())
        lines += [
            f"On moto a LIST page of 1,000 keys took {per_page:.0f} ms ({int(max(commit, key=int)):,} objects) and "
            f"a 4 KB PUT {put[0]:.1f}-{put[-1]:.1f} ms; {threads} threads gained nothing, because the Python server "
            "is the bottleneck here (on real S3 concurrent requests overlap their latency). A LIST page carries up "
            f"to 1,000 keys, more than the small request the {low}-{high} ms is for: the LIST estimates are a floor.",
            "",
        ]
        if builds and "s3_fresh" in builds["cases"]:
            fresh = builds["cases"]["s3_fresh"]
            files = fresh.get("sizes", {}).get("uploaded_files")
            if files:
                lines += [
                    f"This corpus's fresh build uploads {files} files: on real S3, one after another, about "
                    f"{(files + 1) * low / 1000:.1f}-{(files + 1) * high / 1000:.1f} s of request latency (estimate) "
                    f"to its commit point, against {_s(fresh['phases'].get('upload_and_put_s'))} s here.",
                    "",
                ]
    return lines


if __name__ == "__main__":
    bench = Path(__file__).resolve().parent
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else bench / "results.json"
    target = Path(sys.argv[2]) if len(sys.argv) > 2 else bench.parent / "BENCHMARKS.md"
    write_report(json.loads(source.read_text()), target)
    sys.exit(0)
