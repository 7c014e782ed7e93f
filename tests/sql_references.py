"""What DuckDB's binder scans for a query: the oracle the lineage derived from the parse tree
(pipelines.analytics.catalog.sql_reads) is checked against.

The query is bound over empty tables of the canonical schemas, the seeds, the macros and the marts
(each an empty table made by running its SQL), and planned without optimizing
(``json_serialize_plan``): every table the bound plan scans, macros and views expanded by DuckDB
itself, is what the query reads. Binding needs every table to exist, which is why the product
derives its lineage from the parse tree instead (sql/drilldown's queries read temporary tables the
failure views make first, and take parameters, so only the others are planned here).
"""

from __future__ import annotations

import json
from typing import Any

import duckdb

from pipelines import schema
from pipelines.analytics import catalog


def _scans(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        data = node.get("function_data")
        if node.get("type") == "LOGICAL_GET" and isinstance(data, dict) and "table" in data:
            found.add(data["table"])
        for value in node.values():
            _scans(value, found)
    elif isinstance(node, list):
        for value in node:
            _scans(value, found)


class Binder:
    """An in-memory database with every table, seed, macro and mart, empty."""

    def __init__(self) -> None:
        self.con = duckdb.connect()
        for name, table_schema in schema.TABLES.items():
            columns = ", ".join(f'"{f.name}" {catalog.duckdb_type(f.type)}' for f in table_schema)
            self.con.execute(f'create table "{name}" ({columns})')
        for seed in sorted((catalog.SQL_DIR / "seeds").glob("*.csv")):
            self.con.execute(f'create table "{seed.stem}" as select * from read_csv(?, all_varchar = true)',
                             [str(seed)])
        for path in sorted((catalog.SQL_DIR / "macros").glob("*.sql")):
            self.con.execute(path.read_text())
        pending = list(catalog.marts())
        while pending:  # a mart after the marts it reads, found by trying (not by the order under test)
            made = [name for name in pending if self._make(name)]
            assert made, f"marts that cannot be made over empty tables: {pending}"
            pending = [name for name in pending if name not in made]
        self.known = set(schema.TABLES) | set(catalog.marts())

    def _make(self, name: str) -> bool:
        sql = catalog.marts()[name].sql.strip().rstrip(";")
        try:
            self.con.execute(f'create table "{name}" as from (\n{sql}\n) limit 0')
        except duckdb.CatalogException:
            return False  # reads a mart not made yet
        return True

    def reads(self, sql: str) -> set[str]:
        """The tables and marts the bound plan of ``sql`` scans."""
        plan = json.loads(self.con.execute("select json_serialize_plan(?::varchar, optimize := false)",
                                           [sql]).fetchone()[0])
        assert not plan.get("error"), plan
        found: set[str] = set()
        _scans(plan, found)
        return found & self.known

    def close(self) -> None:
        self.con.close()
