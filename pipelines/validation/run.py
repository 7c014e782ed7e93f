"""One validation of a whole build: every check over every partition of its snapshot."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from pipelines import schema
from pipelines.state import Snapshot
from pipelines.storage import Warehouse
from pipelines.validation import expectations, sources, sql_checks
from pipelines.validation.checks import ERROR, WARN, CheckOutcome, CheckSpec

INGEST_ERROR_ROWS = 200


def all_specs() -> list[CheckSpec]:
    """Every check, in report order: per table, SQL checks, then suites, then the sources check."""
    specs = [*sql_checks.load_sql_checks(), *expectations.expectation_specs(expectations.load_suites()), sources.SPEC]
    names = [(s.asset, s.name) for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"two checks share a name on one table: {sorted(n for n in names if names.count(n) > 1)}")
    order = {name: i for i, name in enumerate(schema.TABLES)}
    return sorted(specs, key=lambda s: (order[s.asset], s.origin != "sql", s.name))


@dataclass
class ValidationRun:
    """Everything one validation found, for the Dagster results and the report."""

    warehouse: str
    started_at: str
    partitions: list[str]
    outcomes: list[CheckOutcome]
    input_files: list[tuple[Any, ...]] = field(default_factory=list)  # (partition, outcome, files)
    ingest_errors: list[tuple[Any, ...]] = field(default_factory=list)
    ingest_error_columns: list[str] = field(default_factory=list)
    ingest_error_total: int = 0
    seconds: float = 0.0

    @property
    def failed(self) -> list[CheckOutcome]:
        return [o for o in self.outcomes if not o.passed]

    @property
    def blocking_failures(self) -> list[CheckOutcome]:
        return [o for o in self.failed if o.spec.severity == ERROR]

    @property
    def warnings(self) -> list[CheckOutcome]:
        return [o for o in self.failed if o.spec.severity == WARN]


def validate_warehouse(
    warehouse: Warehouse,
    snapshot: Snapshot,
    con: duckdb.DuckDBPyConnection,
    *,
    found_files: Mapping[str, Sequence[str]] | None = None,
    use_cache: bool = True,
) -> ValidationRun:
    """Run every check over ``snapshot``. ``con`` has the views of that snapshot (``db.connection``)."""
    started = time.monotonic()
    run = ValidationRun(
        warehouse=str(warehouse.root),
        started_at=time.strftime("%Y-%m-%d %H:%M:%S %z"),
        partitions=sorted(snapshot.partitions),
        outcomes=[],
    )
    specs = all_specs()
    by_key: dict[tuple[str, str], CheckOutcome] = {}
    for spec in specs:
        if spec.origin == "sql":
            by_key[(spec.asset, spec.name)] = sql_checks.run_sql_check(con, spec)
    try:
        for outcome in expectations.validate_suites(warehouse, snapshot, use_cache=use_cache):
            by_key[(outcome.spec.asset, outcome.spec.name)] = outcome
    except Exception as exc:  # noqa: BLE001 - a GX failure fails its checks, it must not hide the others
        for spec in specs:
            if spec.origin == "expectations":
                by_key[(spec.asset, spec.name)] = CheckOutcome(spec, failing=0, error=f"{type(exc).__name__}: {exc}")
    by_key[(sources.SPEC.asset, sources.SPEC.name)] = sources.check_sources(con, found_files)
    run.outcomes = [by_key[(s.asset, s.name)] for s in specs]

    run.input_files = con.execute(
        "select partition, outcome, count(*) as files from input_files group by all order by all"
    ).fetchall()
    run.ingest_error_total = con.execute("select count(*) from ingest_errors").fetchone()[0]
    result = con.execute(
        "select source, split, file, kind, reason, position, rejected from ingest_errors "
        f"order by source, split, file, position nulls first limit {INGEST_ERROR_ROWS}"
    )
    run.ingest_error_columns = [d[0] for d in result.description]
    run.ingest_errors = result.fetchall()
    run.seconds = time.monotonic() - started
    return run
