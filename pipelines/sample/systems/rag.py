"""Naive RAG: buffer raw messages, cut them into fixed-size memory units, index units for BM25.

Ops (category): ``memory_system.message_buffer_update`` (update) per exchange (two messages),
``memory_system.finalize_memory_unit`` (extraction) when the buffer is full or the session ends,
``memory_system.add`` (update) to put the unit in the index, ``memory_system.retrieve`` (retrieval)
per question. Injected faults: the unit loses the decisive fact at finalisation (ExtractionError), the
buffer stores a stale copy of the decisive message (UpdateError), a later ``add`` rewrites the stored
unit without the decisive message while de-duplicating (DeletionError), retrieval skips the units
holding the decisive message (RetrievalError).
"""

from __future__ import annotations

from smartcomment.runtime.variable import RuntimeVariable

from ..conversations import DialogueSession, Message, Question
from ..models import BM25Index
from ..tracing import Out
from .base import MemorySystem, buffer_text, line_of, turn_pairs


class NaiveRAG(MemorySystem):
    split = "rag"
    project_id = "NaiveRAG"
    layer_type = "naive_rag"
    top_k = 6

    def setup(self) -> None:
        self.chunk_size = self.tracer.rng.randint(4, 6)
        self.buffer: list[tuple[Message, str]] = []
        self.buffer_rv: RuntimeVariable[str] | None = None
        self.index_rv: RuntimeVariable[str] | None = None
        self.units: dict[str, list[tuple[Message, str]]] = {}
        self.unit_rvs: dict[str, RuntimeVariable[str]] = {}
        self.index = BM25Index()

    def construct_session(self, session: DialogueSession, msg_rvs: list[RuntimeVariable[str]]) -> None:
        for batch in turn_pairs(session, msg_rvs):
            faults = []
            for msg, _ in batch:
                text, fault = self.text_for_memory(msg)
                self.buffer.append((msg, line_of(msg, text)))
                faults += [fault] if fault is not None else []
            inputs = [rv for _, rv in batch] + ([self.buffer_rv] if self.buffer_rv is not None else [])
            op_id, (self.buffer_rv,) = self.tracer.op(
                "memory_system.message_buffer_update", "update", inputs,
                [Out(buffer_text(line for _, line in self.buffer), "message_buffer", class_name="buffer",
                     category="buffer", metadata={"size": len(self.buffer)})],
                comment="Append the messages to the chunking buffer.",
            )
            for fault in faults:
                self.plan.inject(fault, op_id, "memory_system.message_buffer_update")
            if len(self.buffer) >= self.chunk_size:
                self._flush(session)
        if self.buffer:
            self._flush(session)

    def _flush(self, session: DialogueSession) -> None:
        assert self.buffer_rv is not None
        unit_id = f"unit-{len(self.units) + 1}"
        entries: list[tuple[Message, str]] = []
        dropped = []
        for msg, line in self.buffer:
            fault = self.plan.at_message("ExtractionError", msg.id)
            if fault is not None and msg.event is not None:
                line = line.replace(" " + msg.event.sentence, "").replace(msg.event.sentence, "")
                dropped.append(fault)
            entries.append((msg, line))
        self.buffer = []
        op_id, (unit_rv,) = self.tracer.op(
            "memory_system.finalize_memory_unit", "extraction", [self.buffer_rv],
            [Out("\n".join(line for _, line in entries), unit_id, class_name="memory_unit",
                 category="memory_entry",
                 metadata={"messages": [m.id for m, _ in entries], "session": session.index})],
            comment="Cut the buffer into a retrievable memory unit.",
        )
        for fault in dropped:
            self.plan.inject(fault, op_id, "memory_system.finalize_memory_unit")
        self.units[unit_id] = entries
        self.unit_rvs[unit_id] = unit_rv
        self.index.add(unit_id, unit_rv.raw_value)

        # A wrong de-duplication in `add` rewrites an older unit without a live message.
        rewritten: list[Out] = []
        deletions = self.plan.pending_deletions(session.index)
        for fault in deletions:
            target = fault.question.decisive
            old_id = next(u for u, ents in self.units.items() if any(m.id == target for m, _ in ents))
            self.units[old_id] = [(m, ln) for m, ln in self.units[old_id] if m.id != target]
            kept = "\n".join(ln for _, ln in self.units[old_id])
            rewritten.append(Out(kept, old_id, class_name="memory_unit", category="memory_entry",
                                 metadata={"messages": [m.id for m, _ in self.units[old_id]],
                                           "deduplicated_against": unit_id}))
        index_value = "\n".join(f"{u}\t{len(ents)}" for u, ents in self.units.items())
        inputs = [unit_rv] + ([self.index_rv] if self.index_rv is not None else [])
        op_id, outs = self.tracer.op(
            "memory_system.add", "update", inputs,
            [Out(index_value, "rag_index", class_name="index", category="index",
                 metadata={"n_units": len(self.units)}), *rewritten],
            comment="Add the unit to the retrieval index (de-duplicating against stored units).",
        )
        self.index_rv = outs[0]
        for fault, rv in zip(deletions, outs[1:], strict=True):
            self.unit_rvs[rv.name] = rv
            self.index.add(rv.name, rv.raw_value)
            self.plan.inject(fault, op_id, "memory_system.add")

    def retrieve(self, question: Question, query_rv: RuntimeVariable[str]) -> RuntimeVariable[str]:
        fault = self.plan.for_question(question.qid, "RetrievalError")
        exclude: list[str] = []
        if fault is not None:
            exclude = [u for u, ents in self.units.items() if any(m.id == question.decisive for m, _ in ents)]
        hits = self.index.search(question.text, self.top_k, exclude=exclude)
        order = {u: i for i, u in enumerate(self.units)}
        chosen = sorted((u for u, _ in hits), key=order.__getitem__)
        context = "\n".join(self.unit_rvs[u].raw_value for u in chosen)
        assert self.index_rv is not None
        inputs = [query_rv, self.index_rv, *(self.unit_rvs[u] for u in chosen)]
        op_id, (ctx_rv,) = self.tracer.op(
            "memory_system.retrieve", "retrieval", inputs,
            [Out(context, question.qid, class_name="retrieved_context", category="context",
                 metadata={"units": chosen, "scores": [s for _, s in hits]})],
            comment=f"BM25 top-{self.top_k} memory units for the query.",
        )
        if fault is not None:
            self.plan.inject(fault, op_id, "memory_system.retrieve")
        return ctx_rv
