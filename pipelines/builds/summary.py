"""What a build did, said once: the summary ``tracehouse build`` prints, the progress lines, and the
fingerprint of the code the outputs are made by. Free of Dagster and Great Expectations, so that a
build with nothing to do (pipelines.interfaces.build, before its run) is decided and said without importing them.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pipelines import schema
from pipelines.analytics import db
from pipelines.builds.ingest import load_manifest
from pipelines.progress import show
from pipelines.readers import tier
from pipelines.storage.records import BuildRecord
from pipelines.storage.warehouse import Warehouse

# trace sources, one operation per span (Langfuse: per observation, its spans): counted in spans
SPAN_KINDS = frozenset({"otlp", "otel_spans", "phoenix", "mlflow", "langfuse"})
# The position of a rejected span (docs/SOURCES.md, "Bad input"): `line N: resourceSpans[i].scopeSpans[j].
# spans[k]` (otlp), `$.spans[i]` or `$[i]` (otel_spans; a list file), with the span's field after it.
_SPAN_POSITION = re.compile(r"\.spans\[\d+\]")
_LIST_ITEM_POSITION = re.compile(r"^\$\[\d+\]")


@dataclass
class SourceCounts:
    """What one source's files came to in a committed build, in the units of its records and of its
    ``ingest_errors`` rows: files by outcome (as ``input_files.outcome``), records loaded (spans for
    trace sources, predictions, labels, else graphs), and the rejected rows by what each rejected."""

    source: str
    kind: str
    files: int = 0
    files_loaded: int = 0
    files_partly: int = 0
    files_rejected: int = 0
    loaded: int = 0
    rejected: Counter[str] = field(default_factory=Counter)  # "file" / "span" / "line or request" / "record" -> rows

    @property
    def unit(self) -> str:
        level = tier(self.kind)
        return "span" if self.kind in SPAN_KINDS else "prediction" if level == 2 else "label" if level == 1 else "graph"


def rejected_unit(kind: str, position: str | None, whole_file: bool) -> str:
    """What one rejected ``ingest_errors`` row rejected: the whole file (its only rejected row, and
    nothing of it loaded), a span (its position names one), an otlp line or request, or a record."""
    if whole_file:
        return "file"
    if kind in SPAN_KINDS and position and (_SPAN_POSITION.search(position) or (
            kind == "otel_spans" and _LIST_ITEM_POSITION.match(position))):
        return "span"
    if kind == "otlp":
        return "line or request"
    return "record"


def source_counts(warehouse: Warehouse, record: BuildRecord) -> list[SourceCounts]:
    """Per source, its files, records and rejected rows in ``record`` (from the partitions' manifests,
    which ``input_files`` and ``ingest_errors`` are made from)."""
    counts: dict[str, SourceCounts] = {}
    for part in sorted(record.snapshot.partitions.values(), key=lambda p: p.key):
        manifest = load_manifest(warehouse.path(part.generation)) or {"files": []}
        into = counts.setdefault(part.source, SourceCounts(part.source, part.kind))
        for entry in manifest["files"]:
            _count_file(into, entry)
    return list(counts.values())


def _count_file(into: SourceCounts, entry: dict[str, Any]) -> None:
    rows = entry.get("rows", {})
    loaded = {"span": rows.get("operations", 0), "prediction": rows.get("attributions", 0),
              "label": rows.get("annotations", 0), "graph": len(entry["graph_ids"])}
    into.loaded += loaded[into.unit]
    # as input_files.outcome decides it (sql/views/input_files.sql)
    anything = bool(entry["graph_ids"] or rows.get("attributions", 0) or entry.get("labels", 0))
    rejected = [error for error in entry["errors"] if error["rejected"]]
    into.files += 1
    if rejected and anything:
        into.files_partly += 1
    elif rejected:
        into.files_rejected += 1
    else:
        into.files_loaded += 1
    for error in rejected:
        into.rejected[rejected_unit(into.kind, error.get("position"), not anything and len(rejected) == 1)] += 1


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def format_source_counts(counts: SourceCounts) -> str:
    """One source's line of the summary, e.g. ``collected (otlp): 1 file: 1 partly loaded; 5 spans
    loaded; rejected: 1 span``."""
    outcomes = [f"{n:,} {what}" for n, what in ((counts.files_loaded, "loaded"),
                                                 (counts.files_partly, "partly loaded"),
                                                 (counts.files_rejected, "rejected")) if n]
    line = (f"{counts.source} ({counts.kind}): {_plural(counts.files, 'file')}: {', '.join(outcomes) or 'none'}; "
            f"{_plural(counts.loaded, counts.unit)} loaded")
    if counts.rejected:
        order = ("file", "span", "line or request", "record")
        shown = [_plural(counts.rejected[unit], unit).replace("line or requests", "lines or requests")
                 for unit in order if counts.rejected[unit]]
        line += "; rejected: " + ", ".join(shown)
    return line


@dataclass
class BuildSummary:
    warehouse: Path
    remote: str | None = None  # the s3:// URL of a warehouse on object storage (``warehouse``: its working copy)
    build: int | None = None  # the committed build this summary describes
    partitions_built: list[str] = field(default_factory=list)
    partitions_unchanged: list[str] = field(default_factory=list)
    partitions_adopted: list[str] = field(default_factory=list)  # finished by a build that was killed
    partitions_removed: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    files_found: int = 0
    files_rejected: list[dict] = field(default_factory=list)  # the rejected ingest_errors rows (files or records)
    sources: list[SourceCounts] = field(default_factory=list)  # per source, in files, records and rejected rows
    failed_checks: list[str] = field(default_factory=list)
    warned_checks: list[str] = field(default_factory=list)
    failed_steps: list[str] = field(default_factory=list)
    report: str | None = None  # the validation report of this build (committed or not)
    seconds: float = 0.0
    code: str = ""
    checked: bool = False  # the checks, marts and dashboard ran (not skipped: nothing had changed)
    committed: bool = False  # this build committed ``build`` (even if publishing it failed after)

    @property
    def ok(self) -> bool:
        return not self.failed_checks and not self.failed_steps

    @property
    def exit_code(self) -> int:
        """0: clean; 1: a check or step failed, nothing committed; 3: built, but some input could not be
        loaded; 4: committed, but publishing its copies did not finish (the next build finishes it)."""
        if not self.ok:
            return 4 if self.committed else 1
        return 3 if self.files_rejected else 0


_CODE_DIGEST: tuple[tuple, str] = ((), "")  # the last fingerprint, after the files' paths, sizes and mtimes


def code_fingerprint() -> str:
    """Every file the outputs are made by (Python, SQL, suites, seeds): a build after a code change
    runs the checks, marts and dashboard even when no input changed. Hashed again only when a file's
    size or mtime changed (a process that builds again and again, as ``tracehouse watch``, would otherwise
    read and hash every file each round, a large part of a round with nothing changed)."""
    paths = [
        path
        for folder in ("pipelines", "dashboards", "sql", "expectations")
        for path in sorted((db.REPO / folder).rglob("*"))
        if path.suffix in {".py", ".sql", ".json", ".csv", ".yml", ".j2", ".css", ".js"}
        and "__pycache__" not in path.parts
    ]
    stamp = tuple((str(path), stat.st_size, stat.st_mtime_ns) for path in paths for stat in (path.stat(),))
    global _CODE_DIGEST
    if _CODE_DIGEST[0] != stamp:
        _CODE_DIGEST = (stamp, db.files_digest(paths).hexdigest())
    return _CODE_DIGEST[1]


def describe(warehouse: Warehouse, record: BuildRecord, summary: BuildSummary, after_steps: bool = False) -> None:
    """Fill the summary with what the committed build ``record`` holds (``after_steps``: read from the
    database the build's steps set up; otherwise from a database with that one view, not every view,
    seed and macro, whose setting up would be much of a build that found nothing changed)."""
    summary.build = record.build
    rows = record.summary.get("rows", {})
    summary.rows = {table: rows[table] for table in schema.TABLES if table in rows}
    summary.warned_checks = summary.warned_checks or [
        f"{c['asset']}:{c['name']}" for c in record.checks if not c["passed"] and c["severity"] == "warn"
    ]
    summary.report = record.report
    con = db.connection(warehouse, record.snapshot) if after_steps else db.tables_connection(
        warehouse, record.snapshot, ["ingest_errors"])
    try:
        rejected = con.execute(
            "select source, split, file, kind, reason, position from ingest_errors where rejected order by all"
        ).fetchall()
    finally:
        con.close()
    cols = ("source", "split", "file", "kind", "reason", "position")
    summary.files_rejected = [dict(zip(cols, row, strict=True)) for row in rejected]
    summary.sources = source_counts(warehouse, record)


def say(out: TextIO, progress: bool, message: str) -> None:
    if progress:
        show(message, "tracehouse: ", out)


def format_summary(summary: BuildSummary) -> str:
    lines = [f"warehouse: {summary.remote} (working copy {summary.warehouse})" if summary.remote
             else f"warehouse: {summary.warehouse}"]
    adopted = len(summary.partitions_adopted)
    adopted = f", {adopted} taken from an unfinished build" if adopted else ""
    lines.append(
        f"partitions: {len(summary.partitions_built)} built, {len(summary.partitions_unchanged)} unchanged"
        f"{adopted}, {len(summary.partitions_removed)} removed"
    )
    if summary.sources:  # the files' outcomes, in files; what was rejected, in ingest_errors rows
        outcomes = [sum(getattr(c, name) for c in summary.sources)
                    for name in ("files_loaded", "files_partly", "files_rejected")]
        lines.append(f"files: {summary.files_found} found: {outcomes[0]} loaded, {outcomes[1]} partly loaded, "
                     f"{outcomes[2]} rejected; {len(summary.files_rejected)} rejected in ingest_errors")
        lines.extend(f"  {format_source_counts(counts)}" for counts in summary.sources)
    else:
        lines.append(f"files: {summary.files_found} found, {len(summary.files_rejected)} rejected in ingest_errors")
    if summary.ok and not summary.checked and summary.build is None:
        lines.append("nothing built yet: the sources list no files")
    elif summary.ok and not summary.checked:
        lines.append(f"nothing changed since build {summary.build}: its checks, marts and dashboard stand")
    if summary.rows:
        lines.append("rows: " + ", ".join(f"{name} {n:,}" for name, n in summary.rows.items()))
    for row in summary.files_rejected[:20]:
        at = f" at {row['position']}" if row["position"] else ""
        lines.append(f"  rejected {row['source']}/{row['file']}: {row['kind']}: {row['reason']}{at}")
    if len(summary.files_rejected) > 20:
        lines.append(f"  ... and {len(summary.files_rejected) - 20} more (select * from ingest_errors)")
    for check in summary.failed_checks:
        lines.append(f"  FAILED check {check}")
    for check in summary.warned_checks:
        lines.append(f"  warning: check {check} found problems")
    for step in summary.failed_steps:
        lines.append(f"  FAILED step {step.splitlines()[0][:300]}")
    if summary.report and (summary.failed_checks or summary.warned_checks):
        lines.append(f"  validation report: {summary.warehouse / summary.report}")
    if summary.ok:
        status = "ok" if summary.exit_code == 0 else "built with rejected input (select * from ingest_errors)"
        lines.append(f"status: {status}; build {summary.build} committed in {summary.seconds:.1f} s"
                     if summary.checked else f"status: {status} in {summary.seconds:.1f} s")
    elif summary.committed:  # e.g. an Iceberg catalog that could not be reached
        lines.append(f"status: build {summary.build} committed in {summary.seconds:.1f} s, but publishing its copies "
                     "did not finish (tracehouse.duckdb, dashboards/index.html may show an earlier build); the next "
                     "build finishes it first")
    else:
        stands = f"; build {summary.build} stands" if summary.build else ""
        lines.append(f"status: FAILED in {summary.seconds:.1f} s; nothing was committed{stands}")
    return "\n".join(lines)
