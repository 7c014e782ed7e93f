"""DuckDB over the warehouse: the SQL files in sql/, views over one build's files, and connections.

Views never glob folders: each table view reads the exact Parquet files of one snapshot (a committed
build, or a build's candidate while it is checked and its marts computed), so a reader sees one
build and nothing half-written. The paths are the warehouse's own (relative to its root, resolved
through ``file_search_path``), never text from the data.

``tracehouse sql`` and the other readers open an in-memory database over the latest committed build
(:func:`connect`); ``tracehouse.duckdb`` in the warehouse root is the same views written to a file
after each commit, for plain ``duckdb``. The user's own tables live in ``scratch.duckdb``, attached
as catalog ``scratch``, which builds never touch.
"""

from __future__ import annotations

import csv
import hashlib
import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv

from pipelines.storage.records import BuildRecord, Snapshot
from pipelines.storage.state import CommitLog
from pipelines.storage.warehouse import Warehouse, write_atomic

REPO = Path(__file__).resolve().parents[2]
SQL_DIR = REPO / "sql"
FILES_PLACEHOLDER = "{{ files }}"
ANNOTATION_FILES_PLACEHOLDER = "{{ annotation_files }}"
WAREHOUSE_CATALOG = "memory"  # an in-memory connection's own catalog
SCRATCH_CATALOG = "scratch"
# The storage format tracehouse.duckdb is written in: DuckDB 2.x writes format 69 by default, which
# DuckDB 1.5 refuses ("can only read versions between 64 and 68"); written as v1.5.0, 1.5 and 2.x
# both read it (tests/test_duckdb_compat.py opens it with DuckDB 1.5.6).
PUBLISHED_STORAGE_VERSION = "v1.5.0"


def open_database() -> duckdb.DuckDBPyConnection:
    """A new in-memory database that keeps the Parquet footers it has read (DuckDB's documented
    ``parquet_metadata_cache``, set for the database so its cursors have it too): a mart or a user's
    session scans the same data files many times, and a build's files never change in place (a
    rewrite is a new file). It pays most on the slowest marts of a large warehouse
    (BENCHMARKS.md)."""
    con = duckdb.connect()
    con.execute("set global parquet_metadata_cache = true")
    return con


class NoBuild(FileNotFoundError):
    """The warehouse has no committed build yet."""


def sql_file(*parts: str) -> str:
    """The text of one SQL file under sql/."""
    return (SQL_DIR.joinpath(*parts)).read_text()


def files_digest(paths: Iterable[Path]) -> Any:
    """sha256 over files' names relative to the repository and their bytes: the fingerprint of the
    code or SQL an output was made by (update it with more when an output depends on more)."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path.name}\n".encode())
        digest.update(path.read_bytes())
    return digest


def sql_files(folder: str) -> list[Path]:
    return sorted((SQL_DIR / folder).glob("*.sql"))


def mart_names() -> list[str]:
    """Every mart, as sql/marts/_marts.yml declares them."""
    from pipelines.analytics import catalog

    return list(catalog.marts())


def path_list(paths: list[str]) -> str:
    """A DuckDB list literal of the warehouse's own relative file paths."""
    if not paths:
        raise ValueError("a view needs at least one file")
    for path in paths:
        if not re.fullmatch(r"[A-Za-z0-9_.\-/]+", path):
            raise ValueError(f"{path!r} is not a warehouse file path")
    return "[" + ", ".join(f"'{p}'" for p in paths) + "]"


def install(con: duckdb.DuckDBPyConnection, warehouse: Warehouse, snapshot: Snapshot,
            record: BuildRecord | None = None, views: bool = True) -> None:
    """Create on ``con`` the views over ``snapshot``'s files, the seed tables and the macros
    (``views=False``: the seeds and macros only)."""
    con.execute("set file_search_path = ?", [str(warehouse.root)])
    statements = _definitions(snapshot) if views else {}
    for path in sql_files("views"):
        if path.stem in statements:
            con.execute(statements[path.stem])
    from pipelines.analytics import crosswalk

    for seed in sorted((SQL_DIR / "seeds").glob("*.csv")):
        # the crosswalk seed with the team's own rows over it (pipelines.analytics.crosswalk)
        rows = crosswalk.table(warehouse.root, seed_table(seed), record) if seed == crosswalk.SEED else seed_table(seed)
        con.register("seed_rows", rows)
        con.execute(f'create or replace table "{_identifier(seed.stem)}" as select * from seed_rows')
        con.unregister("seed_rows")
    for path in sql_files("macros"):
        con.execute(path.read_text())
    for mart in sorted(snapshot.marts):
        if mart in statements:
            con.execute(statements[mart])
    if record is not None:
        con.execute(
            "create or replace table tracehouse_build as select ?::integer as build, ?::varchar as committed_at, "
            "?::varchar as attempt", [record.build, record.committed_at, record.attempt],
        )


# The column types a seed may declare (_seeds.yml, config.column_types), DuckDB's names for them
SEED_COLUMN_TYPES = {"varchar": pa.string(), "bigint": pa.int64(), "integer": pa.int32(), "double": pa.float64(),
                     "boolean": pa.bool_()}


def seed_table(path: Path) -> pa.Table:
    """The rows of seed CSV ``path``, each column of the type _seeds.yml declares for it and text when it
    declares none: never pyarrow's guess, which reads an arXiv id 2505.10010 as the number 2505.1001.
    Every connection (:func:`install`) and every mart unit test (pipelines.analytics.mart_units) loads seeds here."""
    from pipelines.analytics import catalog

    declared = (catalog.seeds()[path.stem].get("config") or {}).get("column_types") or {}
    with path.open(newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle), [])
    unknown = {c: t for c, t in declared.items() if c not in header or str(t).lower() not in SEED_COLUMN_TYPES}
    if unknown:
        raise catalog.CatalogError(f"_seeds.yml: {path.stem}: column_types {unknown} name no column of {path.name} "
                                   f"or no type of {sorted(SEED_COLUMN_TYPES)}")
    types = {c: SEED_COLUMN_TYPES[str(declared.get(c, "varchar")).lower()] for c in header}
    return pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(column_types=types))


def _identifier(name: str) -> str:
    """Names of views come from our own file names; refuse anything that is not a plain identifier."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ValueError(f"{name!r} is not a plain lower-case identifier")
    return name


def _definitions(snapshot: Snapshot) -> dict[str, str]:
    """The statements of the views over ``snapshot``'s files, by name."""
    statements = {}
    for path in sql_files("views"):
        files = snapshot.manifests() if path.stem == "input_files" else snapshot.table_files(path.stem)
        text = path.read_text().replace(FILES_PLACEHOLDER, path_list(files))
        # graphs counts the annotations other partitions hold for its graphs (sql/views/graphs.sql)
        if ANNOTATION_FILES_PLACEHOLDER in text:
            text = text.replace(ANNOTATION_FILES_PLACEHOLDER, path_list(snapshot.table_files("annotations")))
        statements[path.stem] = text
    for mart, rel in sorted(snapshot.marts.items()):
        name = _identifier(mart)
        statements[name] = f'create or replace view "{name}" as select * from read_parquet({path_list([rel])})'
    return statements


class _Shared:
    """One in-memory database per warehouse for a build's steps: seeds and macros installed once,
    views replaced only where the snapshot's files changed. A step gets a cursor (a connection of
    its own to that database: its own settings and temp tables). Installing all of it per step would
    be a large part of a one-file rebuild (BENCHMARKS.md)."""

    def __init__(self, warehouse: Warehouse) -> None:
        self.con = open_database()
        self.views: dict[str, str] = {}
        self.code = _sql_code_stamp(warehouse)
        self.macros = False  # created after the first views: a macro's body must find its tables
        self.con.execute("set file_search_path = ?", [str(warehouse.root)])

    def cursor(self, warehouse: Warehouse, snapshot: Snapshot) -> duckdb.DuckDBPyConnection:
        # A mart's view stays once made, also for snapshots without that mart: a mart step's snapshot
        # holds only the marts it reads, a chart step's all computed so far, and db.prepare's none,
        # taken on another thread while the first steps start; dropping the views one lacks could pull
        # them from under another's query. Within a build a mart's file never changes, and what a step
        # reads is in its snapshot (catalog.marts_read).
        for name, statement in _definitions(snapshot).items():
            if self.views.get(name) != statement:
                self.con.execute(statement)
                self.views[name] = statement
        if not self.macros:
            install(self.con, warehouse, snapshot, None, views=False)
            self.macros = True
        cursor = self.con.cursor()
        cursor.execute("set file_search_path = ?", [str(warehouse.root)])
        return cursor


_SHARED: dict[tuple[str, str], _Shared] = {}
_SHARED_LOCK = threading.Lock()


def _sql_code_stamp(warehouse: Warehouse) -> str:
    """Which seeds and macros a shared database holds (a changed file gets a new database), the
    warehouse's team crosswalk among them."""
    from pipelines.analytics import crosswalk

    paths = [*sql_files("macros"), *sorted((SQL_DIR / "seeds").glob("*.csv")), *sql_files("views")]
    return repr([(str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in paths]) + crosswalk.digest(warehouse.root)


def connection(warehouse: Warehouse, snapshot: Snapshot, record: BuildRecord | None = None
               ) -> duckdb.DuckDBPyConnection:
    """A connection with views over ``snapshot``, the seeds and the macros; close it after use.
    Without ``record`` (a build's step), a cursor on the warehouse's shared in-memory database
    (see :class:`_Shared`); with it (a reader's), a database of its own."""
    if record is not None:
        con = open_database()
        install(con, warehouse, snapshot, record)
        return con
    key = (str(warehouse.root), str(SQL_DIR))
    with _SHARED_LOCK:
        shared = _SHARED.get(key)
        if shared is None or shared.code != _sql_code_stamp(warehouse):
            if shared is not None:
                shared.con.close()
            shared = _SHARED[key] = _Shared(warehouse)
        return shared.cursor(warehouse, snapshot)


def tables_connection(warehouse: Warehouse, snapshot: Snapshot, tables: Iterable[str]) -> duckdb.DuckDBPyConnection:
    """A database of its own with the views of ``tables`` over ``snapshot``'s files and nothing else
    (no seeds, macros or marts), for a question about a table or two; close it after use."""
    statements = _definitions(snapshot)
    con = open_database()
    con.execute("set file_search_path = ?", [str(warehouse.root)])
    for table in tables:
        con.execute(statements[_identifier(table)])
    return con


def prepare(warehouse: Warehouse, snapshot: Snapshot) -> None:
    """Make the shared database a build's steps will take cursors of (:func:`connection`) now."""
    connection(warehouse, snapshot).close()


def committed_record(warehouse: Warehouse, build: int | None = None) -> BuildRecord:
    """The latest committed build (or build ``build``); :class:`NoBuild` when there is none."""
    log = CommitLog(warehouse)
    if build is not None:
        return log.get(build)
    record = log.latest()
    if record is None:
        raise NoBuild(f"no warehouse at {warehouse.root} (no committed build); run `tracehouse build` first")
    return record


def connect(warehouse: Warehouse, *, build: int | None = None, write: bool = False) -> duckdb.DuckDBPyConnection:
    """A reader's connection: views over the latest committed build (or ``build``), with the user's
    scratch database attached as catalog ``scratch``, read-only unless ``write`` (then new tables and
    views go there, and the warehouse's own names are still found)."""
    record = committed_record(warehouse, build)
    con = connection(warehouse, record.snapshot, record)
    scratch = warehouse.scratch_db_path
    if write or scratch.is_file():
        mode = "" if write else " (read_only)"
        quoted = scratch.as_posix().replace("'", "''")  # the warehouse's own path, not data
        con.execute(f"attach '{quoted}' as {SCRATCH_CATALOG}{mode}")
        # the first schema of the search path is where new tables go; names are looked up in both
        order = [SCRATCH_CATALOG, WAREHOUSE_CATALOG] if write else [WAREHOUSE_CATALOG, SCRATCH_CATALOG]
        if write:
            con.execute(f"use {SCRATCH_CATALOG}")
        con.execute("set search_path = ?", [",".join(f"{c}.main" for c in order)])
    return con


def publish_database(warehouse: Warehouse, record: BuildRecord) -> Path:
    """Write ``tracehouse.duckdb`` (the views of ``record`` in a file, for plain duckdb) atomically,
    in the storage format of :data:`PUBLISHED_STORAGE_VERSION`, so that DuckDB 1.5 opens it too."""

    def write(tmp: Path) -> None:
        con = duckdb.connect(str(tmp), config={"storage_compatibility_version": PUBLISHED_STORAGE_VERSION})
        try:
            install(con, warehouse, record.snapshot, record)
            con.execute("checkpoint")
        finally:
            con.close()

    return write_atomic(warehouse.db_path, write)
