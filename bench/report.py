"""Render a results file of bench/run.py as BENCHMARKS.md, with each target checked against the numbers.

    python bench/report.py [RESULTS.json [OUT.md]]   # default: bench/results.json -> BENCHMARKS.md

The text between ``<!-- notes -->`` and ``<!-- /notes -->`` in the existing report is kept, so the
discussion written by people survives a rerun. Stages missing from the results (``--only``, or one
that failed) are left out of the report.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

NOTES = ("<!-- notes -->", "<!-- /notes -->")

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
            f"| 7. cost of recording the build in Dagster's run history (small corpus) | `record_build` "
            f"{dagster['record_build_s']:.2f} s; fresh build process with {dagster['with_s']:.1f} s, without "
            f"{dagster['without_s']:.1f} s | |")
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
            f"`record_build` {_runs(dagster['record_build_runs_s'])} s. Slowest steps of that build: "
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
            "warehouse estimated from them.",
            "",
            "| mart | computed in builds | compute at scale (s) | runs, s | rows | query the committed mart (ms) "
            "| one partition's fragment (s) |",
            "|---|---|---:|---|---:|---:|---:|",
        ]
        for name, m in queries["marts"].items():
            query = f"{m['query_s'] * 1000:.1f}" if "query_s" in m else ""
            fragment = (f"{max(m['fragment_s'].values()):.2f} ({m['fragments_total_est_s']:.0f})"
                        if m.get("fragment_s") else "")
            lines.append(f"| {name} | {m['compute']} | {m['compute_s']:.2f} | {_runs(m['runs_s'])} | {m['rows']:,} "
                         f"| {query} | {fragment} |")
    return [*lines, ""] if len(lines) > 2 else []


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
    ]
    notes = ""
    if path.is_file():
        text = path.read_text()
        if NOTES[0] in text and NOTES[1] in text:
            notes = text[text.index(NOTES[0]) : text.index(NOTES[1]) + len(NOTES[1])]
    lines += ["## Notes", "", notes or f"{NOTES[0]}\n{NOTES[1]}", ""]
    path.write_text("\n".join(lines))


if __name__ == "__main__":
    bench = Path(__file__).resolve().parent
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else bench / "results.json"
    target = Path(sys.argv[2]) if len(sys.argv) > 2 else bench.parent / "BENCHMARKS.md"
    write_report(json.loads(source.read_text()), target)
    sys.exit(0)
