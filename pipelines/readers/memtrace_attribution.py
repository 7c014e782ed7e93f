"""Reader for the output of MemTrace's ``run_error_attribution.py`` (zjunlp/MemTrace): one JSON
file per split, ``{"split", "sampled_graph_paths": [...], "results": [...], "metrics": {...}}``.

Each result is an annotation's own fields (``query_id``, ``final_error_type``, ``final_op_id``, ...)
plus ``graph_path`` (``<dataset_dir>/<split>/<graph file name>``) and ``error_attribution_result``
(``error_type``, ``op_id``, ``reason``); it is matched to the warehouse's annotation by split, graph
file name and ``query_id``. The run's cases are the annotations of the graphs it sampled
(``sampled_graph_paths``; every graph of the split when absent). Every file of the source belongs
to the method named by the source; all of a method's files make one partition.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from pipelines.readers.base import (
    MISSING_KEY,
    WRONG_FIELD_TYPE,
    WRONG_TOP_LEVEL_TYPE,
    Cases,
    GraphRows,
    IngestError,
    Rows,
    SourceFile,
    list_files,
    load_json,
)
from pipelines.readers.predictions import GRAPH_KINDS, prediction, resolve, scope
from pipelines.storage.warehouse import relative_name

kind = "memtrace_attribution"
needs_cases = True
SPLIT = "predictions"


def discover(root: Path, source: str) -> list[SourceFile]:
    root = root.absolute()
    if root.is_file():
        return [SourceFile(source, SPLIT, root, root.name)]
    return [SourceFile(source, SPLIT, p, relative_name(root, p)) for p in list_files(root, "**/*.json")]


def _graph_file(path: Any, position: str) -> tuple[str, str]:
    """(split, graph file name) of a ``<dataset_dir>/<split>/<file>.json`` path."""
    if not isinstance(path, str) or not path.strip():
        raise IngestError(WRONG_FIELD_TYPE, "a graph path must be a non-empty string", position)
    parts = PurePosixPath(path.replace("\\", "/")).parts
    if len(parts) < 2:
        raise IngestError(WRONG_FIELD_TYPE, f"graph path {path!r} names no split folder", position)
    return parts[-2], parts[-1]


def read(file: SourceFile, cases: Cases) -> Iterator[GraphRows | Rows | IngestError]:
    doc = load_json(file.path.read_bytes())
    if not isinstance(doc, dict):
        raise IngestError(WRONG_TOP_LEVEL_TYPE, f"expected a JSON object, got {type(doc).__name__}", "$")
    results = doc.get("results")
    if not isinstance(results, list):
        raise IngestError(MISSING_KEY if results is None else WRONG_FIELD_TYPE,
                          "'results' must be a list of attribution results", "$.results")
    split = doc.get("split")
    if split is not None and not isinstance(split, str):
        raise IngestError(WRONG_FIELD_TYPE, "'split' must be a string", "$.split")
    sampled = doc.get("sampled_graph_paths")
    if sampled is None:
        splits = {split} if split else set()
        for i, result in enumerate(results):
            if isinstance(result, dict) and isinstance(result.get("graph_path"), str):
                splits.add(_graph_file(result["graph_path"], f"$.results[{i}].graph_path")[0])
        if not splits:
            raise IngestError(MISSING_KEY, "no 'split', 'sampled_graph_paths' or graph_path says which graphs "
                              "the run covered", "$")
        covered = [g for s in sorted(splits) for g in cases.graphs_of(GRAPH_KINDS, split=s)]
    else:
        if not isinstance(sampled, list):
            raise IngestError(WRONG_FIELD_TYPE, "'sampled_graph_paths' must be a list", "$.sampled_graph_paths")
        covered = []
        for i, path in enumerate(sampled):
            s, name = _graph_file(path, f"$.sampled_graph_paths[{i}]")
            covered += cases.graphs_of(GRAPH_KINDS, split=s, file_name=name)
    yield scope(file, covered)
    for i, result in enumerate(results):
        position = f"$.results[{i}]"
        try:
            yield _prediction(file, cases, result, position)
        except IngestError as error:
            yield error


def _prediction(file: SourceFile, cases: Cases, result: Any, position: str) -> Rows:
    if not isinstance(result, dict):
        raise IngestError(WRONG_FIELD_TYPE, "a result must be an object", position)
    split, name = _graph_file(result.get("graph_path"), f"{position}.graph_path")
    query_id = result.get("query_id")
    if not isinstance(query_id, str):
        raise IngestError(MISSING_KEY, "a result needs its annotation's query_id", f"{position}.query_id")
    found = [c for c in cases.by_query.get((split, name, query_id), []) if c.kind in GRAPH_KINDS]
    case = resolve(found, f"query {query_id!r} of {split}/{name}", position)
    attributed = result.get("error_attribution_result")
    if attributed is None:
        attributed = {}
    if not isinstance(attributed, dict):
        raise IngestError(WRONG_FIELD_TYPE, "error_attribution_result must be an object",
                          f"{position}.error_attribution_result")
    return prediction(file, case, position, error_type=attributed.get("error_type"), op_id=attributed.get("op_id"),
                      reason=attributed.get("reason"))
