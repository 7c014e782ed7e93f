"""The warehouse's committed state: a log of build records, one atomic commit per build.

A build record (``builds/00000042.json``) names every file of one consistent warehouse state:
the generation of each table partition, the file of each mart, the dashboard's page and files,
the validation report, the checks' results and the sources it was built from. Readers
(``tracehouse sql``, the dashboard, the Dagster UI) take the latest record and read only the files
it names, so they see one whole build or the previous one, never a mix.

Committing is creating the next record with create-if-absent semantics (a hard link of a complete
temporary file: it fails if the number is taken). That is the only step that changes what readers
see, so a build killed at any moment leaves the previous state whole, and two builds racing for one
number cannot both win. On object storage the same step is a conditional PUT (``If-None-Match``),
and with Iceberg a catalog commit; nothing here relies on links or renames of folders.

A build under way keeps its plan and its steps' outputs in an :class:`Attempt` (``.staging/<id>/``):
the candidate snapshot that checks, marts and dashboard are computed over, and what each step
produced. The commit turns the attempt into a record.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines import schema
from pipelines.storage import remote
from pipelines.storage.records import (
    BuildRecord,
    CommitConflict,
    Snapshot,
    latest_record,
    read_record,
    record_numbers,
    record_path,
)
from pipelines.storage.warehouse import Warehouse, fsync_path, new_id, relative_name, remove_tree, write_atomic

KEEP_BUILDS = 3  # committed builds whose files are kept (readers may still scan the previous ones)


class CommitLog:
    """The records of committed builds, ``builds/<number>.json``; the latest is the warehouse."""

    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse
        self.folder = warehouse.builds_dir

    def numbers(self) -> list[int]:
        return record_numbers(self.folder)

    def path(self, number: int) -> Path:
        return record_path(self.folder, number)

    def get(self, number: int) -> BuildRecord:
        return read_record(self.folder, number)

    def latest(self) -> BuildRecord | None:
        return latest_record(self.folder)

    def commit(self, record: BuildRecord, say: Callable[[str], None] = lambda _: None) -> Path:
        """Make ``record`` the warehouse's state: everything written so far is flushed to disk, then
        the record appears under its number in one step, or :class:`CommitConflict` if the number
        is taken (another build committed first)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        final = self.path(record.build)
        tmp = self.folder / f".{final.name}.{uuid.uuid4().hex[:8]}.tmp"
        tmp.write_text(json.dumps(record.to_json(), indent=1, sort_keys=True))
        os.sync()  # the files the record names, written without an fsync each (storage.write_atomic)
        fsync_path(tmp)
        try:
            # an s3:// warehouse: its files, then the record by a conditional PUT (the commit point there)
            known = record.parent is not None and self.path(record.parent).is_file()
            parent = self.get(record.parent) if known else None
            remote.push(self.warehouse.root, record, tmp.read_bytes(), parent, say)
            os.link(tmp, final)  # create-if-absent: the commit point
        except FileExistsError:
            raise CommitConflict(
                f"build {record.build} was committed by another build while this one ran; run it again"
            ) from None
        finally:
            tmp.unlink(missing_ok=True)
        fsync_path(self.folder)
        return final


@dataclass
class Attempt:
    """A build under way: ``.staging/<id>/attempt.json`` plus one JSON file per step's output."""

    warehouse: Warehouse
    id: str
    build: int  # the number it will commit as
    parent: int | None
    sources: list[dict[str, str]] = field(default_factory=list)
    snapshot: Snapshot = field(default_factory=Snapshot)
    code: str = ""
    inputs: str = ""
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        return self.warehouse.staging_dir / self.id

    @classmethod
    def start(cls, warehouse: Warehouse, parent: BuildRecord | None, attempt_id: str | None = None) -> Attempt:
        build = (parent.build if parent else 0) + 1
        snapshot = Snapshot(dict(parent.snapshot.partitions)) if parent else Snapshot()
        sources = list(parent.sources) if parent else []
        attempt = cls(warehouse, attempt_id or new_id(), build, parent.build if parent else None, sources, snapshot)
        attempt.save()
        return attempt

    @classmethod
    def load(cls, warehouse: Warehouse, attempt_id: str) -> Attempt:
        data = json.loads((warehouse.staging_dir / attempt_id / "attempt.json").read_text())
        data["snapshot"] = Snapshot.from_json(data["snapshot"])
        return cls(warehouse, **data)

    def save(self) -> None:
        data = {
            "id": self.id, "build": self.build, "parent": self.parent, "sources": self.sources,
            "snapshot": self.snapshot.to_json(), "code": self.code, "inputs": self.inputs, "summary": self.summary,
        }
        write_atomic(self.folder / "attempt.json", json.dumps(data, indent=1, sort_keys=True))

    def put_output(self, step: str, output: dict[str, Any]) -> None:
        """What one step wrote; ``files`` (relative paths) are kept alive by the record."""
        write_atomic(self.folder / "outputs" / f"{step}.json", json.dumps(output, sort_keys=True, default=str))

    def output(self, step: str) -> dict[str, Any] | None:
        path = self.folder / "outputs" / f"{step}.json"
        return json.loads(path.read_text()) if path.is_file() else None

    def outputs(self) -> dict[str, dict[str, Any]]:
        folder = self.folder / "outputs"
        return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))} if folder.is_dir() else {}

    def record(self, checks: list[dict[str, Any]]) -> BuildRecord:
        outputs = self.outputs()
        return BuildRecord(
            build=self.build,
            parent=self.parent,
            attempt=self.id,
            committed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            code=self.code,
            inputs=self.inputs,
            sources=self.sources,
            snapshot=self.current_snapshot(),
            checks=checks,
            outputs=outputs,
            summary=self.summary,
        )

    def current_snapshot(self) -> Snapshot:
        """The attempt's tables with the marts its steps have computed so far."""
        marts = {n.removeprefix("mart."): o["path"] for n, o in self.outputs().items() if n.startswith("mart.")}
        return Snapshot(dict(self.snapshot.partitions), marts)

    def discard(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def unfinished_attempt(warehouse: Warehouse) -> Attempt | None:
    """The newest build that started on this warehouse, recorded its sources and did not commit
    (killed, interrupted or failed: its ``.staging/<id>/``, which garbage collection removes after the
    next commit); None when there is none."""
    newest: tuple[float, Attempt] | None = None
    if warehouse.staging_dir.is_dir():
        for folder in warehouse.staging_dir.iterdir():
            try:
                stamp, attempt = (folder / "attempt.json").stat().st_mtime, Attempt.load(warehouse, folder.name)
            except (OSError, ValueError, TypeError, KeyError):
                continue  # not an attempt, or cut off while written: nothing to go on
            if attempt.sources and (newest is None or stamp > newest[0]):
                newest = (stamp, attempt)
    return newest[1] if newest else None


def sources_to_read(warehouse: Warehouse, last: BuildRecord | None,
                    given: bool) -> tuple[list[dict[str, str]] | None, Attempt | None]:
    """The recorded sources a build starts from: the last committed build's (``last``); before any
    commit and without sources ``given``, those of a first build that did not commit (it is continued,
    not the sample corpus built instead), with that attempt; None when there are none."""
    if last is None and not given and (unfinished := unfinished_attempt(warehouse)):
        return unfinished.sources, unfinished
    return (last.sources if last else None), None


def inputs_digest(code: str, sources: list[dict[str, str]], fingerprints: dict[str, str]) -> str:
    """What a build's outputs are a function of: the code, the sources and each partition's files."""
    named = sorted((s["name"], s["kind"]) for s in sources)
    text = json.dumps([code, named, sorted(fingerprints.items())])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def collect_garbage(warehouse: Warehouse, keep: int = KEEP_BUILDS, keep_attempt: str | None = None) -> int:
    """Delete every generation, mart, dashboard file and report that none of the last ``keep``
    committed builds refers to, the records of the builds before them, and the leftovers of killed
    builds and failed publications (temporary files, attempts other than ``keep_attempt``, whose run
    may still be reporting). Runs under the build lock, after a commit. Returns the number of paths
    deleted."""
    log = CommitLog(warehouse)
    numbers = log.numbers()
    referenced: set[str] = set()
    for number in numbers[-keep:]:
        referenced |= log.get(number).files()
    kept_prefixes = tuple(f"{r}/" for r in referenced)
    deleted = 0

    def unreferenced(path: Path) -> bool:
        # every path here was found under the (resolved) root: relative by its text, not resolved
        # (Warehouse.rel), which would resolve each of the many files of a warehouse's failure views
        rel = relative_name(warehouse.root, path)
        return rel not in referenced and not rel.startswith(kept_prefixes)

    candidates: list[Path] = []
    if warehouse.tables_dir.is_dir():
        for partition in warehouse.tables_dir.iterdir():
            if partition.name.startswith(".trash-"):
                candidates.append(partition)
            elif partition.is_dir():
                candidates.extend(p for p in partition.iterdir() if unreferenced(p))
    pictures = (warehouse.dashboards_dir / name for name in ("charts", "drilldown", "failures"))
    for folder in (warehouse.marts_dir, *pictures):
        for parent, _, names in os.walk(folder):  # a file's type comes with its name: no stat each
            candidates.extend(p for p in (Path(parent, name) for name in names) if unreferenced(p))
    for folder, pattern in ((warehouse.dashboards_dir, "page-*.html"), (warehouse.reports_dir, "validation-*")):
        if folder.is_dir():
            candidates.extend(p for p in folder.glob(pattern) if unreferenced(p))
    for folder in (warehouse.root, warehouse.dashboards_dir, warehouse.reports_dir, warehouse.builds_dir):
        if folder.is_dir():  # with the write-ahead log DuckDB leaves beside a database it failed to write
            candidates.extend(p for pattern in (".*.tmp", ".*.tmp.wal") for p in folder.glob(pattern))
    if warehouse.staging_dir.is_dir():
        candidates.extend(p for p in warehouse.staging_dir.iterdir() if p.name != keep_attempt)
    if remote.binding(warehouse.root) is None:  # a working copy's records are the store's (remote.pull)
        candidates.extend(log.path(number) for number in numbers[:-keep])  # the records of builds not kept
    for path in candidates:
        remove_tree(path)
        deleted += 1
    if warehouse.tables_dir.is_dir():  # partitions no build refers to any more
        for partition in warehouse.tables_dir.iterdir():
            if partition.is_dir() and not any(partition.iterdir()):
                partition.rmdir()
    return deleted


def committed_rows(warehouse: Warehouse, record: BuildRecord) -> dict[str, int]:
    """Row counts of the record's tables, from the Parquet footers (no data read)."""
    import pyarrow.parquet as pq

    return {
        table: sum(pq.ParquetFile(warehouse.path(f)).metadata.num_rows for f in record.snapshot.table_files(table))
        for table in schema.TABLES
    }


RECORDED = "recorded.json"  # beside the Dagster instance's dagster.yaml: the last commit it holds


def recorded_build(warehouse: Warehouse) -> int | None:
    """The last committed build whose commit the warehouse's Dagster instance holds (its run ended,
    or a later build recorded it: pipelines.builds.run_history); None when not known. Read without Dagster,
    so that a build with nothing to do decides without importing it."""
    try:
        return int(json.loads((warehouse.dagster_home / RECORDED).read_text())["build"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def mark_recorded(warehouse: Warehouse, build: int) -> None:
    write_atomic(warehouse.dagster_home / RECORDED, json.dumps({"build": build}))
