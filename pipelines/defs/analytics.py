"""Analytics: one Parquet mart per SQL file in sql/marts, computed by DuckDB over the warehouse views.

A mart is a SELECT in ``sql/marts/<name>.sql`` whose header comment says what it returns, its grain
and every column. This module turns each file into one asset named after it (the key
``warehouse_database`` already depends on), so a new mart is one new SQL file and nothing else.
The asset's upstream tables are read from the SQL itself: the canonical table names it mentions,
directly or through the table macros of sql/macros it calls.
"""

import re
import time
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines import db, schema
from pipelines.defs.resources import TracehouseResource
from pipelines.storage import Warehouse, write_parquet_atomic

PREVIEW_ROWS = 10
_COMMENT = re.compile(r"--[^\n]*")
_MACRO = re.compile(r"create\s+(?:or\s+replace\s+)?macro\s+([a-z_][a-z0-9_]*)", re.I)
_COLUMN_LINE = re.compile(r"^--\s{1,3}(?P<names>[a-z_][a-z0-9_]*(?:,\s*[a-z_][a-z0-9_]*)*)\s{2,}(?P<text>\S.*)$")
_CONTINUATION = re.compile(r"^--\s{4,}(?P<text>\S.*)$")
_PER_PARTITION = re.compile(
    r"Per partition:[^.]*?combined in order of (?P<columns>[a-z_][a-z0-9_]*(?:, [a-z_][a-z0-9_]*)*)"
)


def _code(sql: str) -> str:
    return _COMMENT.sub("", sql)


def macro_bodies() -> dict[str, str]:
    """Each macro of sql/macros with the text that defines it (up to the next macro)."""
    bodies: dict[str, str] = {}
    for path in db.sql_files("macros"):
        text = _code(path.read_text())
        matches = list(_MACRO.finditer(text))
        for i, match in enumerate(matches):
            end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
            bodies[match.group(1).lower()] = text[match.end():end]
    return bodies


def tables_read(sql: str, macros: dict[str, str] | None = None, _seen: frozenset[str] = frozenset()) -> set[str]:
    """The canonical tables a query reads: named in its code or in the body of a macro it calls."""
    macros = macro_bodies() if macros is None else macros
    code = _code(sql)
    found = {name for name in schema.TABLES if re.search(rf"\b{name}\b", code)}
    for name, body in macros.items():
        if name not in _seen and re.search(rf"\b{name}\s*\(", code):
            found |= tables_read(body, macros, _seen | {name})
    return found


def header(sql: str) -> list[str]:
    """The leading comment lines of a SQL file."""
    lines = []
    for line in sql.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line)
    return lines


def describe(sql: str) -> str:
    """The header's first paragraph, without comment markers: the asset description."""
    text = []
    for line in header(sql):
        body = line.removeprefix("--").strip()
        if not body or body.lower().startswith("columns"):
            break
        text.append(body)
    return re.sub(r"^[a-z_][a-z0-9_]*:\s*", "", " ".join(text))


def column_docs(sql: str) -> dict[str, str]:
    """Column name -> description, from the header's ``--   name   meaning`` lines."""
    docs: dict[str, str] = {}
    current: list[str] = []
    for line in header(sql):
        column = _COLUMN_LINE.match(line)
        if column:
            current = [n.strip() for n in column["names"].split(",")]
            for name in current:
                docs[name] = column["text"].strip()
            continue
        more = _CONTINUATION.match(line)
        if more and current:
            for name in current:
                docs[name] += " " + more["text"].strip()
        else:
            current = []
    return docs


def preview(table: pa.Table, rows: int = PREVIEW_ROWS) -> str:
    """A small markdown table of the first rows, long values cut short."""
    if table.num_rows == 0:
        return "_empty_"
    head = table.slice(0, rows).to_pylist()
    columns = table.column_names
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in head:
        cells = [str(row[c])[:40].replace("|", "\\|").replace("\n", " ") for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def compute_mart(warehouse: Warehouse, name: str) -> pa.Table:
    """Run one mart's SQL over the published tables (in-memory DuckDB, marts not attached)."""
    con = db.scratch(warehouse, with_marts=False)
    try:
        return con.sql(db.sql_file("marts", f"{name}.sql")).to_arrow_table()
    finally:
        con.close()


def per_partition_order(sql: str) -> list[str] | None:
    """The sort columns of a mart computed partition by partition, from its header's paragraph
    ``Per partition: ... combined in order of col, col.``; None for a mart computed whole."""
    text = " ".join(line.removeprefix("--").strip() for line in header(sql))
    match = _PER_PARTITION.search(text)
    return [c.strip() for c in match["columns"].split(",")] if match else None


def compute_mart_by_partition(warehouse: Warehouse, name: str, order: list[str]) -> pa.Table:
    """A mart whose every row depends on one graph: computed per partition generation, kept under
    ``marts/fragments/<name>/`` (a generation never changes, so neither does its fragment), and
    combined. A rebuild computes the fragments of the rebuilt partitions only."""
    sql = db.sql_file("marts", f"{name}.sql")
    code = db.files_digest([db.SQL_DIR / "marts" / f"{name}.sql", *db.sql_files("views"), *db.sql_files("macros"),
                            *sorted((db.SQL_DIR / "seeds").glob("*.csv"))])
    folder = warehouse.marts_dir / "fragments" / name
    fragments: list[pa.Table] = []
    keep: set[str] = set()
    for key in warehouse.partitions():
        generation = warehouse.current(key)
        if generation is None:
            continue
        path = folder / f"{key}--{generation.name}--{code.hexdigest()[:16]}.parquet"
        keep.add(path.name)
        if not path.is_file():
            with db.partition_scratch(warehouse, key) as con:
                write_parquet_atomic(con.sql(sql).to_arrow_table(), path)
        fragments.append(pq.read_table(path))
    if folder.is_dir():
        for stale in folder.glob("*.parquet"):
            if stale.name not in keep:
                stale.unlink(missing_ok=True)
    if not fragments:
        return compute_mart(warehouse, name)
    return pa.concat_tables(fragments, promote_options="default").sort_by([(c, "ascending") for c in order])


def build_mart(warehouse: Warehouse, name: str) -> tuple[pa.Table, Path, float]:
    """Compute a mart and publish ``marts/<name>.parquet`` atomically."""
    started = time.monotonic()
    order = per_partition_order(db.sql_file("marts", f"{name}.sql"))
    table = compute_mart_by_partition(warehouse, name, order) if order else compute_mart(warehouse, name)
    path = warehouse.mart_path(name)
    write_parquet_atomic(table, path)
    return table, path, time.monotonic() - started


def mart_asset(name: str) -> dg.AssetsDefinition:
    sql = db.sql_file("marts", f"{name}.sql")
    docs = column_docs(sql)

    @dg.asset(
        name=name,
        group_name="analytics",
        kinds={"duckdb", "parquet"},
        deps=[dg.AssetKey(table) for table in sorted(tables_read(sql))],
        description=describe(sql) or f"Mart {name} (sql/marts/{name}.sql).",
        metadata={"sql_file": f"sql/marts/{name}.sql"},
    )
    def _mart(context: dg.AssetExecutionContext, tracehouse: TracehouseResource) -> dg.MaterializeResult:
        table, path, seconds = build_mart(tracehouse.wh, name)
        context.log.info(f"{name}: {table.num_rows} rows in {seconds:.2f} s -> {path}")
        columns = [dg.TableColumn(f.name, str(f.type), description=docs.get(f.name)) for f in table.schema]
        return dg.MaterializeResult(
            metadata={
                "rows": table.num_rows,
                "dagster/row_count": table.num_rows,
                "path": str(path),
                "bytes": path.stat().st_size,
                "seconds": round(seconds, 3),
                "preview": dg.MetadataValue.md(preview(table)),
                "dagster/column_schema": dg.TableSchema(columns=columns),
            }
        )

    return _mart


MART_ASSETS = [mart_asset(name) for name in db.mart_names()]

defs = dg.Definitions(assets=MART_ASSETS)
