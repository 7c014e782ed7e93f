"""The one accounting check that needs Python: the files the sources hold now against the manifests.

sql/checks/input_files_unaccounted.sql proves that every file of the published manifests ended in
graphs or in ingest_errors. This check closes the loop with the sources themselves: a file found
there that no manifest lists (a partition whose ingest failed, or a file added since the build) or
a manifest file that is gone. It warns: sources may change after a build without the tables being
wrong.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import duckdb

from pipelines.validation.checks import SAMPLE_ROWS, WARN, CheckOutcome, CheckSpec

SPEC = CheckSpec(
    name="input_files_match_sources",
    asset="ingest_errors",
    severity=WARN,
    description="the files found in the sources now are exactly the files of the published manifests",
    origin="python",
    path="pipelines/validation/sources.py",
)


def check_sources(
    con: duckdb.DuckDBPyConnection, found: Mapping[str, Sequence[str]] | None
) -> CheckOutcome:
    """``found`` maps partition key -> relative paths discovered in the sources (None: nothing to compare)."""
    started = time.monotonic()
    if found is None:
        return CheckOutcome(SPEC, failing=0, seconds=time.monotonic() - started)
    manifest = set(con.execute("select partition, file from input_files").fetchall())
    now = {(key, rel) for key, files in found.items() for rel in files}
    rows = sorted(
        [(key, rel, "found in the sources but in no published manifest") for key, rel in now - manifest]
        + [(key, rel, "in a published manifest but gone from the sources") for key, rel in manifest - now]
    )
    return CheckOutcome(
        SPEC,
        failing=len(rows),
        columns=["partition", "file", "problem"],
        samples=rows[:SAMPLE_ROWS],
        seconds=time.monotonic() - started,
    )
