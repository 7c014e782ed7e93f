"""Validation of a build's tables: every check over every partition of its snapshot, and the report.

The rules live beside what they check:

* ``sql/checks``: the hand-written SQL checks (declared in ``_checks.yml``) and the tables' key and
  relationship checks, generated from ``pipelines/schema.py`` by dbt-style generic tests
  (``pipelines.catalog``). A check is a SELECT of the violating rows; failing = how many it returns.
* ``expectations/<table>.json``: Great Expectations 1.x suites of row-by-row expectations.
* ``input_files_match_sources`` (here): the files the sources hold now against the build's manifests.

A check has a severity: ``error`` checks are structural and block the build's commit when they fail;
``warn`` checks are reported only. This module is the engine; ``pipelines/defs/validation.py`` wires
it into Dagster as asset checks, and the report page is ``dashboards/templates/validation.html.j2``.

Great Expectations runs as it is meant to: one validation definition per suite, a table's rows as
the batch (only the columns the suite names, plus the row key for samples), GX deciding which rows
fail. Results are kept per partition (``reports/.validation-cache``, under the suite and the content
of the columns it reads), so a rebuild runs GX only where those changed; a table's suite passes when
every partition passes. The partitions GX must see are validated together, a run per table
(:func:`table_results`), and each gets the failing rows GX listed among its own. During a build GX
runs in a worker process (:class:`Prevalidation`) on the splits flattened so far, off the build's
critical path.
"""

from __future__ import annotations

import bisect
import contextlib
import copy
import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

from pipelines import catalog, imports, schema
from pipelines.state import Snapshot
from pipelines.storage import Warehouse, write_atomic
from pipelines.text import markdown_table, shorten

ERROR = "error"
WARN = "warn"
SAMPLE_ROWS = 10
PROGRESS_SECONDS = 1.0  # how often a build waiting for the GX worker says how far it is
INGEST_ERROR_ROWS = 200
REPO = Path(__file__).resolve().parent.parent
EXPECTATIONS_DIR = REPO / "expectations"
CACHE_DIR = ".validation-cache"
EXPECTATION_CHECKS = {ERROR: "expectations_critical", WARN: "expectations_warning"}
_GX_SEVERITIES = {"critical": ERROR, "warning": WARN}
_ROW_BY_ROW = "expect_column_values_to_"

# Kinds of ingest_errors rows the readers and the ingest loop write (docs/VALIDATION.md lists them).
# "reader_failure" is left out on purpose: it means a reader raised something it should have named.
INGEST_ERROR_KINDS = (
    "unreadable", "empty_file", "no_records", "invalid_json", "invalid_parquet", "not_utf8",
    "wrong_top_level_type", "missing_key", "wrong_field_type", "duplicate_key", "dangling_reference",
    "duplicate_graph_id", "unknown_case", "ambiguous_case", "duplicate_prediction",
)
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


# -- the checks -------------------------------------------------------------------------------------------


SOURCES_CHECK = Check(
    "input_files_match_sources", "ingest_errors", WARN,
    "the files found in the sources now are exactly the files of the build's manifests",
    "python", "pipelines/validation.py",
)


def all_checks() -> list[Check]:
    """Every check, in report order: per table, SQL checks, then suites, then the sources check."""
    checks = [Check.of(test) for test in catalog.table_tests()]
    checks += expectation_checks(load_suites())
    checks.append(SOURCES_CHECK)
    order = {name: i for i, name in enumerate(schema.TABLES)}
    return sorted(checks, key=lambda c: (order[c.asset], c.kind != "sql", c.name))


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


# -- Great Expectations ----------------------------------------------------------------------------------


class SuiteError(ValueError):
    """A suite file the validation cannot evaluate partition by partition."""


def parameters() -> dict[str, list[str]]:
    """Values for the suites' ``{"$PARAMETER": ...}`` placeholders: the canonical sets (seeds)."""
    return {
        "known_systems": list(schema.KNOWN_SYSTEMS),
        "known_datasets": sorted(schema.KNOWN_DATASETS),
        "error_types": list(schema.ERROR_TYPES),
        "ingest_error_kinds": list(INGEST_ERROR_KINDS),
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
            if not str(exp.get("type", "")).startswith(_ROW_BY_ROW):
                raise SuiteError(f"{where}: only {_ROW_BY_ROW}* expectations hold partition by partition; "
                                 "use a SQL check")
            if exp.get("kwargs", {}).get("column") not in columns:
                raise SuiteError(f"{where}: column {exp.get('kwargs', {}).get('column')!r} is not a column of {table}")
            if exp.get("severity", "critical") not in _GX_SEVERITIES:
                raise SuiteError(f"{where}: severity must be one of {', '.join(_GX_SEVERITIES)}")
        suites[table] = doc
    return suites


def severity_of(exp: dict[str, Any]) -> str:
    return _GX_SEVERITIES[exp.get("severity", "critical")]


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


class _Runner:
    """One ephemeral GX context with a validation definition per suite (GX imported lazily: ~2.5 s)."""

    def __init__(self, suites: dict[str, dict[str, Any]]) -> None:
        os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
        with imports.hidden("pyspark"):  # GX imports it only to see whether Spark is there (pipelines.imports)
            import great_expectations as gx
        from great_expectations.core.expectation_suite import ExpectationSuite
        from great_expectations.data_context.types.base import ProgressBarsConfig

        self.context = gx.get_context(mode="ephemeral")
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        source = self.context.data_sources.add_pandas("tracehouse")
        self.definitions = {}
        self.order: dict[str, dict[str, int]] = {}  # expectation id -> its index in the suite file
        for table, doc in suites.items():
            suite = self.context.suites.add(ExpectationSuite(
                name=doc["name"],
                expectations=copy.deepcopy(doc["expectations"]),  # GX fills in kwargs
                meta=copy.deepcopy(doc.get("meta") or {}),
            ))
            self.order[table] = {e.id: i for i, e in enumerate(suite.expectations)}
            batch = source.add_dataframe_asset(table).add_batch_definition_whole_dataframe(f"{table}_batch")
            self.definitions[table] = self.context.validation_definitions.add(
                gx.ValidationDefinition(name=f"validate_{table}", data=batch, suite=suite)
            )

    def run(self, table: str, frame: Any, params: dict[str, Any], every_row: bool = False) -> list[Any]:
        """The results in the order of the suite file (GX groups them by column). ``every_row``: with
        the index of every failing row (GX's COMPLETE format), not only the first SAMPLE_ROWS."""
        result = self.definitions[table].run(
            batch_parameters={"dataframe": frame},
            expectation_parameters=params,
            result_format={"result_format": "COMPLETE" if every_row else "SUMMARY",
                           "partial_unexpected_count": SAMPLE_ROWS},
        )
        order = self.order[table]
        return sorted(result.results, key=lambda r: order[r.expectation_config.id])


_RUNNERS: dict[str, _Runner] = {}
_RUNNERS_LOCK = threading.Lock()


def runner_for(suites: dict[str, dict[str, Any]] | None = None) -> _Runner:
    """The GX context holding these suites (default: expectations/), one per process: importing GX
    and setting the context up take ~3 s (``tracehouse watch`` makes it at start)."""
    suites = load_suites() if suites is None else suites
    key = hashlib.sha256(json.dumps(suites, sort_keys=True).encode()).hexdigest()
    with _RUNNERS_LOCK:  # a watcher sets one up on a thread while its first build may need it
        if key not in _RUNNERS:
            _RUNNERS.clear()
            _RUNNERS[key] = _Runner(suites)
        return _RUNNERS[key]


def _columns(table: str, doc: dict[str, Any]) -> list[str]:
    """The columns a suite reads, and the row key shown with a failing value."""
    return list(dict.fromkeys([e["kwargs"]["column"] for e in doc["expectations"]] + list(SAMPLE_KEYS[table])))


def _suite_rows(path: Path, table: str, doc: dict[str, Any]) -> Any:
    """A partition's file of a table, with only the columns its suite reads (and the row key)."""
    return pq.read_table(path, columns=_columns(table, doc)).replace_schema_metadata(None)


def _samples(table: str, data: Any, column: str, partition: str, indices: Sequence[int]) -> list[dict[str, Any]]:
    """The first failing rows (``indices`` into ``data``) with their keys, as the report shows them."""
    samples = []
    for index in indices[:SAMPLE_ROWS]:
        row = {name: data.column(name)[int(index)].as_py() for name in (*SAMPLE_KEYS[table], column)}
        keys = {k: shorten(row[k], 120, null="NULL") for k in SAMPLE_KEYS[table]}
        samples.append({"partition": partition, **keys, "value": shorten(row[column], 120, null="NULL")})
    return samples


def _raised(result: Any, partition: str) -> dict[str, Any] | None:
    """The entry of an expectation that raised instead of deciding (None when it decided). GX 1.x
    keeps an exception raised while computing a metric under that metric's id, else at the top."""
    info = result.exception_info or {}
    raised = [info] if "raised_exception" in info else [v for v in info.values() if isinstance(v, dict)]
    messages = [str(r.get("exception_message") or "exception").splitlines()[0]
                for r in raised if r.get("raised_exception")]
    if not messages:
        return None
    return {"element_count": 0, "unexpected_count": 0, "success": False, "samples": [],
            "exceptions": [f"{partition}: {message}" for message in dict.fromkeys(messages)]}


def _run_gx(runner_of: Any, table: str, data: Any, partition: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """One GX run over one partition's rows of a table: per expectation, its counts, success and a
    few failing rows (with their keys)."""
    results = []
    for result in runner_of().run(table, data.to_pandas(), params):
        raised = _raised(result, partition)
        if raised is not None:
            results.append(raised)
            continue
        res = result.result or {}
        column = result.expectation_config.kwargs.get("column")
        results.append({"element_count": int(res.get("element_count") or 0),
                        "unexpected_count": int(res.get("unexpected_count") or 0),
                        "success": bool(result.success), "exceptions": [],
                        "samples": _samples(table, data, column, partition,
                                            res.get("partial_unexpected_index_list") or [])})
    return results


def _run_gx_together(runner_of: Any, table: str, datas: list[Any], partitions: list[str],
                     params: dict[str, Any]) -> list[list[dict[str, Any]]] | None:
    """One GX run over several partitions' rows of a table, read back per partition: what GX would
    have found in each alone (a run costs ~0.1 s however few its rows, so for small partitions this
    is most of the validation). Each partition gets its rows' count, the failing rows GX lists
    among them (COMPLETE format: the index of every failing row), and succeeds when none of its rows
    fails, which is GX's own verdict for row-by-row expectations without ``mostly`` (the caller
    checks: ``_splittable``). None when an expectation raised, or a verdict is not explained by the
    failing rows; the caller then runs each partition alone."""
    import pyarrow as pa

    try:
        data = pa.concat_tables(datas)
    except pa.ArrowInvalid:  # files written with other column types: each is validated alone
        return None
    bounds, start = [], 0
    for part in datas:
        bounds.append((start, start + part.num_rows))
        start += part.num_rows
    per_partition: list[list[dict[str, Any]]] = [[] for _ in partitions]
    for result in runner_of().run(table, data.to_pandas(), params, every_row=True):
        if _raised(result, "") is not None:  # which partitions it raises on, each alone tells
            return None
        res = result.result or {}
        failing = sorted(int(i) for i in res.get("unexpected_index_list") or [])
        if bool(result.success) == bool(failing) or len(failing) != int(res.get("unexpected_count") or 0):
            return None
        column = result.expectation_config.kwargs.get("column")
        for entries, partition, (lo, hi) in zip(per_partition, partitions, bounds, strict=True):
            mine = failing[bisect.bisect_left(failing, lo):bisect.bisect_left(failing, hi)]
            entries.append({"element_count": hi - lo, "unexpected_count": len(mine), "success": not mine,
                            "exceptions": [], "samples": _samples(table, data, column, partition, mine)})
    return per_partition


def _splittable(doc: dict[str, Any]) -> bool:
    """Whether a run over several partitions gives each GX's verdict for it alone: yes when no
    expectation sets ``mostly`` (a partition then passes when none of its rows fails)."""
    return not any("mostly" in (e.get("kwargs") or {}) for e in doc["expectations"])


class _Cache:
    """Results of one suite over one partition's file, in ``reports/.validation-cache``: keyed by
    the content of the columns the suite reads (an edit of a column no expectation reads, or a
    rebuilt partition with the same rows, costs no GX run), found through the file's path, size and
    mtime (an unchanged file is not even read)."""

    def __init__(self, warehouse: Warehouse) -> None:
        self.folder = warehouse.reports_dir / CACHE_DIR

    @staticmethod
    def _name(*parts: Any) -> str:
        return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:32] + ".json"

    def file_key(self, digest: str, path: Path) -> str:
        stat = path.stat()
        return self._name("file", digest, path.as_posix(), stat.st_size, stat.st_mtime_ns)

    def content_key(self, digest: str, partition: str, data: Any) -> str:
        import pyarrow as pa

        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, data.schema) as writer:
            writer.write_table(data)
        content = hashlib.sha256(sink.getvalue()).hexdigest()
        return self._name("content", digest, partition, content)

    def get(self, name: str) -> Any:
        path = self.folder / name
        return json.loads(path.read_text()) if path.is_file() else None

    def put(self, name: str, value: Any) -> None:
        write_atomic(self.folder / name, json.dumps(value))


def suite_digest(doc: dict[str, Any], params: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps([doc, params], sort_keys=True).encode()).hexdigest()[:16]


# Up to this many rows of a table are validated in one GX run, when several partitions need it: the
# run's fixed cost (~0.1 s) is paid once, and its list of failing rows (COMPLETE format) stays bounded.
BATCH_ROWS = 500_000


def table_results(warehouse: Warehouse, table: str, doc: dict[str, Any], parts: Sequence[tuple[str, str]],
                  params: dict[str, Any], runner_of: Any, used: set[str] | None = None) -> list[list[dict[str, Any]]]:
    """The results of one suite over each of several partitions' files of a table (``parts``: (file,
    partition) pairs), each from the cache when the file, or the content of the columns the suite
    reads, was validated before; the others validated together, one GX run per BATCH_ROWS rows
    (:func:`_run_gx_together`), and kept per partition."""
    cache, digest = _Cache(warehouse), suite_digest(doc, params)
    contents: list[str] = []
    waiting: list[tuple[str, str, str, Any]] = []  # (file key, content key, partition, rows) GX must see

    def validate_waiting() -> None:
        partitions, datas = [w[2] for w in waiting], [w[3] for w in waiting]
        together = _run_gx_together(runner_of, table, datas, partitions, params) if len(waiting) > 1 else None
        if together is None:
            together = [_run_gx(runner_of, table, data, partition, params)
                        for data, partition in zip(datas, partitions, strict=True)]
        for (by_file, content, _, _), results in zip(waiting, together, strict=True):
            cache.put(content, results)
            cache.put(by_file, content)
        waiting.clear()

    for rel, partition in parts:
        path = warehouse.path(rel)
        by_file = cache.file_key(digest, path)
        content = cache.get(by_file)
        if content is None or cache.get(content) is None:
            data = _suite_rows(path, table, doc)
            content = cache.content_key(digest, partition, data)
            if cache.get(content) is not None:
                cache.put(by_file, content)
            else:
                if waiting and (not _splittable(doc) or
                                sum(w[3].num_rows for w in waiting) + data.num_rows > BATCH_ROWS):
                    validate_waiting()
                waiting.append((by_file, content, partition, data))
        contents.append(content)
        if used is not None:
            used.update((by_file, content))
    if waiting:
        validate_waiting()
    return [cache.get(content) for content in contents]


def prevalidate(root: str, partitions: list[tuple[str, str]]) -> int:
    """Validate partitions' generations ((key, generation) pairs) into the cache; run by the
    worker process of :class:`Prevalidation`. Returns the GX runs it made."""
    warehouse = Warehouse(root)
    suites, params = load_suites(), parameters()
    runs = []

    def runner_of() -> _Runner:
        runs.append(1)
        return runner_for(suites)

    for table, doc in suites.items():
        table_results(warehouse, table, doc, [(f"{generation}/{table}.parquet", key) for key, generation in partitions],
                      params, runner_of)
    return len(runs)


def _exit_with(parent: int) -> None:
    """Leave as soon as the build process that started this worker is gone (killed with -9, it
    cannot stop its worker, and a worker waiting for work would wait for ever)."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)


def _load_gx(parent: int) -> None:
    """The worker's start: watch the parent, import Great Expectations and set its context up (~3 s,
    on the other core). Asked to leave, the worker skips tearing down its interpreter (1.1 s with GX
    and pandas loaded, at the end of every build): multiprocessing runs this last finalizer once the
    pool's queues are flushed, and nothing after it needs doing."""
    import multiprocessing.util

    threading.Thread(target=_exit_with, args=(parent,), daemon=True).start()
    multiprocessing.util.Finalize(None, os._exit, args=(0,), exitpriority=-1000)
    # see pipelines.imports; the worker gives GX pandas frames only, never S3 paths, so it is spared
    # boto3 (hidden in this process alone: elsewhere tracehouse may be reaching object storage)
    with imports.frozen_imports(), imports.deferred("scipy.stats", "altair"), imports.hidden("boto3", "botocore"):
        runner_for()


# A worker spawned by `tracehouse build` before it imports Dagster (spawn_early_worker), for the
# build's Prevalidation to take: (pool, warm-up future).
_EARLY: tuple[Any, Any] | None = None


def _new_pool() -> Any:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=_load_gx,
                               initargs=(os.getpid(),))


def spawn_early_worker() -> None:
    """Start loading Great Expectations in a worker process now, at the start of a build process:
    loading it takes 3-5 s, which a rebuild's checks otherwise waited for (its worker started at the
    first changed split, ~2.5 s in). A build that flattens nothing, or a file too big to have the
    worker beside it (``build.HEAVY_FILE_BYTES``), stops it (:func:`drop_early_worker`)."""
    global _EARLY
    if _EARLY is None and "great_expectations" not in sys.modules:
        pool = _new_pool()
        _EARLY = (pool, pool.submit(int))  # a process is spawned at its first task


def _take_early_worker() -> tuple[Any, Any] | None:
    """The early worker's (pool, warm-up future), now no longer anybody else's; None if there is none."""
    global _EARLY
    early, _EARLY = _EARLY, None
    return early


def drop_early_worker() -> None:
    """Stop the early worker if no build took it."""
    early = _take_early_worker()
    if early is not None:
        _stop(early[0])


def _stop(pool: Any) -> None:
    """Stop a pool's worker at once, whatever it is doing."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.join(5)
    pool.shutdown(wait=True, cancel_futures=True)


class Prevalidation:
    """A worker process that runs Great Expectations on the partitions the build has flattened, while
    the build goes on (flattening, marts, charts) on the main core: the GX import and runs leave the
    critical path, and the checks' step finds their results in the cache.

    The worker gets, each time it is free, every split submitted meanwhile, and validates them
    together (:func:`table_results`: one GX run per table, not one per split and table). Only when
    this process has not imported GX already (``tracehouse watch`` keeps it loaded)."""

    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse
        self.pool: Any = None
        self.warm_up: Any = None
        self.feeder: threading.Thread | None = None  # sends the worker what is queued, once it is free
        self.changed = threading.Condition()
        self.queued: list[tuple[str, str]] = []  # submitted, not yet sent to the worker
        self.sent: list[int] = []  # how many splits each run of the worker was given
        self.submitted = 0
        self.validated = 0  # splits the worker has finished with (validated, or failed: the build does them)
        self.closing = False
        self.held: list[tuple[str, str]] | None = None  # while held: the splits to validate once released
        self.start_wanted = False

    def start(self) -> None:
        """Start the worker now (it imports GX, ~2.8 s, on the other core), for a build that will
        flatten something: its first partition then finds GX loaded. While held, once released."""
        if self.held is not None:
            self.start_wanted = True
        elif self.pool is None and "great_expectations" not in sys.modules:
            early = _take_early_worker()
            if early is not None:  # spawned by the build process at its start: GX may be loaded already
                self.pool, self.warm_up = early
            else:
                self.warm_up = self._pool().submit(int)  # a process is spawned at its first task
            self.feeder = threading.Thread(target=self._feed, name="tracehouse-gx-feeder", daemon=True)
            self.feeder.start()

    def hold(self) -> None:
        """Start no worker until :meth:`release`: the build is about to flatten a file big enough
        that the worker's ~300 MB would stack on the flattening's peak (``build.HEAVY_FILE_BYTES``)."""
        if self.held is None:
            self.held = []

    def release(self) -> None:
        """Start the worker if it was wanted meanwhile, and give it the splits submitted while held."""
        held, self.held = self.held, None
        if self.start_wanted or held:
            self.start()
        for key, generation in held or []:
            self.submit(key, generation)

    def submit(self, key: str, generation: str) -> None:
        if "great_expectations" in sys.modules:
            return  # validated in-process, with the GX context this process keeps
        if self.held is not None:
            self.held.append((key, generation))
            return
        self.start()
        with self.changed:
            self.queued.append((key, generation))
            self.submitted += 1
            self.changed.notify_all()

    def _feed(self) -> None:
        """Once the worker has loaded GX, send it everything queued, and again each time it is done."""
        with contextlib.suppress(Exception):  # a worker that could not start fails the runs below too
            self.warm_up.result()
        while True:
            with self.changed:
                self.changed.wait_for(lambda: self.queued or self.closing)
                if not self.queued:
                    return
                batch, self.queued = self.queued, []
                self.sent.append(len(batch))
            try:
                self.pool.submit(prevalidate, str(self.warehouse.root), batch).result()
            except Exception:  # noqa: BLE001 - validate_suites runs GX itself for whatever is missing
                pass
            finally:
                with self.changed:
                    self.validated += len(batch)
                    self.changed.notify_all()

    def _pool(self) -> Any:
        if self.pool is None:
            self.pool = _new_pool()
        return self.pool

    def _busy(self) -> bool:
        return self.validated < self.submitted and self.feeder is not None and self.feeder.is_alive()

    def wait(self, say: Callable[[str], None] | None = None) -> None:
        """Wait for what was submitted, saying every second how far the worker is (``say``); a
        worker that failed only leaves the work to the build."""
        self.release()  # a build that stopped before releasing: what was held is validated now
        with self.changed:
            while not self.changed.wait_for(lambda: not self._busy(), timeout=PROGRESS_SECONDS):
                if say is None:
                    continue
                if self.warm_up is not None and not self.warm_up.done():
                    say("checks: waiting for Great Expectations to load in its worker process")
                else:
                    say(f"checks: waiting for Great Expectations (its worker process): {self.validated} of "
                        f"{self.submitted} splits validated")

    def close(self) -> None:
        """Stop the worker now: what it was doing is either in the cache already or not needed."""
        with self.changed:
            self.closing = True
            unfinished = self._busy() or (self.warm_up is not None and not self.warm_up.done())
            self.changed.notify_all()
        drop_early_worker()  # a build that flattened nothing did not take it
        if self.pool is not None:
            if unfinished:  # a build that failed half-way
                _stop(self.pool)
            else:
                self.pool.shutdown(wait=True, cancel_futures=True)  # an idle worker leaves at once (_load_gx)
            self.pool = None
        if self.feeder is not None:
            self.feeder.join(5)


_PREVALIDATIONS: dict[str, Prevalidation] = {}


@contextmanager
def prevalidation(warehouse: Warehouse) -> Iterator[Prevalidation]:
    """A :class:`Prevalidation` for the duration of one build; :func:`validate_suites` on the same
    warehouse waits for it."""
    pre = Prevalidation(warehouse)
    _PREVALIDATIONS[str(warehouse.root)] = pre
    try:
        yield pre
    finally:
        del _PREVALIDATIONS[str(warehouse.root)]
        pre.close()


def wait_for_worker(warehouse: Warehouse, say: Callable[[str], None]) -> None:
    """Wait for the build's Great Expectations worker (if any) to validate what it was given,
    saying every second how far it is."""
    pre = _PREVALIDATIONS.get(str(warehouse.root))
    if pre is not None:
        pre.wait(say)


def validate_suites(warehouse: Warehouse, snapshot: Snapshot, suites: dict[str, dict[str, Any]] | None = None,
                    *, use_cache: bool = True) -> list[Outcome]:
    """Every suite over every partition of ``snapshot`` (:func:`table_results`); one outcome per
    (table, severity) check. ``use_cache=False`` runs GX on each partition alone, and keeps nothing."""
    pre = _PREVALIDATIONS.get(str(warehouse.root))
    if pre is not None:
        pre.wait()
    suites = load_suites() if suites is None else suites
    params = parameters()
    outcomes: list[Outcome] = []
    used: set[str] = set()
    for table, doc in suites.items():
        started = time.monotonic()
        results = [ExpectationResult(e["type"], dict(e["kwargs"]), severity_of(e), (e.get("meta") or {}).get("notes"))
                   for e in doc["expectations"]]
        keys = sorted(snapshot.partitions)
        files = [(snapshot.partitions[key].file(table), key) for key in keys]
        if use_cache:
            per_partition = table_results(warehouse, table, doc, files, params, lambda s=suites: runner_for(s), used)
        else:
            per_partition = [_run_gx(lambda s=suites: runner_for(s), table,
                                     _suite_rows(warehouse.path(rel), table, doc), key, params) for rel, key in files]
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
    folder = warehouse.reports_dir / CACHE_DIR
    if use_cache and folder.is_dir():  # results no partition of this build needs any more
        for stale in folder.glob("*.json"):
            if stale.name not in used:
                stale.unlink(missing_ok=True)
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


# -- one validation -----------------------------------------------------------------------------------------


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


# -- the report ----------------------------------------------------------------------------------------------


def render_report(run: ValidationRun) -> str:
    """The report page of one validation (dashboards/templates/validation.html.j2): self-contained,
    no script, every value escaped by the template (trace content is untrusted)."""
    import jinja2

    folder = REPO / "dashboards" / "templates"
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(folder), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["short"] = lambda value, limit=400: shorten(value, limit, null="NULL")
    return env.get_template("validation.html.j2").render(
        run=run, css=(folder / "validation.css").read_text(), error=ERROR,
        passed=len(run.outcomes) - len(run.failed),
        kwargs_json=lambda e: json.dumps({k: v for k, v in e.kwargs.items() if k not in ("column", "batch_id")},
                                         default=str),
    )


def write_report(run: ValidationRun, warehouse: Warehouse, attempt: str) -> tuple[Path, Path]:
    """The report of one build attempt, ``reports/validation-<attempt>.html`` and ``.json``; the
    commit publishes the committed build's as reports/validation.html and .json."""
    html_path = write_atomic(warehouse.reports_dir / f"validation-{attempt}.html", render_report(run))
    digest = {"warehouse": run.warehouse, "validated_at": run.started_at, "partitions": run.partitions,
              "checks": run.results(), "ingest_errors": run.ingest_error_total}
    json_path = write_atomic(warehouse.reports_dir / f"validation-{attempt}.json", json.dumps(digest, indent=1))
    return html_path, json_path
