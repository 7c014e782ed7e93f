"""Great Expectations suites (expectations/<table>.json) run over the published Parquet, batch by batch.

A suite is plain GX 1.x JSON (``ExpectationSuite.to_json_dict()`` shape). At run time it is loaded
into an ephemeral GX context with a pandas data source, and ``ValidationDefinition.run`` is called
once per batch of at most ``BATCH_ROWS`` rows (a record batch of a large partition file, or several
small partition files packed together), reading only the columns the suite names plus the row key
(for samples). Per-batch results are summed, so memory follows one batch, never a table, and a
warehouse of many small partitions costs few GX runs. Summing is exact because suites hold
column-map expectations only
(``expect_column_values_to_*``: each row passes or fails on its own); anything that needs more than
one row at a time (uniqueness, counts, references) is a SQL check in sql/checks.

Each expectation's GX ``severity`` says how it is reported: ``critical`` ones make up the table's
blocking check ``expectations_critical``, ``warning`` ones its non-blocking ``expectations_warning``.
Value sets may be ``{"$PARAMETER": name}``, filled from :func:`parameters` (the canonical sets of
pipelines.schema and the readers), so the JSON never drifts from the code.

Results are cached under ``reports/.validation-cache`` per chunk of files, keyed by the files' paths,
sizes and mtimes and the suite, and per batch, keyed by the batch's content: an incremental build
reads only the files it rebuilt, and runs GX only on batches whose validated columns changed.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines import schema
from pipelines.db import REPO
from pipelines.readers.tracertraj import DOMAINS as TRACERTRAJ_DOMAINS
from pipelines.state import Snapshot
from pipelines.storage import Warehouse, write_atomic
from pipelines.validation.checks import ERROR, SAMPLE_ROWS, WARN, CheckOutcome, CheckSpec, ExpectationOutcome, cell

EXPECTATIONS_DIR = REPO / "expectations"
BATCH_ROWS = 65_536
CACHE_DIR = ".validation-cache"
CHECK_NAMES = {ERROR: "expectations_critical", WARN: "expectations_warning"}
_SEVERITIES = {"critical": ERROR, "warning": WARN}
_ROW_LOCAL = "expect_column_values_to_"

# The key columns shown with a failing value, so a sample row can be found again.
SAMPLE_KEYS: dict[str, tuple[str, ...]] = {**schema.PRIMARY_KEYS, "ingest_errors": ("source", "file")}

# Kinds of ingest_errors rows the readers and the ingest loop write (docs/VALIDATION.md lists them).
# "reader_failure" is left out on purpose: it means a reader raised something it should have named.
INGEST_ERROR_KINDS = (
    "unreadable",
    "empty_file",
    "no_records",
    "invalid_json",
    "invalid_parquet",
    "not_utf8",
    "wrong_top_level_type",
    "missing_key",
    "wrong_field_type",
    "duplicate_key",
    "dangling_reference",
    "duplicate_graph_id",
)

# Who&When's task benchmarks (pipelines.readers.trajectory.task_benchmark).
TASK_BENCHMARKS = ("gaia", "assistantbench")


def parameters() -> dict[str, list[str]]:
    """Values for the ``{"$PARAMETER": ...}`` placeholders of the suites."""
    return {
        "known_systems": list(schema.KNOWN_SYSTEMS),
        "known_datasets": sorted({*schema.MEMORY_DATASETS, *TASK_BENCHMARKS, *TRACERTRAJ_DOMAINS, schema.UNKNOWN}),
        "error_types": list(schema.ERROR_TYPES),
        "ingest_error_kinds": list(INGEST_ERROR_KINDS),
    }


class SuiteError(ValueError):
    """A suite file the validation cannot evaluate batch by batch."""


def load_suites(folder: Path = EXPECTATIONS_DIR) -> dict[str, dict[str, Any]]:
    """Every suite, keyed by table; refuses suites that could not be summed over batches."""
    suites: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.json")):
        doc = json.loads(path.read_text())
        table = path.stem
        if table not in schema.TABLES or doc.get("name") != table:
            raise SuiteError(f"{path}: a suite is named after its table (one of {', '.join(schema.TABLES)})")
        columns = {f.name for f in schema.TABLES[table]}
        for i, exp in enumerate(doc.get("expectations", [])):
            where = f"{path.name} expectation {i}"
            if not str(exp.get("type", "")).startswith(_ROW_LOCAL):
                raise SuiteError(f"{where}: only {_ROW_LOCAL}* expectations can run per batch; use sql/checks")
            if exp.get("kwargs", {}).get("column") not in columns:
                raise SuiteError(f"{where}: column {exp.get('kwargs', {}).get('column')!r} is not a column of {table}")
            if exp.get("severity", "critical") not in _SEVERITIES:
                raise SuiteError(f"{where}: severity must be one of {', '.join(_SEVERITIES)}")
        suites[table] = doc
    return suites


def severity_of(exp: dict[str, Any]) -> str:
    return _SEVERITIES[exp.get("severity", "critical")]


def expectation_specs(suites: dict[str, dict[str, Any]]) -> list[CheckSpec]:
    """One check per (table, severity) present in its suite."""
    specs = []
    for table, doc in suites.items():
        for severity in (ERROR, WARN):
            n = sum(1 for e in doc["expectations"] if severity_of(e) == severity)
            if n:
                kind = "critical (blocking)" if severity == ERROR else "warning"
                specs.append(CheckSpec(
                    name=CHECK_NAMES[severity],
                    asset=table,
                    severity=severity,
                    description=f"{n} {kind} Great Expectations of expectations/{table}.json, over every row",
                    origin="expectations",
                    path=f"expectations/{table}.json",
                ))
    return specs


class _Runner:
    """One ephemeral GX context with a validation definition per suite (GX imported lazily: ~2.5 s)."""

    def __init__(self, suites: dict[str, dict[str, Any]]) -> None:
        os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
        import great_expectations as gx
        from great_expectations.core.expectation_suite import ExpectationSuite
        from great_expectations.data_context.types.base import ProgressBarsConfig

        self.context = gx.get_context(mode="ephemeral")
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        source = self.context.data_sources.add_pandas("tracehouse")
        self.definitions = {}
        self.order: dict[str, dict[str, int]] = {}  # expectation id -> its index in the suite file
        for table, doc in suites.items():
            suite = self.context.suites.add(ExpectationSuite(**_suite_kwargs(doc)))
            self.order[table] = {e.id: i for i, e in enumerate(suite.expectations)}
            if len(self.order[table]) != len(doc["expectations"]):
                raise SuiteError(f"expectations/{table}.json: GX kept {len(self.order[table])} expectations")
            batch = source.add_dataframe_asset(table).add_batch_definition_whole_dataframe(f"{table}_batch")
            self.definitions[table] = self.context.validation_definitions.add(
                gx.ValidationDefinition(name=f"validate_{table}", data=batch, suite=suite)
            )

    def run(self, table: str, frame: Any, params: dict[str, Any]) -> list[Any]:
        """The results in the order of the suite file (GX groups them by column)."""
        result = self.definitions[table].run(
            batch_parameters={"dataframe": frame},
            expectation_parameters=params,
            result_format={"result_format": "SUMMARY", "partial_unexpected_count": SAMPLE_ROWS},
        )
        order = self.order[table]
        results = sorted(result.results, key=lambda r: order[r.expectation_config.id])
        if [order[r.expectation_config.id] for r in results] != list(range(len(order))):
            raise RuntimeError(f"GX returned {len(results)} results for the {len(order)} expectations of {table}")
        return results


_RUNNERS: dict[str, _Runner] = {}
_RUNNERS_LOCK = threading.Lock()


def runner_for(suites: dict[str, dict[str, Any]] | None = None) -> _Runner:
    """The GX context holding these suites (default: expectations/). Importing GX and setting the
    context up take ~3 s and ~0.25 s: a long-lived process keeps one, and may call this at start."""
    suites = load_suites() if suites is None else suites
    key = hashlib.sha256(json.dumps(suites, sort_keys=True).encode()).hexdigest()
    with _RUNNERS_LOCK:  # a watcher sets one up on a thread while its first build may need it
        if key not in _RUNNERS:
            _RUNNERS.clear()
            _RUNNERS[key] = _Runner(suites)
        return _RUNNERS[key]


def _suite_kwargs(doc: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": doc["name"],
        "expectations": copy.deepcopy(doc["expectations"]),  # GX fills in kwargs (batch_id, parameters)
        "meta": copy.deepcopy(doc.get("meta") or {}),  # GX adds its version: the suite's digest must not change
    }


def _new_outcomes(doc: dict[str, Any]) -> list[ExpectationOutcome]:
    return [
        ExpectationOutcome(
            type=e["type"], kwargs=dict(e["kwargs"]), severity=severity_of(e), notes=(e.get("meta") or {}).get("notes")
        )
        for e in doc["expectations"]
    ]


@dataclass(frozen=True)
class _Part:
    """One published Parquet file of a table."""

    partition: str
    path: Path
    rows: int
    size: int
    mtime_ns: int


def _chunks(parts: list[_Part], batch_rows: int) -> list[list[_Part]]:
    """Files grouped for GX: consecutive small files packed up to ``batch_rows`` rows (one GX run for
    many small partitions), a large file alone (validated batch by batch). Planned from the Parquet
    footers only, so a chunk's cache key is known before any data is read."""
    chunks: list[list[_Part]] = []
    current: list[_Part] = []
    rows = 0
    for part in parts:
        if part.rows == 0:
            continue
        if part.rows >= batch_rows:
            chunks.append([part])
            continue
        if current and rows + part.rows > batch_rows:
            chunks.append(current)
            current, rows = [], 0
        current.append(part)
        rows += part.rows
    if current:
        chunks.append(current)
    return chunks


def _chunk_key(chunk: list[_Part], suite_digest: str) -> str:
    text = json.dumps([suite_digest, [(str(p.path), p.size, p.mtime_ns) for p in chunk]])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _empty_totals(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"element_count": 0, "missing_count": 0, "unexpected_count": 0, "samples": [], "exceptions": []}
        for _ in doc["expectations"]
    ]


def _batches(chunk: list[_Part], table: str, doc: dict[str, Any], batch_rows: int,
             totals: list[dict[str, Any]]) -> Iterator[pa.Table]:
    """The rows of a chunk, at most ``batch_rows`` (or one small-file pack) at a time, with only the
    columns the suite reads plus the sample keys and a ``__partition`` column."""
    wanted = list(dict.fromkeys(
        [e["kwargs"]["column"] for e in doc["expectations"]] + list(SAMPLE_KEYS.get(table, ()))
    ))
    pending: list[pa.Table] = []
    rows = 0
    for part in chunk:
        parquet = pq.ParquetFile(part.path)
        present = set(parquet.schema_arrow.names)
        for total, exp in zip(totals, doc["expectations"], strict=True):
            column = exp["kwargs"]["column"]
            if column not in present:
                total["exceptions"].append(f"{part.partition}: {table}.parquet has no column {column!r}")
        for batch in parquet.iter_batches(batch_size=batch_rows, columns=[c for c in wanted if c in present]):
            data = pa.Table.from_batches([batch]).replace_schema_metadata(None)
            pending.append(data.append_column("__partition", pa.array([part.partition] * batch.num_rows, pa.string())))
            rows += batch.num_rows
            # Cut at fixed row offsets, not where the file's row groups end: the same rows then
            # make the same batches (and cache keys) however the file was written.
            while rows >= batch_rows:
                combined = pa.concat_tables(pending, promote_options="default")
                yield combined.slice(0, batch_rows)
                pending, rows = [combined.slice(batch_rows)], combined.num_rows - batch_rows
    if rows:
        yield pa.concat_tables(pending, promote_options="default")


def _batch_key(data: pa.Table, suite_digest: str) -> str:
    """The cache key of one batch's content: the same rows (same columns, same partition) always
    give the same results, whichever files or generation they were read from."""
    digest = hashlib.sha256(suite_digest.encode())
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as writer:
        writer.write_table(data)
    digest.update(sink.getvalue())
    return "batch-" + digest.hexdigest()[:32]


def _validate_chunk(
    runner_of: Any,
    table: str,
    chunk: list[_Part],
    doc: dict[str, Any],
    params: dict[str, Any],
    batch_rows: int,
    cache: _Cache,
    suite_digest: str,
) -> list[dict[str, Any]]:
    """Per-expectation sums for one chunk (a list parallel to the suite's expectations).

    Each batch's results are cached by its content, so a rebuilt partition whose validated columns
    did not change (a file re-parsed after an edit elsewhere in it) costs no GX run."""
    totals = _empty_totals(doc)
    for data in _batches(chunk, table, doc, batch_rows, totals):
        key = _batch_key(data, suite_digest)
        batch_totals = cache.get(key)
        if batch_totals is None:
            batch_totals = _empty_totals(doc)
            results = runner_of().run(table, data.to_pandas(), params)
            for total, result in zip(batch_totals, results, strict=True):
                _add(total, result, data, table)
            cache.put(key, batch_totals)
        for total, part in zip(totals, batch_totals, strict=True):
            _sum(total, part)
    return totals


class _Cache:
    """Validation results under reports/.validation-cache, one JSON file per key; entries not used
    by the latest run are swept after it."""

    def __init__(self, folder: Path, enabled: bool) -> None:
        self.folder, self.enabled, self.used = folder, enabled, set()

    def get(self, key: str) -> Any:
        path = self.folder / f"{key}.json"
        self.used.add(path.name)
        return json.loads(path.read_text()) if self.enabled and path.is_file() else None

    def put(self, key: str, data: Any) -> None:
        self.used.add(f"{key}.json")
        if self.enabled:
            write_atomic(self.folder / f"{key}.json", json.dumps(data))

    def sweep(self) -> None:
        if self.enabled and self.folder.is_dir():
            for stale in self.folder.glob("*.json"):
                if stale.name not in self.used:
                    stale.unlink(missing_ok=True)


_COUNTS = ("element_count", "missing_count", "unexpected_count")


def _sum(total: dict[str, Any], part: dict[str, Any]) -> None:
    """Add one batch's or chunk's totals to another's: counts add up, samples and exceptions join."""
    for count in _COUNTS:
        total[count] += part[count]
    total["samples"].extend(part["samples"][: max(0, SAMPLE_ROWS - len(total["samples"]))])
    total["exceptions"].extend(e for e in part["exceptions"] if e not in total["exceptions"])


def _add(total: dict[str, Any], result: Any, data: pa.Table, table: str) -> None:
    info = result.exception_info or {}
    if info.get("raised_exception"):
        message = str(info.get("exception_message") or "exception").splitlines()[0]
        if message not in total["exceptions"]:
            total["exceptions"].append(message)
        return
    res = result.result or {}
    total["element_count"] += int(res.get("element_count") or 0)
    total["missing_count"] += int(res.get("missing_count") or 0)
    total["unexpected_count"] += int(res.get("unexpected_count") or 0)
    column = result.expectation_config.kwargs.get("column")
    names = data.schema.names
    for index in res.get("partial_unexpected_index_list") or []:
        if len(total["samples"]) >= SAMPLE_ROWS:
            break
        i = int(index)
        row = {"partition": data.column("__partition")[i].as_py()}
        row |= {key: cell(data.column(key)[i].as_py()) for key in SAMPLE_KEYS.get(table, ()) if key in names}
        row["value"] = cell(data.column(column)[i].as_py()) if column in names else "NULL"
        total["samples"].append(row)


def _merge(outcome: ExpectationOutcome, total: dict[str, Any]) -> None:
    """Add one chunk's totals to an expectation's outcome, by the same rule as :func:`_sum`."""
    summed = {name: getattr(outcome, name) for name in (*_COUNTS, "samples", "exceptions")}
    _sum(summed, total)  # the lists are the outcome's own, extended in place
    for count in _COUNTS:
        setattr(outcome, count, summed[count])


def _finish(outcome: ExpectationOutcome) -> None:
    """Success over all batches, as GX decides it for one batch (``mostly`` over the non-null rows)."""
    mostly = float(outcome.kwargs.get("mostly", 1.0))
    nonmissing = outcome.element_count - outcome.missing_count
    if outcome.exceptions:
        outcome.success = False
    elif mostly >= 1.0 or nonmissing == 0:
        outcome.success = outcome.unexpected_count == 0
    else:
        outcome.success = (nonmissing - outcome.unexpected_count) / nonmissing >= mostly


def validate_suites(
    warehouse: Warehouse,
    snapshot: Snapshot,
    suites: dict[str, dict[str, Any]] | None = None,
    *,
    use_cache: bool = True,
    batch_rows: int = BATCH_ROWS,
) -> list[CheckOutcome]:
    """Run every suite over every partition of ``snapshot``; one outcome per (table, severity) check.
    ``batch_rows`` bounds the rows handed to GX at once (memory follows one batch)."""
    suites = load_suites() if suites is None else suites
    params = parameters()
    digests = {
        table: hashlib.sha256(json.dumps([doc, params, batch_rows], sort_keys=True).encode()).hexdigest()
        for table, doc in suites.items()
    }
    cache = _Cache(warehouse.reports_dir / CACHE_DIR, use_cache)
    runner_of = functools.partial(runner_for, suites)

    outcomes: list[CheckOutcome] = []
    for table, doc in suites.items():
        started = time.monotonic()
        expectations = _new_outcomes(doc)
        parts: list[_Part] = []
        for partition in sorted(snapshot.partitions):
            path = warehouse.path(snapshot.partitions[partition].file(table))
            if not path.is_file():
                for outcome in expectations:
                    outcome.exceptions.append(f"partition {partition} has no published {table}.parquet")
                continue
            stat = path.stat()
            parts.append(_Part(partition, path, pq.ParquetFile(path).metadata.num_rows, stat.st_size, stat.st_mtime_ns))
        for chunk in _chunks(parts, batch_rows):
            key = _chunk_key(chunk, digests[table])
            totals = cache.get(key)
            if totals is None:
                totals = _validate_chunk(runner_of, table, chunk, doc, params, batch_rows, cache, digests[table])
                cache.put(key, totals)
            for outcome, total in zip(expectations, totals, strict=True):
                _merge(outcome, total)
        for outcome in expectations:
            _finish(outcome)
        seconds = time.monotonic() - started
        for spec in expectation_specs({table: doc}):
            mine = [e for e in expectations if e.severity == spec.severity]
            outcomes.append(_check_outcome(spec, mine, seconds))
    cache.sweep()
    return outcomes


def _check_outcome(spec: CheckSpec, expectations: list[ExpectationOutcome], seconds: float) -> CheckOutcome:
    failed = [e for e in expectations if not e.success]
    samples: list[tuple[Any, ...]] = []
    for exp in failed:
        for message in exp.exceptions:
            samples.append((exp.label, "", "", f"error: {message}"))
        for row in exp.samples:
            where = ", ".join(f"{k}={v}" for k, v in row.items() if k not in ("partition", "value"))
            samples.append((exp.label, row["partition"], where, row["value"]))
    return CheckOutcome(
        spec,
        failing=sum(e.failing for e in failed),
        columns=["expectation", "partition", "row", "value"],
        samples=samples[:SAMPLE_ROWS],
        expectations=expectations,
        seconds=seconds,
    )
