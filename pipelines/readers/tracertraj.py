"""Reader for TracerTraj (AgenTracer): Parquet files of trajectories, or the JSON / JSON-lines
records the AgenTracer pipeline writes with the same fields.

There is no column for system or domain: the domain is a token of the file name
(``tracertraj-code-test.parquet`` -> ``code``), the system is MetaGPT unless a record names one.
Rows are read in batches, so a large file never sits in memory whole; a bad row is rejected
alone (``position`` = its row) while the rest of the file loads.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines import schema
from pipelines.readers.base import (
    INVALID_PARQUET,
    MISSING_KEY,
    NOT_UTF8,
    GraphRows,
    IngestError,
    SourceFile,
    file_sha256,
    list_files,
    load_json,
    path_sha256,
    read_bytes,
    split_of,
)
from pipelines.readers.trajectory import to_rows
from pipelines.readers.whowhen import trajectory
from pipelines.storage.warehouse import relative_name

kind = "tracertraj"

DOMAINS = schema.TRACERTRAJ_DOMAINS  # sql/seeds/datasets.csv, benchmark tracertraj
DEFAULT_SYSTEM = "metagpt"
_SUFFIXES = (".parquet", ".json", ".jsonl")
# A corrupt file can surface as any of these (fuzzing found UnicodeDecodeError from a bad footer).
PARQUET_ERRORS = (pa.ArrowException, OSError, ValueError)


def domain_of(path: Path) -> str:
    tokens = re.split(r"[-_.\s]+", path.stem.lower())
    return next((t for t in tokens if t in DOMAINS), schema.UNKNOWN)


def discover(root: Path, source: str) -> list[SourceFile]:
    root = root.absolute()  # file paths keep their own names (a Hub cache links them to blobs)
    if root.is_file():
        return [SourceFile(source, root.stem, root, root.name)]
    files = []
    for path in list_files(root, "**/*"):
        if path.suffix.lower() not in _SUFFIXES:
            continue
        split = path.stem if path.suffix.lower() != ".json" else split_of(root, path, "records")
        files.append(SourceFile(source, split, path, relative_name(root, path)))
    return files


def _system(record: dict[str, Any]) -> str:
    value = record.get("system")
    return value.strip().lower() if isinstance(value, str) and value.strip() else DEFAULT_SYSTEM


def _record_rows(record: Any, file: SourceFile, graph_id: str, sha256: str) -> GraphRows:
    system = _system(record) if isinstance(record, dict) else DEFAULT_SYSTEM
    traj = trajectory(record, file, graph_id, provenance="tracertraj", system=system,
                      dataset=domain_of(file.path), agent_key="name")
    return to_rows(traj, file, sha256)


def _read_parquet(file: SourceFile) -> Iterator[GraphRows | IngestError]:
    try:
        parquet = pq.ParquetFile(file.path)
        missing = {"history"} - set(parquet.schema_arrow.names)
    except PARQUET_ERRORS as exc:
        raise IngestError(INVALID_PARQUET, f"not a readable Parquet file: {exc}") from None
    if missing:
        raise IngestError(MISSING_KEY, f"missing required column {sorted(missing)[0]!r}")
    sha256 = path_sha256(file.path)
    row = 0
    try:
        for batch in parquet.iter_batches(batch_size=256):
            for record in _records(batch):
                graph_id = f"{file.source}:{file.relpath}#{row}"
                try:
                    if isinstance(record, IngestError):
                        raise record
                    yield _record_rows(record, file, graph_id, sha256)
                except IngestError as exc:
                    exc.position = f"row {row}" + (f" {exc.position}" if exc.position else "")
                    yield exc
                row += 1
    except PARQUET_ERRORS as exc:
        raise IngestError(INVALID_PARQUET, f"cannot read row group: {exc}", f"row {row}") from None


def _records(batch: pa.RecordBatch) -> list[dict[str, Any] | IngestError]:
    """The rows of a batch as dicts; a row holding invalid UTF-8 becomes an error of its own."""
    try:
        return batch.to_pylist()
    except UnicodeDecodeError:
        pass
    records: list[dict[str, Any] | IngestError] = []
    for i in range(batch.num_rows):
        row = batch.slice(i, 1)
        try:
            records.append(row.to_pylist()[0])
        except UnicodeDecodeError as exc:
            bad = next(name for name in row.schema.names if not _decodes(row.column(name)))
            records.append(IngestError(NOT_UTF8, f"{bad} is not valid UTF-8: {exc.reason}", f"$.{bad}"))
    return records


def _decodes(column: pa.Array) -> bool:
    try:
        column.to_pylist()
    except UnicodeDecodeError:
        return False
    return True


def _read_jsonl(file: SourceFile) -> Iterator[GraphRows | IngestError]:
    data = read_bytes(file.path)
    sha256 = file_sha256(data)
    for line_no, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        graph_id = f"{file.source}:{file.relpath}#{line_no}"
        try:
            yield _record_rows(load_json(line), file, graph_id, sha256)
        except IngestError as exc:
            # load_json saw one line: its "line 1 column C" is column C of this line
            inner = (exc.position or "").removeprefix("line 1 ")
            exc.position = f"line {line_no}" + (f" {inner}" if inner else "")
            yield exc


def _read_json(file: SourceFile) -> Iterator[GraphRows | IngestError]:
    data = read_bytes(file.path)
    sha256 = file_sha256(data)
    document = load_json(data)
    if isinstance(document, list):  # a file holding a list of records
        for i, record in enumerate(document):
            try:
                yield _record_rows(record, file, f"{file.source}:{file.relpath}#{i}", sha256)
            except IngestError as exc:
                exc.position = f"$[{i}]" + (f" {exc.position}" if exc.position else "")
                yield exc
    else:
        yield _record_rows(document, file, f"{file.source}:{file.relpath.removesuffix('.json')}", sha256)


def read(file: SourceFile) -> Iterator[GraphRows | IngestError]:
    suffix = file.path.suffix.lower()
    if suffix == ".parquet":
        return _read_parquet(file)
    if suffix == ".jsonl":
        return _read_jsonl(file)
    return _read_json(file)
