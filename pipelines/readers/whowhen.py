"""Reader for Who&When: a folder holding Algorithm-Generated/ (CaptainAgent) and/or Hand-Crafted/
(Magentic-One), one JSON record per file.

As the official scorer does, the agent of a step is ``name`` in Algorithm-Generated and ``role`` in
Hand-Crafted. Agent names are kept as written (not normalised): disagreement between the
annotated ``mistake_agent`` and the actor of ``mistake_step`` stays queryable.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipelines import schema
from pipelines.readers.base import (
    MISSING_KEY,
    WRONG_FIELD_TYPE,
    WRONG_TOP_LEVEL_TYPE,
    GraphRows,
    IngestError,
    SourceFile,
    file_sha256,
    list_files,
    load_json,
    read_bytes,
    split_of,
)
from pipelines.readers.trajectory import (
    Step,
    Trajectory,
    classify,
    parse_step_index,
    task_benchmark,
    text_field,
    to_rows,
)
from pipelines.storage.warehouse import relative_name

kind = "whowhen"

SUBSET_SYSTEMS = {"algorithm-generated": "captainagent", "hand-crafted": "magentic-one"}
_MAPPED = {
    "question", "ground_truth", "history", "mistake_agent", "mistake_step", "mistake_reason", "system_prompt",
    "model_prediction",
}
_GRAPH_METADATA = ("question_ID", "level", "is_correct", "is_corrected")


def discover(root: Path, source: str) -> list[SourceFile]:
    root = root.absolute()  # file paths keep their own names (a Hub cache links them to blobs)
    if root.is_file():
        return [SourceFile(source, root.parent.name, root, root.name)]
    default = root.name  # the root may itself be one subset folder
    return [
        SourceFile(source, split_of(root, path, default), path, relative_name(root, path))
        for path in list_files(root, "**/*.json")
    ]


def _system(split: str, history: list[dict[str, Any]]) -> str:
    known = SUBSET_SYSTEMS.get(split.lower())
    if known:
        return known
    # Outside the two subset folders, the record's shape tells: only CaptainAgent steps carry `name`.
    return "captainagent" if any("name" in h for h in history) else "magentic-one"


def parse_history(record: dict[str, Any], agent_key: str, system: str = "*") -> list[Step]:
    history = record.get("history")
    if history is None:
        raise IngestError(MISSING_KEY, "missing required key 'history'", "$")
    if not isinstance(history, list):
        raise IngestError(WRONG_FIELD_TYPE, "history must be a list", "$.history")
    steps = []
    for i, entry in enumerate(history):
        pos = f"$.history[{i}]"
        if not isinstance(entry, dict):
            raise IngestError(WRONG_FIELD_TYPE, "a history entry must be an object", pos)
        content = text_field(entry, "content", pos)
        role = text_field(entry, "role", pos)
        actor = text_field(entry, agent_key, pos) or role or text_field(entry, "name", pos)
        if actor is None:
            raise IngestError(MISSING_KEY, f"history entry names no agent ({agent_key!r} or 'role')", pos)
        steps.append(classify(actor, role, system, content or ""))
    return steps


def trajectory(record: Any, file: SourceFile, graph_id: str, provenance: str, system: str | None,
               dataset: str | None, agent_key: str | None = None) -> Trajectory:
    """A Who&When-shaped record (also TracerTraj's JSON records) as a Trajectory."""
    if not isinstance(record, dict):
        raise IngestError(WRONG_TOP_LEVEL_TYPE, f"expected a JSON object, got {type(record).__name__}", "$")
    raw_history = record.get("history")
    history = raw_history if isinstance(raw_history, list) else []
    system = system or _system(file.split, history)
    if agent_key is None:
        agent_key = "role" if system == "magentic-one" else "name"
    steps = parse_history(record, agent_key, system)
    prompts = record.get("system_prompt") or {}
    if not isinstance(prompts, dict) or not all(isinstance(v, str) for v in prompts.values()):
        raise IngestError(WRONG_FIELD_TYPE, "system_prompt must map agent names to strings", "$.system_prompt")
    mistake_step = record.get("mistake_step")
    question_id = text_field(record, "question_ID", "$.question_ID")
    return Trajectory(
        graph_id=graph_id,
        system=system,
        dataset=dataset or task_benchmark(question_id),
        question=text_field(record, "question", "$.question", required=True),
        ground_truth=text_field(record, "ground_truth", "$.ground_truth"),
        steps=steps,
        system_prompts=dict(prompts),
        mistake_agent=text_field(record, "mistake_agent", "$.mistake_agent"),
        mistake_step=None if mistake_step is None else parse_step_index(mistake_step, len(steps), "$.mistake_step"),
        mistake_reason=text_field(record, "mistake_reason", "$.mistake_reason"),
        prediction=text_field(record, "model_prediction", "$.model_prediction"),
        provenance=provenance,
        annotator_kind=schema.BENCHMARK_ANNOTATOR,  # Who&When's and TracerTraj's published labels
        extra={k: v for k, v in record.items() if k not in _MAPPED},
        metadata={k: record[k] for k in _GRAPH_METADATA if k in record},
    )


def read(file: SourceFile) -> Iterator[GraphRows | IngestError]:
    data = read_bytes(file.path)
    record = load_json(data)
    graph_id = f"{file.source}:{file.relpath.removesuffix('.json')}"
    traj = trajectory(record, file, graph_id, provenance=f"whowhen/{file.split}", system=None, dataset=None)
    yield to_rows(traj, file, file_sha256(data))
