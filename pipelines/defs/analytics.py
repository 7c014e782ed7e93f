"""Analytics: one Parquet mart per SQL file in sql/marts, computed by DuckDB over the warehouse views.

A mart is a SELECT in ``sql/marts/<name>.sql`` whose header comment says what it returns, its grain
and every column. This module turns each file into one asset named after it (the key
``warehouse_database`` already depends on), so a new mart is one new SQL file and nothing else.
The asset's upstream tables are read from the SQL itself: the canonical table names it mentions,
directly or through the table macros of sql/macros it calls.
"""

import hashlib
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines import db, schema
from pipelines.defs.resources import TracehouseResource
from pipelines.state import Snapshot
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


def compute_mart(warehouse: Warehouse, snapshot: Snapshot, name: str) -> pa.Table:
    """Run one mart's SQL over a snapshot's tables (in-memory DuckDB, marts not attached)."""
    con = db.connection(warehouse, Snapshot(snapshot.partitions))
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


def mart_code(name: str) -> str:
    """What a mart's rows are computed by: its SQL, the views, macros and seeds."""
    return db.files_digest([db.SQL_DIR / "marts" / f"{name}.sql", *db.sql_files("views"), *db.sql_files("macros"),
                            *sorted((db.SQL_DIR / "seeds").glob("*.csv"))]).hexdigest()


@dataclass
class MartOutput:
    name: str
    path: Path  # marts/<name>/<digest>.parquet
    rows: int
    fragments: list[Path]
    computed: bool  # False: a file of the same inputs was there already
    seconds: float


def build_mart(warehouse: Warehouse, snapshot: Snapshot, name: str) -> MartOutput:
    """The mart's file for ``snapshot``: named by the digest of what it is computed from (code and
    table generations), so it is computed once and never rewritten. A mart whose every row depends
    on one graph is computed per partition generation (``marts/fragments/<name>/``, shared by every
    build with that generation) and combined: a rebuild computes the rebuilt partitions' only."""
    started = time.monotonic()
    sql = db.sql_file("marts", f"{name}.sql")
    code = mart_code(name)
    order = per_partition_order(sql)
    fragments: list[Path] = []
    if order:
        folder = warehouse.marts_dir / "fragments" / name
        for key in sorted(snapshot.partitions):
            part = snapshot.partitions[key]
            path = folder / f"{key}--{Path(part.generation).name}--{code[:16]}.parquet"
            if not path.is_file():
                con = db.connection(warehouse, Snapshot({key: part}))
                try:
                    write_parquet_atomic(con.sql(sql).to_arrow_table(), path)
                finally:
                    con.close()
            fragments.append(path)
        inputs = json.dumps([code, [p.name for p in fragments]])
    else:
        inputs = json.dumps([code, snapshot.tables_digest()])
    path = warehouse.marts_dir / name / f"{hashlib.sha256(inputs.encode()).hexdigest()[:20]}.parquet"
    computed = not path.is_file()
    if computed:
        if order:
            table = pa.concat_tables([pq.read_table(f) for f in fragments], promote_options="default")
            table = table.sort_by([(c, "ascending") for c in order])
        else:
            table = compute_mart(warehouse, snapshot, name)
        write_parquet_atomic(table, path)
    rows = pq.ParquetFile(path).metadata.num_rows
    return MartOutput(name, path, rows, fragments, computed, time.monotonic() - started)


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
        warehouse = tracehouse.wh
        attempt = tracehouse.attempt_for(context)
        out = build_mart(warehouse, attempt.snapshot, name)
        rel = warehouse.rel(out.path)
        attempt.put_output(f"mart.{name}", {"path": rel, "rows": out.rows,
                                            "files": [rel, *(warehouse.rel(f) for f in out.fragments)]})
        context.log.info(f"{name}: {out.rows} rows in {out.seconds:.2f} s -> {out.path}")
        tracehouse.say(f"mart {name}: {out.rows} rows in {out.seconds:.1f} s" + ("" if out.computed else " (kept)"))
        head = pq.ParquetFile(out.path)
        columns = [dg.TableColumn(f.name, str(f.type), description=docs.get(f.name)) for f in head.schema_arrow]
        return dg.MaterializeResult(
            metadata={
                "rows": out.rows,
                "dagster/row_count": out.rows,
                "path": str(out.path),
                "bytes": out.path.stat().st_size,
                "seconds": round(out.seconds, 3),
                "computed": out.computed,
                "preview": dg.MetadataValue.md(preview(head.read_row_group(0) if head.num_row_groups else
                                                       head.schema_arrow.empty_table())),
                "dagster/column_schema": dg.TableSchema(columns=columns),
            }
        )

    return _mart


MART_ASSETS = [mart_asset(name) for name in db.mart_names()]

defs = dg.Definitions(assets=MART_ASSETS)
