"""Source readers, one module per format. A new format is one module plus one line here."""

from __future__ import annotations

from pipelines.readers import (
    agentrx,
    attribution_jsonl,
    memtrace_attribution,
    memtracebench,
    otel_spans,
    otlp,
    smartcomment,
    tracertraj,
    trail_labels,
    whowhen,
    whowhen_predictions,
)
from pipelines.readers.base import Reader

READERS: dict[str, Reader] = {
    module.kind: module for module in (memtracebench, smartcomment, whowhen, tracertraj, otlp, otel_spans, agentrx)
}
# Prediction sources (the outputs of failure-attribution methods): read after the graph sources,
# against their annotations (docs/ATTRIBUTION.md).
PREDICTION_READERS: dict[str, Reader] = {
    module.kind: module for module in (memtrace_attribution, whowhen_predictions, attribution_jsonl)
}
# Label sources (failure labels of graphs another source holds): read after the graph sources, against
# their graphs and operations, and before the prediction sources, which may predict their labels.
LABEL_READERS: dict[str, Reader] = {module.kind: module for module in (trail_labels,)}
READERS |= LABEL_READERS | PREDICTION_READERS


def tier(kind: str) -> int:
    """The order sources are read in: 0 graph sources, 1 label sources (matched against the graphs),
    2 prediction sources (matched against every annotation, the label sources' included)."""
    return 2 if kind in PREDICTION_READERS else 1 if kind in LABEL_READERS else 0


def reader_for(kind: str) -> Reader:
    try:
        return READERS[kind]
    except KeyError:
        raise ValueError(f"unknown source kind {kind!r}; known: {', '.join(sorted(READERS))}") from None
