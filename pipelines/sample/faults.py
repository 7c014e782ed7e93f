"""Seeded, procedural fault injection for the sample corpus, and the category-fit rule.

For each question of a graph a seeded choice decides whether the pipeline breaks and where. The
fault really happens in the traced pipeline and the :class:`FaultPlan` records the ``op_id`` of the
operation where it was injected; that op becomes the annotation's ``final_op_id``.

What each error type does, by memory system (the decisive message is the last event of the asked
fact chain, e.g. the update "I switched my home city from Lisbon to Porto"):

- ``ExtractionError``: the extraction op loses the decisive fact (RAG ``finalize_memory_unit`` drops
  it from the unit, Mem0 ``extract_facts`` and EverMemOS ``extract_memory`` do not extract it).
  Long-Context has no extraction op, so it never gets this error.
- ``UpdateError``: a change is not applied; memory keeps the stale state (Mem0
  ``update_memory_decision`` says NONE or writes the values swapped; RAG/EverMemOS
  ``message_buffer_update`` and Long-Context ``memory_update`` store a stale copy of the message).
  Only for chains whose decisive event is an update or a retraction.
- ``DeletionError``: a live memory is removed in a later session (Mem0 ``update_memory_decision``
  emits a wrong DELETE with a ``delete_marker`` node; the systems without a delete op remove it in an
  update op: RAG ``add`` rewrites the stored unit without it, EverMemOS ``message_buffer_update``
  evicts the atomic fact, Long-Context ``memory_update`` drops the line). Not for retraction
  questions (nothing live to delete) nor when the decisive message is in the last session.
- ``RetrievalError``: a retrieval op misses the decisive memory (EverMemOS: at the hybrid, the
  agentic round-2 or the final rerank step). Not for Mem0 retraction questions, where the correct
  memory state is already empty.
- ``ResponseError``: ``question-answering`` answers wrongly from correct context.
- ``AnnotationError``: the golden answer is wrong; the judge fails a correct prediction.
- ``LLMAsAJudgeError``: the judge fails a correct prediction.
  For the last two, ``final_op_id`` is the ``llm-judge`` op or the string ``"null"`` (seeded).

**Category-fit rule** (:data:`ERROR_CATEGORY_FIT`): an annotation's ``final_op_id`` names an
operation of the same graph whose category is one of the allowed categories of its error type;
``"null"`` is allowed only for the non-memory types (:data:`NULL_OP_ALLOWED`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from pipelines import schema

from .conversations import Dialogue, Question

# The taxonomy is the warehouse's own (sql/seeds/error_types.csv, read by pipelines.schema).
ERROR_TYPES: tuple[str, ...] = schema.ERROR_TYPES
MEMORY_ERROR_TYPES: frozenset[str] = frozenset(schema.MEMORY_ERROR_TYPES)
NON_MEMORY_ERROR_TYPES: frozenset[str] = frozenset(schema.NON_MEMORY_ERROR_TYPES)
CONSTRUCTION_ERROR_TYPES: frozenset[str] = frozenset(schema.CONSTRUCTION_ERROR_TYPES)

#: error type -> operation categories its ``final_op_id`` may have.
ERROR_CATEGORY_FIT: dict[str, frozenset[str]] = {
    "ExtractionError": frozenset({"extraction"}),
    "UpdateError": frozenset({"update"}),
    "DeletionError": frozenset({"update"}),
    "RetrievalError": frozenset({"retrieval"}),
    "ResponseError": frozenset({"evaluation"}),
    "AnnotationError": frozenset({"evaluation"}),
    "LLMAsAJudgeError": frozenset({"evaluation"}),
}
#: error types whose ``final_op_id`` may be the string "null".
NULL_OP_ALLOWED: frozenset[str] = NON_MEMORY_ERROR_TYPES
NULL_OP_ID = "null"

# How often a question fails, and how the error types are weighted among the applicable ones.
FAIL_RATE = 0.42
ERROR_WEIGHTS: dict[str, float] = {
    "ExtractionError": 0.20, "UpdateError": 0.14, "DeletionError": 0.16, "RetrievalError": 0.20,
    "ResponseError": 0.18, "AnnotationError": 0.08, "LLMAsAJudgeError": 0.08,
}
EVERMEMOS_RETRIEVAL_STAGES = ("hybrid", "round2", "final_rerank")


def applicable_errors(split: str, question: Question, n_sessions: int) -> list[str]:
    """Error types that can really break this question in this system (see the module docstring)."""
    out = []
    if split != "long_context":
        out.append("ExtractionError")
    if question.decisive_kind in ("update", "retract"):
        out.append("UpdateError")
    if question.kind != "retracted" and question.decisive_session < n_sessions:
        out.append("DeletionError")
    if not (split == "mem0" and question.kind == "retracted"):
        out.append("RetrievalError")
    out += ["ResponseError", "AnnotationError", "LLMAsAJudgeError"]
    return out


@dataclass
class Fault:
    """One injected fault; ``op_id``/``op_name`` are filled in when the pipeline injects it."""

    question: Question
    error_type: str
    null_op: bool = False
    stage: str | None = None
    variant: int = 0
    op_id: str | None = None
    op_name: str | None = None

    @property
    def final_op_id(self) -> str:
        if self.null_op:
            return NULL_OP_ID
        if self.op_id is None:
            raise RuntimeError(f"{self.error_type} for {self.question.qid} was never injected")
        return self.op_id


@dataclass
class FaultPlan:
    """The faults of one graph, looked up by the pipeline at the points where they can happen."""

    faults: dict[str, Fault] = field(default_factory=dict)  # qid -> fault

    def for_question(self, qid: str, error_type: str | None = None) -> Fault | None:
        f = self.faults.get(qid)
        return f if f is not None and (error_type is None or f.error_type == error_type) else None

    def at_message(self, error_type: str, msg_id: str) -> Fault | None:
        """The fault of ``error_type`` whose decisive message is ``msg_id``, if any."""
        for f in self.faults.values():
            if f.error_type == error_type and f.question.decisive == msg_id:
                return f
        return None

    def pending_deletions(self, session: int) -> list[Fault]:
        """Deletion faults not yet injected whose decisive message is in an earlier session."""
        return [f for f in self.faults.values() if f.error_type == "DeletionError" and f.op_id is None
                and f.question.decisive_session < session]

    @staticmethod
    def inject(fault: Fault, op_id: str, op_name: str) -> None:
        if fault.op_id is None:
            fault.op_id, fault.op_name = op_id, op_name

    def check_injected(self, error_types: frozenset[str] | None = None) -> None:
        """Fail loudly when a planned fault never happened (a generator bug, not a data property)."""
        for f in self.faults.values():
            if f.op_id is None and (error_types is None or f.error_type in error_types):
                raise RuntimeError(f"{f.error_type} for {f.question.qid} was planned but never injected")

    def check_injected_construction(self) -> None:
        self.check_injected(CONSTRUCTION_ERROR_TYPES)


def plan_faults(split: str, dialogue: Dialogue, rng: random.Random) -> FaultPlan:
    """Decide, per question, whether and where the pipeline breaks. At least one question passes
    and at least one fails in every graph."""
    questions = dialogue.questions
    failing = [rng.random() < FAIL_RATE for _ in questions]
    if len(questions) >= 2:
        if all(failing):
            failing[rng.randrange(len(questions))] = False
        if not any(failing):
            failing[rng.randrange(len(questions))] = True
    plan = FaultPlan()
    n_sessions = len(dialogue.sessions)
    for q, fail in zip(questions, failing, strict=True):
        if not fail:
            continue
        types = applicable_errors(split, q, n_sessions)
        error_type = rng.choices(types, weights=[ERROR_WEIGHTS[t] for t in types])[0]
        plan.faults[q.qid] = Fault(
            question=q,
            error_type=error_type,
            null_op=error_type in NULL_OP_ALLOWED and rng.random() < 0.4,
            stage=rng.choice(EVERMEMOS_RETRIEVAL_STAGES) if split == "evermemos" else None,
            variant=rng.randrange(2),
        )
    return plan
