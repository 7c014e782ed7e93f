"""How a multi-agent trajectory (Who&When, TracerTraj) becomes an execution graph.

The mapping (docs/SOURCES.md says it for users):

* one record = one graph with one session (``trajectory``);
* root nodes: the question (``query:question@1``), the reference answer
  (``golden_answers:ground_truth@1``) and one ``system_prompt:<agent>@1`` per system prompt;
* each history entry ``i`` is an operation ``step-<i>`` (``step`` = i, ``actor`` = the agent)
  that outputs the message node ``message:step_<i>@1``;
* information flows along the shared transcript: step 0 reads the question, step ``i`` reads
  message ``i-1`` (so every earlier message is an ancestor), and the acting agent's system prompt;
  plus the specific flows the transcript hides: a delegation ``Orchestrator (-> X)`` feeds X's
  next turn, a code block feeds the terminal turn that runs it, and terminal output feeds the next
  agent turn (extra edges only when those steps are not adjacent);
* the annotation points at ``step-<mistake_step>`` and keeps mistake_agent / mistake_reason.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa

from pipelines import schema
from pipelines.readers.base import (
    DANGLING_REFERENCE,
    MISSING_KEY,
    WRONG_FIELD_TYPE,
    GraphRows,
    IngestError,
    SourceFile,
    graph_row,
    table,
    value_columns,
)

SESSION_ID = "trajectory"
QUESTION_NODE = "query:question@1"
GROUND_TRUTH_NODE = "golden_answers:ground_truth@1"

_DELEGATION = re.compile(r"^\s*(?P<actor>.+?)\s*\(\s*->\s*(?P<target>.+?)\s*\)\s*$")
_ANNOTATED_ROLE = re.compile(r"^\s*(?P<actor>.+?)\s*\(\s*(?P<what>.+?)\s*\)\s*$")

@dataclass(frozen=True)
class Step:
    """One history entry: who acted, what kind of action, and what it said."""

    content: str
    actor: str
    op_name: str
    category: str
    role: str | None
    delegate_to: str | None = None
    agent_role: str | None = None  # the actor's role by the seed's agent rules (terminal, web_surfer, ...)


@dataclass
class Trajectory:
    graph_id: str
    system: str
    dataset: str
    question: str | None
    ground_truth: str | None
    steps: list[Step]
    system_prompts: dict[str, str] = field(default_factory=dict)
    mistake_agent: str | None = None
    mistake_step: int | None = None
    mistake_reason: str | None = None
    prediction: str | None = None
    provenance: str = ""
    annotator_kind: str | None = None  # annotations.annotator_kind of its label
    extra: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


@functools.cache
def _agent_rules() -> list[tuple[str, re.Pattern[str], str]]:
    """The seed's agent rules (sql/seeds/operation_types.csv, kind 'agent'), in the order the SQL
    macro agent_rule() applies them: lowest priority first, a system-specific rule before '*'."""
    rows = [r for r in schema.seed_rows("operation_types") if r["kind"] == "agent"]
    rows.sort(key=lambda r: (int(r["priority"]), r["system"] == "*", r["agent_role"]))
    return [(r["system"].lower(), re.compile(r["name"]), r["agent_role"]) for r in rows]


def agent_role(system: str, agent: str) -> str | None:
    """The role of ``agent`` in ``system``, as the SQL macro agent_role() computes it."""
    for rule_system, pattern, role in _agent_rules():
        if rule_system in ("*", system.lower()) and pattern.fullmatch(agent):
            return role or None
    return None


@dataclass(frozen=True)
class StepRule:
    """One row of sql/seeds/step_rules.csv: what a step does when its actor, role and content match."""

    system: str
    actor: re.Pattern[str] | None  # None: any ('*'); else the whole agent label must match
    agent_role: re.Pattern[str] | None  # None: any; else the whole role must match
    content: re.Pattern[str] | None  # None: any; else searched in the message
    op_name: str
    category: str
    priority: int


def _pattern(text: str, column: str, row: int) -> re.Pattern[str] | None:
    if text == "*":
        return None
    try:
        return re.compile(text)
    except re.error as exc:
        raise ValueError(
            f"sql/seeds/step_rules.csv row {row}: {column} {text!r} is not a regular expression: {exc}"
        ) from None


@functools.cache
def step_rules() -> list[StepRule]:
    """The seed's step rules, lowest priority first (ties: the most specific row, then file order)."""
    rules = []
    for row, r in enumerate(schema.seed_rows("step_rules"), start=2):
        rules.append(StepRule(
            r["system"].lower(), _pattern(r["actor"], "actor", row), _pattern(r["agent_role"], "agent_role", row),
            _pattern(r["content"], "content", row), r["op_name"], r["category"], int(r["priority"]),
        ))
    specificity = [sum(p is not None for p in (r.actor, r.agent_role, r.content)) + (r.system != "*") for r in rules]
    order = sorted(range(len(rules)), key=lambda i: (rules[i].priority, -specificity[i], i))
    return [rules[i] for i in order]


def step_rule(system: str, label: str, agent_role: str | None, content: str) -> StepRule:
    """The first seed rule that matches a step (the seed ends with a catch-all row)."""
    system = system.lower()
    for rule in step_rules():
        if rule.system not in ("*", system):
            continue
        if rule.actor is not None and not rule.actor.fullmatch(label):
            continue
        if rule.agent_role is not None and not rule.agent_role.fullmatch(agent_role or ""):
            continue
        if rule.content is not None and not rule.content.search(content):
            continue
        return rule
    raise ValueError(f"sql/seeds/step_rules.csv has no rule for a step of {label!r}: it must end with a '*' row")


def classify(actor_field: str, role: str | None, system: str = "*", content: str = "") -> Step:
    """One history entry as a Step: who acted (Magentic-One's ``Orchestrator (thought)`` is the
    Orchestrator) and what the step does, by the seed's step rules on its label, role and content."""
    delegation = _DELEGATION.match(actor_field)
    annotated = delegation or _ANNOTATED_ROLE.match(actor_field)
    actor = annotated["actor"] if annotated else actor_field
    agent = agent_role(system, actor)
    rule = step_rule(system, actor_field, agent, content)
    return Step(content, actor, rule.op_name, rule.category, role,
                delegation["target"] if delegation else None, agent)


def parse_step_index(value: Any, n_steps: int, position: str) -> int:
    """``mistake_step`` is a string (or int) index into history; anything else rejects the record."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise IngestError(WRONG_FIELD_TYPE, "mistake_step must be an integer or a string of one", position)
    try:
        step = int(str(value).strip())
    except ValueError:
        raise IngestError(WRONG_FIELD_TYPE, f"mistake_step {value!r} is not an integer", position) from None
    if not 0 <= step < n_steps:
        raise IngestError(
            DANGLING_REFERENCE, f"mistake_step {step} is outside the history (0..{n_steps - 1})", position
        )
    return step


def text_field(record: dict[str, Any], key: str, position: str, required: bool = False) -> str | None:
    value = record.get(key)
    if value is None:
        if required:
            raise IngestError(MISSING_KEY, f"missing required key {key!r}", position)
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise IngestError(WRONG_FIELD_TYPE, f"{key} must be a string, got {type(value).__name__}", position)


def _message(i: int) -> str:
    return f"message:step_{i}@1"


def _edges(steps: list[Step], prompts: dict[str, str]) -> list[tuple[str, str, int, str]]:
    """(source node, target node, step, kind) for every information flow of the trajectory."""
    flows: list[tuple[str, str, int, str]] = []
    for i, step in enumerate(steps):
        flows.append((QUESTION_NODE if i == 0 else _message(i - 1), _message(i), i, "transcript"))
        if step.actor in prompts:
            flows.append((f"system_prompt:{step.actor}@1", _message(i), i, "system_prompt"))
    for i, step in enumerate(steps):
        if step.delegate_to:  # delegation feeds the delegate's next turn
            nxt = next((k for k in range(i + 1, len(steps)) if steps[k].actor == step.delegate_to), None)
            if nxt is not None and nxt != i + 1:
                flows.append((_message(i), _message(nxt), nxt, "delegation"))
        if step.agent_role == "terminal":  # the latest code block feeds the terminal
            src = next((k for k in range(i - 1, -1, -1) if "```" in steps[k].content), None)
            if src is not None and src != i - 1:
                flows.append((_message(src), _message(i), i, "code"))
            nxt = next((k for k in range(i + 1, len(steps)) if steps[k].agent_role != "terminal"), None)
            if nxt is not None and nxt != i + 1:
                flows.append((_message(i), _message(nxt), nxt, "tool_output"))
    return flows


def to_rows(traj: Trajectory, file: SourceFile, sha256: str) -> GraphRows:
    """Flatten one trajectory into the canonical tables."""
    gid = traj.graph_id
    steps = traj.steps
    n = len(steps)

    node_ids = [QUESTION_NODE, GROUND_TRUTH_NODE]
    node_values: list[str | None] = [traj.question, traj.ground_truth]
    node_names = ["question", "ground_truth"]
    node_classes = ["query", "golden_answers"]
    node_categories = ["message & query", "golden_answers"]
    for agent, prompt in traj.system_prompts.items():
        node_ids.append(f"system_prompt:{agent}@1")
        node_values.append(prompt)
        node_names.append(agent)
        node_classes.append("system_prompt")
        node_categories.append("system_prompt")
    for i, step in enumerate(steps):
        node_ids.append(_message(i))
        node_values.append(step.content)
        node_names.append(f"step_{i}")
        node_classes.append("message")
        node_categories.append("message")
    values = pa.array(node_values, type=pa.large_string())
    n_nodes = len(node_ids)
    nodes = table(
        schema.NODES,
        {
            "graph_id": [gid] * n_nodes,
            "full_node_id": node_ids,
            "name": node_names,
            "class_name": node_classes,
            "version": [1] * n_nodes,
            "category": node_categories,
            "session_id": [SESSION_ID] * n_nodes,
            "value": values,
            **value_columns(values),
            "metadata": [None, None]
            + [None] * len(traj.system_prompts)
            + [orjson.dumps({"role": s.role, "step": i}).decode() for i, s in enumerate(steps)],
        },
    )

    op_meta = [
        orjson.dumps({"role": s.role, **({"delegate_to": s.delegate_to} if s.delegate_to else {})}).decode()
        for s in steps
    ]
    operations = table(
        schema.OPERATIONS,
        {
            "graph_id": [gid] * n,
            "op_id": [f"step-{i}" for i in range(n)],
            "op_name": [s.op_name for s in steps],
            "category": [s.category for s in steps],
            "session_id": [SESSION_ID] * n,
            "actor": [s.actor for s in steps],
            "step": pa.array(range(n), type=pa.int64()),
            "metadata": op_meta,
        },
    )

    flows = _edges(steps, traj.system_prompts)
    edges = table(
        schema.EDGES,
        {
            "graph_id": [gid] * len(flows),
            "edge_id": [f"edge-{step}-{kind}-{k}" for k, (_, _, step, kind) in enumerate(flows)],
            "op_id": [f"step-{step}" for _, _, step, _ in flows],
            "source_full_node_id": [src for src, _, _, _ in flows],
            "target_full_node_id": [dst for _, dst, _, _ in flows],
            "category": [kind for _, _, _, kind in flows],
            "session_id": [SESSION_ID] * len(flows),
        },
    )

    sessions = table(
        schema.SESSIONS,
        {
            "graph_id": [gid],
            "session_id": [SESSION_ID],
            "session_name": [traj.system],
            "category": ["multi_agent_trajectory"],
            "ordinal": [0],
        },
    )

    has_annotation = traj.mistake_step is not None or traj.mistake_agent is not None
    k = 1 if has_annotation else 0
    annotations = table(
        schema.ANNOTATIONS,
        {
            "graph_id": [gid] * k,
            "annotation_id": [f"{gid}#a0"] * k,
            "system": [traj.system] * k,
            "dataset": [traj.dataset] * k,
            "query_id": [QUESTION_NODE] * k,
            "query": [traj.question] * k,
            "golden_answers": [[traj.ground_truth] if traj.ground_truth is not None else None] * k,
            "prediction": [traj.prediction] * k,
            "error_type": [None] * k,
            "faulty_op_id": [f"step-{traj.mistake_step}" if traj.mistake_step is not None else None] * k,
            "responsible_agent": [traj.mistake_agent] * k,
            "decisive_step": [traj.mistake_step] * k,
            "is_root_cause": [True] * k,  # mistake_step is the decisive error: the failure's root cause
            "reason": [traj.mistake_reason] * k,
            "source_evidence_ids": [None] * k,
            "provenance": [traj.provenance] * k,
            "annotator_kind": [traj.annotator_kind] * k,
            "extra": [orjson.dumps(traj.extra, option=orjson.OPT_SORT_KEYS).decode() if traj.extra else None] * k,
        },
    )

    tables = {"sessions": sessions, "nodes": nodes, "edges": edges, "operations": operations,
              "annotations": annotations}
    counts = {name: tables[name].num_rows for name in schema.COUNT_COLUMNS}
    tables["graphs"] = graph_row(
        graph_id=gid,
        file=file,
        sha256=sha256,
        system=traj.system,
        dataset=traj.dataset,
        user_id=None,
        project_id=traj.system,
        created_at=pa.nulls(1, type=schema.TIMESTAMP),
        counts=counts,
        metadata=orjson.dumps(traj.metadata, option=orjson.OPT_SORT_KEYS).decode() if traj.metadata else None,
    )
    return GraphRows({name: tables[name] for name in schema.GRAPH_TABLES})


_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
_HEX64 = re.compile(r"^[0-9a-f]{64}$", re.I)


def task_benchmark(question_id: str | None) -> str:
    """Who&When's task benchmark is not a field: a UUID id is GAIA, a 64-hex id is AssistantBench."""
    if question_id and _UUID.match(question_id.strip()):
        return "gaia"
    if question_id and _HEX64.match(question_id.strip()):
        return "assistantbench"
    return schema.UNKNOWN
