"""Source readers, one module per format. A new format is one module plus one line here."""

from __future__ import annotations

from pipelines.readers import (
    agentrx,
    attribution_jsonl,
    memtrace_attribution,
    memtracebench,
    smartcomment,
    tracertraj,
    whowhen,
    whowhen_predictions,
)
from pipelines.readers.base import Reader

READERS: dict[str, Reader] = {
    module.kind: module for module in (memtracebench, smartcomment, whowhen, tracertraj, agentrx)
}
# Prediction sources (the outputs of failure-attribution methods): read after the graph sources,
# against their annotations (docs/ATTRIBUTION.md).
PREDICTION_READERS: dict[str, Reader] = {
    module.kind: module for module in (memtrace_attribution, whowhen_predictions, attribution_jsonl)
}
READERS |= PREDICTION_READERS


def reader_for(kind: str) -> Reader:
    try:
        return READERS[kind]
    except KeyError:
        raise ValueError(f"unknown source kind {kind!r}; known: {', '.join(sorted(READERS))}") from None
