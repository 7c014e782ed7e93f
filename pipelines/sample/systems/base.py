"""What the four toy memory systems share: the run loop over sessions, and the evaluation ops.

A system builds memory once per dialogue session (one ``memory_construction`` session each), then
retrieves context for every question in one ``memory_search`` session, and answers and is judged in
one ``memory_evaluation`` session through the ``question-answering`` and ``llm-judge`` ops (category
``evaluation``), exactly like the benchmark's runner. After the run, every question's judge verdict
is checked against the fault plan: failed if and only if a fault was injected.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from smartcomment.runtime.variable import RuntimeVariable

from .. import models
from ..conversations import Dialogue, DialogueSession, Message, Question
from ..faults import Fault, FaultPlan
from ..tracing import Out, Tracer


@dataclass
class Outcome:
    """One judged question, with the full node ids the annotation needs."""

    question: Question
    prediction: str
    golden: list[str]
    passed: bool
    fault: Fault | None
    query_id: str
    prediction_id: str
    golden_answers_id: str


def stale_text(message: Message, question: Question) -> str:
    """The decisive message as a stale write stores it: the change replaced by the old state."""
    assert message.event is not None
    return message.text.replace(message.event.sentence, question.stale_sentence)


def line_of(message: Message, text: str) -> str:
    return f"[{message.id}] {message.speaker}: {text}"


def buffer_text(lines: Iterable[str]) -> str:
    """A buffer's value: a count header, then its lines.

    The header changes whenever a message is appended. smartcomment compares a changed value with the
    previous version character by character (in Python) to log where they differ; with the header,
    that comparison stops at once instead of scanning the whole previous buffer.
    """
    body = list(lines)
    return f"# {len(body)} buffered messages\n" + "\n".join(body)


def turn_pairs(session: DialogueSession, msg_rvs: list[RuntimeVariable[str]]
               ) -> list[list[tuple[Message, RuntimeVariable[str]]]]:
    """Messages in ingestion batches of two (one exchange), as memory layers are fed."""
    items = list(zip(session.messages, msg_rvs, strict=True))
    return [items[i:i + 2] for i in range(0, len(items), 2)]


class MemorySystem:
    """Base class: subclasses implement :meth:`construct_session` and :meth:`retrieve`."""

    split = ""
    project_id = ""
    layer_type = ""

    def __init__(self, dialogue: Dialogue, plan: FaultPlan, tracer: Tracer) -> None:
        self.dialogue = dialogue
        self.plan = plan
        self.tracer = tracer
        self.messages: dict[str, Message] = {m.id: m for m in dialogue.messages}
        self.setup()

    def setup(self) -> None:
        """Initialise the system's own state."""

    # -- to implement -------------------------------------------------------------------------------
    def construct_session(self, session: DialogueSession, msg_rvs: list[RuntimeVariable[str]]) -> None:
        raise NotImplementedError

    def retrieve(self, question: Question, query_rv: RuntimeVariable[str]) -> RuntimeVariable[str]:
        raise NotImplementedError

    # -- shared -------------------------------------------------------------------------------------
    def text_for_memory(self, message: Message) -> tuple[str, Fault | None]:
        """The message text a buffer/memory write stores, stale if an UpdateError targets it."""
        fault = self.plan.at_message("UpdateError", message.id)
        if fault is None:
            return message.text, None
        return stale_text(message, fault.question), fault

    def run(self) -> list[Outcome]:
        d, t = self.dialogue, self.tracer
        for session in d.sessions:
            with t.session(session.session_id, "memory_construction",
                           metadata={"session_index": session.index, "session_date": session.date}):
                msg_rvs = [
                    t.var(m.text, m.id, category="message",
                          metadata={"speaker": m.speaker, "session": session.index, "turn": m.turn,
                                    "date": session.date})
                    for m in session.messages
                ]
                self.construct_session(session, msg_rvs)
        self.plan.check_injected_construction()

        contexts: dict[str, tuple[RuntimeVariable[str], RuntimeVariable[str]]] = {}
        with t.session(f"{d.user_id}-search", "memory_search", metadata={"n_queries": len(d.questions)}):
            for q in d.questions:
                query_rv = t.var(
                    q.text, q.qid, class_name="query", category="message & query",
                    metadata={"evidence": list(q.evidence), "question_type": q.kind},
                )
                contexts[q.qid] = (query_rv, self.retrieve(q, query_rv))

        outcomes = []
        with t.session(f"{d.user_id}-evaluation", "memory_evaluation",
                       metadata={"n_queries": len(d.questions), "judge": "string-match"}):
            for q in d.questions:
                query_rv, ctx_rv = contexts[q.qid]
                outcomes.append(self._evaluate(q, query_rv, ctx_rv))
        self.plan.check_injected()
        for o in outcomes:
            if o.passed != (o.fault is None):
                raise RuntimeError(
                    f"{self.split}/{d.user_id} {o.question.qid}: judged {'passed' if o.passed else 'failed'} "
                    f"but the plan says {o.fault.error_type if o.fault else 'no fault'} "
                    f"(prediction {o.prediction!r}, golden {o.golden!r})"
                )
        return outcomes

    def _evaluate(self, q: Question, query_rv: RuntimeVariable[str], ctx_rv: RuntimeVariable[str]) -> Outcome:
        t, plan = self.tracer, self.plan
        prediction = models.answer(q.text, ctx_rv.raw_value, self.dialogue.user)
        response_fault = plan.for_question(q.qid, "ResponseError")
        if response_fault is not None:
            prediction = q.wrong_answer
        qa_id, (pred_rv,) = t.op(
            "question-answering", "evaluation", [query_rv, ctx_rv],
            [Out(prediction, q.qid, class_name="prediction", category="prediction")],
            comment="Answer the question from the retrieved memory.",
        )
        if response_fault is not None:
            plan.inject(response_fault, qa_id, "question-answering")

        golden = list(q.golden)
        annotation_fault = plan.for_question(q.qid, "AnnotationError")
        if annotation_fault is not None:
            golden = [q.wrong_answer]
        gold_rv = t.var(", ".join(golden), q.qid, class_name="golden_answers", category="golden_answers")

        verdict = models.judge(prediction, golden)
        judge_fault = plan.for_question(q.qid, "LLMAsAJudgeError")
        if judge_fault is not None:
            verdict = False
        reference = ", ".join(golden)
        if verdict:
            response = f"The prediction {prediction!r} matches the reference answer {reference!r}. CORRECT"
        else:
            response = f"The prediction {prediction!r} does not match the reference {reference!r}. WRONG"
        judge_id, _ = t.op(
            "llm-judge", "evaluation", [query_rv, pred_rv, gold_rv],
            [Out(response, q.qid, class_name="judge_response", category="judge_response"),
             Out("1.0" if verdict else "0.0", q.qid, class_name="judge_score", category="judge_score")],
            comment="Judge the prediction against the golden answers.",
        )
        for f in (annotation_fault, judge_fault):
            if f is not None:
                plan.inject(f, judge_id, "llm-judge")
        return Outcome(
            question=q, prediction=prediction, golden=golden, passed=verdict,
            fault=plan.for_question(q.qid), query_id=query_rv.full_node_id,
            prediction_id=pred_rv.full_node_id, golden_answers_id=gold_rv.full_node_id,
        )
