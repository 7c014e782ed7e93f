"""Cross-table integrity checks: one SELECT per file in sql/checks, returning the violating rows.

Each file starts with a header comment naming the check, the table (asset) it is attached to and
its severity::

    -- edges_with_unknown_endpoint: edge endpoints that are not a node of the edge's graph.
    -- asset: edges
    -- severity: error

The check's failing count is the number of rows the SELECT returns; its samples are the first rows.
A new check is one new file.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import duckdb

from pipelines import schema
from pipelines.db import REPO, sql_files
from pipelines.validation.checks import ERROR, SAMPLE_ROWS, SEVERITIES, CheckOutcome, CheckSpec

_TITLE = re.compile(r"^--\s*(?P<name>[a-z][a-z0-9_]*)\s*:\s*(?P<description>.+)$")
_FIELD = re.compile(r"^--\s*(?P<key>asset|severity)\s*:\s*(?P<value>\S+)\s*$")


class CheckFileError(ValueError):
    """A check file whose header does not say what it checks."""


def parse_check(path: Path) -> CheckSpec:
    """The spec of one check file, from its header comment."""
    lines = path.read_text().splitlines()
    title = _TITLE.match(lines[0]) if lines else None
    if not title or title["name"] != path.stem:
        raise CheckFileError(f"{path}: the first line must be '-- {path.stem}: <what it finds>'")
    fields: dict[str, str] = {}
    for line in lines[1:]:
        if not line.startswith("--"):
            break
        found = _FIELD.match(line)
        if found:
            fields[found["key"]] = found["value"]
    asset, severity = fields.get("asset"), fields.get("severity", ERROR)
    if asset not in schema.TABLES:
        raise CheckFileError(f"{path}: '-- asset:' must name one of {', '.join(schema.TABLES)}, got {asset!r}")
    if severity not in SEVERITIES:
        raise CheckFileError(f"{path}: '-- severity:' must be one of {', '.join(SEVERITIES)}, got {severity!r}")
    return CheckSpec(
        name=path.stem,
        asset=asset,
        severity=severity,
        description=title["description"].strip(),
        origin="sql",
        path=path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(path),
    )


def load_sql_checks() -> list[CheckSpec]:
    return [parse_check(path) for path in sql_files("checks")]


def check_sql(spec: CheckSpec) -> str:
    """The SELECT of a check, without a trailing semicolon (it is nested in other queries)."""
    return (REPO / spec.path).read_text().strip().rstrip(";")


def run_sql_check(con: duckdb.DuckDBPyConnection, spec: CheckSpec, samples: int = SAMPLE_ROWS) -> CheckOutcome:
    """Count the violating rows (streaming, so a huge result costs no memory), then fetch a few."""
    started = time.monotonic()
    sql = check_sql(spec)
    try:
        failing = con.execute(f"select count(*) from (\n{sql}\n) as violations").fetchone()[0]
        columns: list[str] = []
        rows: list[tuple] = []
        if failing:
            result = con.execute(f"select * from (\n{sql}\n) as violations order by all limit {int(samples)}")
            columns = [d[0] for d in result.description]
            rows = result.fetchall()
    except duckdb.Error as exc:
        return CheckOutcome(spec, failing=0, error=f"{type(exc).__name__}: {exc}",
                            seconds=time.monotonic() - started)
    return CheckOutcome(spec, failing=failing, columns=columns, samples=rows, seconds=time.monotonic() - started)
