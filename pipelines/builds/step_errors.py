"""What a failed Dagster step raised, said in one line for the build's summary.

Dagster wraps what an asset raised in its own errors (``DagsterExecutionStepExecutionError``...);
the user wants the error underneath, in the words our code wrote for them. Shared by the build's own
runs and the fan-out's runs on a cluster.
"""

from __future__ import annotations

from typing import Any


def cause(error: Any) -> str:
    """The error a step raised (not Dagster's wrapper around it), in one line."""
    if error is None:
        return "failed"
    while error.cls_name.startswith("Dagster") and (error.cause or error.context) is not None:
        error = error.cause or error.context
    return " ".join(message(error).split())[:300]


def message(error: Any) -> str:
    """What an error of ours says, without the qualified class name Dagster puts before it
    ("pipelines.builds.ingest.StrictIngestError: ..."): our messages are written for the user. Others keep
    their class name (``KeyError: 'x'`` says little without it)."""
    head, sep, rest = error.message.strip().partition(": ")
    ours = head.startswith(("pipelines.", "dashboards.")) and head.endswith(f".{error.cls_name}")
    return rest.strip() if sep and ours else error.message.strip()
