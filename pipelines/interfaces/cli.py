"""The ``tracehouse`` command line."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from pipelines.interfaces.arguments import number, positive_float, positive_int
from pipelines.readers import GRAPH_KINDS, LABEL_KINDS, PREDICTION_KINDS

EXAMPLES = """\
examples:
  tracehouse build                                   # the embedded sample corpus into warehouse/
  tracehouse build --source whowhen=../shared/data/whowhen --source tracertraj=../shared/data/tracertraj
  tracehouse watch --interval 5                      # stay up; rebuild what changed as files change
  tracehouse sql "select system, error_type, n from failure_modes_by_system order by all"
  tracehouse sql --format csv "select system, dataset, count(*) from annotations group by all"
  tracehouse sample --out /tmp/corpus --seed 7 --graphs-per-split 50
  tracehouse fetch whowhen --dest data/whowhen       # needs network access to the Hugging Face Hub
  tracehouse dashboard --open                        # the failure dashboard of the last build, in a browser
  tracehouse show 'whowhen:Hand-Crafted/1#a0' --open   # one failure's view, SVG and PNG
  tracehouse collect                                 # receive OTLP/HTTP traces on 127.0.0.1:4318 into warehouse/
exit status: 0 ok, 1 failed, 2 usage error, 3 built, input rejected, 4 committed, publishing unfinished, 130 interrupted
(each command's --help says which it returns and when)
"""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tracehouse")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree without installing
        return "unknown"


BUILD_EXIT = """\
exit status:
  0    ok: committed (or nothing changed since the last build, or nothing to build yet: the only sources
       are empty landing folders of tracehouse collect)
  1    failed, nothing committed: a blocking check or a step failed, --strict met a rejected file
       (one this build read, or one an earlier build rejected and that is unchanged), no input
       files at all, another build holds the warehouse, or the latest build record is damaged
  2    usage error, nothing done: a bad option or tracehouse.toml, a build that would drop a
       recorded source (name it, or --remove-source it), a source that does not exist, or a
       recorded source that lists no files now (an emptied folder, a mistyped path, an unmounted disk)
  3    committed, but some input files were rejected (select * from ingest_errors)
  4    committed, but publishing its copies did not finish (a full disk, say): tracehouse sql, show and
       dashboard read the new build; tracehouse.duckdb and dashboards/index.html may show an earlier
       one until the next build, which finishes the publishing first
  130  interrupted (Ctrl-C); the last committed build stands"""


def _wrapped(text: str) -> str:
    """A description filled to the terminal's width (the parsers keep their epilogs' lines as written)."""
    width = max(shutil.get_terminal_size().columns - 2, 40)
    return "\n".join(textwrap.fill(paragraph, width) for paragraph in text.split("\n"))


_scale = number(float, 0.01, wanted="a number of at least 0.01")  # sample --scale


def _add_warehouse(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--warehouse", metavar="DIR|URL",
        help="warehouse folder, or s3://bucket/prefix on object storage (built in a local working copy and "
        "committed to the store; endpoint and credentials from the AWS variables, docs/SCALE.md) "
        "(default: tracehouse.toml's, else warehouse/)"
    )
    parser.add_argument("--config", metavar="FILE", help="config file (default: ./tracehouse.toml if present)")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tracehouse",
        description="An analytical warehouse for the execution graphs of LLM memory and multi-agent systems.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tracehouse {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    build = sub.add_parser(
        "build", help="flatten the sources into the warehouse (incremental by default)",
        description=_wrapped("Flatten every source file into the warehouse's Parquet tables (only the partitions whose "
        "files changed), validate them (SQL checks and Great Expectations suites), compute the marts and the "
        "dashboard, and commit all of it as the next build in one step: readers see the whole build or none "
        "of it, and a killed build leaves the last committed one as it was (docs/BUILDS.md). The sources are "
        "recorded: the next build without --source uses them."),
        epilog="examples:\n"
        "  tracehouse build                                   # the embedded sample corpus into warehouse/\n"
        "  tracehouse build --source whowhen=data/whowhen --source mtb:memtracebench=data/memtracebench\n"
        "  tracehouse build --remove-source mtb               # drop a source and its rows\n"
        "  tracehouse build --source careful:memtrace_attribution=preds/careful   # an attribution method\n"
        "  tracehouse build --warehouse s3://team/wh --source mtb:memtracebench=s3://team/mtb   # object storage\n"
        + BUILD_EXIT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_warehouse(build)
    build.add_argument(
        "--source", action="append", metavar="[NAME:]KIND=PATH",
        help="a source folder or file (or s3://bucket/prefix, mirrored by ETag and size); KIND is a graph format "
        f"({', '.join(GRAPH_KINDS)}), {' or '.join(LABEL_KINDS)} for failure labels of another source's traces, or "
        f"for the predictions of an attribution method (NAME = the method) {', '.join(PREDICTION_KINDS)} "
        "(docs/SOURCES.md) (repeatable; default: tracehouse.toml's sources, else the sources the warehouse "
        "recorded, else those of a first build that did not commit (killed, say), else the embedded sample "
        "corpus). When given, they must include every source the warehouse "
        "holds",
    )
    build.add_argument("--remove-source", action="append", default=[], metavar="NAME",
                       help="drop a recorded source and its rows from the warehouse (repeatable)")
    build.add_argument("--full", action="store_true", help="re-read every file instead of only changed ones")
    build.add_argument("--pictures", choices=("none", "svg", "png"), default=None,
                       help="what to draw besides the failure views and the charts' specs (the page draws the "
                       "charts and its menu saves each as SVG or PNG): svg adds every chart's SVG and a drill-down "
                       "picture per failure (up to $TRACEHOUSE_DRILLDOWN_LIMIT, default 200), png their PNGs too "
                       "(slow: 0.1-0.3 s a picture). Default: $TRACEHOUSE_PICTURES, else none; "
                       "`tracehouse show ID` draws one failure's picture on demand")
    build.add_argument("--strict", action="store_true", help="stop at the first file that cannot be loaded")
    build.add_argument("--iceberg", action="store_true",
                       help="also publish every table and mart as Apache Iceberg snapshots (<warehouse>/iceberg, "
                       "one tagged build-N per build; docs/SCALE.md); once on, later builds keep publishing them "
                       "until [iceberg] enabled = false in tracehouse.toml. An s3:// warehouse needs a shared "
                       "catalog: [iceberg] catalog = \"postgresql+psycopg2://user@host/db\"")
    build.add_argument("--executor", choices=("in_process", "dask"), default=None,
                       help="where the changed partitions are flattened: in this process, or as parallel Dagster "
                       "steps on a Dask cluster (dagster-dask) that tracehouse starts for the build, or the one "
                       "--scheduler names; the result is the same row for row (docs/SCALE.md). Default: "
                       "tracehouse.toml's [executor] kind, else in_process")
    build.add_argument("--workers", type=positive_int, default=None, metavar="N",
                       help="with --executor dask: worker processes of the local cluster (default 2)")
    build.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="with --executor dask: an existing Dask scheduler (tcp://host:8786) whose workers share "
                       "the warehouse's and sources' filesystem (for an s3:// warehouse and sources: only the "
                       "store), instead of a local cluster")
    build.add_argument("--quiet", action="store_true", help="no progress lines, only the summary")
    build.add_argument("--progress", choices=("text", "json"), default="text",
                       help="progress on stderr as lines (default) or as one JSON object per event "
                       "({\"event\": name, \"t\": seconds, ...its fields, \"text\": the line}; pipelines/progress.py)")
    build.add_argument("--verbose", action="store_true", help="also print Dagster's errors with their stack traces")

    watch = sub.add_parser(
        "watch", help="stay running and rebuild whenever the sources change (one warm process; Ctrl-C stops)",
        description=_wrapped("Build now, then look at the sources every --interval seconds and rebuild what changed, "
        "in this one process: Dagster, Great Expectations and DuckDB stay loaded, so a rebuild costs what "
        "changed. Prints a summary after each build that changed something; stops on Ctrl-C or SIGTERM "
        "once the build under way is done. A recorded source that goes missing or empty while it runs is "
        "waited for, its rows kept (never deleted: drop a source with build --remove-source)."),
        epilog="example: tracehouse watch --source whowhen=data/whowhen --interval 5\n"
        "exit status (once stopped):\n"
        "  0  the last build was ok\n"
        "  1  the last build failed\n"
        "  2  usage error (a bad option or tracehouse.toml, a source that cannot be used at the start), or the\n"
        "     last round was refused: a recorded source missing or listing no files",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_warehouse(watch)
    watch.add_argument("--source", action="append", metavar="[NAME:]KIND=PATH", help="as for build")
    watch.add_argument("--interval", type=float, default=10.0, metavar="SECONDS",
                       help="how often to look for changed files (default 10)")
    watch.add_argument("--quiet", action="store_true", help="no progress lines, only a summary per rebuild")
    watch.add_argument("--progress", choices=("text", "json"), default="text", help="as for build")
    watch.add_argument("--pictures", choices=("none", "svg", "png"), default=None,
                       help="as for build: svg or png also draws the charts' and drill-down pictures (default: "
                       "$TRACEHOUSE_PICTURES, else none)")

    from pipelines.interfaces import shell

    sql = sub.add_parser("sql", help=shell.HELP, description=shell.DESCRIPTION, epilog=shell.CATALOG_EPILOG,
                         formatter_class=shell.HelpFormatter)
    _add_warehouse(sql)
    sql.add_argument("query", nargs="?", metavar="QUERY",
                     help="SQL statements (and dot-commands) to run; omit to read them from standard input")
    sql.add_argument("--format", choices=shell.MODES, default="table",
                     help="output mode (.mode in the shell; default table)")
    sql.add_argument("--max-rows", type=shell.max_rows_arg, default=shell.DEFAULT_MAX_ROWS, metavar="N",
                     help="rows a table shows: the first and the last ones, with a row of '…' between "
                     f"(default {shell.DEFAULT_MAX_ROWS}; 0: every row; csv, json and markdown show every row)")
    sql.add_argument("--build", type=positive_int, metavar="N",
                     help="read build N instead of the last committed one (one of the builds the warehouse still "
                     "keeps: the last three)")
    sql.add_argument("--write", action="store_true",
                     help="let statements create tables and views; they go to the warehouse's scratch database "
                     "(catalog scratch, scratch.duckdb), which builds keep; the warehouse itself stays read-only")

    sample = sub.add_parser(
        "sample", help="generate a MemTraceBench-format corpus with injected failures",
        description=_wrapped(
            "Trace four toy memory systems (rag, mem0, evermemos, long_context) over seeded dialogues of three "
            "datasets (locomo, longmemeval, realmem) with smartcomment, and write one MemTraceBench graph per "
            "trajectory (<out>/<system>/<dataset>_<user>.json) plus injected_faults.jsonl. About 4 in 10 questions "
            "fail, each by a fault injected into the pipeline, whose operation becomes the annotation's final_op_id: "
            "ExtractionError (an extraction op loses the decisive fact), UpdateError (a change is not applied), "
            "DeletionError (a live memory is removed later), RetrievalError (a retrieval misses the memory), "
            "ResponseError (the answer step answers wrongly from correct context), AnnotationError (the golden "
            "answer is wrong) and LLMAsAJudgeError (the judge fails a correct answer). Same arguments, same bytes. "
            "--predictions also writes the predictions of two simulated attribution methods (docs/ATTRIBUTION.md)."),
        epilog="example: tracehouse sample --out /tmp/corpus --seed 7 --graphs-per-split 50 --predictions /tmp/preds\n"
        "exit status: 0 written, 1 could not write (named), 2 usage error (a bad number, --out a file), "
        "130 interrupted",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sample.add_argument("--out", required=True, metavar="DIR", help="output folder")
    sample.add_argument("--predictions", metavar="DIR",
                        help="also write two simulated attribution methods' predictions there (one folder each)")
    sample.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    sample.add_argument("--graphs-per-split", type=positive_int, default=25, metavar="N",
                        help="graphs per system, at least 1 (25)")
    sample.add_argument("--scale", type=_scale, default=1.0, metavar="F",
                        help="grow sessions/messages/values, at least 0.01 (1.0)")

    fetch = sub.add_parser(
        "fetch", help="download a dataset from the Hugging Face Hub, recording its revision",
        description=_wrapped("Download MemTraceBench, Who&When or TracerTraj from the Hugging Face Hub into --dest and "
        "record the revision it came from (build it then with --source KIND=DEST). Needs network access."),
        epilog="example: tracehouse fetch whowhen --dest data/whowhen; tracehouse build --source whowhen=data/whowhen\n"
        "exit status: 0 fetched, 1 the download failed (the reason named), 2 usage error, 130 interrupted",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fetch.add_argument("dataset", choices=("memtracebench", "whowhen", "tracertraj"))
    fetch.add_argument("--dest", required=True, metavar="DIR", help="folder to download into")
    fetch.add_argument("--revision", metavar="REV", help="branch, tag or commit (default: main)")
    fetch.add_argument("--repo-id", metavar="OWNER/NAME", help="override the dataset repository")

    dashboard = sub.add_parser(
        "dashboard", help="print the path of the failure dashboard page (built by build)",
        description=_wrapped("Print the path of the last committed build's dashboard: one offline HTML page with the "
        "cross-system failure charts, the attribution leaderboard and the annotation table (each row opens "
        "its failure view). It needs no server and loads nothing from any host."),
        epilog="example: tracehouse dashboard --open\n"
        "exit status: 0 ok, 1 no committed build or no dashboard yet (or a damaged build record), 2 usage error, "
        "130 interrupted",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_warehouse(dashboard)
    dashboard.add_argument("--open", action="store_true", help="also open it in the default web browser")

    show = sub.add_parser(
        "show", help="one failure annotation: its failure view (HTML) and a drill-down picture (SVG and PNG)",
        description=_wrapped("Write the failure view of one annotation (the page the dashboard's table links: query, "
        "golden answer, prediction, reason, and the faulty operation with its inputs, outputs and path to the "
        "prediction, or the multi-agent timeline with the decisive step) and draw its faulty operation as SVG "
        "and PNG, for a paper or a chat. Prints the three paths: view, SVG, PNG."),
        epilog="example: tracehouse show 'whowhen:Hand-Crafted/1#a0' --open\n"
        "ids: tracehouse sql \"select annotation_id, graph_id, error_type from annotations limit 20\"\n"
        "exit status: 0 written, 1 no such annotation (or it is in several graphs: --graph), no committed "
        "build or a damaged build record, 2 usage error (--out a file), 130 interrupted",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_warehouse(show)
    show.add_argument("annotation_id", metavar="ANNOTATION_ID", help="e.g. 'whowhen:Hand-Crafted/1#a0' (quote it)")
    show.add_argument("--out", metavar="DIR", help="output folder (default: <warehouse>/dashboards/show)")
    show.add_argument("--graph", metavar="GRAPH_ID", help="the graph, when the id exists in several")
    show.add_argument("--open", action="store_true", help="also open the failure view in the default web browser")

    collect = sub.add_parser(
        "collect", help="receive OpenTelemetry traces over OTLP/HTTP into the warehouse's landing folder",
        description=_wrapped("An OTLP/HTTP receiver: instrumented programs (any OpenTelemetry SDK's OTLP/HTTP "
        "exporter, an OpenTelemetry Collector) POST /v1/traces, protobuf (application/x-protobuf) or JSON "
        "(application/json), gzip or not. Each accepted request is appended, as one line of OTLP/JSON, to a file "
        "of <warehouse>/collected/ and acknowledged (200) only once written and fsynced; concurrent requests "
        "share one fsync. The folder is "
        "recorded at once as the warehouse's source 'collected' (kind otlp): `tracehouse build` (no --source), "
        "`tracehouse watch` and the Dagster sensor read it with the other sources, and spans of a trace that "
        "arrive later extend it on the next build (docs/SOURCES.md). Answers: 400 a malformed body (the reason "
        "in the JSON body), 401 a missing or wrong token, 404 another path, 408 a request not whole within "
        "--request-seconds, 413 a body over --max-body-mb, 503 the landing file could not be written (nothing "
        "acknowledged that is not on disk) or --max-connections are open (with Retry-After). SIGTERM or Ctrl-C "
        "finishes the requests under way and stops, with a line counting the requests and spans accepted and "
        "rejected."),
        epilog="examples:\n"
        "  tracehouse collect --warehouse wh                # then OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318\n"
        "  TRACEHOUSE_COLLECT_TOKEN=s3cret tracehouse collect --host 0.0.0.0   # other machines, with a token\n"
        "  tracehouse build --warehouse wh                  # the collected traces with the other sources\n"
        "exit status: 0 stopped by SIGTERM or Ctrl-C, 1 could not listen (e.g. the port is taken) or write the "
        "landing folder, 2 usage error (a bad option, an s3:// warehouse)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_warehouse(collect)
    collect.add_argument("--host", default="127.0.0.1",
                         help="bind address (default 127.0.0.1: this machine only; another prints a warning: spans "
                         "carry prompts, set a token)")
    collect.add_argument("--port", type=int, default=4318, help="port (default 4318, OTLP/HTTP's; 0: any free one, "
                         "printed)")
    collect.add_argument("--token", default=None, metavar="TOKEN",
                         help="require 'Authorization: Bearer TOKEN' (default: $TRACEHOUSE_COLLECT_TOKEN, else none)")
    collect.add_argument("--max-body-mb", type=positive_float, default=20.0, metavar="MB",
                         help="largest request body, compressed or inflated (default 20, as the OpenTelemetry "
                         "Collector's); a larger one gets 413")
    collect.add_argument("--roll-mb", type=positive_float, default=64.0, metavar="MB",
                         help="start a new landing file once the current one holds this much (default 64)")
    collect.add_argument("--roll-seconds", type=positive_float, default=3600.0, metavar="SECONDS",
                         help="... or is this old (default 3600)")
    collect.add_argument("--request-seconds", type=positive_float, default=60.0, metavar="SECONDS",
                         help="a request's headers and body must arrive within this (default 60); a slower one "
                         "gets 408 and its connection is closed")
    collect.add_argument("--max-connections", type=positive_int, default=1024, metavar="N",
                         help="connections open at once (default 1024; idle kept-alive ones count); past it a new "
                         "one gets 503 with Retry-After")
    collect.add_argument("--workers", type=positive_int, default=8, metavar="N",
                         help="threads decoding whole requests (default 8); slow clients and fsyncs hold none")

    ui = sub.add_parser(
        "ui", help="the Dagster UI on 127.0.0.1",
        description=_wrapped("Start the Dagster UI (dagster dev) on the warehouse: its assets, partitions, checks and "
        "the runs of every committed build; a sensor rebuilds when the sources change. Ctrl-C stops it and "
        "every process it started."),
        epilog="example: tracehouse ui --port 3001   # then open http://127.0.0.1:3001\n"
        "exit status: 0 stopped by Ctrl-C or SIGTERM, 1 (or dagster dev's own status) the UI stopped by itself "
        "or could not start (e.g. the port is taken), 2 usage error",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_warehouse(ui)
    ui.add_argument("--port", type=int, default=3000, help="port (default 3000)")
    ui.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    from pipelines.errors import ConfigError, DamagedRecord

    try:
        return COMMANDS[args.command](args)
    except ConfigError as exc:
        print(f"tracehouse: {exc}", file=sys.stderr)
        return 2
    except DamagedRecord as exc:  # the message names the file and the builds that still open
        print(f"tracehouse: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        if args.command == "build":
            print("tracehouse: build interrupted; the last committed build stands, and the next build takes over "
                  "what this one finished", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `tracehouse sql ... | head` closed the pipe: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # no committed build yet, a file that cannot be read or written: the message names it
        print(f"tracehouse: {exc}", file=sys.stderr)
        return 1


def cmd_build(args: argparse.Namespace) -> int:
    from pipelines import progress
    from pipelines.config import load_settings, refuse_before_building

    progress.set_format(args.progress)
    settings = load_settings(args.warehouse, args.source, args.config)
    refuse_before_building(settings, args.remove_source)  # usage errors before Dagster, GX and DuckDB load

    from pipelines.builds.executors import executor_settings

    executor = executor_settings(settings.config_file, args.executor, args.workers, args.scheduler)
    _set_iceberg(settings, args.iceberg)
    return _build(args, settings, executor)


def _build(args: argparse.Namespace, settings, executor) -> int:
    from pipelines.interfaces.build import BuildLocked, StrictBuildError, format_summary, run_build

    try:
        summary = run_build(settings, full=args.full, strict=args.strict, progress=not args.quiet,
                            remove_sources=args.remove_source, verbose=args.verbose, pictures=args.pictures,
                            executor=executor, early_worker=True)
    except StrictBuildError as exc:
        print(f"tracehouse: --strict: stopped at {exc}", file=sys.stderr)
        return 1
    except (BuildLocked, RuntimeError) as exc:
        print(f"tracehouse: {exc}", file=sys.stderr)
        return 1
    print(format_summary(summary))
    return summary.exit_code


def _set_iceberg(settings, flag: bool) -> None:
    """--iceberg or tracehouse.toml's [iceberg] enabled turns the warehouse's Iceberg publication on (or off)."""
    from pipelines.storage import iceberg
    from pipelines.storage.warehouse import Warehouse

    on = True if flag else settings.iceberg
    warehouse = Warehouse(settings.warehouse)
    if on and settings.remote and not (settings.iceberg_catalog or iceberg.catalog_uri(warehouse) !=
                                       iceberg.default_uri(warehouse)):
        from pipelines.config import ConfigError

        raise ConfigError(f"--iceberg: a warehouse on object storage ({settings.remote}) publishes its Iceberg tables "
                          "to a catalog every machine reaches: set [iceberg] catalog = "
                          "\"postgresql+psycopg2://user@host/db\" in tracehouse.toml (docs/SCALE.md)")
    if on is False:
        iceberg.set_enabled(warehouse, False)
    elif on or ((settings.iceberg_catalog or settings.iceberg_namespace) and iceberg.enabled(warehouse)):
        iceberg.set_enabled(warehouse, True, settings.iceberg_catalog, settings.iceberg_namespace)
    if iceberg.enabled(warehouse):  # pyiceberg missing: stop before the build, not after its commit
        iceberg.require_extras(warehouse)


def cmd_watch(args: argparse.Namespace) -> int:
    from pipelines import progress
    from pipelines.config import load_settings
    from pipelines.interfaces.watch import watch_until_signalled

    progress.set_format(args.progress)

    if args.interval <= 0:
        print("tracehouse: --interval must be positive", file=sys.stderr)
        return 2
    settings = load_settings(args.warehouse, args.source, args.config)
    _set_iceberg(settings, False)
    return watch_until_signalled(settings, interval=args.interval, progress=not args.quiet, pictures=args.pictures)


def cmd_sql(args: argparse.Namespace) -> int:
    from pipelines.interfaces import shell

    return shell.main(args)


def cmd_sample(args: argparse.Namespace) -> int:
    from pipelines.sample.corpus import generate_corpus

    out = Path(args.out)
    for flag, folder in (("--out", out), ("--predictions", Path(args.predictions) if args.predictions else None)):
        if folder is not None and folder.exists() and not folder.is_dir():
            print(f"tracehouse: {flag} {folder} is a file; give a folder (it is created if missing)", file=sys.stderr)
            return 2
    records = generate_corpus(out, seed=args.seed, graphs_per_split=args.graphs_per_split, scale=args.scale)
    files = [p for p in out.rglob("*.json")]
    size = sum(p.stat().st_size for p in files)
    failed = sum(1 for r in records if r["failed"])
    print(f"wrote {len(files)} graphs ({size / 1e6:.1f} MB) to {out}: {len(records)} queries, {failed} failed")
    if args.predictions:
        from pipelines.sample.predictions import simulate_predictions

        counts = simulate_predictions(out, Path(args.predictions), seed=args.seed)
        print("wrote the predictions of " + ", ".join(f"{m} ({n})" for m, n in counts.items())
              + f" to {args.predictions}; build them with --source <method>:memtrace_attribution=<folder>")
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    from pipelines.storage.hub import HubError, fetch

    try:
        record = fetch(args.dataset, Path(args.dest), args.revision, args.repo_id)
    except HubError as exc:
        print(f"tracehouse: {exc}", file=sys.stderr)
        return 1
    print(f"fetched {record.repo_id} at revision {record.revision}: {record.files} files in {args.dest}")
    print(f"build it with: tracehouse build --source {args.dataset}={args.dest}")
    return 0


def cmd_collect(args: argparse.Namespace) -> int:
    from pipelines.config import ConfigError, load_settings
    from pipelines.interfaces.collect import TOKEN_ENV, CollectOptions, LandingFailed, serve

    settings = load_settings(args.warehouse, None, args.config)
    if settings.remote:
        raise ConfigError(f"collect lands traces on local disk; {settings.remote} is on object storage: collect into "
                          "a local warehouse")
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port must be 0-65535, got {args.port}")
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    options = CollectOptions(args.host, args.port, token, args.max_body_mb, args.roll_mb, args.roll_seconds,
                             args.workers, args.max_connections, args.request_seconds)
    try:
        return serve(settings.warehouse, options)
    except LandingFailed as exc:
        print(f"tracehouse collect: {exc}", file=sys.stderr)
        return 1


UI_STOP_SECONDS = 20.0  # how long the UI's processes get to stop before they are killed


def cmd_ui(args: argparse.Namespace) -> int:
    import signal
    import subprocess

    from pipelines.builds.run_history import instance_for
    from pipelines.config import load_settings
    from pipelines.storage.warehouse import Warehouse

    settings = load_settings(args.warehouse, None, args.config)
    warehouse = Warehouse(settings.warehouse)
    if settings.remote:  # an s3:// warehouse: the UI shows (and its runs commit to) the store's latest build
        from pipelines.storage.remote import pull

        pull(warehouse.root, lambda line: print(f"tracehouse: {line}", file=sys.stderr, flush=True))
    instance_for(warehouse)  # the instance's dagster.yaml, as tracehouse build writes it
    env = dict(os.environ, DAGSTER_HOME=str(warehouse.dagster_home), TRACEHOUSE_WAREHOUSE=str(warehouse.root))
    if settings.config_file:
        env["TRACEHOUSE_CONFIG"] = str(settings.config_file.resolve())
    command = [sys.executable, "-m", "dagster", "dev", "-m", "pipelines.definitions",
               "--host", args.host, "--port", str(args.port)]
    print(f"tracehouse: Dagster UI on http://{args.host}:{args.port} (DAGSTER_HOME={warehouse.dagster_home})",
          file=sys.stderr)
    # dagster dev runs in a session of its own, with SIGINT at its default even when this process was
    # started in the background (where the shell ignores SIGINT, and dagster dev would then ignore
    # SIGTERM too). SIGINT or SIGTERM here asks it to stop as Ctrl-C does (it stops the webserver and
    # the daemon), then whatever is left of its session is terminated.
    child = subprocess.Popen(command, env=env, start_new_session=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    stopping: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        stopping.append(signum)
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGINT)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)
    code = child.wait()
    for signum, grace in ((signal.SIGTERM, UI_STOP_SECONDS), (signal.SIGKILL, 5.0)):
        deadline = time.monotonic() + grace
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signum)
            while time.monotonic() < deadline:
                os.killpg(child.pid, 0)  # ProcessLookupError once the session's last process is gone
                time.sleep(0.2)
    return 0 if stopping else code


def cmd_dashboard(args: argparse.Namespace) -> int:
    from pipelines.analytics import db
    from pipelines.builds.commit import published_build
    from pipelines.config import warehouse_for_reading
    from pipelines.storage.warehouse import Warehouse

    warehouse = Warehouse(warehouse_for_reading(args.warehouse, args.config))
    record = db.committed_record(warehouse)
    page = warehouse.dashboards_dir / "index.html"
    if published_build(warehouse) != record.build or not page.is_file():  # the commit's copy is not there yet
        page = warehouse.path(record.dashboard_page or "dashboards/index.html")
    if not page.is_file():
        print(f"tracehouse: no dashboard at {page}; run `tracehouse build` first", file=sys.stderr)
        return 1
    print(page)
    if args.open:
        import webbrowser

        if not webbrowser.open(page.as_uri()):
            print("tracehouse: could not start a web browser; open the path above yourself", file=sys.stderr)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    import duckdb

    from dashboards import drilldown, failure_view
    from pipelines.analytics import db
    from pipelines.config import warehouse_for_reading
    from pipelines.storage.warehouse import Warehouse

    warehouse = Warehouse(warehouse_for_reading(args.warehouse, args.config))
    out = Path(args.out) if args.out else drilldown.show_dir(warehouse)
    if out.exists() and not out.is_dir():
        print(f"tracehouse: --out {out} is a file; give a folder (it is created if missing)", file=sys.stderr)
        return 2
    try:
        con = db.connect(warehouse)
    except (FileNotFoundError, LookupError, duckdb.Error) as exc:
        print(f"tracehouse: {exc}", file=sys.stderr)
        return 1
    try:
        svg, png = drilldown.draw(con, args.annotation_id, out, args.graph)
        view = failure_view.write_one(con, args.annotation_id, out, args.graph,
                                      dashboard=warehouse.dashboards_dir.absolute() / "index.html")
    except LookupError as exc:
        print(f"tracehouse: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 1
    except duckdb.CatalogException as exc:
        print(f"tracehouse: the warehouse has no failure marts yet ({exc}); run `tracehouse build`", file=sys.stderr)
        return 1
    finally:
        con.close()
    print(view)
    print(svg)
    print(png)
    if args.open:
        import webbrowser

        if not webbrowser.open(view.as_uri()):
            print("tracehouse: could not start a web browser; open the first path above yourself", file=sys.stderr)
    return 0


COMMANDS = {"build": cmd_build, "watch": cmd_watch, "sql": cmd_sql, "sample": cmd_sample, "fetch": cmd_fetch,
            "ui": cmd_ui, "dashboard": cmd_dashboard, "show": cmd_show, "collect": cmd_collect}

def run() -> NoReturn:
    """The ``tracehouse`` command: :func:`main`, then a normal exit. Output a closed pipe no longer
    wants (`tracehouse sql ... | head`) is not an error: standard output then goes to /dev/null, as
    Python's documentation advises, so the interpreter's own flush at exit finds nowhere to fail."""
    code = main()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    raise SystemExit(code)


if __name__ == "__main__":
    run()
