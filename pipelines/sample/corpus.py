"""Generate the embedded default corpus in the MemTraceBench layout.

``generate_corpus(out)`` runs the four toy memory systems over seeded dialogues of the three
datasets, traced with smartcomment, and writes ``<out>/<split>/<dataset>_<user_id>.json`` (the
``ExecNetwork.export_graph()`` dict plus ``data["annotations"]``, one per failed question) and
``<out>/injected_faults.jsonl`` (the generator's own record of every question). Same arguments,
byte-identical files: randomness comes from ``random.Random`` instances seeded by strings, and the
wall clock, uuid ids and absolute paths smartcomment records are rewritten (see
:mod:`pipelines.sample.tracing`).

Graphs are traced in a worker thread: smartcomment calls ``inspect.stack()`` on every traced object,
whose cost grows with the stack depth of the caller (pytest, dagster), and a fresh thread starts
with a shallow stack.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from smartcomment import comment_graph

from .conversations import DATASET_CLASSES, DATASETS, generate_dialogue
from .faults import NULL_OP_ID, plan_faults
from .systems import SYSTEMS
from .tracing import Tracer, finalize_export

SPLITS: tuple[str, ...] = ("rag", "mem0", "evermemos", "long_context")
FAULTS_FILE = "injected_faults.jsonl"
DAY_MS = 86_400_000


@dataclass(frozen=True)
class GraphSpec:
    """Which dialogue goes through which system."""

    split: str
    dataset: str
    traj_no: int


def corpus_plan(graphs_per_split: int) -> list[GraphSpec]:
    """Every split cycles through the three datasets; trajectory k of a dataset is the same dialogue
    in every split it appears in, as when one benchmark runs several memory systems."""
    specs = []
    for si, split in enumerate(SPLITS):
        for i in range(graphs_per_split):
            specs.append(GraphSpec(split, DATASETS[(i + si) % len(DATASETS)], i // len(DATASETS) + 1))
    return specs


def build_graph(spec: GraphSpec, seed: int, scale: float) -> tuple[str, bytes, list[dict[str, Any]]]:
    """Trace one graph; returns its file name, its serialized bytes and the per-question records."""
    dialogue = generate_dialogue(spec.dataset, spec.traj_no, seed=seed, scale=scale)
    key = f"{seed}:{spec.split}:{spec.dataset}:{spec.traj_no}"
    plan = plan_faults(spec.split, dialogue, random.Random(f"sample-faults:{key}"))
    rng = random.Random(f"sample-trace:{key}")
    start_ms = rng.randint(60, 300) * DAY_MS + rng.randint(8 * 3600, 20 * 3600) * 1000
    tracer = Tracer(start_ms, rng)
    system_cls = SYSTEMS[spec.split]
    file_name = f"{spec.dataset}_{dialogue.user_id}.json"
    graph_id = "graph-" + hashlib.sha1(f"sample-graph:{key}".encode()).hexdigest()[:32]
    metadata = {
        "memtracebench_dataset_source": spec.dataset,
        "memtracebench_graph_filename": file_name,
        "save_dir": f"outputs/memtracebench/{spec.split}",
        "layer_type": system_cls.layer_type,
        "traj_metadata": dialogue.traj_metadata,
        "dataset_cls": DATASET_CLASSES[spec.dataset],
        "generator": {"name": "tracehouse.pipelines.sample", "seed": seed, "scale": scale},
    }
    with comment_graph(graph_id=graph_id, user_id=dialogue.user_id, project_id=system_cls.project_id,
                       metadata=metadata, strict=False) as graph:
        assert graph is not None, "smartcomment tracing is disabled"
        outcomes = system_cls(dialogue, plan, tracer).run()
    export = graph.export_graph()
    op_map = finalize_export(export, tracer, salt=key)

    annotations: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    for o in outcomes:
        q, fault = o.question, o.fault
        final_op = NULL_OP_ID
        if fault is not None:
            final_op = op_map.get(fault.final_op_id, fault.final_op_id)
            single = len(o.golden) == 1 and rng.random() < 0.5
            annotations.append({
                "query_id": o.query_id,
                "query": q.text,
                "golden_answers": o.golden[0] if single else list(o.golden),
                "prediction": o.prediction,
                "source_evidence_ids": [f"{m}@1" for m in q.evidence],
                "final_error_type": fault.error_type,
                "final_op_id": final_op,
                "golden_answers_id": o.golden_answers_id,
                "prediction_id": o.prediction_id,
            })
        records.append({
            "split": spec.split,
            "system": system_cls.project_id,
            "dataset": spec.dataset,
            "graph_id": graph_id,
            "file": f"{spec.split}/{file_name}",
            "query_id": o.query_id,
            "failed": not o.passed,
            "error_type": fault.error_type if fault else None,
            "op_id": final_op,
            "op_name": fault.op_name if fault is not None and final_op != NULL_OP_ID else None,
        })
    export["data"]["annotations"] = annotations
    return file_name, orjson.dumps(export), records


def _in_fresh_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn`` in a new thread (shallow stack, fresh context variables) and return its result."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn(*args)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="sample-graph")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"]


def generate_corpus(out_dir: Path, seed: int = 0, graphs_per_split: int = 25, scale: float = 1.0,
                    progress: Callable[[str], None] | None = None) -> list[dict]:
    """Write the sample corpus under ``out_dir`` and return one record per question.

    Layout: ``<out_dir>/{rag,mem0,evermemos,long_context}/<dataset>_<user_id>.json`` and
    ``<out_dir>/injected_faults.jsonl``. Stale ``*.json`` files in the four split folders are removed
    first, so the folder always matches the returned records. ``scale`` (>= 0.01) multiplies the
    number of sessions and the length of messages; the Long-Context memory holds the whole history
    in every version, so its files grow roughly with the cube of ``scale``.
    """
    if scale < 0.01:
        raise ValueError(f"scale must be >= 0.01, got {scale}")
    if graphs_per_split < 0:
        raise ValueError(f"graphs_per_split must be >= 0, got {graphs_per_split}")
    out_dir = Path(out_dir)
    for split in SPLITS:
        folder = out_dir / split
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("*.json"):
            stale.unlink()

    specs = corpus_plan(graphs_per_split)
    records: list[dict] = []
    for k, spec in enumerate(specs, start=1):
        file_name, payload, recs = _in_fresh_thread(build_graph, spec, seed, scale)
        path = out_dir / spec.split / file_name
        if path.exists():
            raise RuntimeError(f"two graphs of split {spec.split} would both be written to {file_name}")
        path.write_bytes(payload)
        records.extend(recs)
        if progress is not None:
            progress(f"[{k}/{len(specs)}] {spec.split}/{file_name} {len(payload) / 1e6:.2f} MB")
    (out_dir / FAULTS_FILE).write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return records
