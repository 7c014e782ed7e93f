"""tracehouse in Python, for notebooks and scripts: ``tracehouse.open(W)`` (docs/PYTHON.md).

Opening a warehouse pins one committed build: its build record is read once, at open time, and
everything read through the handle reads exactly the Parquet files that record names, the same
views, seeds, marts and macros as ``tracehouse sql`` (:func:`pipelines.analytics.db.connection`), or a
Polars ``LazyFrame`` over the same files. Builds committed later make new files and never touch
these, so a notebook keeps reading the build it opened while new ones are committed.

Until the warehouse collects them: a commit deletes the files of every build but the last
:data:`pipelines.storage.state.KEEP_BUILDS` (three), so a pinned build stays readable until three newer builds
are committed. After that, :meth:`Build.sql` and :meth:`Build.table` raise :class:`BuildNotKept`
saying so, and a ``LazyFrame`` made earlier fails when collected, naming the file that is gone
(Polars' ``FileNotFoundError``); :meth:`Build.kept` says whether the build is still kept, and opening
the warehouse again pins its latest build.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines import schema
from pipelines.analytics import db
from pipelines.config import warehouse_for_reading
from pipelines.storage.records import BuildRecord
from pipelines.storage.state import KEEP_BUILDS, CommitLog
from pipelines.storage.warehouse import Warehouse

if TYPE_CHECKING:
    import duckdb
    import polars as pl


class BuildNotKept(LookupError):
    """The build asked for is not one the warehouse keeps (never committed, or collected)."""


def open(warehouse: str | os.PathLike[str] | None = None, build: int | None = None, *,
         config: str | os.PathLike[str] | None = None) -> Build:
    """Pin build ``build`` of ``warehouse`` (default: its latest committed build), for reading.

    ``warehouse`` is a folder or an ``s3://`` URL (then its working copy is brought to that build
    first, as ``tracehouse sql`` does); without it, the warehouse of ``tracehouse.toml`` (``config``,
    ``$TRACEHOUSE_CONFIG`` or the working directory's), else ``warehouse/``. Raises
    :class:`pipelines.analytics.db.NoBuild` (a ``FileNotFoundError``) when there is no committed build there,
    and :class:`BuildNotKept` for a build the warehouse does not keep."""
    if build is not None and (isinstance(build, bool) or not isinstance(build, int) or build < 1):
        raise ValueError(f"build must be a build number (a whole number of at least 1), got {build!r}")
    root = warehouse_for_reading(None if warehouse is None else os.fspath(warehouse),
                                 None if config is None else os.fspath(config), build)
    store = Warehouse(root)
    log = CommitLog(store)
    if build is None:
        record = db.committed_record(store)
    else:
        kept = log.numbers()[-KEEP_BUILDS:]
        if not kept:
            db.committed_record(store)  # raises NoBuild, naming the folder
        if build not in kept:
            raise BuildNotKept(
                f"build {build} is not one {store.root} keeps (the files of a build are deleted once "
                f"{KEEP_BUILDS} newer builds are committed); builds kept: {', '.join(map(str, kept))}")
        record = log.get(build)
    return Build(store, record)


class Build:
    """One committed build of a warehouse, opened for reading (see the module docstring)."""

    def __init__(self, warehouse: Warehouse, record: BuildRecord) -> None:
        self.warehouse = warehouse
        self.record = record
        self._con: duckdb.DuckDBPyConnection | None = None

    @property
    def build(self) -> int:
        return self.record.build

    @property
    def root(self) -> Path:
        return self.warehouse.root

    @property
    def committed_at(self) -> str:
        return self.record.committed_at

    def __repr__(self) -> str:
        return f"<tracehouse build {self.build} of {self.root}, committed {self.committed_at}>"

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The DuckDB connection over this build: its own in-memory database with the views over the
        build's files, the seeds, the marts and the lineage macros (made on first use)."""
        if self._con is None:
            self._con = db.connection(self.warehouse, self.record.snapshot, self.record)
        return self._con

    def sql(self, query: str, params: Any = None) -> duckdb.DuckDBPyRelation:
        """DuckDB's relation of ``query`` over this build: ``.pl()`` a Polars DataFrame, ``.df()`` a
        pandas one, ``.arrow()`` an Arrow record batch reader, or more relational methods. ``params``
        fill the query's ``?`` or ``$name`` placeholders (never put values into the query's text)."""
        self._check_kept()
        return self.con.sql(query, params=params)

    def names(self) -> list[str]:
        """What :meth:`table` reads: the tables (pipelines/schema.py) and the marts of this build."""
        return [*schema.TABLES, *sorted(self.record.snapshot.marts)]

    def files(self, name: str) -> list[Path]:
        """The Parquet files of table or mart ``name`` in this build (absolute paths)."""
        snapshot = self.record.snapshot
        if name in schema.TABLES:
            return [self.warehouse.path(rel) for rel in snapshot.table_files(name)]
        if name in snapshot.marts:
            return [self.warehouse.path(snapshot.marts[name])]
        raise KeyError(f"{name!r} is neither a table nor a mart of build {self.build} of {self.root} "
                       f"(names: {', '.join(self.names())}); views, seeds and macros: use .sql()")

    def table(self, name: str) -> pl.LazyFrame:
        """A Polars LazyFrame scanning exactly this build's Parquet files of table or mart ``name``:
        builds committed after :func:`open` do not change what it reads."""
        import polars as pl

        self._check_kept()
        files = self.files(name)
        if not files:  # a build without partitions: the table's columns, no rows
            return pl.from_arrow(schema.TABLES[name].empty_table()).lazy()
        return pl.scan_parquet(files, glob=False, hive_partitioning=False)

    def kept(self) -> bool:
        """Whether the warehouse still keeps this build's files (one of its last KEEP_BUILDS builds)."""
        return self.build in self._kept_builds()

    def _kept_builds(self) -> list[int]:
        return CommitLog(self.warehouse).numbers()[-KEEP_BUILDS:]

    def _check_kept(self) -> None:
        """A query on a collected build would fail on whichever of its files went first: say why instead."""
        kept = self._kept_builds()
        if self.build not in kept:
            raise BuildNotKept(
                f"build {self.build} of {self.root} was collected: its files are deleted once {KEEP_BUILDS} newer "
                f"builds are committed (builds kept: {', '.join(map(str, kept))}); tracehouse.open() it again "
                "for the latest")

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def __enter__(self) -> Build:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Build", "BuildNotKept", "open"]
