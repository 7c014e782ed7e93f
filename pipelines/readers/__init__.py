"""Source readers, one module per format, named after its kind. A new format is its module plus its
kind in one of the tuples below: the CLI's help, the config's validation and the docs test read them.

Importing this package imports no reader (the CLI checks kinds before anything heavy loads);
:func:`reader_for` and the ``READERS`` mappings import the readers when first asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipelines.readers.base import Reader

# Graph sources: execution graphs and their annotations.
GRAPH_KINDS: tuple[str, ...] = ("memtracebench", "smartcomment", "whowhen", "tracertraj", "otlp", "otel_spans",
                                "agentrx", "phoenix", "mlflow", "langfuse")
# Label sources (failure labels of graphs another source holds): read after the graph sources, against
# their graphs and operations, and before the prediction sources, which may predict their labels.
LABEL_KINDS: tuple[str, ...] = ("trail_labels",)
# Prediction sources (the outputs of failure-attribution methods): read after the graph and label
# sources, against their annotations (docs/ATTRIBUTION.md).
PREDICTION_KINDS: tuple[str, ...] = ("memtrace_attribution", "whowhen_predictions", "attribution_jsonl")
KINDS: tuple[str, ...] = GRAPH_KINDS + LABEL_KINDS + PREDICTION_KINDS


def tier(kind: str) -> int:
    """The order sources are read in: 0 graph sources, 1 label sources (matched against the graphs),
    2 prediction sources (matched against every annotation, the label sources' included)."""
    return 2 if kind in PREDICTION_KINDS else 1 if kind in LABEL_KINDS else 0


def unknown_kind(kind: str) -> str:
    """What to say of a kind no reader reads."""
    return f"unknown source kind {kind!r}; use one of: {', '.join(sorted(KINDS))}"


def reader_for(kind: str) -> Reader:
    if kind not in KINDS:
        raise ValueError(unknown_kind(kind))
    return importlib.import_module(f"pipelines.readers.{kind}")  # type: ignore[return-value]


def _readers(kinds: tuple[str, ...]) -> dict[str, Reader]:
    return {kind: reader_for(kind) for kind in kinds}


_MAPPINGS = {"READERS": KINDS, "LABEL_READERS": LABEL_KINDS, "PREDICTION_READERS": PREDICTION_KINDS}


def __getattr__(name: str) -> Any:
    """``READERS`` (every kind's reader), ``LABEL_READERS`` and ``PREDICTION_READERS``, imported on first use."""
    if name in _MAPPINGS:
        return _readers(_MAPPINGS[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
