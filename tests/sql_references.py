"""What a query reads, worked out from DuckDB's own parse tree: the check the declarations (`reads` in
sql/marts/_marts.yml and sql/charts/_charts.yml, and the dashboards' READS) are held to. Tests only:
the product reads the declarations, and the layout of ``json_serialize_sql``'s tree is DuckDB's own
business, not a public interface to build on."""

from __future__ import annotations

import functools
import json
from typing import Any

import duckdb
import pyarrow as pa

from pipelines import catalog, schema


def _walk(node: Any, found: dict[str, set[str]]) -> None:
    if isinstance(node, dict):
        if node.get("type") == "BASE_TABLE":
            found["tables"].add(node["table_name"])
        elif node.get("type") == "TABLE_FUNCTION":
            found["functions"].add(node["function"]["function_name"])
        if node.get("class") == "FUNCTION" and "function_name" in node:
            found["functions"].add(node["function_name"])
        for value in node.values():
            _walk(value, found)
    elif isinstance(node, list):
        for value in node:
            _walk(value, found)


def _parse(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[set[str], set[str]]:
    tree = json.loads(con.execute("select json_serialize_sql(?::varchar)", [sql]).fetchone()[0])
    assert not tree.get("error"), tree.get("error_message")
    found: dict[str, set[str]] = {"tables": set(), "functions": set()}
    _walk(tree, found)
    return found["tables"], found["functions"]


def _duckdb_type(arrow_type: Any) -> str:
    if pa.types.is_list(arrow_type):
        return _duckdb_type(arrow_type.value_type) + "[]"
    if pa.types.is_timestamp(arrow_type):
        return "TIMESTAMP_MS"
    return {pa.string(): "VARCHAR", pa.large_string(): "VARCHAR", pa.int64(): "BIGINT", pa.bool_(): "BOOLEAN",
            pa.float64(): "DOUBLE"}[arrow_type]


@functools.cache
def macro_bodies() -> dict[str, str]:
    """Each macro's body as SQL DuckDB can parse, read back from DuckDB after creating sql/macros over
    empty tables (a scalar macro's expression wrapped in a SELECT)."""
    con = duckdb.connect()
    try:
        for name, table_schema in schema.TABLES.items():
            columns = ", ".join(f'"{f.name}" {_duckdb_type(f.type)}' for f in table_schema)
            con.execute(f'create table "{name}" ({columns})')
        for seed in sorted((catalog.SQL_DIR / "seeds").glob("*.csv")):
            con.execute(f'create table "{seed.stem}" as select * from read_csv(?, all_varchar = true)', [str(seed)])
        for path in sorted((catalog.SQL_DIR / "macros").glob("*.sql")):
            con.execute(path.read_text())
        rows = con.execute("select function_name, function_type, macro_definition from duckdb_functions() "
                           "where function_type in ('macro', 'table_macro') and not internal").fetchall()
    finally:
        con.close()
    return {name: body if kind == "table_macro" else f"select {body}" for name, kind, body in rows}


def references(sql: str) -> set[str]:
    """The canonical tables and marts ``sql`` reads, directly or through the macros it calls."""
    known = set(schema.TABLES) | set(catalog.marts())
    bodies = macro_bodies()
    con = duckdb.connect()
    found: set[str] = set()
    todo, seen = [sql], set()
    try:
        while todo:
            tables, functions = _parse(con, todo.pop())
            found |= tables & known
            for name in functions & set(bodies):
                if name not in seen:
                    seen.add(name)
                    todo.append(bodies[name])
    finally:
        con.close()
    return found
