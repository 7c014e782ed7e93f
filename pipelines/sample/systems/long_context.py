"""Long-Context: the memory is the whole dialogue history, handed to the reader in full.

Ops (category): ``memory_system.memory_update`` (update) once per dialogue session, writing a new
version of the single memory node that holds the entire history so far (so its value, and the file,
grow with the whole history), and ``memory_system.retrieve`` (retrieval) per question, which copies
the history into the question's context. Injected faults: the update stores a stale copy of the
decisive message (UpdateError), a later update drops the decisive line (DeletionError), retrieval
loses the decisive line (RetrievalError). There is no extraction op, hence no ExtractionError.

The version header comes first on purpose: smartcomment diffs a changed value against the previous
version character by character in Python, so a header that differs at once keeps that diff O(1)
instead of O(history).
"""

from __future__ import annotations

from smartcomment.runtime.variable import RuntimeVariable

from ..conversations import DialogueSession, Question
from ..tracing import Out
from .base import MemorySystem, line_of


class LongContext(MemorySystem):
    split = "long_context"
    project_id = "Long-Context"
    layer_type = "long_context"

    def setup(self) -> None:
        self.blocks: list[str] = []  # one block of lines per dialogue session
        self.lines: dict[str, tuple[int, str]] = {}  # message id -> (block index, line)
        self.memory_rv: RuntimeVariable[str] | None = None
        self.n_messages = 0

    def _body(self) -> str:
        return "".join(self.blocks)

    def construct_session(self, session: DialogueSession, msg_rvs: list[RuntimeVariable[str]]) -> None:
        faults = []
        deletions = self.plan.pending_deletions(session.index)
        for fault in deletions:
            block, line = self.lines.pop(fault.question.decisive)
            self.blocks[block] = self.blocks[block].replace(line + "\n", "", 1)
        lines = []
        for msg in session.messages:
            text, fault = self.text_for_memory(msg)
            if fault is not None:
                faults.append(fault)
            line = line_of(msg, text)
            self.lines[msg.id] = (len(self.blocks), line)
            lines.append(line + "\n")
        self.blocks.append(f"## {session.session_id} ({session.date})\n" + "".join(lines))
        self.n_messages += len(session.messages)
        header = (f"# long-context memory v{session.index}: {len(self.blocks)} sessions, "
                  f"{self.n_messages} messages, last update {session.session_id}\n")
        inputs = ([self.memory_rv] if self.memory_rv is not None else []) + list(msg_rvs)
        op_id, (self.memory_rv,) = self.tracer.op(
            "memory_system.memory_update", "update", inputs,
            [Out(header + self._body(), "long_context_memory", class_name="memory", category="memory_entry",
                 metadata={"n_sessions": len(self.blocks), "n_messages": self.n_messages})],
            comment="Append the session transcript to the long-context memory.",
        )
        for fault in faults:
            self.plan.inject(fault, op_id, "memory_system.memory_update")
        for fault in deletions:
            self.plan.inject(fault, op_id, "memory_system.memory_update")

    def retrieve(self, question: Question, query_rv: RuntimeVariable[str]) -> RuntimeVariable[str]:
        assert self.memory_rv is not None
        body = self._body()
        fault = self.plan.for_question(question.qid, "RetrievalError")
        if fault is not None and question.decisive in self.lines:
            body = body.replace(self.lines[question.decisive][1] + "\n", "", 1)
        op_id, (ctx_rv,) = self.tracer.op(
            "memory_system.retrieve", "retrieval", [query_rv, self.memory_rv],
            [Out(f"# context for {question.qid}\n" + body, question.qid, class_name="retrieved_context",
                 category="context")],
            comment="Hand the whole history to the reader.",
        )
        if fault is not None:
            self.plan.inject(fault, op_id, "memory_system.retrieve")
        return ctx_rv
