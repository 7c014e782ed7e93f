"""Small execution graphs traced with the real smartcomment package, for reader tests.

Each graph has construction sessions (messages -> memory entries), a search session and an
evaluation session with a judge subgraph per query, and one annotation per failed query.
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
from smartcomment import comment_graph, comment_op, comment_session, comment_variable


def var(value: str, name: str, **options: Any):
    """A traced variable named by hand (smartcomment names variables by content hash by default)."""
    return comment_variable(value, variable_name=name, id_strategy=lambda _v: name, to_runtime=True, **options)


def make_graph(
    graph_id: str, user_id: str, project_id: str, *, seed: int = 0, sessions: int = 2, queries: int = 2
) -> dict[str, Any]:
    """Trace a toy memory pipeline; every other query fails, annotated at its retrieval op.

    Traced on a fresh thread: smartcomment inspects the whole call stack for every variable, and
    under pytest, with Dagster and Great Expectations loaded, that cost ~0.4 s a graph (50x)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(
            _make_graph, graph_id, user_id, project_id, seed=seed, sessions=sessions, queries=queries
        ).result()


def _make_graph(
    graph_id: str, user_id: str, project_id: str, *, seed: int, sessions: int, queries: int
) -> dict[str, Any]:
    rng = random.Random(seed)
    with comment_graph(
        graph_id=graph_id,
        user_id=user_id,
        project_id=project_id,
        metadata={"memtracebench_dataset_source": user_id.split("-")[0]},
    ) as graph:
        memories = []
        for s in range(sessions):
            with comment_session(session_id=f"{user_id}-session-{s + 1}", category="memory_construction"):
                for m in range(2):
                    text = f"session {s} message {m} fact {rng.randint(0, 10**6)}"
                    msg = var(text, f"D{s + 1}:{m + 1}", category="message")
                    mem = var(f"memory of {text}", f"mem_{s}_{m}", category="memory_entry")
                    comment_op(
                        inputs=[msg], outputs=[mem], op_name="memory_system.extract_facts", category="extraction"
                    )
                    memories.append(mem)
        annotations = []
        with comment_session(session_id=f"{user_id}-search", category="memory_search"):
            for q in range(queries):
                query = var(f"question {q}?", f"q{q}", class_name="query", category="message & query")
                found = var(f"retrieved {q}", f"retrieved_{q}", category="memory_entry")
                op = comment_op(
                    inputs=[query, *memories[:2]],
                    outputs=[found],
                    op_name="memory_system.search_vector_store",
                    category="retrieval",
                )
                pred = var(f"answer {q}", f"prediction_{q}", class_name="prediction", category="prediction")
                comment_op(inputs=[query, found], outputs=[pred], op_name="question-answering", category="evaluation")
                failed = q % 2 == 1
                score = var("0.0" if failed else "1.0", f"score_{q}", class_name="judge_score")
                comment_op(inputs=[pred], outputs=[score], op_name="llm-judge", category="evaluation")
                if failed:
                    annotations.append(
                        {
                            "query_id": query.full_node_id,
                            "query": f"question {q}?",
                            "golden_answers": "gold" if q % 4 == 1 else ["gold", "also gold"],
                            "prediction": f"answer {q}",
                            "source_evidence_ids": [memories[0].full_node_id],
                            "final_error_type": "RetrievalError",
                            "final_op_id": op.op_id,
                            "prediction_id": pred.full_node_id,
                            "golden_answers_id": None,
                            "annotator_note": "kept in extra",
                        }
                    )
        exported = graph.export_graph()
    exported["data"]["annotations"] = annotations
    return exported


def write_memtracebench(root: Path, graphs_per_split: dict[str, int]) -> dict[str, dict[str, Any]]:
    """A MemTraceBench-layout folder; returns {relative path: exported graph}."""
    projects = {"rag": "NaiveRAG", "mem0": "Mem0", "evermemos": "EverMemOS", "long_context": "Long-Context"}
    written = {}
    for split, n in graphs_per_split.items():
        for i in range(n):
            user = f"locomo-{i}" if i % 2 == 0 else f"longmemeval-{i}"
            graph = make_graph(
                f"graph-{split}-{i:04d}",
                user,
                projects.get(split, split),
                seed=i,
                sessions=1 + i % 3,
                queries=2 + i % 3,
            )
            rel = f"{split}/{user.split('-')[0]}_{user}.json"
            (root / split).mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(orjson.dumps(graph))
            written[rel] = graph
    return written
