"""The checks of a build's tables, and what a check found.

The rules live beside what they check:

* ``sql/checks``: the hand-written SQL checks (declared in ``_checks.yml``) and the tables' key and
  relationship checks, generated from ``pipelines/schema.py`` by dbt-style generic tests
  (``pipelines.analytics.catalog``). A check is a SELECT of the violating rows; failing = how many it returns.
* ``expectations/<table>.json``: Great Expectations 1.x suites of row-by-row expectations, one
  check per table and severity (``pipelines.validation.gx_runner`` runs them).
* ``input_files_match_sources`` (here): the files the sources hold now against the build's manifests.

A check has a severity: ``error`` checks are structural and block the build's commit when they fail;
``warn`` checks are reported only. Dagster sees them as one asset check per table (``checks``:
:func:`asset_checks`), each result listing its checks: each asset check result is three events of
the run's log, so a build records one per table, not one per check.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from pipelines import schema
from pipelines.analytics import catalog, crosswalk
from pipelines.text import markdown_table

ERROR = "error"
WARN = "warn"
SAMPLE_ROWS = 10
REPO = Path(__file__).resolve().parents[2]
EXPECTATIONS_DIR = REPO / "expectations"
EXPECTATION_CHECKS = {ERROR: "expectations_critical", WARN: "expectations_warning"}
ASSET_CHECK = "checks"  # the one Dagster asset check of a table, reporting all its checks
GX_SEVERITIES = {"critical": ERROR, "warning": WARN}
ROW_BY_ROW = "expect_column_values_to_"

# Kinds of ingest_errors rows the readers and the ingest loop write (sql/seeds/ingest_error_kinds.csv).
# "reader_failure" (reader_bug = yes) is left out on purpose: it means a reader raised something it should have named.
INGEST_ERROR_KINDS = schema.EXPECTED_INGEST_ERROR_KINDS
# The key columns shown with a failing value, so a sample row can be found again.
SAMPLE_KEYS: dict[str, tuple[str, ...]] = {**schema.PRIMARY_KEYS, "ingest_errors": ("source", "file")}


@dataclass(frozen=True)
class Check:
    """One check of one table: a SQL test, a table's expectations of one severity, or Python."""

    name: str  # unique on its table
    asset: str
    severity: str
    description: str
    kind: str  # "sql" | "expectations" | "python"
    defined_in: str  # the file that defines it, relative to the repository
    sql: str | None = None

    @property
    def blocking(self) -> bool:
        return self.severity == ERROR

    @property
    def asset_check(self) -> str:
        """The name of the Dagster asset check of its table that reports it (one per table)."""
        return ASSET_CHECK

    @classmethod
    def of(cls, test: catalog.Test) -> Check:
        """A SQL test of the catalog (generic or hand-written) as a check."""
        return cls(test.name, test.asset, test.severity, test.description, "sql", test.defined_in, test.sql)


@dataclass
class ExpectationResult:
    """One expectation of a suite over every partition: counts summed, passed when every partition's
    batch passed (as GX decided)."""

    type: str
    kwargs: dict[str, Any]
    severity: str
    notes: str | None
    element_count: int = 0
    unexpected_count: int = 0
    success: bool = True
    samples: list[dict[str, Any]] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)

    @property
    def column(self) -> str | None:
        return self.kwargs.get("column")

    @property
    def label(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items() if k not in ("column", "batch_id"))
        return f"{self.type}({self.column}{', ' + args if args else ''})"


@dataclass
class Outcome:
    """What one check found: failing count, sample rows, and any error running it (counts as failed)."""

    check: Check
    failing: int
    columns: list[str] = field(default_factory=list)
    samples: list[tuple[Any, ...]] = field(default_factory=list)
    expectations: list[ExpectationResult] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.failing == 0 and self.error is None

    def samples_markdown(self) -> str:
        """The sample rows as a markdown table, every cell escaped (trace content is untrusted)."""
        if self.error:
            return f"check could not run: {markdown_table(['error'], [[self.error]], 500)}"
        if not self.samples:
            return "_no failing rows_"
        more = self.failing - len(self.samples)
        return markdown_table(self.columns, self.samples, 120) + (f"\n\n_and {more} more_" if more > 0 else "")


SOURCES_CHECK = Check(
    "input_files_match_sources", "ingest_errors", WARN,
    "the files found in the sources now are exactly the files of the build's manifests",
    "python", "pipelines/validation/checks.py",
)


class SuiteError(ValueError):
    """A suite file the validation cannot evaluate partition by partition."""


def parameters(warehouse_root: Path | None = None) -> dict[str, list[str]]:
    """Values for the suites' ``{"$PARAMETER": ...}`` placeholders: the canonical sets (seeds); with
    ``warehouse_root``, the labels its team crosswalk maps are among ``taxonomy_labels``
    (pipelines.analytics.crosswalk). The values are part of the validation cache's key: a changed set
    validates again."""
    return {
        "known_systems": list(schema.KNOWN_SYSTEMS),
        "known_datasets": sorted(schema.KNOWN_DATASETS),
        "error_types": list(schema.ERROR_TYPES),
        "taxonomies": list(schema.TAXONOMIES),
        "taxonomy_labels": list(schema.TAXONOMY_LABELS) if warehouse_root is None else crosswalk.labels(warehouse_root),
        "ingest_error_kinds": list(INGEST_ERROR_KINDS),
        "span_statuses": list(schema.SPAN_STATUSES),
        "annotator_kinds": list(schema.ANNOTATOR_KINDS),
    }


def load_suites(folder: Path = EXPECTATIONS_DIR) -> dict[str, dict[str, Any]]:
    """Every suite, keyed by table. Only row-by-row expectations: a table passes when each partition
    passes only for those (uniqueness, counts and references are SQL checks)."""
    suites: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.json")):
        doc = json.loads(path.read_text())
        table = path.stem
        if table not in schema.TABLES or doc.get("name") != table:
            raise SuiteError(f"{path}: a suite is named after its table (one of {', '.join(schema.TABLES)})")
        columns = {f.name for f in schema.TABLES[table]}
        for i, exp in enumerate(doc.get("expectations", [])):
            where = f"{path.name} expectation {i}"
            if not str(exp.get("type", "")).startswith(ROW_BY_ROW):
                raise SuiteError(f"{where}: only {ROW_BY_ROW}* expectations hold partition by partition; "
                                 "use a SQL check")
            if exp.get("kwargs", {}).get("column") not in columns:
                raise SuiteError(f"{where}: column {exp.get('kwargs', {}).get('column')!r} is not a column of {table}")
            if exp.get("severity", "critical") not in GX_SEVERITIES:
                raise SuiteError(f"{where}: severity must be one of {', '.join(GX_SEVERITIES)}")
        suites[table] = doc
    return suites


def severity_of(exp: dict[str, Any]) -> str:
    return GX_SEVERITIES[exp.get("severity", "critical")]


def expectation_checks(suites: dict[str, dict[str, Any]]) -> list[Check]:
    """One check per (table, severity) present in its suite."""
    checks = []
    for table, doc in suites.items():
        for severity in (ERROR, WARN):
            n = sum(1 for e in doc["expectations"] if severity_of(e) == severity)
            if n:
                kind = "critical (blocking)" if severity == ERROR else "warning"
                checks.append(Check(EXPECTATION_CHECKS[severity], table, severity,
                                    f"{n} {kind} Great Expectations of expectations/{table}.json, over every row",
                                    "expectations", f"expectations/{table}.json"))
    return checks


def all_checks() -> list[Check]:
    """Every check, in report order: per table, SQL checks, then suites, then the sources check."""
    checks = [Check.of(test) for test in catalog.table_tests()]
    checks += expectation_checks(load_suites())
    checks.append(SOURCES_CHECK)
    order = {name: i for i, name in enumerate(schema.TABLES)}
    return sorted(checks, key=lambda c: (order[c.asset], c.kind != "sql", c.name))


def asset_checks(checks: Sequence[Check]) -> dict[tuple[str, str], list[Check]]:
    """The checks grouped as Dagster sees them: (table, asset check name) -> its checks, in report order."""
    groups: dict[tuple[str, str], list[Check]] = {}
    for check in checks:
        groups.setdefault((check.asset, check.asset_check), []).append(check)
    return groups


def run_sql(con: duckdb.DuckDBPyConnection, check: Check, samples: int = SAMPLE_ROWS) -> Outcome:
    """Count the violating rows (streaming: a huge result costs no memory), then fetch a few."""
    started = time.monotonic()
    sql = check.sql or ""
    try:
        failing = con.execute(f"select count(*) from (\n{sql}\n) as violations").fetchone()[0]
        columns: list[str] = []
        rows: list[tuple] = []
        if failing:
            result = con.execute(f"select * from (\n{sql}\n) as violations order by all limit {int(samples)}")
            columns = [d[0] for d in result.description]
            rows = result.fetchall()
    except duckdb.Error as exc:
        return Outcome(check, failing=0, error=f"{type(exc).__name__}: {exc}", seconds=time.monotonic() - started)
    return Outcome(check, failing=failing, columns=columns, samples=rows, seconds=time.monotonic() - started)


def check_sources(con: duckdb.DuckDBPyConnection, found: Mapping[str, Sequence[str]]) -> Outcome:
    """``found``: partition key -> the relative paths the sources hold now."""
    started = time.monotonic()
    manifest = set(con.execute("select partition, file from input_files").fetchall())
    now = {(key, rel) for key, files in found.items() for rel in files}
    rows = sorted(
        [(key, rel, "found in the sources but in no manifest of the build") for key, rel in now - manifest]
        + [(key, rel, "in a manifest of the build but gone from the sources") for key, rel in manifest - now]
    )
    return Outcome(SOURCES_CHECK, failing=len(rows), columns=["partition", "file", "problem"],
                   samples=rows[:SAMPLE_ROWS], seconds=time.monotonic() - started)
