"""Reader for failure labels in TRAIL's annotation form (Patronus AI's TRAIL benchmark): one JSON object
per trace, ``{"trace_id": <32 hex>, "errors": [{"category", "location" (a span id), "evidence",
"description", "impact": LOW|MEDIUM|HIGH}], ...}``, a ``.json`` file each (or a list of them), or one
a line in ``.jsonl`` files.

A label source: its labels are of traces another source holds (``otlp``, ``otel_spans``: graph
``otel:<trace id>``, one operation per span, ``op_id`` = the span id). It is read after the graph
sources, against their traces and spans (``Cases.spans``); a rebuild of the traces changes that
context and so re-reads the labels. Each error becomes one annotation of its trace:
``error_type`` = the category as written, ``taxonomy`` = ``trail``, ``faulty_op_id`` = the location,
``reason`` = the description, evidence and impact in ``extra``. A trace or span the warehouse does
not hold goes to ingest_errors (``dangling_reference``, naming both), and the trace's other errors load.

TRAIL's records do not name their split (GAIA or SWE Bench); its release keeps each split in a folder of
its own (``GAIA/``, ``SWE Bench/``, ``processed_annotations_gaia/``, ``processed_annotations_swe_bench/``).
The nearest folder on a file's path (its file name, the folders under the source root, then the root's own
name) whose name ends in a split's name, compared ignoring case and anything but letters and digits, gives
the split, spelled as the seed published_results spells it: ``provenance`` = ``trail/GAIA``, as Who&When's
``whowhen/Hand-Crafted``, where the mart attribution_published reads a case's split. Without one it is
``trail``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from pipelines import schema
from pipelines.readers.base import (
    DANGLING_REFERENCE,
    MISSING_KEY,
    WRONG_FIELD_TYPE,
    WRONG_TOP_LEVEL_TYPE,
    Cases,
    IngestError,
    Labels,
    Rows,
    SourceFile,
    list_files,
    load_json,
    read_bytes,
)
from pipelines.storage.warehouse import relative_name

kind = "trail_labels"
needs_cases = True  # matched against the traces and spans of the graph sources (Cases.spans)

SPLIT = "labels"
TAXONOMY = "trail"
PROVENANCE = "trail"
COMBINED = "both splits"  # the seed's split of TRAIL's number over both splits together: no folder's


def _letters(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


# TRAIL's splits as the seed published_results spells them, by their names' letters and digits
SPLITS = {_letters(r["split"]): r["split"] for r in schema.seed_rows("published_results")
          if r["benchmark"] == TAXONOMY and r["split"] != COMBINED}


def split_of(file: SourceFile) -> str | None:
    """The TRAIL split the nearest folder on ``file``'s path names (its file name first, then the folders
    up to the source root's own name), or None."""
    parts = file.relpath.split("/")
    parts[-1] = parts[-1].rsplit(".", 1)[0]
    root_name = file.path.parents[len(parts) - 1].name  # the source root's (a one-file source: its folder's)
    for name in reversed([root_name, *parts]):
        letters = _letters(name)
        for key, split in SPLITS.items():
            if letters.endswith(key):
                return split
    return None
_MAPPED = {"category", "location", "description"}
_HEX = re.compile(r"[0-9a-f]+")


def discover(root: Path, source: str) -> list[SourceFile]:
    root = root.absolute()
    if root.is_file():
        return [SourceFile(source, SPLIT, root, root.name)]
    paths = [*list_files(root, "**/*.json"), *list_files(root, "**/*.jsonl")]
    return sorted((SourceFile(source, SPLIT, p, relative_name(root, p)) for p in paths), key=lambda f: f.relpath)


def read(file: SourceFile, cases: Cases) -> Iterator[Rows | Labels | IngestError]:
    data = read_bytes(file.path)
    if file.path.suffix == ".jsonl":
        for n, line in enumerate(data.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = load_json(line)
            except IngestError as error:
                yield IngestError(error.kind, error.reason, f"line {n}" + (f" {error.position}" if error.position
                                                                         else ""))
                continue
            yield from _trace(record, file, cases, f"line {n} $", n)
        return
    doc = load_json(data)
    if isinstance(doc, list):
        for i, record in enumerate(doc):
            yield from _trace(record, file, cases, f"$[{i}]", i)
    else:
        yield from _trace(doc, file, cases, "$", 0)


def _hex_id(value: Any, digits: int) -> str | None:
    """A trace or span id as the warehouse writes it (lower-case hex), or None when it is not one."""
    if not isinstance(value, str):
        return None
    text = value.strip().lower().removeprefix("0x")
    return text.rjust(digits, "0") if _HEX.fullmatch(text) and len(text) <= digits else None


def _trace(record: Any, file: SourceFile, cases: Cases, pos: str, at: int) -> Iterator[Rows | Labels | IngestError]:
    """The annotations of one trace's labels (one Rows), and the errors it cannot place; ``at``: the
    record's line or index, which the annotation ids hold (one trace labelled in two files loads twice)."""
    if not isinstance(record, dict):
        yield IngestError(WRONG_TOP_LEVEL_TYPE, f"a trace's labels must be an object, got {type(record).__name__}",
                          pos)
        return
    if "trace_id" not in record or "errors" not in record:
        yield IngestError(MISSING_KEY, f"missing required key {'trace_id' if 'trace_id' not in record else 'errors'!r}",
                          pos)
        return
    trace = _hex_id(record["trace_id"], 32)
    if trace is None:
        yield IngestError(WRONG_FIELD_TYPE, f"trace_id {record['trace_id']!r} is not a hex trace id", f"{pos}.trace_id")
        return
    errors = record["errors"]
    if not isinstance(errors, list):
        yield IngestError(WRONG_FIELD_TYPE, "errors must be a list", f"{pos}.errors")
        return
    gid = f"otel:{trace}"
    split = split_of(file)
    provenance = f"{PROVENANCE}/{split}" if split else PROVENANCE
    held = cases.spans.get(gid)
    if held is None:
        yield IngestError(DANGLING_REFERENCE, f"trace {trace} is not in the warehouse (no graph {gid})",
                          f"{pos}.trace_id")
        return
    system, dataset, spans = held
    rows: dict[str, list[Any]] = {f.name: [] for f in schema.ANNOTATIONS}
    shared = {k: v for k, v in record.items() if k not in ("trace_id", "errors")}  # e.g. TRAIL's scores
    for j, error in enumerate(errors):
        epos = f"{pos}.errors[{j}]"
        if not isinstance(error, dict):
            yield IngestError(WRONG_FIELD_TYPE, "an error must be an object", epos)
            continue
        location = error.get("location")
        span = _hex_id(location, 16)
        if location is not None and span is None:
            yield IngestError(WRONG_FIELD_TYPE, f"location {location!r} is not a hex span id", f"{epos}.location")
            continue
        if span is not None and span not in spans:
            yield IngestError(DANGLING_REFERENCE, f"span {span} of trace {trace} is not in the warehouse "
                              f"(no operation {span} in graph {gid})", f"{epos}.location")
            continue
        category, description = error.get("category"), error.get("description")
        if not isinstance(category, str | None) or not isinstance(description, str | None):
            yield IngestError(WRONG_FIELD_TYPE, "category and description must be strings", epos)
            continue
        extra = {k: v for k, v in error.items() if k not in _MAPPED} | ({"trace": shared} if shared else {})
        rows["graph_id"].append(gid)
        rows["annotation_id"].append(f"{gid}#trail{j}@{file.source}/{file.relpath}#{at}")
        rows["system"].append(system)
        rows["dataset"].append(dataset)
        rows["error_type"].append(category)
        rows["taxonomy"].append(TAXONOMY if category is not None else None)
        rows["faulty_op_id"].append(span)
        rows["reason"].append(description)
        rows["provenance"].append(provenance)
        rows["annotator_kind"].append(schema.BENCHMARK_ANNOTATOR)
        rows["extra"].append(orjson.dumps(extra, option=orjson.OPT_SORT_KEYS).decode() if extra else None)
    n = len(rows["graph_id"])
    if n:
        for name in ("query_id", "query", "golden_answers", "prediction", "responsible_agent", "decisive_step",
                     "is_root_cause", "source_evidence_ids"):  # TRAIL names no root cause, query or step
            rows[name] = [None] * n
        yield Rows({"annotations": pa.Table.from_pydict(rows, schema=schema.ANNOTATIONS)})
    yield Labels(1)

