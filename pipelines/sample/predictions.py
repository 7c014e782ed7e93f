"""Predictions of two simulated failure-attribution methods over the sample corpus, in the format of
MemTrace's ``run_error_attribution.py`` (one JSON file per split), so that a fresh warehouse has a
leaderboard to show. Both are simulations, named as such; they know the corpus's injected faults
(its annotations) and err on purpose, the ways attribution methods do:

* ``simulated-careful``: right about the operation for about half of the cases; when wrong, it
  usually blames an operation just upstream of the faulty one (too early), sometimes one downstream;
  right about the error type more often than about the operation.
* ``simulated-hasty``: blames the operation that produced the failed answer (a ResponseError) most of
  the time, and something at random otherwise; it only looked at 70% of the graphs.

Same corpus and seed, same files.
"""

from __future__ import annotations

import random
from collections import deque
from pathlib import Path
from typing import Any

import orjson

from pipelines import schema

METHODS = ("simulated-careful", "simulated-hasty")
DATASET_DIR = "data/MemTraceBench"  # how the simulated runs name the dataset folder in graph paths
MEMORY_TYPES = schema.MEMORY_ERROR_TYPES


def op_graph(graph: dict[str, Any]) -> tuple[dict[str, set[str]], dict[str, set[str]], dict[str, str]]:
    """(successors, predecessors, category) of every operation: A precedes B when a node A writes
    is a node B reads."""
    writes: dict[str, set[str]] = {}
    reads: dict[str, set[str]] = {}
    category: dict[str, str] = {}
    for edge in graph["data"]["edges"]:
        op = edge.get("op_id")
        if op:
            writes.setdefault(edge["target_full_node_id"], set()).add(op)
            reads.setdefault(edge["source_full_node_id"], set()).add(op)
    for op in graph["data"].get("operations", []):
        category[op["op_id"]] = op.get("category") or ""
    succ: dict[str, set[str]] = {}
    pred: dict[str, set[str]] = {}
    for node, writers in writes.items():
        for a in writers:
            for b in reads.get(node, ()):
                if a != b:
                    succ.setdefault(a, set()).add(b)
                    pred.setdefault(b, set()).add(a)
    return succ, pred, category


def within(start: str, links: dict[str, set[str]], hops: int) -> list[str]:
    """Operations 1..hops steps from ``start`` along ``links``, nearest first."""
    seen, out, queue = {start}, [], deque([(start, 0)])
    while queue:
        op, depth = queue.popleft()
        if depth == hops:
            continue
        for nxt in sorted(links.get(op, ())):
            if nxt not in seen:
                seen.add(nxt)
                out.append(nxt)
                queue.append((nxt, depth + 1))
    return out


def producer(graph: dict[str, Any], node_id: str | None) -> str | None:
    """The operation that wrote ``node_id``."""
    return next((e["op_id"] for e in graph["data"]["edges"] if e["target_full_node_id"] == node_id and e.get("op_id")),
                None)


def _careful(rng: random.Random, truth: dict[str, Any], succ: dict, pred: dict, ops: list[str]) -> tuple[str, str]:
    op, error = truth["final_op_id"], truth["final_error_type"]
    if rng.random() >= 0.5:
        roll = rng.random()
        candidates = within(op, pred, 3) if roll < 0.65 else within(op, succ, 2) if roll < 0.9 else ops
        op = rng.choice(candidates or ops)
    if rng.random() >= 0.7:
        error = rng.choice([t for t in MEMORY_TYPES if t != error])
    return op, error


def _hasty(rng: random.Random, graph: dict[str, Any], truth: dict[str, Any], ops: list[str]) -> tuple[str, str]:
    answer = producer(graph, truth.get("prediction_id"))
    if answer and rng.random() < 0.65:
        return answer, "ResponseError"
    return rng.choice(ops), rng.choice(MEMORY_TYPES)


REASONS = {
    "simulated-careful": "The {error} traces back to {op}: the memory it wrote or read no longer holds the fact "
                         "the question asks about.",
    "simulated-hasty": "The answer step {op} produced the wrong answer ({error}).",
}


def simulate_predictions(corpus: Path, out: Path, seed: int = 0) -> dict[str, int]:
    """Write ``<out>/<method>/<split>.json`` for both methods; returns predictions per method."""
    counts = dict.fromkeys(METHODS, 0)
    for split_dir in sorted(p for p in corpus.iterdir() if p.is_dir() and not p.name.startswith(".")):
        graphs = [(path, orjson.loads(path.read_bytes())) for path in sorted(split_dir.glob("*.json"))]
        for method in METHODS:
            rng = random.Random(f"sample-predictions:{seed}:{method}:{split_dir.name}")
            sampled = [p for p, _ in graphs if method != "simulated-hasty" or rng.random() < 0.7]
            results = []
            for path, graph in graphs:
                if path not in sampled:
                    continue
                succ, pred, _ = op_graph(graph)
                ops = sorted(op["op_id"] for op in graph["data"].get("operations", []))
                for annotation in graph["data"].get("annotations", []):
                    if annotation.get("final_error_type") not in MEMORY_TYPES or not ops:
                        continue
                    if method == "simulated-careful":
                        op, error = _careful(rng, annotation, succ, pred, ops)
                    else:
                        op, error = _hasty(rng, graph, annotation, ops)
                    results.append({
                        **annotation,
                        "graph_path": f"{DATASET_DIR}/{split_dir.name}/{path.name}",
                        "error_attribution_result": {
                            "error_type": error, "op_id": op,
                            "reason": REASONS[method].format(error=error, op=op),
                        },
                        "is_error_type_correct": error == annotation["final_error_type"],
                        "is_op_id_correct": op == annotation["final_op_id"],
                    })
            total = len(results)
            metrics = {
                "total_cases": total,
                "error_type_prediction_accuracy": sum(r["is_error_type_correct"] for r in results) / total if total
                else 0.0,
                "operation_identifier_prediction_accuracy": sum(r["is_op_id_correct"] for r in results) / total if total
                else 0.0,
                "simulated": True,
            }
            doc = {
                "split": split_dir.name,
                "sampled_graph_paths": [f"{DATASET_DIR}/{split_dir.name}/{p.name}" for p in sampled],
                "results": results,
                "metrics": metrics,
            }
            target = out / method / f"{split_dir.name}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
            counts[method] += total
    return counts
