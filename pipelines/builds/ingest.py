"""Flatten the files of one source split into a new generation of the canonical tables.

Files are read one at a time, in path order, and streamed into one Parquet writer per table, so
memory follows the largest file, not the split. Every file ends either in ``graphs`` or in
``ingest_errors``. Unless asked for a full rebuild, a file whose size and mtime (or, failing
that, sha256) match an earlier generation's manifest is not parsed again: its piece is kept by
reference, or, when the piece is rewritten, its rows are copied from it (a piece's tables hold
each file's rows contiguously, in path order).

A graph id is loaded once in the whole warehouse: ``claimed`` names the ids that partitions ordered
before this one already loaded (and where from); a file that repeats one, or repeats one of an
earlier file of this partition, is quarantined in ``ingest_errors`` (``duplicate_graph_id``).

The result is a complete generation, not a published one: it becomes visible when a build record
names it (pipelines.storage.state).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipelines import schema
from pipelines.builds.changes import FORMAT_VERSION, fingerprint, partition_context
from pipelines.readers import reader_for
from pipelines.readers.base import (
    DUPLICATE_GRAPH_ID,
    DUPLICATE_PREDICTION,
    NO_RECORDS,
    READER_FAILURE,
    Cases,
    FileStamp,
    GraphRows,
    IngestError,
    Labels,
    Rows,
    SourceFile,
    path_sha256,
    with_options,
)
from pipelines.storage.records import GENERATION_TABLE, MANIFEST
from pipelines.storage.warehouse import Warehouse, parquet_options, with_field_ids, write_parquet_atomic

# The system allocator, as pipelines/__init__.py asks through Arrow's documented environment variable
# (unless the user chose another); this covers a process that imported pyarrow before pipelines.
if os.environ.get("ARROW_DEFAULT_MEMORY_POOL") == "system":
    pa.set_memory_pool(pa.system_memory_pool())

ROW_GROUP_ROWS = 64_000
ROW_GROUP_BYTES = 64 << 20  # the Parquet writer holds a whole row group's column chunk in memory
FLUSH_BYTES = 16 << 20
# Parquet encoding runs on these threads while the next files are read and decoded. Two keep the
# small tables' writes from queueing behind a big nodes write.
WRITE_THREADS = 2
# What a partition's ingest may hold at once, in multiples of its largest file: rows waiting to be
# written plus the file being parsed (its bytes and then its decoded strings, about twice its size).
# 2: the largest file is parsed once the rows before it are written; the floor keeps small files
# flowing past a big write. 3 would let it be parsed while the file before it is still being
# written: a higher peak for no time saved, enough to take a whole build past its memory budget
# (a target in BENCHMARKS.md).
MEMORY_BUDGET_FILES = 2
MEMORY_BUDGET_FLOOR = 4 * FLUSH_BYTES
# A piece (one data file per table) holds the rows of a run of files of about this many input bytes:
# a changed file costs its piece's rewrite (its unchanged rows copied as Parquet, about a quarter of
# the input's size), not its split's, while queries open few files: a split of a gigabyte is
# about 8 pieces, and a warehouse's small tables (graphs, sessions, annotations) are not thousands of
# tiny files. A file larger than this is a piece of its own.
PIECE_BYTES = 128 << 20
# Pieces a partition may hold beyond what its bytes need (ceil(bytes / PIECE_BYTES)) before its small
# pieces, left by files added a few at a time, are compacted.
PIECE_SLACK = 4


class StrictIngestError(RuntimeError):
    """Raised by a --strict build at the first file that cannot be loaded."""

    def __init__(self, file: SourceFile, error: IngestError) -> None:
        at = f" at {error.position}" if error.position else ""
        super().__init__(f"{file.path}: {error.kind}: {error.reason}{at}")
        self.file = file
        self.error = error


@dataclass
class Progress:
    """What a partition ingest reports while it runs (files done, bytes, errors)."""

    partition: str
    files_total: int
    bytes_total: int
    files_done: int = 0
    bytes_done: int = 0
    reused: int = 0
    errors: int = 0
    started: float = field(default_factory=time.monotonic)


@dataclass
class PartitionResult:
    key: str
    generation: Path
    rows: dict[str, int]
    files: int
    reused: int
    parsed: int
    errors: list[dict[str, Any]]
    bytes_in: int
    seconds: float


class TableWriter:
    """Buffers small tables and writes large row groups; always leaves a valid file with the schema.

    Encoding and compression run on a background thread (pyarrow releases the GIL there) while the
    next files are parsed. One write per table is in flight at a time; rows that arrive meanwhile
    keep collecting, and ``make_room`` bounds what all writers hold (their backlog).
    """

    def __init__(self, path: Path, table_schema: pa.Schema, pool: ThreadPoolExecutor) -> None:
        self.schema = table_schema
        self.writer = pq.ParquetWriter(path, with_field_ids(table_schema), **parquet_options(table_schema))
        self.pool = pool
        self.in_flight: Future | None = None
        self.in_flight_bytes = 0
        self.pending: list[pa.Table | pa.RecordBatch] = []
        self.pending_rows = 0
        self.pending_bytes = 0
        self.rows = 0

    @property
    def backlog(self) -> int:
        """Bytes held for writing: the rows collected plus the write in flight."""
        if self.in_flight is not None and self.in_flight.done():
            self.wait()
        return self.pending_bytes + self.in_flight_bytes

    def write(self, data: pa.Table | pa.RecordBatch, size: int | None = None) -> None:
        """Queue ``data``; ``size`` is its size in bytes when the caller knows it (``nbytes`` walks
        every buffer's slice, and this is called once a graph)."""
        if data.num_rows == 0:
            return
        self.pending.append(data)
        self.pending_rows += data.num_rows
        self.pending_bytes += data.nbytes if size is None else size
        self.rows += data.num_rows
        if self.pending_rows >= ROW_GROUP_ROWS or self.pending_bytes >= FLUSH_BYTES:
            self.flush(wait=False)

    def flush(self, wait: bool = True) -> None:
        """Hand the collected rows to the writing thread. With ``wait=False`` only if the previous
        write is done; otherwise they keep collecting (so parsing never waits here)."""
        if not self.pending:
            return
        if self.in_flight is not None and not (wait or self.in_flight.done()):
            return
        self.wait()
        parts = [p if isinstance(p, pa.Table) else pa.Table.from_batches([p]) for p in self.pending]
        combined = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        size = max(self.pending_bytes, 1)
        self.pending, self.pending_rows, self.pending_bytes = [], 0, 0
        rows = max(1, min(ROW_GROUP_ROWS, ROW_GROUP_BYTES * combined.num_rows // size))
        self.in_flight = self.pool.submit(self.writer.write_table, combined, row_group_size=rows)
        self.in_flight_bytes = size

    def wait(self) -> None:
        if self.in_flight is not None:
            self.in_flight.result()  # re-raises a write error here
            self.in_flight, self.in_flight_bytes = None, 0

    def close(self) -> None:
        self.flush()
        self.wait()
        self.writer.close()


def close_all(writers: dict[str, TableWriter]) -> None:
    """Write every table's last rows and close the files. The last writes go out together, each as
    soon as its table's write in flight is done, so both writing threads share them: one table
    after another left a thread idle at the end of every partition (a third of a small one's
    closing time)."""
    for writer in writers.values():
        writer.flush(wait=False)  # the tables with no write in flight
    for writer in writers.values():
        writer.flush()  # the others, as their writes finish
    for writer in writers.values():
        writer.close()


def make_room(writers: dict[str, TableWriter], file_bytes: int, budget: int) -> None:
    """Before parsing a file of ``file_bytes`` (0 after copying reused rows): wait for writes until
    the writers' backlog plus the file's bytes and decoded strings (twice its size) fit in
    ``budget``. First each write in flight is awaited and the rows collected meanwhile go out; if
    that is not enough, those writes are awaited too."""

    def fits() -> bool:
        return sum(w.backlog for w in writers.values()) + 2 * file_bytes <= budget

    if fits():
        return
    for writer in writers.values():
        writer.flush()
    if fits():
        return
    for writer in writers.values():
        writer.wait()


class RowCursor:
    """Reads a previous generation's table front to back, handing out or skipping row runs.

    Works row group by row group: a row group that is only skipped (the rows of a changed or
    deleted file) is never read."""

    def __init__(self, path: Path) -> None:
        self.file = pq.ParquetFile(path)
        self.sizes = [self.file.metadata.row_group(i).num_rows for i in range(self.file.num_row_groups)]
        self.group = 0  # the row group holding the next row
        self.offset = 0  # the next row's offset in it
        self.loaded: tuple[int, pa.Table] | None = None

    def _run(self, n: int) -> int:
        """How many of the next ``n`` rows lie in the current row group."""
        while self.group < len(self.sizes) and self.offset >= self.sizes[self.group]:
            self.group, self.offset = self.group + 1, 0
        if self.group >= len(self.sizes):
            total = self.file.metadata.num_rows
            raise RuntimeError(f"the previous generation has {total} rows, fewer than its manifest says")
        return min(n, self.sizes[self.group] - self.offset)

    def take(self, n: int) -> list[pa.Table]:
        out = []
        while n > 0:
            k = self._run(n)
            if self.loaded is None or self.loaded[0] != self.group:
                self.loaded = (self.group, self.file.read_row_group(self.group))
            out.append(self.loaded[1].slice(self.offset, k))
            self.offset += k
            n -= k
        return out

    def skip(self, n: int) -> None:
        while n > 0:
            k = self._run(n)
            self.offset += k
            n -= k


def error_row(file: SourceFile, error: IngestError, rejected: bool = True) -> dict[str, Any]:
    return {
        "source": file.source,
        "split": file.split,
        "file": file.relpath,
        "kind": error.kind,
        "reason": error.reason,
        "position": error.position,
        "rejected": rejected,
    }


def load_manifest(generation: Path | None) -> dict[str, Any] | None:
    """A generation's manifest, or None when there is none or it is of another table format."""
    if generation is None or not (generation / MANIFEST).is_file():
        return None
    manifest = json.loads((generation / MANIFEST).read_text())
    return manifest if manifest.get("format") == FORMAT_VERSION else None


def file_label(file: SourceFile) -> str:
    """How an ingest error names the file a graph id was first loaded from."""
    return f"{file.source}/{file.relpath}"


def loaded_graphs(manifest: dict[str, Any]) -> dict[str, str]:
    """graph id -> the file (source/path) it was loaded from, for every graph of a generation (the
    first that lists it: a trace of an otlp source is listed by every file holding one of its spans)."""
    source = manifest.get("source", "")
    loaded: dict[str, str] = {}
    for entry in manifest["files"]:
        for gid in entry["graph_ids"]:
            loaded.setdefault(gid, f"{source}/{entry['file']}")
    return loaded


def claims_hold(manifest: dict[str, Any], claimed: dict[str, str]) -> bool:
    """True when a generation quarantined exactly the graph ids that ``claimed`` says were loaded
    before it (same first file), and loaded none of them itself: it is right for that claim."""
    own = loaded_graphs(manifest)
    if any(gid in claimed for gid in own):
        return False
    hits = {gid: first for entry in manifest["files"] for gid, first in entry.get("claimed", {}).items()}
    return all(claimed.get(gid, own.get(gid)) == first for gid, first in hits.items())


class _PieceNotReusable(Exception):
    """A piece thought unchanged holds a file whose graph ids another file now loads first: the
    ingest starts again with that piece rewritten (rare: a graph id moved between files)."""

    def __init__(self, piece: str) -> None:
        super().__init__(piece)
        self.piece = piece


def piece_paths(manifest: dict[str, Any]) -> list[str]:
    """The piece folders (relative to the warehouse) a generation's rows lie in, in order."""
    return list(manifest.get("pieces", []))


def generation_files(warehouse: Warehouse, generation: Path, table: str) -> list[Path]:
    """The data files of ``table`` in a complete generation (committed or not), in order."""
    if table == GENERATION_TABLE:
        return [generation / f"{table}.parquet"]
    manifest = load_manifest(generation) or {}
    return [warehouse.path(f"{piece}/{table}.parquet") for piece in piece_paths(manifest)]


def ingest_partition(
    warehouse: Warehouse,
    key: str,
    kind: str,
    files: list[SourceFile],
    *,
    previous: Path | None = None,
    claimed: dict[str, str] | None = None,
    cases: Cases | None = None,
    strict: bool = False,
    on_progress: Callable[[Progress], None] | None = None,
    options: dict[str, Any] | None = None,
) -> PartitionResult:
    """Write a complete new generation of partition ``key`` from ``files`` (one reader kind),
    taking over the pieces of generation ``previous`` whose files are all unchanged (None: parse
    every file). ``claimed``: graph ids already loaded by partitions before this one -> the file
    they came from. ``cases``: the annotations a prediction source's predictions are matched
    against (its digest is part of the generation's fingerprint). ``options``: the reader options the
    partition's source sets (pipelines.config.Source.option_values), handed to its reader and part of
    the fingerprint too.

    A generation's rows lie in *pieces*: folders of one data file per table, each holding the rows
    of a run of files of about ``PIECE_BYTES`` of input. A piece whose files are all unchanged is
    kept by reference (its files are not read, not copied); a piece holding a changed or deleted
    file is rewritten, its unchanged files' rows copied; new files go to new pieces. When
    references leave a partition with more than ``PIECE_SLACK`` pieces beyond what its bytes need,
    its small pieces are compacted into new ones, as Iceberg compacts small data files."""
    started = time.monotonic()
    reader = with_options(reader_for(kind), options)
    files = sorted(files, key=lambda f: f.relpath)
    stats = {f.relpath: f.stat() for f in files}
    manifest_before = load_manifest(previous)
    old_entries: list[dict[str, Any]] = manifest_before["files"] if manifest_before else []
    context = partition_context(cases.digest if cases is not None and getattr(reader, "needs_cases", False) else "",
                                options)
    if manifest_before and manifest_before.get("context", "") != context:
        old_entries = []  # matched against other annotations, or read with other options: every file is read again
    # A graph of a reads_partition reader (otlp) spans files: its generation is taken over graph by
    # graph (_read_partition), not file by file.
    grouped = getattr(reader, "reads_partition", False)
    traces_before = manifest_before if grouped and old_entries and _traces_reusable(warehouse, manifest_before,
                                                                                   strict) else None
    if getattr(reader, "whole_partition", False) or getattr(reader, "reads_partition", False):
        old_entries = []  # a file's rows depend on the partition's other files: none is reused alone
    old_pieces = piece_paths(manifest_before) if old_entries else []
    if old_pieces and not all(warehouse.path(piece).is_dir() for piece in old_pieces):
        old_entries, old_pieces = [], []  # a piece it refers to was collected: nothing to take over
    unchanged: dict[str, bool] = {}
    rewrite = _pieces_to_rewrite(old_entries, old_pieces, files, stats, unchanged)
    while True:
        try:
            return _ingest(warehouse, key, kind, reader, files, stats, old_entries, old_pieces, rewrite, unchanged,
                           claimed or {}, cases, context, strict, on_progress, started, traces_before)
        except _PieceNotReusable as again:
            rewrite.add(again.piece)
        except _ReadAllTraces:
            traces_before = None


def _traces_reusable(warehouse: Warehouse, manifest: dict[str, Any] | None, strict: bool) -> bool:
    """An earlier generation of a reads_partition reader whose graphs can be taken over: it lists
    every file's graphs, and its pieces are still there. A --strict build reads every file again,
    so that a rejected record stops it."""
    return (not strict and manifest is not None and all("traces" in entry for entry in manifest["files"])
            and all(warehouse.path(piece).is_dir() for piece in piece_paths(manifest)))


def _pieces_to_rewrite(
    old_entries: list[dict[str, Any]], old_pieces: list[str], files: list[SourceFile],
    stats: dict[str, FileStamp], unchanged: dict[str, bool],
) -> set[str]:
    """The earlier generation's pieces that cannot be kept: those holding a changed or deleted
    file, and, when the partition would hold more than ``PIECE_SLACK`` pieces beyond what its bytes
    need, every small one (under half of ``PIECE_BYTES``), to be compacted into new pieces."""
    by_path = {f.relpath: f for f in files}
    rewrite: set[str] = set()
    piece_bytes: dict[str, int] = dict.fromkeys(old_pieces, 0)
    for old in old_entries:
        piece = old_pieces[old["piece"]]
        piece_bytes[piece] += old["size"]
        file = by_path.get(old["file"])
        if file is None or not _same_file(old, file, stats[file.relpath], unchanged):
            rewrite.add(piece)
    kept = [piece for piece in old_pieces if piece not in rewrite]
    new_bytes = sum(stat.st_size for stat in stats.values()) - sum(piece_bytes[piece] for piece in kept)
    needed = -(-sum(stat.st_size for stat in stats.values()) // PIECE_BYTES)
    if len(kept) + -(-new_bytes // PIECE_BYTES) > needed + PIECE_SLACK:
        rewrite.update(piece for piece in kept if piece_bytes[piece] < PIECE_BYTES // 2)
    return rewrite


def _same_file(old: dict[str, Any], file: SourceFile, stat: FileStamp, unchanged: dict[str, bool]) -> bool:
    """The file is the one an earlier manifest entry describes: same size and mtime, or, touched,
    the same bytes (hashed once per ingest)."""
    if old["size"] != stat.st_size:
        return False
    if old["mtime_ns"] == stat.st_mtime_ns:
        return True
    if file.relpath not in unchanged:
        unchanged[file.relpath] = old["sha256"] == path_sha256(file.path)
    return unchanged[file.relpath]


def _ingest(
    warehouse: Warehouse, key: str, kind: str, reader: Any, files: list[SourceFile],
    stats: dict[str, FileStamp], old_entries: list[dict[str, Any]], old_pieces: list[str], rewrite: set[str],
    unchanged: dict[str, bool], claimed: dict[str, str], cases: Cases | None, context: str, strict: bool,
    on_progress: Callable[[Progress], None] | None, started: float, traces_before: dict[str, Any] | None = None,
) -> PartitionResult:
    """One attempt of :func:`ingest_partition` with the pieces ``rewrite`` rewritten and the other
    pieces of ``old_pieces`` kept."""
    cursors: dict[str, dict[str, RowCursor]] = {}  # a rewritten piece -> its tables, read front to back

    def cursor(piece: str) -> dict[str, RowCursor]:
        if piece not in cursors:
            cursors[piece] = {name: RowCursor(warehouse.path(f"{piece}/{name}.parquet"))
                              for name in schema.PARTITION_TABLES}
        return cursors[piece]

    staging = warehouse.new_generation(key)
    final = f"{warehouse.rel(staging.parent)}/{staging.with_suffix('').name}"
    pool = ThreadPoolExecutor(max_workers=WRITE_THREADS, thread_name_prefix=f"write-{key}")
    own: list[str] = []  # the pieces this generation writes (relative paths), in order
    writers: dict[str, TableWriter] = {}
    own_bytes = 0  # input bytes of the files in the piece being written
    written: list[dict[str, TableWriter]] = []

    def open_piece() -> None:
        nonlocal writers, own_bytes
        folder = staging / str(len(own))
        folder.mkdir()
        own.append(f"{final}/{len(own)}")
        writers = {name: TableWriter(folder / f"{name}.parquet", table_schema, pool)
                   for name, table_schema in schema.PARTITION_TABLES.items()}
        written.append(writers)
        own_bytes = 0

    errors: list[dict[str, Any]] = []
    entries: list[dict[str, Any]] = []
    seen_graphs: dict[str, str] = dict(claimed)  # graph id -> the file that loaded it first
    sizes = {path: stat.st_size for path, stat in stats.items()}
    progress = Progress(key, len(files), sum(sizes.values()))
    budget = max(MEMORY_BUDGET_FILES * max(sizes.values(), default=0), MEMORY_BUDGET_FLOOR)
    old_index = 0
    grouped = getattr(reader, "reads_partition", False)
    open_piece()

    try:
        if grouped:  # a trace may span files: read graph by graph, into one piece
            make_room(writers, sum(sizes.values()), budget)
            entries = _read_partition(warehouse, reader, files, stats, unchanged, writers, seen_graphs, strict,
                                      traces_before)
            for entry in entries:
                errors.extend(entry["errors"])
                entry["piece"] = own[-1]
                progress.reused += not entry.pop("parsed")
            progress.files_done, progress.bytes_done, progress.errors = len(files), progress.bytes_total, len(errors)
            if on_progress:
                on_progress(progress)
        for file in [] if grouped else files:
            stat = stats[file.relpath]
            # Walk the previous manifest in step: entries before this path are deleted files.
            while old_index < len(old_entries) and old_entries[old_index]["file"] < file.relpath:
                _skip(cursor(old_pieces[old_entries[old_index]["piece"]]), old_entries[old_index])
                old_index += 1
            old = None
            if old_index < len(old_entries) and old_entries[old_index]["file"] == file.relpath:
                old = old_entries[old_index]
                old_index += 1
            entry = {"file": file.relpath, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
            piece = old_pieces[old["piece"]] if old is not None else ""
            reusable = old is not None and _reusable(old, file, stat, seen_graphs, unchanged)
            if old is not None and piece not in rewrite and not reusable:
                raise _PieceNotReusable(piece)
            if reusable:
                if piece in rewrite:  # copied into this generation's piece
                    if own_bytes >= PIECE_BYTES:
                        close_all(writers)
                        open_piece()
                    _copy(cursor(piece), old, writers)
                    make_room(writers, 0, budget)
                    own_bytes += stat.st_size
                    piece = own[-1]
                entry |= {k: old[k] for k in ("sha256", "graph_ids", "predictions", "rows", "errors", "claimed")}
                entry["labels"] = old.get("labels", 0)
                errors.extend(old["errors"])
                seen_graphs.update(dict.fromkeys(old["graph_ids"], file_label(file)))
                seen_graphs.update(dict.fromkeys((f"prediction:{k}" for k in old["predictions"]), file_label(file)))
                progress.reused += 1
            else:
                if old is not None:
                    _skip(cursor(piece), old)
                if own_bytes >= PIECE_BYTES:
                    close_all(writers)
                    open_piece()
                make_room(writers, stat.st_size, budget)
                entry |= _read_file(reader, file, writers, seen_graphs, strict, cases)
                errors.extend(entry["errors"])
                own_bytes += stat.st_size
                piece = own[-1]
            entry["piece"] = piece
            entries.append(entry)
            progress.files_done += 1
            progress.bytes_done += stat.st_size
            progress.errors = len(errors)
            if on_progress:
                on_progress(progress)
        close_all(writers)
        # This generation's first piece is dropped when no file went to it, unless it would leave none.
        used = {entry["piece"] for entry in entries}
        kept_old = [p for p in old_pieces if p in used]
        kept_own = [p for p in own if p in used] or ([] if kept_old else own[:1])
        for index, piece in enumerate(own):
            if piece not in kept_own:
                shutil.rmtree(staging / str(index))
        pieces = kept_old + kept_own
        index_of = {p: i for i, p in enumerate(pieces)}
        for entry in entries:
            entry["piece"] = index_of[entry["piece"]]
        write_parquet_atomic(
            pa.Table.from_pylist(errors, schema=schema.INGEST_ERRORS), staging / f"{GENERATION_TABLE}.parquet"
        )
        source = files[0].source if files else ""
        fp = fingerprint(kind, [(e["file"], e["size"], e["mtime_ns"]) for e in entries], context)
        manifest = {"format": FORMAT_VERSION, "partition": key, "kind": kind, "source": source,
                    "fingerprint": fp, "context": context, "pieces": pieces, "files": entries}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))  # last: complete
    except BaseException:
        for piece_writers in written:
            for writer in piece_writers.values():
                with contextlib.suppress(Exception):  # already failing (or closed); the staging folder is discarded
                    writer.wait()
                    writer.writer.close()
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        pool.shutdown(wait=True)

    generation = warehouse.finish_generation(staging)
    rows = {name: sum(e["rows"].get(name, 0) for e in entries) for name in schema.PARTITION_TABLES}
    return PartitionResult(
        key=key,
        generation=generation,
        rows=rows | {"ingest_errors": len(errors)},
        files=len(files),
        reused=progress.reused,
        parsed=len(files) - progress.reused,
        errors=errors,
        bytes_in=progress.bytes_total,
        seconds=time.monotonic() - started,
    )


def _reusable(
    old: dict[str, Any], file: SourceFile, stat: FileStamp, seen: dict[str, str], unchanged: dict[str, bool]
) -> bool:
    """An earlier generation's rows of this file can be taken over: the file is unchanged, none of
    its graphs was loaded before it, and the graphs it quarantined were loaded from the same files."""
    if "claimed" not in old:
        return False
    if any(gid in seen for gid in old["graph_ids"]) or any(f"prediction:{k}" in seen for k in old["predictions"]):
        return False
    if any(seen.get(gid) != first for gid, first in old["claimed"].items()):
        return False
    return _same_file(old, file, stat, unchanged)


def _copy(cursors: dict[str, RowCursor], old: dict[str, Any], writers: dict[str, TableWriter]) -> None:
    for name, cursor in cursors.items():
        for batch in cursor.take(old["rows"][name]):
            writers[name].write(batch)


def _skip(cursors: dict[str, RowCursor], old: dict[str, Any]) -> None:
    for name, cursor in cursors.items():
        cursor.skip(old["rows"][name])


def _read_file(
    reader: Any, file: SourceFile, writers: dict[str, TableWriter], seen_graphs: dict[str, str], strict: bool,
    cases: Cases | None = None,
) -> dict[str, Any]:
    """Parse one file with its reader; returns its manifest entry (rows, graph ids, errors, and the
    graph ids it quarantined because another file loaded them first). A prediction source's reader
    is given the ``cases`` to match against; a second prediction about one annotation is quarantined
    like a repeated graph id."""
    rows = dict.fromkeys(schema.PARTITION_TABLES, 0)
    graph_ids: list[str] = []
    errors: list[dict[str, Any]] = []
    claimed: dict[str, str] = {}
    loaded: list[str] = []  # the annotations of the predictions a prediction file loaded
    labels = 0  # the labels of a labels file whose annotations another file's graphs hold (Labels)
    sha256 = None

    def reject(error: IngestError) -> None:
        if strict:
            raise StrictIngestError(file, error)
        errors.append(error_row(file, error))

    if file.problem is not None:  # a broken link, a hidden name: listed, named, not read
        reject(file.problem)
        return {"sha256": None, "graph_ids": [], "predictions": [], "rows": rows, "errors": errors, "claimed": {},
                "labels": 0}
    items = reader.read(file, cases or Cases([], [])) if getattr(reader, "needs_cases", False) else reader.read(file)
    try:
        for item in items:
            if isinstance(item, IngestError):
                reject(item)
                continue
            if isinstance(item, Labels):
                labels += item.n
                continue
            if isinstance(item, Rows):
                if item.key is not None:
                    label = f"prediction:{item.key}"
                    if label in seen_graphs:
                        reject(IngestError(DUPLICATE_PREDICTION, f"a prediction for {item.key!r} was already "
                                           f"loaded from {seen_graphs[label]}", item.position))
                        continue
                    seen_graphs[label] = file_label(file)
                    loaded.append(item.key)
                for name, data in item.tables.items():
                    writers[name].write(data)
                    rows[name] += data.num_rows
                continue
            graph: GraphRows = item
            gid = graph.graph_id
            if gid in seen_graphs:
                first = seen_graphs[gid]
                reject(IngestError(DUPLICATE_GRAPH_ID, f"graph_id {gid!r} was already loaded from {first}"))
                claimed[gid] = first
                continue
            seen_graphs[gid] = file_label(file)
            graph_ids.append(gid)
            sha256 = graph.tables["graphs"]["file_sha256"][0].as_py()
            for defect in graph.defects:
                errors.append(error_row(file, defect, rejected=False))
            for name, data in graph.tables.items():
                writers[name].write(data, data.get_total_buffer_size())  # a reader's tables own their buffers
                rows[name] += data.num_rows
    except IngestError as error:
        reject(error)
    except StrictIngestError:
        raise
    except Exception as exc:  # noqa: BLE001 - a reader bug must not lose the rest of the split
        reject(IngestError(READER_FAILURE, f"{type(exc).__name__}: {exc}"))
    if not (graph_ids or loaded or labels or errors or any(rows.values())):  # e.g. "[]", blank JSON lines
        reject(IngestError(NO_RECORDS, "the file holds no records"))
    return {
        "sha256": sha256 or path_sha256(file.path),
        "graph_ids": graph_ids,
        "predictions": loaded,
        "rows": rows,
        "errors": errors,
        "claimed": claimed,
        "labels": labels,
    }


class _ReadAllTraces(Exception):
    """The earlier generation's rows do not match its manifest: the partition is read whole."""


def _read_partition(
    warehouse: Warehouse, reader: Any, files: list[SourceFile], stats: dict[str, FileStamp],
    unchanged: dict[str, bool], writers: dict[str, TableWriter], seen_graphs: dict[str, str], strict: bool,
    before: dict[str, Any] | None,
) -> list[dict[str, Any]]:
    """Read a partition whose graphs span files (``otlp``: a trace spread over lines and files);
    returns one manifest entry per file (``parsed``: whether it was read). A graph counts for every
    file that holds part of it (``graph_ids``), its rows for the one it is said to come from
    (``graphs.file``: the first of them); a problem for the file it was found in.

    With an earlier generation ``before``, only the graphs of new, changed and deleted files are
    put together again (the *touched* ones), from those files and the unchanged files holding a
    span of one of them; every other graph's rows, problems and manifest facts are taken over. The
    result is the same, row for row and in the same order, as reading every file: graphs come in the
    order of their first span, files in path order (``traces``: each file's graphs in that order).
    """
    old = {e["file"]: e for e in before["files"]} if before else {}
    kept = {f.relpath for f in files if f.problem is None and f.relpath in old and old[f.relpath]["traces"] is not None
            and _same_file(old[f.relpath], f, stats[f.relpath], unchanged)}
    parsed = {f.relpath: reader.parse(f) for f in files if f.problem is None and f.relpath not in kept}
    touched = {gid for result in parsed.values() for gid in result.graph_ids}
    for path, entry in old.items():
        if path not in kept:
            touched.update(entry["traces"] or [])
    for path in kept:  # a graph now loaded by a partition before this one, or no longer: its quarantine changes
        touched.update(gid for gid in old[path]["graph_ids"] if gid in seen_graphs)
        touched.update(gid for gid, first in old[path]["claimed"].items() if seen_graphs.get(gid) != first)
    for file in files:
        if file.relpath in kept and not touched.isdisjoint(old[file.relpath]["traces"]):
            parsed[file.relpath] = reader.parse(file)
    graphs_of = {f.relpath: parsed[f.relpath].graph_ids if f.relpath in parsed else
                 old[f.relpath]["traces"] if f.relpath in kept else [] for f in files}
    home: dict[str, str] = {}  # graph id -> the first file holding one of its spans; its order is the graphs'
    for file in files:
        for gid in graphs_of[file.relpath]:
            home.setdefault(gid, file.relpath)
    rank = {gid: i for i, gid in enumerate(home)}

    entries: dict[str, dict[str, Any]] = {}
    for f in files:
        if f.relpath in kept and f.relpath not in parsed:
            entries[f.relpath] = {k: v for k, v in old[f.relpath].items() if k != "piece"} | {"parsed": False}
        else:
            entries[f.relpath] = {"file": f.relpath, "sha256": None, "graph_ids": [], "predictions": [],
                                  "errors": [], "error_traces": [], "claimed": {},
                                  "traces": graphs_of[f.relpath] if f.problem is None else None, "parsed": True}
        # the file as it is now (a touched file of the same bytes is kept, under its new mtime)
        entries[f.relpath] |= {"size": stats[f.relpath].st_size, "mtime_ns": stats[f.relpath].st_mtime_ns}
        entries[f.relpath]["rows"] = dict.fromkeys(schema.PARTITION_TABLES, 0)
    # The problems of a trace, per file, in the order read: merged with the taken-over ones by graph order.
    notes: dict[str, list[tuple[str, dict[str, Any]]]] = {path: [] for path in parsed}
    loaded: dict[str, list[str]] = {path: [] for path in parsed}
    claims: dict[str, dict[str, str]] = {path: {} for path in parsed}
    new_graphs: dict[str, dict[str, pa.Table]] = {}  # graph id -> its tables, for the touched graphs that load

    def note(file: SourceFile, error: IngestError, rejected: bool, gid: str | None) -> None:
        if rejected and strict:
            raise StrictIngestError(file, error)
        if gid is None:
            entries[file.relpath]["errors"].append(error_row(file, error, rejected))
            entries[file.relpath]["error_traces"].append(None)
        else:
            notes[file.relpath].append((gid, error_row(file, error, rejected)))

    readable = [f for f in files if f.relpath in parsed]
    for file in files:
        if file.problem is not None:  # a broken link, a hidden name: listed, named, not read
            note(file, file.problem, True, None)
    by_path = {f.relpath: f for f in files}
    try:
        items = reader.read_traces(readable, parsed, touched if before else None) if readable else ()
        for file, item, rejected, gid in items:
            if isinstance(item, IngestError):
                note(file, item, rejected, gid)
                continue
            graph: GraphRows = item
            parts = graph.tables["graphs"]["files"][0].as_py() or [file.relpath]
            if gid in seen_graphs:
                first = seen_graphs[gid]
                for path in parts:
                    note(by_path[path], IngestError(DUPLICATE_GRAPH_ID,
                                                    f"graph_id {gid!r} was already loaded from {first}"), True, gid)
                    claims[path][gid] = first
                continue
            seen_graphs[gid] = file_label(file)
            for path in parts:
                loaded[path].append(gid)
            for defect in graph.defects:
                note(file, defect, False, gid)
            if before:  # written in graph order among the taken-over rows, once they are all read
                new_graphs[gid] = graph.tables
                continue
            for name, data in graph.tables.items():
                writers[name].write(data, data.get_total_buffer_size())
                entries[file.relpath]["rows"][name] += data.num_rows
    except StrictIngestError:
        raise
    except IngestError as error:
        if before:
            raise _ReadAllTraces from error
        note(readable[0], error, True, None)
    except Exception as exc:  # noqa: BLE001 - a reader bug must not lose the rest of the split
        if before:
            raise _ReadAllTraces from exc
        note(readable[0], IngestError(READER_FAILURE, f"{type(exc).__name__}: {exc}"), True, None)

    for file in readable:
        entry = entries[file.relpath]
        previous = old[file.relpath] if file.relpath in kept else None
        ordered = [(gid, row) for row, gid in zip(previous["errors"], previous["error_traces"], strict=True)
                   if gid is not None and gid not in touched] if previous else []
        ordered = sorted(ordered + notes[file.relpath], key=lambda note: rank[note[0]])
        entry["errors"] += [row for _, row in ordered]
        entry["error_traces"] += [gid for gid, _ in ordered]
        graph_ids = [gid for gid in previous["graph_ids"] if gid not in touched] if previous else []
        entry["graph_ids"] = sorted(graph_ids + loaded[file.relpath], key=rank.__getitem__)
        entry["claimed"] = ({gid: first for gid, first in previous["claimed"].items() if gid not in touched}
                            if previous else {}) | claims[file.relpath]
        if previous is None:
            result = parsed[file.relpath]
            entry["sha256"] = result.digest if result.digest is not None else path_sha256(file.path)
        else:
            entry["sha256"] = previous["sha256"]
        if not entry["graph_ids"] and not entry["errors"]:
            note(file, IngestError(NO_RECORDS, "the file holds no records"), True, None)
    for path in kept:  # the graphs taken over
        for gid in old[path]["graph_ids"]:
            if gid not in touched:
                seen_graphs.setdefault(gid, file_label(by_path[home[gid]]))
    _write_graphs(warehouse, before, touched, new_graphs, home, rank, entries, writers)
    return [entries[f.relpath] for f in files]


def _write_graphs(
    warehouse: Warehouse, before: dict[str, Any] | None, touched: set[str], new_graphs: dict[str, dict[str, pa.Table]],
    home: dict[str, str], rank: dict[str, int], entries: dict[str, dict[str, Any]],
    writers: dict[str, TableWriter],
) -> None:
    """Write every graph's rows in graph order: a touched graph's from ``new_graphs``, the others'
    from the earlier generation ``before`` (whose rows are in that order too), counting them for
    the file each graph is said to come from."""
    order = sorted(new_graphs, key=rank.__getitem__)
    new_ranks = np.array([rank[gid] for gid in order], dtype=np.int64)
    by_rank = pa.array(list(rank), pa.string())
    home_of = [home[gid] for gid in rank]
    left_out = pa.array(sorted(touched), pa.string())

    def put_new(name: str, done: int, upto: int) -> int:
        """Write the new graphs from the ``done``-th on whose order is before ``upto``; returns how
        many new graphs are written then."""
        while done < len(order) and new_ranks[done] < upto:
            data = new_graphs[order[done]].get(name)
            if data is not None:
                writers[name].write(data, data.get_total_buffer_size())
                entries[home[order[done]]]["rows"][name] += data.num_rows
            done += 1
        return done

    for name, writer in writers.items():
        done = 0  # the new graphs written so far
        for piece in piece_paths(before) if before else []:
            for batch in pq.ParquetFile(warehouse.path(f"{piece}/{name}.parquet")).iter_batches(ROW_GROUP_ROWS):
                batch = batch.filter(pc.invert(pc.is_in(batch.column("graph_id"), value_set=left_out)))
                if batch.num_rows == 0:
                    continue
                ranks = pc.index_in(batch.column("graph_id"), value_set=by_rank)
                if ranks.null_count or (len(ranks) > 1 and not np.all(np.diff(ranks.to_numpy()) >= 0)):
                    raise _ReadAllTraces(f"{piece}/{name}.parquet")
                ranks = ranks.to_numpy()
                batch = pa.RecordBatch.from_arrays(batch.columns, schema=writer.schema)
                start = 0
                while done < len(order) and new_ranks[done] < ranks[-1]:
                    cut = int(np.searchsorted(ranks, new_ranks[done]))
                    writer.write(batch.slice(start, cut - start))
                    start = cut
                    done = put_new(name, done, new_ranks[done] + 1)
                writer.write(batch.slice(start))
                values, counts = np.unique(ranks, return_counts=True)
                for value, count in zip(values.tolist(), counts.tolist(), strict=True):
                    entries[home_of[value]]["rows"][name] += count
        put_new(name, done, len(rank))
