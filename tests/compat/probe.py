"""Open ``tracehouse.duckdb`` read-only with whichever ``duckdb`` this Python has, as plain DuckDB
would (from the current folder: the views' file paths are relative to the warehouse folder), and
print what it finds as JSON: the DuckDB version, every table and view with its row count and its
columns' counts of values, the macros the file holds, and the rows of each probe query read from
standard input.

Run by tests/test_duckdb_compat.py with DuckDB 1.5 (its own environment) and with the project's
DuckDB, so that both sides read the same file the same way. Needs nothing but ``duckdb``.
"""

from __future__ import annotations

import json
import re
import sys

import duckdb


def main() -> None:
    probes = json.load(sys.stdin)  # {name: [sql, params]}
    con = duckdb.connect("tracehouse.duckdb", read_only=True)
    names = [name for (name,) in con.execute(
        "select view_name from duckdb_views() where not internal "
        "union all select table_name from duckdb_tables() where not internal order by 1").fetchall()]
    counts = {}
    for name in names:
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            raise SystemExit(f"unexpected relation name {name!r} in tracehouse.duckdb")
        # the rows, then the non-null values of each column: every column is computed, none pruned
        counts[name] = list(con.execute(f'select count(*), count(columns(*)) from "{name}"').fetchone())
    macros = sorted({name for (name,) in con.execute(
        "select function_name from duckdb_functions() where not internal "
        "and function_type in ('macro', 'table_macro')").fetchall()})
    results = {name: [list(row) for row in con.execute(sql, params).fetchall()]
               for name, (sql, params) in probes.items()}
    json.dump({"duckdb": duckdb.__version__, "relations": counts, "macros": macros, "probes": results},
              sys.stdout, default=str)


if __name__ == "__main__":
    main()
