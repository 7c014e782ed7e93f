"""Mem0: extract facts from message pairs, decide ADD/UPDATE/DELETE/NONE against similar memories,
embed the memories into a vector store, and search it by cosine similarity at question time.

Ops (category): ``memory_system.extract_facts`` (extraction) per message pair,
``memory_system.update_memory_decision`` (update) per extracted fact, with a ``memory_decision``
node, the added/updated ``memory`` node and, for a DELETE, a ``delete_marker`` node;
``memory_system.add_to_vector_store`` (embedding, traced with ``comment_fn``) per written memory;
``memory_system.search_vector_store`` (retrieval) per question. Injected faults: the decisive fact
is not extracted (ExtractionError), the decision ignores it or swaps the values (UpdateError), a
decision in a later session wrongly DELETEs the live memory (DeletionError), the search misses the
memory (RetrievalError).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from smartcomment import comment_fn, current_op
from smartcomment.runtime.variable import RuntimeVariable

from .. import facts, models
from ..conversations import DialogueSession, Message, Question
from ..faults import Fault
from ..tracing import Out
from .base import MemorySystem


@dataclass
class _Memory:
    mem_id: str
    subject: str
    slot: str
    value: str | None
    previous: str | None
    label: str  # the message id of the last event written into this memory
    rv: RuntimeVariable[str]

    @property
    def text(self) -> str:
        return facts.canonical(self.subject, self.slot, self.value, self.previous)


def _encode_embedding(record: dict[str, Any]) -> str:
    return json.dumps({"memory_id": record["memory_id"], "dims": len(record["vector"]),
                       "vector": record["vector"]})


class Mem0(MemorySystem):
    split = "mem0"
    project_id = "Mem0"
    layer_type = "mem0"
    top_k = 6

    def setup(self) -> None:
        self.memories: dict[str, _Memory] = {}
        self.vectors: dict[str, list[float]] = {}
        self.emb_rvs: dict[str, RuntimeVariable[str]] = {}
        self.order: dict[str, int] = {}
        self.n_decisions = 0
        self._last_embed_op = ""

        @comment_fn(
            op_name="memory_system.add_to_vector_store", category="embedding",
            comment="Embed the memory and upsert it into the vector store.",
            param_options={"-o": {"class_name": "embedding", "category": "embedding",
                                  "id_strategy": lambda r: f"emb-{r['memory_id']}",
                                  "encoding_fn": _encode_embedding}},
        )
        def add_to_vector_store(memory: RuntimeVariable[str]) -> dict[str, Any]:
            op = current_op()
            assert op is not None
            self._last_embed_op = op.op_id
            return {"memory_id": memory.name, "vector": models.hashed_vector(memory.raw_value)}

        self._embed_fn = add_to_vector_store

    def _embed(self, mem: _Memory) -> None:
        start = self.tracer.tick(self.tracer.rng.randint(15, 80))
        record = self._embed_fn(mem.rv)
        code = self._embed_fn.__wrapped__.__code__
        self.tracer.stamp_op(self._last_embed_op, start, (code.co_filename, code.co_firstlineno))
        self.vectors[mem.mem_id] = record["vector"]
        self.order.setdefault(mem.mem_id, len(self.order))

    def _live(self, subject: str, slot: str) -> _Memory | None:
        for mem in self.memories.values():
            if mem.subject == subject and mem.slot == slot:
                return mem
        return None

    def construct_session(self, session: DialogueSession, msg_rvs: list[RuntimeVariable[str]]) -> None:
        pairs = list(zip(session.messages, msg_rvs, strict=True))
        for i in range(0, len(pairs), 2):
            batch = pairs[i:i + 2]
            extracted: list[tuple[Message, facts.FactEvent]] = []
            dropped: list[Fault] = []
            for msg, _ in batch:
                for event in facts.extract_events(msg.text, msg.speaker):
                    fault = self.plan.at_message("ExtractionError", msg.id)
                    if fault is not None:
                        dropped.append(fault)
                        continue
                    extracted.append((msg, event))
            texts = [facts.canonical(e.subject, e.slot, e.value, e.old) for _, e in extracted]
            op_id, (facts_rv,) = self.tracer.op(
                "memory_system.extract_facts", "extraction", [rv for _, rv in batch],
                [Out(json.dumps(texts), f"facts-{batch[0][0].id}", class_name="facts", category="facts",
                     metadata={"sources": [m.id for m, _ in batch]})],
                comment="Extract salient facts from the new messages.",
            )
            for fault in dropped:
                self.plan.inject(fault, op_id, "memory_system.extract_facts")
            for (msg, event), text in zip(extracted, texts, strict=True):
                self._decide(session, msg, event, text, facts_rv)

    def _decide(self, session: DialogueSession, msg: Message, event: facts.FactEvent, fact_text: str,
                facts_rv: RuntimeVariable[str]) -> None:
        live = self._live(event.subject, event.slot)
        decisions: list[tuple[str, str, str | None, str | None]] = []  # (event, mem_id, value, previous)
        if event.kind == "intro":
            if live is None:
                decisions.append(("ADD", "", event.value, None))
            elif live.value != event.value:
                decisions.append(("UPDATE", live.mem_id, event.value, live.value))
        elif event.kind == "update":
            if live is None:
                decisions.append(("ADD", "", event.value, event.old))
            else:
                decisions.append(("UPDATE", live.mem_id, event.value, event.old))
        elif live is not None:
            decisions.append(("DELETE", live.mem_id, None, None))

        update_fault = self.plan.at_message("UpdateError", msg.id)
        if update_fault is not None:
            if update_fault.variant == 1 and event.kind == "update" and live is not None:
                decisions = [("UPDATE", live.mem_id, event.old, event.value)]  # values swapped
            else:
                decisions = []  # judged a duplicate: NONE
        deletions = self.plan.pending_deletions(session.index)
        for fault in deletions:
            target = self._live(fault.question.subject, fault.question.slot)
            if target is None:
                raise RuntimeError(f"no live memory to delete for {fault.question.qid}")
            decisions.append(("DELETE", target.mem_id, None, None))

        # Candidates the decision looked at: the memories most similar to the fact.
        fact_vec = models.hashed_vector(fact_text)
        cand_ids = [m for m, _ in models.rank_by_vector(fact_vec, self.vectors, 2, self.order)]
        for _, mem_id, _, _ in decisions:
            if mem_id and mem_id not in cand_ids:
                cand_ids.append(mem_id)
        inputs = [facts_rv] + [self.memories[m].rv for m in cand_ids]

        self.n_decisions += 1
        outs: list[Out] = []
        record = []
        written: list[tuple[str, str, str | None, str | None]] = []
        for kind, mem_id, value, previous in decisions:
            if kind == "ADD":
                mem_id = f"mem-{len(self.order) + sum(1 for k, *_ in written if k == 'ADD') + 1}"
            if kind == "DELETE":
                old = self.memories[mem_id]
                outs.append(Out(f"DELETE {mem_id}: {old.text}", mem_id, class_name="delete_marker",
                                category="memory_entry", metadata={"event": "DELETE", "source": msg.id}))
                record.append({"event": "DELETE", "memory_id": mem_id, "old_memory": old.text})
            else:
                text = facts.canonical(event.subject, event.slot, value, previous)
                outs.append(Out(text, mem_id, class_name="memory", category="memory_entry",
                                metadata={"event": kind, "source": msg.id}))
                old_text = self.memories[mem_id].text if kind == "UPDATE" else None
                record.append({"event": kind, "memory_id": mem_id, "text": text, "old_memory": old_text})
            written.append((kind, mem_id, value, previous))
        if not record:
            record.append({"event": "NONE", "fact": fact_text})
        op_id, out_rvs = self.tracer.op(
            "memory_system.update_memory_decision", "update", inputs,
            [Out(json.dumps({"fact": fact_text, "decisions": record}), f"decision-{self.n_decisions}",
                 class_name="memory_decision", category="decision"), *outs],
            comment="Decide ADD / UPDATE / DELETE / NONE for the fact against similar memories.",
        )
        if update_fault is not None:
            self.plan.inject(update_fault, op_id, "memory_system.update_memory_decision")
        for fault in deletions:
            self.plan.inject(fault, op_id, "memory_system.update_memory_decision")

        for (kind, mem_id, value, previous), rv in zip(written, out_rvs[1:], strict=True):
            if kind == "DELETE":
                del self.memories[mem_id]
                self.vectors.pop(mem_id, None)
                continue
            subject, slot = event.subject, event.slot
            mem = _Memory(mem_id, subject, slot, value, previous, msg.id, rv)
            self.memories[mem_id] = mem
            self._embed(mem)
            self.emb_rvs[mem_id] = self._emb_rv(mem_id)

    def _emb_rv(self, mem_id: str) -> RuntimeVariable[str]:
        graph_rv = self.tracer.var(
            _encode_embedding({"memory_id": mem_id, "vector": self.vectors[mem_id]}), f"emb-{mem_id}",
            class_name="embedding", category="embedding",
        )
        return graph_rv

    def retrieve(self, question: Question, query_rv: RuntimeVariable[str]) -> RuntimeVariable[str]:
        fault = self.plan.for_question(question.qid, "RetrievalError")
        exclude = []
        if fault is not None:
            target = self._live(question.subject, question.slot)
            if target is None:
                raise RuntimeError(f"no memory to miss for {question.qid}")
            exclude = [target.mem_id]
        live = {m: v for m, v in self.vectors.items() if m in self.memories}
        query_vec = models.hashed_vector(question.text)
        hits = models.rank_by_vector(query_vec, live, self.top_k, self.order, exclude)
        chosen = sorted((m for m, _ in hits), key=self.order.__getitem__)
        context = "\n".join(f"[{self.memories[m].label}] {self.memories[m].text}" for m in chosen)
        op_id, (ctx_rv,) = self.tracer.op(
            "memory_system.search_vector_store", "retrieval", [query_rv, *(self.emb_rvs[m] for m in chosen)],
            [Out(context, question.qid, class_name="retrieved_memories", category="context",
                 metadata={"memories": chosen, "scores": [s for _, s in hits]})],
            comment=f"Cosine top-{self.top_k} memories from the vector store.",
        )
        if fault is not None:
            self.plan.inject(fault, op_id, "memory_system.search_vector_store")
        return ctx_rv
