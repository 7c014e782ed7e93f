"""What a build did, said once: the summary ``tracehouse build`` prints, the progress lines, and the
fingerprint of the code the outputs are made by. Free of Dagster and Great Expectations, so that a
build with nothing to do (pipelines.unchanged) is decided and said without importing them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from pipelines import db, schema
from pipelines.progress import show
from pipelines.records import BuildRecord
from pipelines.storage import Warehouse


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
    files_rejected: list[dict] = field(default_factory=list)
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
        """0: clean; 1: a check or step failed; 3: built, but some input could not be loaded."""
        if not self.ok:
            return 1
        return 3 if self.files_rejected else 0


_CODE_DIGEST: tuple[tuple, str] = ((), "")  # the last fingerprint, after the files' paths, sizes and mtimes


def code_fingerprint() -> str:
    """Every file the outputs are made by (Python, SQL, suites, seeds): a build after a code change
    runs the checks, marts and dashboard even when no input changed. Hashed again only when a file's
    size or mtime changed (a process that builds again and again, as ``tracehouse watch``, read and
    hashed every file each round: 0.05 s of a 0.4 s round)."""
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
    seed and macro: 0.1 s of a build that found nothing changed)."""
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
    lines.append(f"files: {summary.files_found} found, {len(summary.files_rejected)} rejected")
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
        lines.append(f"status: FAILED in {summary.seconds:.1f} s; build {summary.build} was committed, but publishing "
                     "it did not finish (the next build publishes it again first)")
    else:
        stands = f"; build {summary.build} stands" if summary.build else ""
        lines.append(f"status: FAILED in {summary.seconds:.1f} s; nothing was committed{stands}")
    return "\n".join(lines)
