"""The ``tracehouse`` command line."""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

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
  tracehouse show 'whowhen:Hand-Crafted/1#a0' --out /tmp/pictures   # one annotation's faulty operation
exit status: 0 ok, 1 failed, 2 usage error, 3 built but some input files were rejected
"""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tracehouse")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree without installing
        return "unknown"


def _add_warehouse(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--warehouse", metavar="DIR", help="warehouse folder (default: tracehouse.toml's, else warehouse/)"
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

    build = sub.add_parser("build", help="flatten the sources into the warehouse (incremental by default)")
    _add_warehouse(build)
    build.add_argument(
        "--source", action="append", metavar="[NAME:]KIND=PATH",
        help="a source folder or file; KIND is memtracebench, smartcomment, whowhen or tracertraj "
        "(repeatable; default: tracehouse.toml's sources, else the sources the warehouse recorded, else the "
        "embedded sample corpus). When given, they must include every source the warehouse holds",
    )
    build.add_argument("--remove-source", action="append", default=[], metavar="NAME",
                       help="drop a recorded source and its rows from the warehouse (repeatable)")
    build.add_argument("--full", action="store_true", help="re-read every file instead of only changed ones")
    build.add_argument("--strict", action="store_true", help="stop at the first file that cannot be loaded")
    build.add_argument("--quiet", action="store_true", help="no progress lines, only the summary")
    build.add_argument("--verbose", action="store_true", help="also print Dagster's errors with their stack traces")

    watch = sub.add_parser(
        "watch", help="stay running and rebuild whenever the sources change (one warm process; Ctrl-C stops)",
        description="Build now, then look at the sources every --interval seconds and rebuild what changed, "
        "in this one process: Dagster, Great Expectations and DuckDB stay loaded, so a rebuild costs what "
        "changed. Prints a summary after each build that changed something; stops on Ctrl-C or SIGTERM "
        "once the build under way is done. Exit status: 0, or 1 when the last build failed.",
    )
    _add_warehouse(watch)
    watch.add_argument("--source", action="append", metavar="[NAME:]KIND=PATH", help="as for build")
    watch.add_argument("--interval", type=float, default=10.0, metavar="SECONDS",
                       help="how often to look for changed files (default 10)")
    watch.add_argument("--quiet", action="store_true", help="no progress lines, only a summary per rebuild")

    sql = sub.add_parser("sql", help="run SQL over the warehouse (read-only); no query = interactive prompt")
    _add_warehouse(sql)
    sql.add_argument("query", nargs="?", help="SQL text; omit for an interactive prompt")
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format")
    sql.add_argument("--write", action="store_true",
                     help="let statements create tables and views; they go to the warehouse's scratch database "
                     "(catalog scratch, scratch.duckdb), which builds keep; the warehouse itself stays read-only")

    sample = sub.add_parser("sample", help="generate a MemTraceBench-format corpus with injected failures")
    sample.add_argument("--out", required=True, metavar="DIR", help="output folder")
    sample.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    sample.add_argument("--graphs-per-split", type=_positive_int, default=25, metavar="N",
                        help="graphs per system, at least 1 (25)")
    sample.add_argument("--scale", type=_scale, default=1.0, metavar="F",
                        help="grow sessions/messages/values, at least 0.01 (1.0)")

    fetch = sub.add_parser("fetch", help="download a dataset from the Hugging Face Hub, recording its revision")
    fetch.add_argument("dataset", choices=("memtracebench", "whowhen", "tracertraj"))
    fetch.add_argument("--dest", required=True, metavar="DIR", help="folder to download into")
    fetch.add_argument("--revision", metavar="REV", help="branch, tag or commit (default: main)")
    fetch.add_argument("--repo-id", metavar="OWNER/NAME", help="override the dataset repository")

    dashboard = sub.add_parser("dashboard", help="print the path of the failure dashboard page (built by build)")
    _add_warehouse(dashboard)
    dashboard.add_argument("--open", action="store_true", help="also open it in the default web browser")

    show = sub.add_parser("show", help="draw the faulty operation of one failure annotation as SVG and PNG")
    _add_warehouse(show)
    show.add_argument("annotation_id", metavar="ANNOTATION_ID", help="e.g. 'whowhen:Hand-Crafted/1#a0' (quote it)")
    show.add_argument("--out", metavar="DIR", help="output folder (default: <warehouse>/dashboards/show)")
    show.add_argument("--graph", metavar="GRAPH_ID", help="the graph, when the id exists in several")

    ui = sub.add_parser("ui", help="the Dagster UI on 127.0.0.1")
    _add_warehouse(ui)
    ui.add_argument("--port", type=int, default=3000)
    ui.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only)")
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _scale(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0.01 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of at least 0.01, got {text}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    from pipelines.config import ConfigError

    try:
        return COMMANDS[args.command](args)
    except ConfigError as exc:
        print(f"tracehouse: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:  # no committed build yet, a missing file the message names
        print(f"tracehouse: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `tracehouse sql ... | head` closed the pipe: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def cmd_build(args: argparse.Namespace) -> int:
    from pipelines.build import BuildLocked, StrictBuildError, format_summary, run_build
    from pipelines.config import load_settings

    settings = load_settings(args.warehouse, args.source, args.config)
    try:
        summary = run_build(settings, full=args.full, strict=args.strict, progress=not args.quiet,
                            remove_sources=args.remove_source, verbose=args.verbose)
    except StrictBuildError as exc:
        print(f"tracehouse: --strict: stopped at {exc}", file=sys.stderr)
        return 1
    except (BuildLocked, RuntimeError) as exc:
        print(f"tracehouse: {exc}", file=sys.stderr)
        return 1
    print(format_summary(summary))
    return summary.exit_code


def cmd_watch(args: argparse.Namespace) -> int:
    from pipelines.config import load_settings
    from pipelines.watch import watch_until_signalled

    if args.interval <= 0:
        print("tracehouse: --interval must be positive", file=sys.stderr)
        return 2
    settings = load_settings(args.warehouse, args.source, args.config)
    return watch_until_signalled(settings, interval=args.interval, progress=not args.quiet)


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float | Decimal):
        return f"{value:.6g}"
    return str(value)


def _json_value(value: object) -> object:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return value


def print_result(columns: list[str], rows: list[tuple], fmt: str, out=sys.stdout) -> None:
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[_cell(v) for v in row] for row in rows])
    elif fmt == "json":
        out.write(json.dumps([{c: _json_value(v) for c, v in zip(columns, row, strict=True)} for row in rows],
                             default=str, ensure_ascii=False))
        out.write("\n")
    else:
        cells = [[_cell(v).replace("\n", " ")[:80] for v in row] for row in rows]
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
        out.write("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip() + "\n")
        out.write("  ".join("-" * w for w in widths) + "\n")
        for row in cells:
            out.write("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() + "\n")
        out.write(f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n")


_TEMPORARY = re.compile(r"^\s*create\s+(or\s+replace\s+)?(temp|temporary)\b", re.I)


def _writes(statement) -> bool:
    """A statement that would create or change a table or view (temporary ones excepted)."""
    import duckdb

    kinds = duckdb.StatementType
    if statement.type in (kinds.CREATE, kinds.CREATE_FUNC):
        return not _TEMPORARY.match(statement.query)
    return statement.type in (kinds.INSERT, kinds.UPDATE, kinds.DELETE, kinds.ALTER, kinds.DROP, kinds.MERGE_INTO,
                              kinds.COPY_DATABASE)


def cmd_sql(args: argparse.Namespace) -> int:
    import duckdb

    from pipelines import db
    from pipelines.config import load_settings
    from pipelines.storage import Warehouse

    warehouse = Warehouse(load_settings(args.warehouse, None, args.config).warehouse)
    try:
        con = db.connect(warehouse, write=args.write)
    except (FileNotFoundError, LookupError, duckdb.Error) as exc:
        print(f"tracehouse: {exc}", file=sys.stderr)
        return 1

    def run(text: str) -> int:
        """Run every statement of ``text``, showing each result; stop at the first error."""
        try:
            statements = duckdb.extract_statements(text)
        except duckdb.Error as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        for statement in statements:
            if not args.write and _writes(statement):
                print("error: tracehouse sql is read-only; with --write, statements that create or change tables "
                      "run in the warehouse's scratch catalog (scratch.duckdb), which builds keep", file=sys.stderr)
                return 1
            try:
                cursor = con.execute(statement.query)
            except duckdb.Error as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            if cursor.description is not None:
                print_result([d[0] for d in cursor.description], cursor.fetchall(), args.format)
        return 0

    if args.query is not None:
        return run(args.query)
    interactive = sys.stdin.isatty()
    if not interactive:  # a script on a pipe: no prompts, stop at the first error
        script: list[str] = []
        for line in sys.stdin:
            if not "".join(script).strip() and line.strip() in {".quit", ".exit"}:
                break
            script.append(line)
            if line.rstrip().endswith(";") and run("".join(script)):
                return 1
            if line.rstrip().endswith(";"):
                script = []
        return run("".join(script)) if "".join(script).strip() else 0
    print(f"tracehouse sql on {warehouse.root} (read-only: {not args.write}); end a statement with ';', "
          "quit with .quit or Ctrl-D", file=sys.stderr)
    buffer: list[str] = []
    status = 0
    while True:
        try:
            line = input("tracehouse> " if not buffer else "       ...> ")
        except EOFError:
            break
        except KeyboardInterrupt:  # Ctrl-C clears the statement being typed
            print(file=sys.stderr)
            buffer = []
            continue
        if not buffer and line.strip() in {".quit", ".exit", "quit", "exit"}:
            break
        buffer.append(line)
        if line.rstrip().endswith(";"):
            status = run("\n".join(buffer))
            buffer = []
    if buffer and "".join(buffer).strip():
        status = run("\n".join(buffer))
    return status


def cmd_sample(args: argparse.Namespace) -> int:
    from pipelines.sample import generate_corpus

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        print(f"tracehouse: --out {out} is a file; give a folder (it is created if missing)", file=sys.stderr)
        return 2
    records = generate_corpus(out, seed=args.seed, graphs_per_split=args.graphs_per_split, scale=args.scale)
    files = [p for p in out.rglob("*.json")]
    size = sum(p.stat().st_size for p in files)
    failed = sum(1 for r in records if r["failed"])
    print(f"wrote {len(files)} graphs ({size / 1e6:.1f} MB) to {out}: {len(records)} queries, {failed} failed")
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    from pipelines.hub import HubError, fetch

    try:
        record = fetch(args.dataset, Path(args.dest), args.revision, args.repo_id)
    except HubError as exc:
        print(f"tracehouse: {exc}", file=sys.stderr)
        return 1
    print(f"fetched {record.repo_id} at revision {record.revision}: {record.files} files in {args.dest}")
    print(f"build it with: tracehouse build --source {args.dataset}={args.dest}")
    return 0


UI_STOP_SECONDS = 20.0  # how long the UI's processes get to stop before they are killed


def cmd_ui(args: argparse.Namespace) -> int:
    import signal
    import subprocess

    from pipelines.config import load_settings
    from pipelines.run_history import instance_for
    from pipelines.storage import Warehouse

    settings = load_settings(args.warehouse, None, args.config)
    warehouse = Warehouse(settings.warehouse)
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
    from pipelines import db
    from pipelines.commit import published_build
    from pipelines.config import load_settings
    from pipelines.storage import Warehouse

    warehouse = Warehouse(load_settings(args.warehouse, None, args.config).warehouse)
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

    from dashboards import drilldown
    from pipelines import db
    from pipelines.config import load_settings
    from pipelines.storage import Warehouse

    warehouse = Warehouse(load_settings(args.warehouse, None, args.config).warehouse)
    out = Path(args.out) if args.out else drilldown.show_dir(warehouse)
    try:
        con = db.connect(warehouse)
    except (FileNotFoundError, duckdb.Error) as exc:
        print(f"tracehouse: {exc}", file=sys.stderr)
        return 1
    try:
        svg, png = drilldown.draw(con, args.annotation_id, out, args.graph)
    except LookupError as exc:
        print(f"tracehouse: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 1
    except duckdb.CatalogException as exc:
        print(f"tracehouse: the warehouse has no failure marts yet ({exc}); run `tracehouse build`", file=sys.stderr)
        return 1
    finally:
        con.close()
    print(svg)
    print(png)
    return 0


COMMANDS = {"build": cmd_build, "watch": cmd_watch, "sql": cmd_sql, "sample": cmd_sample, "fetch": cmd_fetch,
            "ui": cmd_ui, "dashboard": cmd_dashboard, "show": cmd_show}

if __name__ == "__main__":
    sys.exit(main())
