"""Validation of the published tables: SQL integrity checks, Great Expectations suites, the report.

* ``sql/checks/*.sql``: cross-table integrity, one SELECT of the violating rows per file;
* ``expectations/<table>.json``: GX suites, run per Parquet batch and summed;
* ``sources.check_sources``: the sources' files against the manifests;
* ``report.write_report``: ``<warehouse>/reports/validation.html``.

The Dagster wiring (asset checks, blocking or warn) is pipelines/defs/validation.py; the policy is
docs/VALIDATION.md.
"""

from pipelines.validation.checks import ERROR, WARN, CheckOutcome, CheckSpec, ExpectationOutcome
from pipelines.validation.report import write_report
from pipelines.validation.run import ValidationRun, all_specs, validate_warehouse

__all__ = [
    "ERROR",
    "WARN",
    "CheckOutcome",
    "CheckSpec",
    "ExpectationOutcome",
    "ValidationRun",
    "all_specs",
    "validate_warehouse",
    "write_report",
]
