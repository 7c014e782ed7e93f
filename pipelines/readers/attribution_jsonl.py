"""Reader for the generic prediction format: JSON lines, one prediction per line, for any method
or benchmark: ``{"annotation_id": <the warehouse's own id>, "error_type", "op_id", "agent", "step",
"reason"}`` (every key but annotation_id optional). The run's cases are every annotation of the
sources whose annotations the file names.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson

from pipelines.readers.base import (
    INVALID_JSON,
    MISSING_KEY,
    WRONG_FIELD_TYPE,
    WRONG_TOP_LEVEL_TYPE,
    Cases,
    GraphRows,
    IngestError,
    Rows,
    SourceFile,
    list_files,
)
from pipelines.readers.predictions import prediction, resolve, scope
from pipelines.storage.warehouse import relative_name

kind = "attribution_jsonl"
needs_cases = True
SPLIT = "predictions"
KEYS = {"annotation_id", "error_type", "op_id", "agent", "step", "reason"}


def discover(root: Path, source: str) -> list[SourceFile]:
    root = root.absolute()
    if root.is_file():
        return [SourceFile(source, SPLIT, root, root.name)]
    return [SourceFile(source, SPLIT, p, relative_name(root, p)) for p in list_files(root, "**/*.jsonl")]


def read(file: SourceFile, cases: Cases) -> Iterator[GraphRows | Rows | IngestError]:
    predictions: list[Rows] = []
    errors: list[IngestError] = []
    sources: set[str] = set()
    for number, line in enumerate(file.path.read_bytes().splitlines(), start=1):
        position = f"line {number}"
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            errors.append(IngestError(INVALID_JSON, f"the line is not JSON: {exc.msg}", position))
            continue
        if not isinstance(record, dict):
            errors.append(IngestError(WRONG_TOP_LEVEL_TYPE, "a line must hold a JSON object", position))
            continue
        annotation_id = record.get("annotation_id")
        if not isinstance(annotation_id, str):
            errors.append(IngestError(MISSING_KEY, "a prediction needs the annotation_id it is about", position))
            continue
        step = record.get("step")
        if step is not None and (isinstance(step, bool) or not isinstance(step, int | str)
                                 or not str(step).strip().lstrip("-").isdigit()):
            errors.append(IngestError(WRONG_FIELD_TYPE, f"step {step!r} is not an integer", position))
            continue
        try:
            case = resolve(cases.by_id.get(annotation_id, []), f"annotation {annotation_id!r}", position)
        except IngestError as error:
            errors.append(error)
            continue
        sources.add(case.source)
        predictions.append(prediction(file, case, position, error_type=record.get("error_type"),
                                      op_id=record.get("op_id"), agent=record.get("agent"),
                                      step=None if step is None else int(step), reason=record.get("reason")))
    yield scope(file, [g for s in sorted(sources) for g in cases.graphs_of({k for _, _, k, _, _ in cases.graphs},
                                                                           sources={s})])
    yield from predictions
    yield from errors
