"""DuckDB over the warehouse: the SQL files in sql/, the views database, and connections to it.

``tracehouse.duckdb`` holds no data: views over the published Parquet files (relative globs,
resolved through ``file_search_path``), the seed tables of sql/seeds and the macros of
sql/macros. It is rebuilt under a temporary name and renamed into place, so a reader never
needs the builder's lock and never sees a half-written database.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.csv as pacsv

from pipelines.storage import Warehouse

REPO = Path(__file__).resolve().parent.parent
SQL_DIR = REPO / "sql"


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
    """Every mart is one file in sql/marts named after what it returns."""
    return [p.stem for p in sql_files("marts")]


def install(con: duckdb.DuckDBPyConnection, warehouse: Warehouse, *, with_marts: bool = True) -> None:
    """Create the views, seed tables and macros of the warehouse on ``con``."""
    con.execute("set file_search_path = ?", [str(warehouse.root)])
    for path in sql_files("views"):
        con.execute(path.read_text())
    for seed in sorted((SQL_DIR / "seeds").glob("*.csv")):
        con.register("seed_rows", pacsv.read_csv(seed))
        con.execute(f'create or replace table "{_identifier(seed.stem)}" as select * from seed_rows')
        con.unregister("seed_rows")
    for path in sql_files("macros"):
        con.execute(path.read_text())
    if with_marts:
        for mart in mart_names():
            if warehouse.mart_path(mart).is_file():
                name = _identifier(mart)
                con.execute(f"create or replace view \"{name}\" as select * from read_parquet('marts/{name}.parquet')")


def _identifier(name: str) -> str:
    """Names of views come from our own file names; refuse anything that is not a plain identifier."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ValueError(f"{name!r} is not a plain lower-case identifier")
    return name


def scratch(warehouse: Warehouse, *, with_marts: bool = True) -> duckdb.DuckDBPyConnection:
    """An in-memory connection with the warehouse's views, for builds and checks; close it after use.

    Installing the views, seeds and macros costs ~35 ms and a build opens a dozen such connections,
    so each is a cursor on an in-memory database kept per warehouse, set of published marts and
    version of sql/. Views are bound when a query runs, so a cursor sees what is published then.
    Cursors share the catalog: create only temporary objects on one."""
    marts = tuple(m for m in mart_names() if warehouse.mart_path(m).is_file()) if with_marts else None
    key = (str(warehouse.root), marts, _sql_version())
    base = _SCRATCH.pop(key, None)
    if base is None:
        base = fresh_scratch(warehouse, with_marts=with_marts)
    _SCRATCH[key] = base  # most recently used last
    while len(_SCRATCH) > _SCRATCH_KEPT:
        _SCRATCH.pop(next(iter(_SCRATCH))).close()
    cursor = base.cursor()
    cursor.execute("set file_search_path = ?", [str(warehouse.root)])  # a per-connection setting
    return cursor


def fresh_scratch(warehouse: Warehouse, *, with_marts: bool = True) -> duckdb.DuckDBPyConnection:
    """A new in-memory connection with the warehouse's views (not shared)."""
    con = duckdb.connect()
    install(con, warehouse, with_marts=with_marts)
    return con


_SCRATCH: dict[tuple, duckdb.DuckDBPyConnection] = {}
_SCRATCH_KEPT = 4


def _sql_version() -> tuple:
    return tuple((p.name, p.stat().st_mtime_ns) for p in sorted(SQL_DIR.rglob("*")) if p.is_file())


@contextmanager
def partition_scratch(warehouse: Warehouse, key: str) -> Iterator[duckdb.DuckDBPyConnection]:
    """A scratch connection (no marts) whose table views see one partition's current generation only.

    The view files stay as they are: ``file_search_path`` points at a temporary folder holding just
    ``tables/<key>/current``, linked to that generation."""
    generation = warehouse.current(key)
    if generation is None:
        raise FileNotFoundError(f"partition {key} has no published generation")
    with tempfile.TemporaryDirectory(prefix=".partition-", dir=warehouse.root) as folder:
        link = Path(folder) / "tables" / key / "current"
        link.parent.mkdir(parents=True)
        link.symlink_to(generation)
        con = fresh_scratch(Warehouse(folder), with_marts=False)
        try:
            yield con
        finally:
            con.close()


def publish_database(warehouse: Warehouse) -> Path:
    """Write tracehouse.duckdb afresh and rename it into place."""
    tmp = warehouse.root / f".{warehouse.db_path.name}.{uuid.uuid4().hex[:8]}.tmp"
    con = duckdb.connect(str(tmp))
    try:
        install(con, warehouse)
        con.execute("checkpoint")
    finally:
        con.close()
    os.replace(tmp, warehouse.db_path)
    return warehouse.db_path


def connect(warehouse: Warehouse, *, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """Open the published warehouse database (read-only unless asked) from any working directory."""
    if not warehouse.db_path.is_file():
        raise FileNotFoundError(
            f"no warehouse at {warehouse.root} (missing {warehouse.db_path.name}); run `tracehouse build` first"
        )
    con = duckdb.connect(str(warehouse.db_path), read_only=read_only)
    con.execute("set file_search_path = ?", [str(warehouse.root)])
    return con
