"""The project's SQL, declared: every mart, check, seed and macro with its YAML declaration, and
what each mart, chart or page reads, derived from its SQL (:func:`sql_reads`).

Each folder of sql/ holds its SQL files and one declaration file beside them, in dbt's vocabulary::

    sql/views/_views.yml     the tables' and input_files' descriptions; each table's column descriptions,
                             primary key and relationships
    sql/marts/_marts.yml     description, grain (tested unique), columns (description, tests),
                             config: compute whole | per_partition with combine_order, unit_tests
    sql/checks/_checks.yml   the hand-written checks: asset, severity, description
    sql/checks/generic/      dbt-style generic tests (unique, relationships, not_null,
                             accepted_values) as Jinja SQL templates; the tables' key and
                             relationship checks are generated from sql/views/_views.yml
    sql/seeds/_seeds.yml     description and columns of each seed table
    sql/macros/_macros.yml   description and signature of each macro

Comments in SQL explain; they never configure. A declaration without its SQL file, or a SQL file
without its declaration, is an error (:class:`CatalogError`), as is a key the loader does not know.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import json
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import jinja2
import pyarrow as pa
import yaml

from pipelines import schema

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"
SEVERITIES = ("error", "warn")


class CatalogError(ValueError):
    """A declaration that does not match the SQL beside it."""


def read_yaml(path: Path) -> Any:
    """A YAML file, read with libyaml's safe loader when PyYAML has it: every process that loads
    the definitions reads the declaration files, and the pure-Python loader is many times slower."""
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506


def _load(path: Path, section: str, keys: set[str]) -> list[dict[str, Any]]:
    try:
        doc = read_yaml(path) or {}
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path}: {exc}") from None
    entries = doc.get(section)
    if not isinstance(entries, list):
        raise CatalogError(f"{path}: needs a list '{section}'")
    names = [e.get("name") for e in entries]
    if len(set(names)) != len(names):
        raise CatalogError(f"{path}: a name is declared twice")
    for entry in entries:
        unknown = set(entry) - keys
        if unknown:
            raise CatalogError(f"{path}: {entry.get('name')}: unknown key(s) {sorted(unknown)}")
    return entries


def _match(folder: Path, suffix: str, declared: list[dict[str, Any]], what: str) -> None:
    files = {p.name.removesuffix(suffix) for p in folder.glob(f"*{suffix}")}
    names = {e["name"] for e in declared}
    if files != names:
        raise CatalogError(
            f"{folder}: every {what} needs its file and its declaration; files without one: "
            f"{sorted(files - names)}, declarations without a file: {sorted(names - files)}"
        )


# -- tests (dbt's generic tests) ----------------------------------------------------------------------


_TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(SQL_DIR / "checks" / "generic"),
    undefined=jinja2.StrictUndefined,
    autoescape=False,  # SQL, made only from identifiers and values of our own declarations
    keep_trailing_newline=True,
)
_TEMPLATES.filters["literal"] = lambda value: "'" + str(value).replace("'", "''") + "'"


@dataclass(frozen=True)
class Test:
    """One data test: a SELECT of the rows that violate it (none = passes)."""

    name: str  # unique on its asset
    asset: str  # the table or mart it is attached to
    severity: str
    description: str
    sql: str
    defined_in: str  # the file that declares it, relative to the repository


def render_test(kind: str, **params: Any) -> str:
    """The SQL of a generic test (sql/checks/generic/<kind>.sql) for ``params``."""
    return _TEMPLATES.get_template(f"{kind}.sql").render(**params).strip()


def table_tests() -> list[Test]:
    """The tables' key and relationship checks, generated from sql/views/_views.yml (through
    pipelines.schema), then the
    hand-written checks of sql/checks/_checks.yml."""
    tests = [
        Test("duplicate_keys", table, "error", f"rows of {table} sharing one key ({', '.join(key)})",
             render_test("unique", model=table, columns=list(key)), "sql/views/_views.yml")
        for table, key in schema.PRIMARY_KEYS.items()
    ]
    for rel in schema.RELATIONSHIPS:
        unlisted = f" (or {', '.join(rel.unlisted)})" if rel.unlisted else ""
        tests.append(Test(
            rel.name, rel.table, "error",
            f"rows of {rel.table} whose {', '.join(rel.columns)} name no row of {rel.to}; NULL{unlisted} names none",
            render_test("relationships", model=rel.table, key=list(schema.PRIMARY_KEYS[rel.table]),
                        columns=list(rel.columns), to=rel.to, to_columns=list(rel.to_columns),
                        unlisted=list(rel.unlisted)),
            "sql/views/_views.yml",
        ))
    folder = SQL_DIR / "checks"
    declared = _load(folder / "_checks.yml", "checks", {"name", "asset", "severity", "description"})
    _match(folder, ".sql", declared, "check")
    for entry in declared:
        if entry.get("asset") not in schema.TABLES or entry.get("severity") not in SEVERITIES:
            raise CatalogError(f"_checks.yml: {entry['name']}: asset must be a table, severity one of {SEVERITIES}")
        path = folder / f"{entry['name']}.sql"
        tests.append(Test(entry["name"], entry["asset"], entry["severity"], entry["description"],
                          path.read_text().strip().rstrip(";"), f"sql/checks/{path.name}"))
    names = [(t.asset, t.name) for t in tests]
    if len(set(names)) != len(names):
        raise CatalogError(f"two checks share a name on one table: {sorted(n for n in names if names.count(n) > 1)}")
    return tests


# -- marts ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mart:
    name: str
    description: str
    grain: tuple[str, ...]
    columns: dict[str, str]  # name -> description
    column_tests: dict[str, list[Any]]
    compute: str  # "whole" | "per_partition"
    combine_order: tuple[str, ...]
    unit_tests: tuple[dict[str, Any], ...] = ()  # dbt's unit_tests: inline inputs and expected rows

    @property
    def path(self) -> Path:
        return SQL_DIR / "marts" / f"{self.name}.sql"

    @property
    def sql(self) -> str:
        return self.path.read_text()

    @property
    def reads(self) -> tuple[str, ...]:
        """The tables and other marts its SQL reads, directly or through macros (:func:`sql_reads`)."""
        return tuple(sorted(set(sql_reads(self.sql)) - {self.name}))

    def tests(self) -> list[Test]:
        """Its grain is unique; its columns' declared tests (not_null, accepted_values)."""
        where = "sql/marts/_marts.yml"
        tests = [Test("unique_grain", self.name, "error", f"rows of {self.name} sharing one grain "
                      f"({', '.join(self.grain)})", render_test("unique", model=self.name, columns=list(self.grain)),
                      where)]
        for column, declared in self.column_tests.items():
            for test in declared:
                kind, params = (test, {}) if isinstance(test, str) else next(iter(test.items()))
                if kind not in ("not_null", "accepted_values"):
                    raise CatalogError(f"{where}: {self.name}.{column}: unknown test {kind!r}")
                tests.append(Test(f"{kind}_{column}", self.name, "error", f"{kind} on {self.name}.{column}",
                                  render_test(kind, model=self.name, column=column, **params), where))
        return tests


@functools.cache
def marts() -> dict[str, Mart]:
    """Every mart of sql/marts, in name order."""
    folder = SQL_DIR / "marts"
    declared = _load(folder / "_marts.yml", "marts", {"name", "description", "grain", "config", "columns",
                                                      "unit_tests"})
    _match(folder, ".sql", declared, "mart")
    found = {}
    for entry in sorted(declared, key=lambda e: e["name"]):
        config = entry.get("config") or {}
        if set(config) - {"compute", "combine_order"} or config.get("compute", "whole") not in ("whole",
                                                                                                  "per_partition"):
            raise CatalogError(f"_marts.yml: {entry['name']}: config takes compute (whole | per_partition) "
                               "and combine_order")
        if (config.get("compute") == "per_partition") != bool(config.get("combine_order")):
            raise CatalogError(f"_marts.yml: {entry['name']}: compute per_partition needs a combine_order")
        if config.get("compute") == "per_partition" and "graph_id" not in (entry.get("grain") or []):
            raise CatalogError(f"_marts.yml: {entry['name']}: compute per_partition needs graph_id in the grain "
                               "(fragments computed together are split by graph)")
        unit_tests = entry.get("unit_tests") or []
        if not isinstance(unit_tests, list) or not all(isinstance(t, dict) and set(t) == {"name", "given", "expect"}
                                                        for t in unit_tests):
            raise CatalogError(f"_marts.yml: {entry['name']}: each unit test has exactly a name, given "
                               "(rows per table) and expect (rows)")
        columns = entry.get("columns") or []
        if not entry.get("description") or not entry.get("grain") or not all(c.get("description") for c in columns):
            raise CatalogError(f"_marts.yml: {entry['name']}: needs a description, a grain and described columns")
        found[entry["name"]] = Mart(
            name=entry["name"],
            description=entry["description"],
            grain=tuple(entry["grain"]),
            columns={c["name"]: c["description"] for c in columns},
            column_tests={c["name"]: list(c["tests"]) for c in columns if c.get("tests")},
            compute=config.get("compute", "whole"),
            combine_order=tuple(config.get("combine_order") or ()),
            unit_tests=tuple(unit_tests),
        )
    return found


# -- views, seeds and macros ---------------------------------------------------------------------------


@functools.cache
def views() -> dict[str, dict[str, Any]]:
    """Every view of sql/views (the tables and input_files): its description, and its columns'
    descriptions (``columns``: name -> description, in the declared order; empty when undeclared)."""
    path = SQL_DIR / "views" / "_views.yml"
    declared = _load(path, "views", {"name", "description", "columns", "primary_key", "relationships"})
    _match(path.parent, ".sql", declared, "view")
    return {e["name"]: {**e, "columns": view_columns(path, e)} for e in declared}


def view_columns(path: Path, entry: dict[str, Any]) -> dict[str, str]:
    """A view's ``columns`` (a list of ``{name, description}``, as dbt writes them) as a mapping."""
    columns: dict[str, str] = {}
    for column in entry.get("columns") or []:
        if not isinstance(column, dict) or set(column) != {"name", "description"}:
            raise CatalogError(f"{path}: {entry['name']}: each column needs a name and a description, and "
                               f"nothing else: {column!r}")
        if not isinstance(column["description"], str) or not column["description"].strip():
            raise CatalogError(f"{path}: {entry['name']}.{column['name']}: the description is empty")
        if column["name"] in columns:
            raise CatalogError(f"{path}: {entry['name']}.{column['name']}: the column is described twice")
        columns[column["name"]] = column["description"]
    return columns


@functools.cache
def seeds() -> dict[str, dict[str, Any]]:
    """Every seed of sql/seeds: description, column descriptions and (``config: column_types``, as dbt's
    seeds declare them) the DuckDB types of its columns that are not text."""
    folder = SQL_DIR / "seeds"
    declared = _load(folder / "_seeds.yml", "seeds", {"name", "description", "columns", "config"})
    _match(folder, ".csv", declared, "seed")
    return {e["name"]: e for e in declared}


@functools.cache
def macros() -> dict[str, dict[str, Any]]:
    """Every macro of sql/macros: signature and description (what `tracehouse sql --help` lists)."""
    declared = _load(SQL_DIR / "macros" / "_macros.yml", "macros", {"name", "signature", "description", "returns"})
    text = "\n".join(p.read_text() for p in sorted((SQL_DIR / "macros").glob("*.sql")))
    for entry in declared:
        if f"macro {entry['name']}(" not in text:
            raise CatalogError(f"_macros.yml: {entry['name']} is defined in no file of sql/macros")
    return {e["name"]: e for e in declared}


# -- what a query reads, from its SQL ---------------------------------------------------------------------
# DuckDB's parser gives the tree: json_serialize_sql (documented with json_deserialize_sql, which
# reads the same tree back). A table is a BASE_TABLE node, a call a FUNCTION or TABLE_FUNCTION node;
# a call of one of sql/macros is followed into the macro's body, as DuckDB itself keeps it.


def _walk(node: Any, tables: set[str], functions: set[str]) -> None:
    if isinstance(node, dict):
        if node.get("type") == "BASE_TABLE":
            tables.add(node["table_name"])
        elif node.get("type") == "TABLE_FUNCTION":
            functions.add(node["function"]["function_name"])
        if node.get("class") == "FUNCTION" and "function_name" in node:
            functions.add(node["function_name"])
        for value in node.values():
            _walk(value, tables, functions)
    elif isinstance(node, list):
        for value in node:
            _walk(value, tables, functions)


_PARSER: duckdb.DuckDBPyConnection | None = None  # one in-memory database parses every query
_PARSER_LOCK = threading.Lock()


def parse_sql(sql: str) -> tuple[set[str], set[str]]:
    """The names a statement reads as tables, and the functions it calls (a CTE's name is a table too:
    the lineage keeps only names of tables and marts)."""
    global _PARSER
    with _PARSER_LOCK:
        if _PARSER is None:
            _PARSER = duckdb.connect()
        tree = json.loads(_PARSER.execute("select json_serialize_sql(?::varchar)", [sql]).fetchone()[0])
    if tree.get("error"):
        raise CatalogError(f"DuckDB cannot parse {sql[:80]!r}...: {tree.get('error_message')}")
    tables: set[str] = set()
    functions: set[str] = set()
    _walk(tree, tables, functions)
    return tables, functions


def duckdb_type(arrow_type: pa.DataType) -> str:
    """The DuckDB type of a column of pipelines/schema.py's."""
    if pa.types.is_list(arrow_type):
        return duckdb_type(arrow_type.value_type) + "[]"
    if pa.types.is_timestamp(arrow_type):
        return {"ms": "TIMESTAMP_MS", "us": "TIMESTAMP", "ns": "TIMESTAMP_NS", "s": "TIMESTAMP_S"}[arrow_type.unit]
    return {pa.string(): "VARCHAR", pa.large_string(): "VARCHAR", pa.int64(): "BIGINT", pa.int32(): "INTEGER",
            pa.bool_(): "BOOLEAN", pa.float64(): "DOUBLE"}[arrow_type]


@functools.cache
def _macro_reads(macro_sql: str, seeds: tuple[tuple[str, tuple[str, ...]], ...]
                 ) -> dict[str, tuple[set[str], set[str]]]:
    """Each macro of ``macro_sql``: the names its body reads and the functions it calls. The bodies are
    DuckDB's own, read back after creating the macros over empty tables of the canonical schemas and of
    the ``seeds`` (name, columns): a macro's body must find its tables. Names and columns are the
    project's own (pipelines/schema.py, sql/seeds), never data."""
    con = duckdb.connect()
    try:
        for name, table_schema in schema.TABLES.items():
            columns = ", ".join(f'"{f.name}" {duckdb_type(f.type)}' for f in table_schema)
            con.execute(f'create table "{name}" ({columns})')
        for name, header in seeds:
            con.execute(f'create table "{name}" ({", ".join(f'"{c}" VARCHAR' for c in header)})')
        con.execute(macro_sql)
        rows = con.execute("select function_name, function_type, macro_definition from duckdb_functions() "
                           "where function_type in ('macro', 'table_macro') and not internal").fetchall()
    finally:
        con.close()
    return {name: parse_sql(body if kind == "table_macro" else f"select {body}") for name, kind, body in rows}


def _seed_headers() -> tuple[tuple[str, tuple[str, ...]], ...]:
    headers = []
    for path in sorted((SQL_DIR / "seeds").glob("*.csv")):
        with path.open(newline="") as f:
            headers.append((path.stem, tuple(next(csv.reader(f)))))
    return tuple(headers)


def sql_reads(sql: str) -> tuple[str, ...]:
    """The canonical tables (pipelines.schema.TABLES) and marts ``sql`` reads, directly or through the
    macros of sql/macros it calls, in name order. Kept in the user's cache (:func:`lineage_cache`) under
    a digest of everything the answer depends on, so a process that loads the definitions parses only
    SQL it has not seen."""
    macro_sql = "\n".join(p.read_text() for p in sorted((SQL_DIR / "macros").glob("*.sql")))
    seeds, known = _seed_headers(), frozenset(schema.TABLES) | mart_files()
    key = hashlib.sha256(json.dumps([sql, macro_sql, seeds, sorted(known), duckdb.__version__, _CODE]).encode()
                         ).hexdigest()
    cache = _cached_reads()
    if key not in cache:
        cache[key] = list(_sql_reads(sql, macro_sql, seeds, known))
        _save_reads(cache)
    return tuple(cache[key])


_CODE = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()  # a change of the derivation derives anew


def lineage_cache() -> Path:
    """Where derived lineage is kept between processes: the user's cache folder ($XDG_CACHE_HOME, else ~/.cache)."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "tracehouse" / "sql-reads.json"


@functools.cache
def _cached_reads() -> dict[str, list[str]]:
    try:
        found = json.loads(lineage_cache().read_text())
    except (OSError, ValueError):  # none yet, or unreadable: derived again
        return {}
    return found if isinstance(found, dict) else {}


def _save_reads(cache: dict[str, list[str]]) -> None:
    """Best effort: a cache that cannot be written costs a parse next time, nothing else."""
    path = lineage_cache()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(cache))
        os.replace(temporary, path)
    except OSError:
        pass


@functools.cache
def _sql_reads(sql: str, macro_sql: str, seeds: tuple[tuple[str, tuple[str, ...]], ...], known: frozenset[str]
               ) -> tuple[str, ...]:
    macros = _macro_reads(macro_sql, seeds)
    tables, functions = parse_sql(sql)
    found = tables & known
    todo, seen = sorted(functions & set(macros)), set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            found |= macros[name][0] & known
            todo.extend(macros[name][1] & set(macros))
    return tuple(sorted(found))


def mart_files() -> frozenset[str]:
    """The marts' names, from their SQL files (a query's lineage names marts before their declarations load)."""
    return frozenset(p.stem for p in (SQL_DIR / "marts").glob("*.sql"))


def files_read(paths: Iterable[Path]) -> tuple[str, ...]:
    """The tables and marts the SQL files ``paths`` read together (the failure views', the page's)."""
    return tuple(sorted({name for path in paths for name in sql_reads(path.read_text())}))


def tables_read(name: str) -> tuple[str, ...]:
    """The canonical tables (pipelines.schema.TABLES) mart ``name`` reads, directly or through macros."""
    return tuple(t for t in marts()[name].reads if t in schema.TABLES)


def marts_read(name: str) -> tuple[str, ...]:
    """The marts mart ``name`` reads, directly or through macros (attribution_op_distance reads
    operation_links): each is computed first, and its rows are the same whenever its SQL and the
    tables are (pipelines.analytics.marts.mart_code)."""
    return tuple(sorted(m for m in marts()[name].reads if m in marts()))


@functools.cache
def mart_order() -> tuple[str, ...]:
    """Every mart, each after the marts it reads. A cycle is an error, and so is a per-partition mart
    that reads a mart (its fragments see one partition's tables, never a whole mart)."""
    order: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in order:
            return
        if name in path:
            raise CatalogError(f"sql/marts: {' -> '.join([*path, name])}: marts that read each other in a cycle")
        for upstream in marts_read(name):
            visit(upstream, (*path, name))
        order.append(name)

    for name, mart in marts().items():
        if mart.compute == "per_partition" and marts_read(name):
            raise CatalogError(f"sql/marts/{name}.sql: a per_partition mart reads marts "
                               f"({', '.join(marts_read(name))}); it can read the tables only")
        visit(name, ())
    return tuple(order)


def marts_upstream(name: str) -> tuple[str, ...]:
    """Every mart ``name`` reads, directly or through the marts it reads, in computing order."""
    wanted: set[str] = set()
    todo = list(marts_read(name))
    while todo:
        upstream = todo.pop()
        if upstream not in wanted:
            wanted.add(upstream)
            todo.extend(marts_read(upstream))
    return tuple(m for m in mart_order() if m in wanted)
