"""What the prediction readers share: a prediction becomes one row of ``attributions`` matched to the
annotation it names, and a run's coverage rows of ``attribution_scope``.

A prediction source's name is the method's (``--source gpt41:memtrace_attribution=outputs/gpt41``).
Its readers need the warehouse's annotations to resolve what each prediction names (``Cases``,
passed by the ingest); a prediction that names no known annotation, or more than one, is a rejected
record of ``ingest_errors`` (``unknown_case``, ``ambiguous_case``).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from pipelines import schema
from pipelines.readers.base import AMBIGUOUS_CASE, UNKNOWN_CASE, Case, IngestError, Rows, SourceFile

GRAPH_KINDS = {"memtracebench", "smartcomment"}  # where MemTrace's attribution runs find their graphs
MULTI_AGENT_KINDS = {"whowhen"}

needs_cases = True  # every prediction reader declares it: the ingest passes it the Cases


def resolve(found: list[Case], what: str, position: str) -> Case:
    """The one annotation a prediction names."""
    if not found:
        raise IngestError(UNKNOWN_CASE, f"no annotation of the warehouse is {what}", position)
    if len(found) > 1:
        graphs = ", ".join(sorted({c.graph_id for c in found})[:3])
        raise IngestError(AMBIGUOUS_CASE, f"{len(found)} annotations are {what} (graphs {graphs})", position)
    return found[0]


def prediction(file: SourceFile, case: Case, position: str, *, error_type: Any = None, op_id: Any = None,
               agent: Any = None, step: int | None = None, reason: Any = None) -> Rows:
    """One ``attributions`` row: method = the source's name."""
    row = {
        "method": file.source,
        "annotation_id": case.annotation_id,
        "graph_id": case.graph_id,
        "system": case.system,
        "dataset": case.dataset,
        "predicted_error_type": _text(error_type),
        "predicted_op_id": _text(op_id),
        "predicted_agent": _text(agent),
        "predicted_step": step,
        "reason": _text(reason),
        "source_file": file.relpath,
    }
    table = pa.Table.from_pylist([row], schema=schema.ATTRIBUTIONS)
    return Rows({"attributions": table}, key=case.annotation_id, position=position)


def scope(file: SourceFile, graph_ids: list[str]) -> Rows:
    """The ``attribution_scope`` rows of a run: the graphs whose annotations are its cases."""
    ids = sorted(set(graph_ids))
    table = pa.Table.from_pydict(
        {"method": [file.source] * len(ids), "graph_id": ids, "source_file": [file.relpath] * len(ids)},
        schema=schema.ATTRIBUTION_SCOPE,
    )
    return Rows({"attribution_scope": table})


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    return text if text.strip() and text.strip().lower() not in ("null", "none") else None
