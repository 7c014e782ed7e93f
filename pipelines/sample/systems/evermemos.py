"""EverMemOS: segment the dialogue into episodes (MemCells), extract an episodic memory and atomic
facts from each, and retrieve with BM25 + embeddings, a hybrid fusion and an agentic two-round
bundle with a final rerank.

Ops (category): ``evermemos.boundary_detection`` (boundary_detection) per exchange (two messages) and at
session end, ``memory_system.message_buffer_update`` (update) per exchange,
``memory_system.finalize_memory_unit`` (initialization) per MemCell, ``memory_system.extract_memory``
(extraction) per MemCell; per question ``memory_system.bm25_retrieval``,
``memory_system.embedding_retrieval``, ``memory_system.hybrid_retrieval``,
``memory_system.agentic_round1_bundle``, ``memory_system.agentic_round2_bundle`` and
``memory_system.agentic_final_rerank`` (all retrieval; the rerank is traced with
``comment_op_scope`` + ``comment_link``, one edge per kept memory). Injected faults: the decisive atomic
fact is not extracted (ExtractionError), the buffer stores a stale copy of the decisive message
(UpdateError), a buffer update in a later session evicts the live atomic fact (DeletionError), one of
the hybrid / round-2 / final-rerank steps loses it (RetrievalError).
"""

from __future__ import annotations

import json

from smartcomment import comment_link, comment_op_scope
from smartcomment.runtime.variable import RuntimeVariable

from .. import facts, models
from ..conversations import DialogueSession, Message, Question
from ..faults import EVERMEMOS_RETRIEVAL_STAGES, Fault
from ..tracing import Out
from .base import MemorySystem, buffer_text, line_of, turn_pairs


class EverMemOS(MemorySystem):
    split = "evermemos"
    project_id = "EverMemOS"
    layer_type = "evermemos"
    list_k = 8
    bundle_k = 6

    def setup(self) -> None:
        self.max_cell = self.tracer.rng.randint(4, 8)
        self.buffer: list[tuple[Message, str]] = []
        self.buffer_rv: RuntimeVariable[str] | None = None
        self.n_cells = 0
        self.docs: dict[str, tuple[str, RuntimeVariable[str]]] = {}  # live memories: id -> (text, node)
        self.fact_of_msg: dict[str, str] = {}
        self.index = models.BM25Index()
        self.vectors: dict[str, list[float]] = {}
        self.order: dict[str, int] = {}

    # -- construction ---------------------------------------------------------------------------------
    def _boundary(self, inputs: list[RuntimeVariable[str]], name: str, should_end: bool, reason: str) -> None:
        self.tracer.op(
            "evermemos.boundary_detection", "boundary_detection", inputs,
            [Out(json.dumps({"should_end": should_end, "reason": reason, "buffer_size": len(self.buffer)}),
                 name, class_name="boundary", category="boundary")],
            comment="Decide whether the new message closes the current episode.",
        )

    def construct_session(self, session: DialogueSession, msg_rvs: list[RuntimeVariable[str]]) -> None:
        for batch in turn_pairs(session, msg_rvs):
            rvs = [rv for _, rv in batch]
            buffer_in = [self.buffer_rv] if self.buffer_rv is not None else []
            should_end = len(self.buffer) >= self.max_cell
            reason = "topic shift after a full episode" if should_end else "same episode continues"
            self._boundary(rvs + buffer_in, f"boundary-{batch[0][0].id}", should_end, reason)
            if should_end:
                self._finalize(session)
            faults = []
            for msg, _ in batch:
                text, fault = self.text_for_memory(msg)
                self.buffer.append((msg, text))
                faults += [fault] if fault is not None else []
            deletions = self.plan.pending_deletions(session.index)
            evicted: list[Out] = []
            for f in deletions:
                doc_id = self.fact_of_msg[f.question.decisive]
                old_text, _ = self.docs.pop(doc_id)
                self.index.remove(doc_id)
                self.vectors.pop(doc_id)
                evicted.append(Out(f"[evicted] {old_text}", doc_id, class_name="atomic_fact",
                                   category="memory_entry", metadata={"evicted": True, "by": batch[0][0].id}))
            inputs = rvs + ([self.buffer_rv] if self.buffer_rv is not None else [])
            op_id, outs = self.tracer.op(
                "memory_system.message_buffer_update", "update", inputs,
                [Out(buffer_text(line_of(m, t) for m, t in self.buffer), "episode_buffer",
                     class_name="buffer", category="buffer", metadata={"size": len(self.buffer)}), *evicted],
                comment="Append the messages to the episode buffer (evicting stale memories).",
            )
            self.buffer_rv = outs[0]
            for f in faults + deletions:
                self.plan.inject(f, op_id, "memory_system.message_buffer_update")
        if self.buffer and self.buffer_rv is not None:
            self._boundary([self.buffer_rv], f"boundary-{session.session_id}-end", True, "session ended")
            self._finalize(session)

    def _finalize(self, session: DialogueSession) -> None:
        if not self.buffer or self.buffer_rv is None:
            return
        self.n_cells += 1
        k = self.n_cells
        cell = self.buffer
        self.buffer = []
        _, (cell_rv,) = self.tracer.op(
            "memory_system.finalize_memory_unit", "initialization", [self.buffer_rv],
            [Out("\n".join(line_of(m, t) for m, t in cell), f"memcell-{k}", class_name="memcell",
                 category="memory_entry",
                 metadata={"messages": [m.id for m, _ in cell], "session": session.index})],
            comment="Close the episode buffer into a MemCell.",
        )
        outs: list[Out] = []
        dropped: list[Fault] = []
        fact_ids: list[str] = []
        for msg, text in cell:
            for event in facts.extract_events(text, msg.speaker):
                fault = self.plan.at_message("ExtractionError", msg.id)
                if fault is not None:
                    dropped.append(fault)
                    continue
                doc_id = f"fact-{msg.id}"
                fact_ids.append(doc_id)
                text = facts.canonical(event.subject, event.slot, event.value, event.old)
                outs.append(Out(f"[{msg.id}] {text}", doc_id, class_name="atomic_fact",
                                category="memory_entry", metadata={"source": msg.id, "cell": cell_rv.name}))
        speakers = " and ".join(dict.fromkeys(m.speaker for m, _ in cell))
        topic = facts.EPISODE_TOPICS[(k * 7 + len(cell)) % len(facts.EPISODE_TOPICS)]
        narrative = " ".join(m.text.replace(m.event.sentence, "") if m.event else m.text for m, _ in cell)
        episode = (f"Episode {k} ({cell[0][0].id} to {cell[-1][0].id}, {session.date}): {speakers} talked "
                   f"about {topic}. {narrative}")
        episode_id = f"episode-{k}"
        op_id, rvs = self.tracer.op(
            "memory_system.extract_memory", "extraction", [cell_rv],
            [Out(episode, episode_id, class_name="episodic_memory", category="memory_entry",
                 metadata={"cell": cell_rv.name}), *outs],
            comment="Extract the episodic memory and atomic facts of the MemCell.",
        )
        for fault in dropped:
            self.plan.inject(fault, op_id, "memory_system.extract_memory")
        for doc_id, rv in zip([episode_id, *fact_ids], rvs, strict=True):
            self.docs[doc_id] = (rv.raw_value, rv)
            self.index.add(doc_id, rv.raw_value)
            self.vectors[doc_id] = models.hashed_vector(rv.raw_value)
            self.order.setdefault(doc_id, len(self.order))
            if doc_id.startswith("fact-"):
                self.fact_of_msg[doc_id[len("fact-"):]] = doc_id

    # -- retrieval ------------------------------------------------------------------------------------
    def _rerank(self, query: str, candidates: list[str]) -> list[str]:
        """The agent's relevance order over ``candidates``: coordination-first BM25, then the rest."""
        allowed = set(candidates)
        ranked = [d for d, _ in self.index.search(query, len(self.docs)) if d in allowed]
        seen = set(ranked)
        return ranked + [d for d in candidates if d not in seen]

    def _results(self, hits: list[tuple[str, float]]) -> str:
        return "\n".join(f"{d}\t{s}" for d, s in hits)

    def retrieve(self, question: Question, query_rv: RuntimeVariable[str]) -> RuntimeVariable[str]:
        t, qid = self.tracer, question.qid
        fault = self.plan.for_question(question.qid, "RetrievalError")
        lost = self.fact_of_msg.get(question.decisive) if fault else None
        stages = EVERMEMOS_RETRIEVAL_STAGES

        def excluded(stage: str) -> set[str]:
            if fault is None or lost is None or fault.stage is None:
                return set()
            return {lost} if stages.index(stage) >= stages.index(fault.stage) else set()

        def inject(stage: str, op_id: str, op_name: str) -> None:
            if fault is not None and fault.stage == stage:
                self.plan.inject(fault, op_id, op_name)

        bm25 = self.index.search(question.text, self.list_k)
        _, (bm_rv,) = t.op("memory_system.bm25_retrieval", "retrieval", [query_rv],
                           [Out(self._results(bm25), qid, class_name="bm25_results",
                                category="retrieval_result")],
                           comment=f"BM25 top-{self.list_k}.")
        query_vec = models.hashed_vector(question.text)
        emb = models.rank_by_vector(query_vec, self.vectors, self.list_k, self.order)
        _, (emb_rv,) = t.op("memory_system.embedding_retrieval", "retrieval", [query_rv],
                            [Out(self._results(emb), qid, class_name="embedding_results",
                                 category="retrieval_result")],
                            comment=f"Embedding top-{self.list_k}.")

        # Reciprocal rank fusion of both lists.
        rrf: dict[str, float] = {}
        for hits in (bm25, emb):
            for rank, (d, _) in enumerate(hits):
                rrf[d] = rrf.get(d, 0.0) + 1.0 / (60 + rank + 1)
        drop = excluded("hybrid")
        pool = sorted((d for d in rrf if d not in drop), key=lambda d: (-rrf[d], self.order[d]))
        op_id, (hyb_rv,) = t.op("memory_system.hybrid_retrieval", "retrieval", [bm_rv, emb_rv],
                                [Out(self._results([(d, round(rrf[d], 6)) for d in pool]), qid,
                                     class_name="hybrid_results", category="retrieval_result")],
                                comment="Reciprocal-rank fusion of BM25 and embedding results.")
        inject("hybrid", op_id, "memory_system.hybrid_retrieval")

        round1 = self._rerank(question.text, pool)[:self.bundle_k]
        sufficient = any(question.slot in self.docs[d][0] for d in round1 if d.startswith("fact-"))
        _, (r1_rv,) = t.op("memory_system.agentic_round1_bundle", "retrieval", [query_rv, hyb_rv],
                           [Out(json.dumps({"sufficient": sufficient, "memories": round1}), qid,
                                class_name="round1_bundle", category="retrieval_result")],
                           comment="Agentic round 1: rerank the fused pool, bundle, judge sufficiency.")
        extra = [] if sufficient else [d for d in pool if d not in round1]
        drop = excluded("round2")
        round2 = [d for d in round1 + extra if d not in drop]
        refined = question.text if sufficient else f"{question.text} (details about {question.slot})"
        op_id, (r2_rv,) = t.op("memory_system.agentic_round2_bundle", "retrieval", [query_rv, r1_rv, hyb_rv],
                               [Out(json.dumps({"refined_query": refined, "memories": round2}), qid,
                                    class_name="round2_bundle", category="retrieval_result")],
                               comment="Agentic round 2: refine the query and extend the bundle if needed.")
        inject("round2", op_id, "memory_system.agentic_round2_bundle")

        allowed = [d for d in round2 if d not in excluded("final_rerank")]
        ranked = self._rerank(question.text, allowed)
        final = sorted(ranked[:self.bundle_k], key=self.order.__getitem__)
        context = "\n".join(self.docs[d][0] for d in final)
        site = t.call_site()
        start = t.tick(t.rng.randint(8, 160))
        with comment_op_scope(op_name="memory_system.agentic_final_rerank", category="retrieval",
                              comment="Rerank the bundle and keep the final context.") as op:
            assert op is not None
            ctx_rv = t.var(context, qid, class_name="retrieved_context", category="context",
                           metadata={"memories": final}, site=site)
            comment_link(source=r2_rv, target=ctx_rv)
            for rank, d in enumerate(final):
                comment_link(source=self.docs[d][1], target=ctx_rv, edge_metadata={"rank": rank + 1})
        t.stamp_op(op.op_id, start, site)
        inject("final_rerank", op.op_id, "memory_system.agentic_final_rerank")
        return ctx_rv
