"""One validation of a build: every check (``pipelines.validation.checks``) over every partition of its
snapshot, gathered into a :class:`ValidationRun` for the Dagster results, the build record and the
report (``pipelines.validation.report``).

The SQL checks run on the build's DuckDB connection. The Great Expectations suites run through
``pipelines.validation.gx_runner``, their results per partition kept in ``pipelines.validation.cache``; during
a build, GX runs in a worker process (``pipelines.validation.worker``) on the splits flattened so far,
and this waits for it and runs GX only on what is left. A table's suite passes when every partition
passes. ``pipelines/defs/validation.py`` wires this into Dagster as asset checks.

A mart's declared tests (its grain's uniqueness, its column tests) run here too, over the mart's
file (:func:`test_mart`), as checks of the mart's asset.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from pipelines.analytics import catalog, db
from pipelines.analytics.marts import MartOutput
from pipelines.storage.records import Snapshot
from pipelines.storage.warehouse import Warehouse
from pipelines.validation import worker as validation_worker
from pipelines.validation.cache import ResultCache, table_results
from pipelines.validation.checks import (
    SAMPLE_ROWS,
    SOURCES_CHECK,
    Check,
    ExpectationResult,
    Outcome,
    all_checks,
    check_sources,
    expectation_checks,
    load_suites,
    parameters,
    run_sql,
    severity_of,
)
from pipelines.validation.gx_runner import run_partition, runner_for, suite_rows

INGEST_ERROR_ROWS = 200

__all__ = ["Check", "Outcome", "ValidationRun", "run_sql", "runner_for", "test_mart", "validate", "validate_suites"]


def validate_suites(warehouse: Warehouse, snapshot: Snapshot, suites: dict[str, dict[str, Any]] | None = None,
                    *, use_cache: bool = True) -> list[Outcome]:
    """Every suite over every partition of ``snapshot`` (``validation_cache.table_results``); one
    outcome per (table, severity) check. ``use_cache=False`` runs GX on each partition alone, and
    keeps nothing."""
    validation_worker.wait_for_worker(warehouse)
    suites = load_suites() if suites is None else suites
    params = parameters(warehouse.root)  # the warehouse's team crosswalk among the labels
    outcomes: list[Outcome] = []
    used: set[str] = set()
    for table, doc in suites.items():
        started = time.monotonic()
        results = [ExpectationResult(e["type"], dict(e["kwargs"]), severity_of(e), (e.get("meta") or {}).get("notes"))
                   for e in doc["expectations"]]
        keys = sorted(snapshot.partitions)
        files = [(file, key) for key in keys for file in snapshot.partitions[key].files(table)]
        if use_cache:
            per_partition = table_results(warehouse, table, doc, files, params, lambda s=suites: runner_for(s), used)
        else:
            per_partition = [run_partition(lambda s=suites: runner_for(s), table,
                                           suite_rows(warehouse.path(rel), table, doc), key, params)
                             for rel, key in files]
        for parts in per_partition:
            for total, part in zip(results, parts, strict=True):
                total.element_count += part["element_count"]
                total.unexpected_count += part["unexpected_count"]
                total.success = total.success and part["success"]
                total.samples.extend(part["samples"][: max(0, SAMPLE_ROWS - len(total.samples))])
                total.exceptions.extend(part["exceptions"])
        seconds = time.monotonic() - started
        for check in expectation_checks({table: doc}):
            mine = [r for r in results if r.severity == check.severity]
            outcomes.append(_suite_outcome(check, mine, seconds))
    if use_cache:
        ResultCache(warehouse).keep_only(used)
    return outcomes


def _suite_outcome(check: Check, results: list[ExpectationResult], seconds: float) -> Outcome:
    failed = [r for r in results if not r.success]
    samples: list[tuple[Any, ...]] = []
    for result in failed:
        samples += [(result.label, "", "", f"error: {message}") for message in result.exceptions]
        for row in result.samples:
            where = ", ".join(f"{k}={v}" for k, v in row.items() if k not in ("partition", "value"))
            samples.append((result.label, row["partition"], where, row["value"]))
    failing = sum(r.unexpected_count + (1 if r.exceptions and not r.unexpected_count else 0) for r in failed)
    return Outcome(check, failing=failing or (1 if failed else 0), columns=["expectation", "partition", "row", "value"],
                   samples=samples[:SAMPLE_ROWS], expectations=results, seconds=seconds)


@dataclass
class ValidationRun:
    """Everything one validation found, for the Dagster results, the build record and the report."""

    warehouse: str
    started_at: str
    partitions: list[str]
    outcomes: list[Outcome]
    input_files: list[tuple[Any, ...]] = field(default_factory=list)  # (partition, outcome, files)
    ingest_errors: list[tuple[Any, ...]] = field(default_factory=list)
    ingest_error_columns: list[str] = field(default_factory=list)
    ingest_error_total: int = 0
    seconds: float = 0.0

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.passed]

    @property
    def blocking_failures(self) -> list[Outcome]:
        return [o for o in self.failed if o.check.blocking]

    @property
    def warnings(self) -> list[Outcome]:
        return [o for o in self.failed if not o.check.blocking]

    def results(self) -> list[dict[str, Any]]:
        """One line per check, as the build record keeps them."""
        return [{"asset": o.check.asset, "name": o.check.name, "severity": o.check.severity, "passed": o.passed,
                 "failing": o.failing, "error": o.error, "description": o.check.description} for o in self.outcomes]


def validate(warehouse: Warehouse, snapshot: Snapshot, con: duckdb.DuckDBPyConnection,
             found_files: Mapping[str, Sequence[str]], *, use_cache: bool = True) -> ValidationRun:
    """Run every check over ``snapshot``; ``con`` has its views (``db.connection``)."""
    started = time.monotonic()
    run = ValidationRun(str(warehouse.root), time.strftime("%Y-%m-%d %H:%M:%S %z"), sorted(snapshot.partitions), [])
    checks = all_checks()
    by_key: dict[tuple[str, str], Outcome] = {}
    for check in checks:
        if check.kind == "sql":
            by_key[(check.asset, check.name)] = run_sql(con, check)
    try:
        for outcome in validate_suites(warehouse, snapshot, use_cache=use_cache):
            by_key[(outcome.check.asset, outcome.check.name)] = outcome
    except Exception as exc:  # noqa: BLE001 - a GX failure fails its checks, it must not hide the others
        for check in checks:
            if check.kind == "expectations":
                by_key[(check.asset, check.name)] = Outcome(check, failing=0, error=f"{type(exc).__name__}: {exc}")
    by_key[(SOURCES_CHECK.asset, SOURCES_CHECK.name)] = check_sources(con, found_files)
    run.outcomes = [by_key[(c.asset, c.name)] for c in checks]
    run.input_files = con.execute(
        "select partition, outcome, count(*) as files from input_files group by all order by all").fetchall()
    run.ingest_error_total = con.execute("select count(*) from ingest_errors").fetchone()[0]
    result = con.execute(
        "select source, split, file, kind, reason, position, rejected from ingest_errors "
        f"order by source, split, file, position nulls first limit {INGEST_ERROR_ROWS}")
    run.ingest_error_columns = [d[0] for d in result.description]
    run.ingest_errors = result.fetchall()
    run.seconds = time.monotonic() - started
    return run


# -- a mart's declared tests ------------------------------------------------------------------------------

_TESTS_DB: duckdb.DuckDBPyConnection | None = None  # the marts' tests run on cursors of one database
_TESTS_LOCK = threading.Lock()


def _tests_cursor() -> duckdb.DuckDBPyConnection:
    """A connection of its own (its own temp views and settings) to one in-memory database: opening a
    new database for each mart's tests would be a large part of a small mart's step."""
    global _TESTS_DB
    with _TESTS_LOCK:
        if _TESTS_DB is None:
            _TESTS_DB = duckdb.connect()
        return _TESTS_DB.cursor()


def test_mart(warehouse: Warehouse, out: MartOutput) -> list[Outcome]:
    """The mart's declared tests (unique grain, column tests) over its file."""
    con = _tests_cursor()
    try:
        con.execute("set file_search_path = ?", [str(warehouse.root)])
        files = db.path_list([warehouse.rel(out.path)])
        con.execute(f'create temp view "{out.name}" as select * from read_parquet({files})')
        return [run_sql(con, Check.of(test)) for test in catalog.marts()[out.name].tests()]
    finally:
        con.close()
