"""Where the warehouse keeps its files, and how a partition is published atomically.

Layout under the warehouse root (every path relative, so the folder can be moved or copied)::

    tracehouse.duckdb                      views over the Parquet files + SQL macros (no data)
    tables/<partition>/current -> g-<id>   the published generation of one source split
    tables/<partition>/g-<id>/<table>.parquet
    tables/<partition>/g-<id>/manifest.json   the input files this generation was built from
    marts/<mart>.parquet
    dashboards/, reports/, corpus/ (the default sample corpus), .dagster/ (run history)

A build writes a new generation next to the published one and swaps the ``current`` symlink
with one ``rename``: a reader sees the old partition or the new one, never a mix, and a build
killed at any point leaves the previous generation in place. Leftovers of a killed build are
swept by the next one.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

DB_FILE = "tracehouse.duckdb"
CURRENT = "current"
PARQUET_OPTIONS = {"compression": "zstd", "compression_level": 3, "write_statistics": True}


# Arrow checks a page's size only between batches of this many values (default 1024): with values
# of ~0.5 MB a page grew to hundreds of MB, fresh memory copied twice. 16 keeps the pages of long
# texts to a few MB.
LONG_TEXT_WRITE_BATCH = 16


def parquet_options(schema: pa.Schema) -> dict:
    """zstd; for large_string columns (long, mostly unique texts) no dictionary (it doubled write
    time for no smaller file), no min/max statistics (no query prunes on them, and each page copied
    its longest values) and small write batches."""
    short = [f.name for f in schema if f.type != pa.large_string()]
    options = {**PARQUET_OPTIONS, "use_dictionary": short}
    if len(short) < len(schema):
        options |= {"write_statistics": short, "write_batch_size": LONG_TEXT_WRITE_BATCH}
    return options


def partition_key(source: str, split: str) -> str:
    """A Dagster- and filesystem-safe key for one source split, e.g. ``whowhen__Hand-Crafted``."""
    return f"{_safe(source)}__{_safe(split)}"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", text) or "_"


class Warehouse:
    """Paths of one warehouse folder."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()

    @property
    def db_path(self) -> Path:
        return self.root / DB_FILE

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
    def dagster_home(self) -> Path:
        return self.root / ".dagster"

    def partition_dir(self, key: str) -> Path:
        return self.tables_dir / key

    def current(self, key: str) -> Path | None:
        """The published generation of a partition, or None before its first build."""
        link = self.partition_dir(key) / CURRENT
        return link.resolve() if link.is_symlink() and link.resolve().is_dir() else None

    def partitions(self) -> list[str]:
        """Partitions with a published generation."""
        if not self.tables_dir.is_dir():
            return []
        return sorted(p.name for p in self.tables_dir.iterdir() if (p / CURRENT).is_symlink())

    def mart_path(self, mart: str) -> Path:
        return self.marts_dir / f"{mart}.parquet"

    # -- publishing -------------------------------------------------------------------------

    def new_generation(self, key: str) -> Path:
        """An empty staging folder for a partition's next generation (suffix .tmp until published)."""
        stamp = time.strftime("%Y%m%dT%H%M%S")
        path = self.partition_dir(key) / f"g-{stamp}-{uuid.uuid4().hex[:8]}.tmp"
        path.mkdir(parents=True)
        return path

    def publish(self, key: str, staging: Path) -> Path:
        """Make ``staging`` the partition's current generation in one atomic rename."""
        final = staging.with_suffix("")
        fsync_dir_tree(staging)
        staging.rename(final)
        partition = self.partition_dir(key)
        link_tmp = partition / f"{CURRENT}.{uuid.uuid4().hex[:8]}.tmp"
        link_tmp.symlink_to(final.name)
        os.replace(link_tmp, partition / CURRENT)
        fsync_dir(partition)
        self.sweep(key, keep=2)
        return final

    def remove_partition(self, key: str) -> None:
        """Unpublish a partition whose files are all gone: drop its link first, then its data."""
        partition = self.partition_dir(key)
        link = partition / CURRENT
        if link.is_symlink():
            link.unlink()
        if partition.exists():
            trash = self.tables_dir / f".trash-{key}-{uuid.uuid4().hex[:8]}"
            partition.rename(trash)
            shutil.rmtree(trash, ignore_errors=True)

    def sweep(self, key: str, keep: int = 2) -> None:
        """Delete staging leftovers and all but the ``keep`` newest generations (readers may still
        be scanning the previous one)."""
        partition = self.partition_dir(key)
        current = self.current(key)
        generations = sorted(p for p in partition.glob("g-*") if p.is_dir() and p.suffix != ".tmp")
        old = [g for g in generations if g != current][: max(0, len(generations) - keep)]
        for path in [*partition.glob("*.tmp"), *old]:
            if path.is_symlink() or path.is_file():
                path.unlink(missing_ok=True)
            else:
                shutil.rmtree(path, ignore_errors=True)

    def sweep_all(self) -> None:
        if self.tables_dir.is_dir():
            for trash in self.tables_dir.glob(".trash-*"):
                shutil.rmtree(trash, ignore_errors=True)
            for partition in self.tables_dir.iterdir():
                if partition.is_dir() and not partition.name.startswith("."):
                    self.sweep(partition.name)
        for leftover in self.root.glob("*.tmp"):
            leftover.unlink(missing_ok=True)
        if self.marts_dir.is_dir():
            for leftover in self.marts_dir.glob("*.tmp"):
                leftover.unlink(missing_ok=True)


def write_parquet_atomic(table: pa.Table, path: Path) -> None:
    """Write a whole Parquet file under a temporary name and rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    pq.write_table(table, tmp, **parquet_options(table.schema))
    fsync_file(tmp)
    os.replace(tmp, path)


def replace_atomic(tmp: Path, path: Path) -> None:
    fsync_file(tmp)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir_tree(path: Path) -> None:
    for child in path.iterdir():
        if child.is_file():
            fsync_file(child)
    fsync_dir(path)
