"""Render a results file of bench/run.py as BENCHMARKS.md: the current figures, how to reproduce them, and
issue 46's targets checked against the numbers. Nothing is run.

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

import argparse
import json
from pathlib import Path

NOTES = ("<!-- notes -->", "<!-- /notes -->")
SCALE = ("<!-- scale:start -->", "<!-- scale:end -->")
COLLECT = ("<!-- collect:start -->", "<!-- collect:end -->")  # bench/collect.py's section

# Issue 46's targets (each ratio against a bare DuckDB flatten or the fresh build of the same run).
WATCH_RATIO = 0.15  # a running `tracehouse watch`: 1 changed file to its committed build vs the fresh build
WATCH_SMALL_S = 2.0  # ... on the small corpus
RECORDING_S = 0.5  # recording a build in the warehouse's Dagster instance
RECORDING_EVENTS = 100
SMALL_RATIO = 6.0  # fresh build of the small corpus vs bare DuckDB
LARGE_RATIO = 1.5  # fresh build of the large corpus vs bare DuckDB
REBUILD_RATIO = 0.30  # 1-file rebuild of the large corpus, new process, vs its fresh build
NOOP_S = 1.0  # a build with nothing changed, new process
RUN_COMMAND_S = 10.0  # `make run` on a fresh warehouse, venv made
PROGRESS_GAP_S = 2.0  # longest silence between two progress lines
MART_S = 10.0  # issue 16: each mart computed at >= 10 M nodes
LOADED = 1.0  # load average at a run's start from which the 2-core machine counts as loaded
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
        "## Ingest",
        "",
        f"The large corpus, each method its own process, median of {len(th['runs_s'])} rounds, timed after its "
        "imports (timed apart).",
        "",
        "| method | seconds | MB/s | graphs/s | peak RSS MB | imports, s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for key, label in NAMES.items():
        if key not in ingest:
            continue
        r = ingest[key]
        label += " (floor)" if key == floor_key else ""
        gps = f"{r['graphs_per_s']:.1f}" if "graphs_per_s" in r else ""
        imports = f"{r['imports_s']:.2f}" if "imports_s" in r else ""
        lines.append(f"| {label} | {r['seconds']:.2f} | {r['mb_per_s']:.1f} | {gps} | {r['peak_rss_mb']:.0f} "
                     f"| {imports} |")
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
    """Issue 46's targets (and issue 16's marts at 10 M nodes, which still stand), each against the run's
    numbers: the ratios are taken within one run."""
    rows = []
    fresh, rebuild, watch = results.get("fresh", {}), results.get("rebuild"), results.get("watch")
    large, small = fresh.get("large"), fresh.get("small")
    if rebuild and watch:
        rows.append(f"| edit loop: `tracehouse watch`, 1 changed file of {rebuild['files']} to its commit, "
                    f"<= {WATCH_RATIO:.0%} of the fresh build | {watch['rebuild_s']:.1f} s / "
                    f"{rebuild['full_build_s']:.1f} s = {watch['ratio']:.1%} | "
                    f"{_verdict(watch['ratio'] <= WATCH_RATIO)} |")
    if watch:
        rows.append(f"| edit loop on the small corpus <= {WATCH_SMALL_S:g} s | not measured (the watch stage uses the "
                    "large corpus) | |")
    dagster = results.get("dagster")
    if dagster:
        rows.append(f"| recording a build in Dagster <= {RECORDING_S:g} s, <= {RECORDING_EVENTS} events, small corpus "
                    "| "
                    f"{dagster['recording_s']:.2f} s, {dagster['events']} events | "
                    f"{_verdict(dagster['recording_s'] <= RECORDING_S and dagster['events'] <= RECORDING_EVENTS)} |")
    for f, limit in ((small, SMALL_RATIO), (large, LARGE_RATIO)):
        if f:
            rows.append(f"| fresh build <= {limit:g}x a bare DuckDB flatten, {f['corpus']['files']} graphs | "
                        f"{f['build_s']:.1f} s / {f['duckdb_process_s']:.2f} s = {f['ratio']:.1f}x | "
                        f"{_verdict(f['ratio'] <= limit)} |")
    if rebuild:
        beyond = (f" (beyond a no-op: {rebuild['beyond_noop_ratio']:.0%})" if "beyond_noop_ratio" in rebuild else "")
        rows += [
            f"| 1-file rebuild, new process, <= {REBUILD_RATIO:.0%} of the fresh build ({rebuild['files']} graphs) | "
            f"{rebuild['incremental_s']:.1f} s / {rebuild['full_build_s']:.1f} s = {rebuild['ratio']:.1%}{beyond} | "
            f"{_verdict(rebuild['ratio'] <= REBUILD_RATIO)} |",
            f"| a build with nothing changed, new process, <= {NOOP_S:g} s | {rebuild['noop_s']:.1f} s | "
            f"{_verdict(rebuild['noop_s'] <= NOOP_S)} |",
        ]
    run = results.get("run_command")
    if run:
        rows.append(f"| `make run` on a fresh warehouse < {RUN_COMMAND_S:g} s | {run['seconds']:.1f} s | "
                    f"{_verdict(run['seconds'] < RUN_COMMAND_S)} |")
    budget = 3 * results["corpus"]["largest_mb"] + 500
    if large:
        rows.append(f"| peak memory (process tree) < 3x the largest file + 500 MB = {budget:.0f} MB | "
                    f"{large['tree_peak_mb']:.0f} MB | {_verdict(large['tree_peak_mb'] < budget)} |")
    gaps = [r["progress"]["longest_gap_s"] for r in (large, small, run) if r]
    if rebuild:
        gaps.append(rebuild["incremental_progress"]["longest_gap_s"])
    if gaps:
        rows.append(f"| progress never silent for more than {PROGRESS_GAP_S:g} s | longest silence {max(gaps):.1f} s | "
                    f"{_verdict(max(gaps) <= PROGRESS_GAP_S)} |")
    queries = results.get("queries")
    if queries:
        slowest = max(queries["marts"], key=lambda m: queries["marts"][m]["compute_s"])
        worst = queries["marts"][slowest]["compute_s"]
        verdict = _verdict(worst <= MART_S) if queries["nodes"] >= 10_000_000 else "not tested (under 10 M nodes)"
        rows.append(f"| each mart at >= 10 M nodes <= {MART_S:g} s (issue 16) | slowest {slowest} {worst:.1f} s "
                    f"({queries['nodes']:,} nodes) | {verdict} |")
    if not rows:
        return []
    return ["## Targets (issue 46)", "", "| target | current | met? |", "|---|---|---|", *rows, ""]


def _details(results: dict) -> list[str]:
    """The builds' own table (every row a new process) and the marts at 10 M nodes."""
    rows = []
    fresh = results.get("fresh", {})
    for name, f in fresh.items():
        p = f["progress"]
        rows += [
            f"| fresh build, {name} corpus | {f['build_s']:.2f} | {f['tree_peak_mb']:.0f} "
            f"| {p['first_line_s']:.1f} / {p['longest_gap_s']:.1f} |",
            f"| bare DuckDB flatten, {name} corpus | {f['duckdb_process_s']:.2f} | "
            f"{f['duckdb_peak_rss_mb']:.0f} | |",
        ]
    rebuild, watch, run = results.get("rebuild"), results.get("watch"), results.get("run_command")
    if rebuild:
        p = rebuild["incremental_progress"]
        peak = f"{rebuild['incremental_tree_peak_mb']:.0f}" if "incremental_tree_peak_mb" in rebuild else ""
        rows += [
            f"| 1-file rebuild, large corpus ({rebuild['edit']}, {rebuild['edited_file_mb']:.0f} MB) | "
            f"{rebuild['incremental_s']:.2f} | {peak} | {p['first_line_s']:.1f} / {p['longest_gap_s']:.1f} |",
            f"| nothing changed | {rebuild['noop_s']:.2f} | | |",
        ]
        if "floor_s" in rebuild:
            rows.append(f"| a process that only runs `{rebuild.get('floor_imports', 'import dagster')}` | "
                        f"{rebuild['floor_s']:.2f} | | |")
        small = rebuild.get("small")
        if small:
            rows.append(f"| 1-file rebuild, small corpus ({small['edited_file_mb']:.1f} MB file) | "
                        f"{small['incremental_s']:.2f} | | |")
    if watch:
        rows.append(f"| the same change in a running `tracehouse watch` (polling every {watch['interval_s']:g} s; "
                    f"restoring {watch['restore_s']:.1f} s; an idle round {watch['idle_round_cpu_s'] * 1000:.0f} ms "
                    f"of CPU) | {watch['rebuild_s']:.2f} | | |")
    if run:
        rows.append(f"| `make run` on a fresh warehouse | {run['seconds']:.2f} | "
                    f"{run['tree_peak_mb']:.0f} | {run['progress']['first_line_s']:.1f} / "
                    f"{run['progress']['longest_gap_s']:.1f} |")
    dagster = results.get("dagster")
    if dagster:
        rows += [
            f"| small corpus, `run_build` recorded in the warehouse's Dagster instance ({dagster['events']} events) "
            f"| {dagster['with_build_s']:.2f} | | |",
            f"| the same in an ephemeral instance | {dagster['without_build_s']:.2f} | | |",
        ]
    lines = []
    if rows:
        lines += [
            "## Builds",
            "",
            "Each a new process (the Dagster rows: `run_build`, bench/build_once.py); peak RSS of the process tree; "
            "seconds to the first progress line / the longest silence between two.",
            "",
            "| build | median s | peak MB | first line / silence, s |",
            "|---|---:|---:|---|",
            *rows,
            "",
        ]
        if dagster:
            steps = sorted(dagster["steps_s"].items(), key=lambda kv: -kv[1])[:6]
            lines += ["Slowest steps of the recorded small build: "
                      + ", ".join(f"{k} {v:.2f} s" for k, v in steps) + ".", ""]
    queries = results.get("queries")
    if queries:
        scaled = queries["scaled"]
        lines += [
            "## Marts at 10 M nodes",
            "",
            f"The large build copied {scaled['copies']} times ({queries['nodes']:,} nodes in {queries['partitions']} "
            f"partitions, {scaled.get('gb', 0):.2f} GB), each mart computed over all of it "
            "(`pipelines.analytics.marts.compute_mart`, a mart that reads marts without them), then queried committed."
            + (f" `upstream()` of a prediction node: {queries['upstream_s'] * 1000:.0f} ms."
               if "upstream_s" in queries else "")
            + " *Fragment*: builds make a `per_partition` mart one per partition; the slowest (in brackets, all).",
            "",
            "| mart | compute s | rows | query ms | fragment s |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, m in queries["marts"].items():
            query = f"{m['query_s'] * 1000:.1f}" if "query_s" in m else ""
            fragment = (f"{max(m['fragment_s'].values()):.2f} ({m['fragments_total_est_s']:.0f})"
                        if m.get("fragment_s") else "")
            lines.append(f"| {name} | {m['compute_s']:.2f} | {m['rows']:,} | {query} | {fragment} |")
        lines.append("")
    return lines


def _executor(results: dict) -> list[str]:
    """The fan-out section: fresh builds in-process and on a local Dask cluster (bench/run.py's executor stage)."""
    fanout = results.get("executor")
    if not fanout:
        return []
    cases, labels = fanout["cases"], {"in_process": "in-process", "dask_1": "Dask, 1 worker",
                                      "dask_2": "Dask, 2 workers"}
    loads = [load for c in cases.values() for load in c["loads"]]
    busy = ", **loaded**" if max(loads) >= LOADED else ""
    lines = [
        "## Fan-out on Dask",
        "",
        f"A fresh build of the small corpus ({_corpus(fanout['corpus'])}, 4 partitions) in-process and with "
        "`--executor dask --workers N` (each changed partition a Dagster step on a `LocalCluster` the build starts "
        f"and stops), medians of {len(cases['in_process']['runs_s'])} interleaved rounds, measured "
        f"{fanout.get('date', '?')} (code {fanout.get('code', '?')}, `bench/run.py --only executor`; load "
        f"{min(loads):.1f} to {max(loads):.1f}{busy}). *Flattening*: from the first flattening line to "
        "`checking tables` (with Dask: the cluster's start and stop, the steps, the pass adopting their "
        "generations). Committed rows equal in every case: " + ("yes." if fanout["same_rows"] else "**NO**."),
        "",
        "| case | build s | flattening s | of which cluster start s | steps s | process tree peak MB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, c in cases.items():
        ph = c["phases"]
        lines.append(f"| {labels.get(name, name)} | {c['wall_s']:.2f} | {ph.get('flatten', 0):.2f} | "
                     f"{_opt(ph.get('cluster_start'))} | {_opt(ph.get('steps'))} | {c['tree_peak_mb']:.0f} |")
    return [*lines, ""]


def _opt(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _load(machine: dict) -> str:
    """The load average at the start, and whether the 2-core machine was loaded (1 or more)."""
    load = machine.get("load_at_start")
    if not load:
        return "load not recorded"
    return f"load {load[0]:.1f}" + (", **loaded**" if load[0] >= LOADED else "")


def _rounds(results: dict) -> str:
    """The rounds of the build stages, and the Dagster stage's when it ran more."""
    fresh = next(iter(results.get("fresh", {}).values()), None)
    rounds = len(fresh["build_runs_s"]) if fresh else results.get("repeat", 1)
    dagster = results.get("dagster")
    more = len(dagster["with_runs_s"]) if dagster else rounds
    return f"{rounds}" + (f" (the Dagster recording's: {more})" if more != rounds else "")


def _reproduce(results: dict, path: Path) -> list[str]:
    """How to reproduce each benchmark, when it was last measured and the machine's load then."""
    beside = [path.parent / "bench", path.parent]

    def raw(name: str) -> dict:
        for folder in beside:
            if (folder / name).is_file():
                return json.loads((folder / name).read_text())
        return {}

    scale, collect, devices, pieces = (raw(f"{n}-results.json") for n in ("scale", "collect", "devices", "pieces"))
    rows = [
        f"| targets, builds, marts, ingest, fan-out | `make bench` (`bench/run.py --only STAGES` reruns some) | "
        f"12-25 min, 10 GB of disk | "
        f"{results['date']}, {_load(results['machine'])} | bench/results.json |",
    ]
    if scale:
        rows.append(f"| object storage | `make bench-scale` | 5 min | {scale['date']}, {_load(scale['machine'])} "
                    "| bench/scale-results.json |")
    if collect:
        rows.append(f"| collecting traces | `make bench-collect` | 8 min | {collect['date']}, "
                    f"{_load(collect['machine'])} | bench/collect-results.json |")
    if devices:
        rows.append(f"| low-level devices | `.venv/bin/python bench/devices.py` | 5 min | "
                    f"{devices['date']} | bench/devices-results.json |")
    if pieces:
        rows.append(f"| data files by reference | `.venv/bin/python bench/pieces.py` | 1 min | "
                    f"{pieces['date']} | bench/pieces-results.json |")
    if raw("iceberg-results.json"):
        rows.append("| Iceberg metadata | `.venv/bin/python bench/iceberg_metadata.py --builds 50 --json "
                    "bench/iceberg-results.json` | | 2026-12-04, shared machine | bench/iceberg-results.json |")
    return [
        "## Reproducing",
        "",
        "| benchmark | command | takes | last measured | raw numbers |",
        "|---|---|---|---|---|",
        *rows,
        "",
        "devices.py and pieces.py use `make bench`'s corpus. `.venv/bin/python bench/report.py` renders this "
        "page again from the results files.",
        "",
    ]


def write_report(results: dict, path: Path) -> None:
    m = results["machine"]
    lines = [
        "# Benchmarks",
        "",
        "The current figures and how to reproduce them; earlier runs and what was tried are in git history "
        f"(`git log -p BENCHMARKS.md`). Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB, Python "
        f"{m['python']}, shared with other work: a load average of {LOADED:g} or more at a run's start is marked "
        "**loaded** (its seconds say less than its ratios, which are taken within one run).",
        "",
        f"bench/run.py: measured {results['date']} with `{results['command']}` (code {results.get('code', '?')}; "
        f"{_load(m)} at its start). Large corpus: {_corpus(results['corpus'])}; small corpus: "
        f"{_corpus(results['small_corpus'])} "
        f"(`tracehouse sample`), read from the page cache; medians of {_rounds(results)} interleaved rounds.",
        "",
        *_reproduce(results, path),
        *_targets(results),
        *_details(results),
        *_ingest(results),
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
    small = sorted(c["put_if_absent_ms"] for c in commit.values())
    answered = (f"{small[0]:.0f}-{small[-1]:.0f} ms" if small and f"{small[0]:.0f}" != f"{small[-1]:.0f}"
                else f"{small[0]:.0f} ms" if small else "a few milliseconds")
    end = f" to {scale['load_at_end'][0]:.1f}" if scale.get("load_at_end") else ""
    busy = ", **loaded**" if max(m["load_at_start"][0], scale.get("load_at_end", [0])[0]) >= LOADED else ""
    lines = [
        "## Scale-out: object storage",
        "",
        f"Measured {scale['date']} with `{scale['command']}` (code {scale.get('code', '?')}; load "
        f"{m['load_at_start'][0]:.1f}{end}{busy}). The S3 is moto {scale['moto']} on 127.0.0.1 of the same machine: "
        f"a small request answered in {answered}, where real S3's are tens of milliseconds "
        f"([AWS]({scale['real_s3_latency_source']})), and its CPU shares the cores with the build. *Estimates* are "
        f"counted requests x {low}-{high} ms one after another: an upper bound, since `remote.push` moves "
        f"{scale.get('transfers', 8)} files at a time; transfer time left out.",
        "",
    ]
    if builds:
        cases = builds["cases"]
        lines += [
            "### The same corpus on local disk and on S3",
            "",
            f"{_corpus(builds['corpus'])}; a new process and a fresh warehouse each, median of {builds['rounds']} "
            "interleaved rounds; *S3 - local*: the median of the rounds' differences.",
            "",
            f"| case | median s | S3 - local, s | process tree peak MB | requests to the store | "
            f"+ {low}-{high} ms a request (estimate), s |",
            "|---|---:|---:|---:|---|---:|",
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
            paired = f"{c['minus_local_s']:+.2f}" if "minus_local_s" in c else ""
            lines.append(f"| {c['label']} | {c['median_s']:.2f}{wide} | {paired} | {c['tree_peak_mb']:.0f} | "
                         f"{requests if name.startswith('s3') else ''} | {estimate} |")
        lines.append("")
        answers = sorted({a for c in cases.values() for a in c.get("answers", [])})
        if len(answers) > 1:
            lines += [f"**The queries' answers differ: {answers}.**", ""]
        fresh = cases.get("s3_fresh", {})
        ph, sizes = fresh.get("phases", {}), fresh.get("sizes", {})
        if ph:
            lines += [
                f"The fresh S3 build's own object-storage time: source mirrored ({sizes.get('source_mb', 0):.1f} MB) "
                f"{_s(ph.get('source_download_s'))} s, {sizes.get('uploaded_files', '?')} files uploaded and the "
                f"conditional PUT {_s(ph.get('upload_and_put_s'))} s, publishing {_s(ph.get('publish_s'))} s.",
                "",
            ]
    if commit:
        first = next(iter(commit.values()))
        seq, par = "sequential", next(k for k in first["uploads"] if k != "sequential")
        threads = par.split("_")[0]
        lines += [
            "### A commit's cost as the store grows",
            "",
            "`pipelines.storage.remote.ObjectStore` against the same server holding that many 4 KB objects: "
            "`list()` as "
            "`remote.collect_garbage` after every commit, `put_if_absent` the commit point; the right-hand columns "
            "for a commit of as many new files (N PUTs + 1 conditional PUT, then a listing and 3 record reads).",
            "",
            f"| objects | `list()` ms (pages) | `put_if_absent` ms | 4 KB upload ms: one at a time / {threads} "
            "threads | to the commit point: requests, s, real S3 s (estimate) | after it: requests, s, real S3 s |",
            "|---:|---:|---:|---:|---|---|",
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
            lines.append(f"| {int(n):,} | {c['list_ms']:.1f} ({c['list_pages']}) | {c['put_if_absent_ms']:.1f} | "
                         f"{u[seq]['per_file_ms']:.2f} / {u[par]['per_file_ms']:.2f} | {point} | {after} |")
        lines += [
            "",
            f"{threads} threads gain nothing on moto (the Python server is the bottleneck); on real S3 concurrent "
            "requests overlap their latency.",
            "",
        ]
    return lines


def main() -> None:
    bench = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description="Render BENCHMARKS.md from bench/run.py's results file (and the "
                                     "other results files beside it), without running anything.")
    parser.add_argument("results", nargs="?", type=Path, default=bench / "results.json",
                        help="bench/run.py's results (default bench/results.json)")
    parser.add_argument("out", nargs="?", type=Path, default=bench.parent / "BENCHMARKS.md",
                        help="the report (default BENCHMARKS.md); its notes and collect section are kept")
    args = parser.parse_args()
    write_report(json.loads(args.results.read_text()), args.out)


if __name__ == "__main__":
    main()
