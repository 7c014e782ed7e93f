"""A mart's unit tests, as dbt's ``unit_tests``: its SQL run by DuckDB over a few inline rows, without a
build, and its rows compared with the expected ones.

Each test is an entry of the mart's ``unit_tests`` in sql/marts/_marts.yml::

    unit_tests:
      - name: one_failed_judgement_of_two
        given:                       # rows per table (or seed, or mart it reads); only the columns that matter
          graphs: [{graph_id: g1, system: rag, dataset: locomo}]
          edges: [...]
        expect:                      # its rows, compared on the columns named here, in any order
          - {system: rag, dataset: locomo, failure_rate: 0.5}

The runner makes an in-memory database with every canonical table (pipelines/schema.py): a table
``given`` holds its rows, the columns it leaves out null, the others are empty. Then the seeds (a seed
``given`` names holds its rows instead of the CSV's) and the macros of sql/, then each mart the mart
reads (its given rows, else computed by its own SQL from those tables), and runs the mart's SQL.
Numbers compare to 1e-9 relative; ``expect: []`` says no rows.

Imports: pipelines.analytics.catalog, pipelines.schema and pipelines.analytics.db (for the seeds,
loaded as every connection loads them), DuckDB and pyarrow; never a warehouse.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from pipelines import schema
from pipelines.analytics import catalog, db


class UnitTestError(ValueError):
    """A unit test that cannot run as written (an unknown table or column)."""


@dataclass(frozen=True)
class UnitResult:
    mart: str
    name: str
    passed: bool
    message: str  # what differs ("" when it passed)
    rows: list[dict[str, Any]]  # the mart's rows, on the expected columns


def input_table(name: str, table_schema: pa.Schema, rows: list[dict[str, Any]]) -> pa.Table:
    """``rows`` in ``table_schema``, the columns they leave out null (a unit test names only the
    columns that matter). A column the schema lacks is an error."""
    for row in rows:
        unknown = set(row) - set(table_schema.names)
        if unknown:
            raise UnitTestError(f"{name} has no column(s) {sorted(unknown)}")
    nullable = pa.schema([field.with_nullable(True) for field in table_schema])
    return pa.Table.from_pylist(rows, schema=nullable)


def _create(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> None:
    con.register("unit_rows", table)
    con.execute(f'create table "{name}" as select * from unit_rows')  # the project's own table names
    con.unregister("unit_rows")


def connection(mart: str, given: dict[str, list[dict[str, Any]]]) -> duckdb.DuckDBPyConnection:
    """An in-memory database holding ``given``'s rows as the tables and marts mart ``mart`` reads, with the
    seeds and macros; close it after use."""
    marts = catalog.marts()
    seeds = sorted((catalog.SQL_DIR / "seeds").glob("*.csv"))
    unknown = set(given) - set(schema.TABLES) - set(marts) - {seed.stem for seed in seeds}
    if unknown:
        raise UnitTestError(f"{mart}: given {sorted(unknown)}, which is no table, seed or mart")
    con = duckdb.connect()
    try:
        for name, table_schema in schema.TABLES.items():
            _create(con, name, input_table(name, table_schema, given.get(name, [])))
        for seed in seeds:
            seed_table = db.seed_table(seed)  # the seed's declared column types, as a connection has
            if seed.stem in given:  # a case that needs rows the seed does not hold (dbt's given seed)
                seed_table = input_table(seed.stem, seed_table.schema, given[seed.stem])
            _create(con, seed.stem, seed_table)
        for path in sorted((catalog.SQL_DIR / "macros").glob("*.sql")):
            con.execute(path.read_text())
        for upstream in catalog.marts_upstream(mart):
            if upstream in given:
                computed = con.sql(marts[upstream].sql).to_arrow_table()
                _create(con, upstream, input_table(upstream, computed.schema, given[upstream]))
            else:
                con.execute(f'create table "{upstream}" as {marts[upstream].sql.strip().rstrip(";")}')
    except BaseException:
        con.close()
        raise
    return con


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, float) or isinstance(got, float):
        if got is None or want is None or isinstance(got, bool) or isinstance(want, bool):
            return got is want
        return math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=1e-12)
    return bool(got == want)


def _key(row: dict[str, Any]) -> str:
    return repr(sorted((k, round(v, 9) if isinstance(v, float) else v) for k, v in row.items()))


def compare(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> str:
    """What differs between the mart's rows and the expected ones, in any order ("" when nothing)."""
    if len(got) != len(expected):
        return f"{len(got)} rows, expected {len(expected)}: {got}"
    left = sorted(got, key=_key)
    for want in sorted(expected, key=_key):
        match = next((row for row in left if all(_same(row.get(k), v) for k, v in want.items())), None)
        if match is None:
            return f"no row like {want}; rows: {got}"
        left.remove(match)
    return ""


def run(mart: str, test: dict[str, Any]) -> UnitResult:
    """One unit test of mart ``mart``: its SQL over the test's ``given`` rows, compared with ``expect``."""
    expected = test["expect"] or []
    con = connection(mart, test["given"] or {})
    try:
        table = con.sql(catalog.marts()[mart].sql).to_arrow_table()
    finally:
        con.close()
    columns = sorted({column for row in expected for column in row})
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise UnitTestError(f"{mart}: {test['name']}: the mart has no column(s) {missing}")
    rows = table.select(columns).to_pylist() if columns else [{} for _ in range(table.num_rows)]
    message = compare(rows, expected)
    return UnitResult(mart, test["name"], not message, message, rows)


def run_all(mart: str) -> list[UnitResult]:
    """Every unit test of mart ``mart``, in the order declared."""
    return [run(mart, test) for test in catalog.marts()[mart].unit_tests]
