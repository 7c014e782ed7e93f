"""Great Expectations, run as it is meant to: one ephemeral context, a validation definition per
suite, a table's rows (only the columns its suite names, plus the row key for samples) as the batch,
GX deciding which rows fail. Its results are read through their documented fields (``success``,
``result``, ``exception_info``) into plain dicts the cache keeps and the report shows.

Importing GX and setting its context up take seconds, so a process makes one context and keeps it
(:func:`runner_for`); :func:`loaded` says whether this process holds one, which decides where a
build validates (``pipelines.validation.worker``).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.text import shorten
from pipelines.validation.checks import SAMPLE_KEYS, SAMPLE_ROWS, load_suites

# A result of one expectation over one partition, as the cache keeps it: element_count,
# unexpected_count, success, samples (failing rows with their keys), exceptions (messages).
PartResult = dict[str, Any]


class Runner:
    """One ephemeral GX context with a validation definition per suite."""

    def __init__(self, suites: dict[str, dict[str, Any]]) -> None:
        os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
        # GX imports pyspark when it is installed (tests' environment, not `make run`'s) to see
        # whether Spark is there; pyspark warns that it does not support pandas 3 yet
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support", category=FutureWarning)
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        self.context = gx.get_context(mode="ephemeral")
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        source = self.context.data_sources.add_pandas("tracehouse")
        self.definitions = {}
        self.order: dict[str, dict[str, int]] = {}  # expectation id -> its index in the suite file
        for table, doc in suites.items():
            suite = self.context.suites.add(gx.ExpectationSuite(
                name=doc["name"],
                expectations=copy.deepcopy(doc["expectations"]),  # GX fills in kwargs
                meta=copy.deepcopy(doc.get("meta") or {}),
            ))
            self.order[table] = {e.id: i for i, e in enumerate(suite.expectations)}
            batch = source.add_dataframe_asset(table).add_batch_definition_whole_dataframe(f"{table}_batch")
            self.definitions[table] = self.context.validation_definitions.add(
                gx.ValidationDefinition(name=f"validate_{table}", data=batch, suite=suite)
            )

    def run(self, table: str, frame: Any, params: dict[str, Any]) -> list[Any]:
        """The results in the order of the suite file (GX groups them by column), with the first
        SAMPLE_ROWS failing rows' indices (GX's SUMMARY format)."""
        result = self.definitions[table].run(
            batch_parameters={"dataframe": frame},
            expectation_parameters=params,
            result_format={"result_format": "SUMMARY", "partial_unexpected_count": SAMPLE_ROWS},
        )
        order = self.order[table]
        return sorted(result.results, key=lambda r: order[r.expectation_config.id])


_RUNNERS: dict[str, Runner] = {}
_RUNNERS_LOCK = threading.Lock()


def runner_for(suites: dict[str, dict[str, Any]] | None = None) -> Runner:
    """The GX context holding these suites (default: expectations/), one per process (``tracehouse
    watch`` makes it at start)."""
    suites = load_suites() if suites is None else suites
    key = hashlib.sha256(json.dumps(suites, sort_keys=True).encode()).hexdigest()
    with _RUNNERS_LOCK:  # a watcher sets one up on a thread while its first build may need it
        if key not in _RUNNERS:
            _RUNNERS.clear()
            _RUNNERS[key] = Runner(suites)
        return _RUNNERS[key]


def loaded() -> bool:
    """Whether this process holds a GX context: then its builds validate in-process, not in a worker."""
    return bool(_RUNNERS)


def columns_of(table: str, doc: dict[str, Any]) -> list[str]:
    """The columns a suite reads, and the row key shown with a failing value."""
    return list(dict.fromkeys([e["kwargs"]["column"] for e in doc["expectations"]] + list(SAMPLE_KEYS[table])))


def suite_rows(path: Path, table: str, doc: dict[str, Any]) -> pa.Table:
    """A partition's file of a table, with only the columns its suite reads (and the row key)."""
    return pq.read_table(path, columns=columns_of(table, doc)).replace_schema_metadata(None)


def _samples(table: str, data: pa.Table, column: str, partition: str, indices: Sequence[int]) -> list[dict[str, Any]]:
    """The first failing rows (``indices`` into ``data``) with their keys, as the report shows them."""
    samples = []
    for index in indices[:SAMPLE_ROWS]:
        row = {name: data.column(name)[int(index)].as_py() for name in (*SAMPLE_KEYS[table], column)}
        keys = {k: shorten(row[k], 120, null="NULL") for k in SAMPLE_KEYS[table]}
        samples.append({"partition": partition, **keys, "value": shorten(row[column], 120, null="NULL")})
    return samples


def exception_messages(info: Any) -> list[str]:
    """The first line of each exception message in a result's ``exception_info``. GX documents its
    form as ``raised_exception``, ``exception_message``, ``exception_traceback``; when a metric
    raised, GX 1.x gives that form once per metric, so it is looked for wherever it is."""
    if not isinstance(info, Mapping):
        return []
    if info.get("raised_exception"):
        return [str(info.get("exception_message") or "exception").splitlines()[0]]
    return [message for value in info.values() for message in exception_messages(value)]


def _raised(result: Any, partition: str) -> PartResult | None:
    """The entry of an expectation GX could not decide (None when it decided): it raised, or it
    failed without counting the rows it looked at."""
    messages = exception_messages(result.exception_info)
    if not messages and (result.success or "element_count" in (result.result or {})):
        return None
    messages = messages or ["Great Expectations gave no verdict and no exception"]
    return {"element_count": 0, "unexpected_count": 0, "success": False, "samples": [],
            "exceptions": [f"{partition}: {message}" for message in dict.fromkeys(messages)]}


def run_partition(runner_of: Callable[[], Runner], table: str, data: pa.Table, partition: str,
                  params: dict[str, Any]) -> list[PartResult]:
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


def splittable(doc: dict[str, Any]) -> bool:
    """Whether GX's verdict over several partitions' rows holds for each of them: yes when no
    expectation sets ``mostly`` (then a batch passes only when every row passes)."""
    return not any("mostly" in (e.get("kwargs") or {}) for e in doc["expectations"])


def run_together(runner_of: Callable[[], Runner], table: str, datas: list[pa.Table], partitions: list[str],
                 params: dict[str, Any]) -> list[list[PartResult]] | None:
    """One GX run over several partitions' rows of a table (a run has a fixed cost however few its
    rows, which for small partitions is most of the validation). When GX passes every expectation over
    them all, each partition passes, with its own row count (a suite without ``mostly``:
    :func:`splittable`). None when any expectation failed or raised: the caller then runs each
    partition alone, so that every partition's verdict, counts, samples and errors are GX's own."""
    try:
        data = pa.concat_tables(datas)
    except pa.ArrowInvalid:  # files written with other column types: each is validated alone
        return None
    results = runner_of().run(table, data.to_pandas(), params)
    if not all(r.success and _raised(r, "") is None for r in results):
        return None
    return [[{"element_count": part.num_rows, "unexpected_count": 0, "success": True, "exceptions": [], "samples": []}
             for _ in results] for part in datas]
