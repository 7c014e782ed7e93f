"""Where the warehouse keeps its files, and the one way a file is written.

Layout under the warehouse root (every path relative, so the folder can be moved or copied)::

    builds/00000042.json                   the commit log: one record per committed build (pipelines.storage.state)
    tables/<partition>/g-<id>/manifest.json, ingest_errors.parquet, <n>/<table>.parquet
                                           immutable generations of one source split, their rows in
                                           pieces (a generation also refers to earlier ones' pieces)
    marts/<mart>/<digest>.parquet          immutable mart files (marts/fragments/: per-partition pieces)
    dashboards/page-<attempt>.html, charts/, failures/, drilldown/   immutable dashboard files of each build
    reports/validation-<attempt>.html      each build's validation report
    tracehouse.duckdb, dashboards/index.html, reports/validation.html
                                           copies published from the latest committed build
    scratch.duckdb                         the user's own tables (`tracehouse sql --write`)
    corpus/, corpus-predictions/           the default sample corpus and two simulated methods' predictions
    .staging/<attempt>/                    a build under way: its candidate state and its steps' outputs
    .dagster/                              the Dagster instance `tracehouse ui` opens

Nothing a committed build refers to is ever rewritten: every data file is written once, under a
name of its own (a generation id, a content digest or the build attempt's id), and becomes visible
only when a build record naming it is committed. A killed build leaves files nobody refers to;
the next build adopts what it can (a complete generation of unchanged files) and garbage collection
removes the rest.

Durability, stated once: files are written under a temporary name and renamed into place
(:func:`write_atomic`), without an fsync each; the commit (``state.CommitLog.commit``) flushes
everything written so far with one ``os.sync()`` before it writes the build record, which it
fsyncs. A crash before the commit loses only uncommitted files.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.storage.records import MANIFEST, BuildRecord, latest_record

DB_FILE = "tracehouse.duckdb"
SCRATCH_DB_FILE = "scratch.duckdb"
PARQUET_OPTIONS = {"compression": "zstd", "compression_level": 3, "write_statistics": True}


# Arrow checks a page's size only between batches of this many values (default 1024): with values
# of half a megabyte a page can grow to hundreds of MB, fresh memory copied twice. 16 keeps the
# pages of long texts to a few MB.
LONG_TEXT_WRITE_BATCH = 16


def parquet_options(schema: pa.Schema) -> dict:
    """zstd; for large_string columns (long, mostly unique texts) no dictionary (it slows the
    write and makes no file smaller), no min/max statistics (no query prunes on them, and each page
    copies its longest values) and small write batches."""
    short = [f.name for f in schema if f.type != pa.large_string()]
    options = {**PARQUET_OPTIONS, "use_dictionary": short}
    if len(short) < len(schema):
        options |= {"write_statistics": short, "write_batch_size": LONG_TEXT_WRITE_BATCH}
    return options


FIELD_ID = b"PARQUET:field_id"


def field_id(path: str) -> int:
    """The Iceberg field id of a column (``nested.paths`` for a list's element or a struct's field):
    a function of its name alone, so a column keeps its id in every file and every schema of its
    table, whatever its position and whatever columns come and go (an id is never reused for another
    name, as Iceberg requires). 30 bits of CRC-32; tests/test_iceberg.py checks that no two columns
    of one table share one."""
    return 1 + zlib.crc32(path.encode()) % (1 << 30)


def with_field_ids(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every field, nested ones too, carrying its :func:`field_id` as Parquet field
    id: what every Parquet file of the warehouse is written with, so that Iceberg readers find the
    columns by id (pipelines.storage.iceberg)."""

    def field(f: pa.Field, path: str) -> pa.Field:
        kind = f.type
        if pa.types.is_list(kind) or pa.types.is_large_list(kind):
            item = field(kind.value_field, f"{path}.element")
            kind = pa.large_list(item) if pa.types.is_large_list(kind) else pa.list_(item)
        elif pa.types.is_struct(kind):
            kind = pa.struct([field(child, f"{path}.{child.name}") for child in kind])
        elif pa.types.is_map(kind):
            kind = pa.map_(field(kind.key_field, f"{path}.key"), field(kind.item_field, f"{path}.value"))
        return f.with_type(kind).with_metadata({**(f.metadata or {}), FIELD_ID: str(field_id(path)).encode()})

    return pa.schema([field(f, f.name) for f in schema], metadata=schema.metadata)


def relative_name(root: Path, path: Path) -> str:
    """``path`` relative to ``root``, with forward slashes (a file's name in its source, or in a
    warehouse). A path found under ``root`` (by os.walk or iterdir) is cut from its text, as this
    runs for every file of every build and of every round of ``tracehouse watch``, where pathlib's
    relative_to is a visible part of the time; any other path goes through relative_to (which
    raises if it is not under)."""
    prefix, text = os.path.join(str(root), ""), str(path)
    if not text.startswith(prefix):
        return path.relative_to(root).as_posix()
    return text[len(prefix):].replace(os.sep, "/")


def partition_key(source: str, split: str) -> str:
    """A Dagster- and filesystem-safe key for one source split, e.g. ``whowhen__Hand-Crafted``."""
    return f"{_safe(source)}__{_safe(split)}"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", text) or "_"


def new_id() -> str:
    """A sortable unique name part: UTC time to the second, then 8 random hex digits."""
    return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}"


class Warehouse:
    """Paths of one warehouse folder."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()

    @property
    def db_path(self) -> Path:
        return self.root / DB_FILE

    @property
    def scratch_db_path(self) -> Path:
        return self.root / SCRATCH_DB_FILE

    @property
    def builds_dir(self) -> Path:
        return self.root / "builds"

    @property
    def tables_dir(self) -> Path:
        return self.root / "tables"

    @property
    def marts_dir(self) -> Path:
        return self.root / "marts"

    @property
    def dashboards_dir(self) -> Path:
        return self.root / "dashboards"

    @property
    def reports_dir(self) -> Path:
        return self.root / "reports"

    @property
    def corpus_dir(self) -> Path:
        return self.root / "corpus"

    @property
    def sample_predictions_dir(self) -> Path:
        """The simulated attribution methods' predictions over the sample corpus (one folder each)."""
        return self.root / "corpus-predictions"

    @property
    def staging_dir(self) -> Path:
        return self.root / ".staging"

    @property
    def dagster_home(self) -> Path:
        return self.root / ".dagster"

    def rel(self, path: Path) -> str:
        """``path`` relative to the root, with forward slashes (how build records name files)."""
        return path.resolve().relative_to(self.root).as_posix()

    def path(self, rel: str) -> Path:
        return self.root / rel

    def partition_dir(self, key: str) -> Path:
        return self.tables_dir / key

    # -- the committed state (pipelines.storage.state keeps the log) ----------------------------------------

    def committed(self) -> BuildRecord | None:
        """The latest committed build's record (pipelines.storage.state.CommitLog commits them)."""
        return latest_record(self.builds_dir)

    def partitions(self) -> list[str]:
        """Partitions of the latest committed build."""
        record = self.committed()
        return sorted(record.snapshot.partitions) if record else []

    def current(self, key: str) -> Path | None:
        """The generation of partition ``key`` in the latest committed build, or None."""
        record = self.committed()
        part = record.snapshot.partitions.get(key) if record else None
        return self.path(part.generation) if part else None

    def current_files(self, key: str, table: str) -> list[Path]:
        """The data files of ``table`` in partition ``key`` of the latest committed build."""
        record = self.committed()
        part = record.snapshot.partitions.get(key) if record else None
        return [self.path(rel) for rel in part.files(table)] if part else []

    def mart_path(self, mart: str) -> Path | None:
        """The Parquet file of ``mart`` in the latest committed build, or None."""
        record = self.committed()
        rel = record.snapshot.marts.get(mart) if record else None
        return self.path(rel) if rel else None

    # -- generations ----------------------------------------------------------------------------------

    def generations(self, key: str) -> list[Path]:
        """Complete generations of a partition (committed or not), newest first."""
        folder = self.partition_dir(key)
        if not folder.is_dir():
            return []
        found = [p for p in folder.glob("g-*") if p.is_dir() and p.suffix != ".tmp" and (p / MANIFEST).is_file()]
        return sorted(found, key=lambda p: p.name, reverse=True)

    def new_generation(self, key: str) -> Path:
        """An empty folder for a partition's next generation (suffix .tmp until it is complete)."""
        path = self.partition_dir(key) / f"g-{new_id()}.tmp"
        path.mkdir(parents=True)
        return path

    def finish_generation(self, staging: Path) -> Path:
        """Mark a generation complete (its manifest written last): a rename drops the .tmp suffix.
        Complete is not committed: no reader sees it until a build record names it."""
        final = staging.with_suffix("")
        staging.rename(final)
        return final


def write_atomic(path: Path, data: bytes | str | Callable[[Path], None]) -> Path:
    """Write ``path`` under a temporary name in its folder, then rename it into place: a reader
    sees the old file or the new one, never a part. ``data`` is the content, or a function that
    writes the temporary file it is given (a Parquet writer, DuckDB)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        if callable(data):
            data(tmp)
        else:
            tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_parquet_atomic(table: pa.Table, path: Path) -> Path:
    """One whole Parquet file, with field ids (:func:`with_field_ids`), written by :func:`write_atomic`."""
    table = table.cast(with_field_ids(table.schema))
    return write_atomic(path, lambda tmp: pq.write_table(table, tmp, **parquet_options(table.schema)))


def fsync_path(path: Path) -> None:
    """Flush one file or folder to disk (the commit record and the folder that holds it)."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_tree(path: Path) -> None:
    """Delete a file or a folder; a folder is renamed aside first, so a half-deleted one is never
    mistaken for a whole one."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.is_dir():
        trash = path.with_name(f".trash-{path.name}-{uuid.uuid4().hex[:8]}")
        path.rename(trash)
        shutil.rmtree(trash, ignore_errors=True)
