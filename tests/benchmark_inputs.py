"""Inputs of the failure-attribution benchmarks written here in their formats: smartcomment traces with
the ids an OpenTelemetry source gives, TRAIL-form errors on their spans, AgentRx trajectories with their
labels, and prediction files in JSON lines."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
from smartcomment import comment_graph, comment_op, comment_session
from smartcomment_graphs import var


def trace_graph(folder: Path, trace: str, spans: list[str]) -> None:
    """One smartcomment graph ``otel:<trace>`` whose operations are the given span ids."""
    with comment_graph(graph_id=f"otel:{trace}", user_id="u1", project_id="agents") as graph:
        with comment_session(session_id="s1", category="trace"):
            value = var("question", "input", category="message")
            ops = []
            for i, _ in enumerate(spans):
                out = var(f"answer {i}", f"output_{i}", category="message")
                ops.append(comment_op(inputs=[value], outputs=[out], op_name="llm", category="llm"))
                value = out
        text = json.dumps(graph.export_graph())
    for op, span in zip(ops, spans, strict=True):
        text = text.replace(op.op_id, span)
    (folder / f"{trace}.json").write_text(text)


def error(category: str, location: str, impact: str = "HIGH") -> dict:
    return {"category": category, "location": location, "evidence": f"evidence of {category} <b>&</b>",
            "description": f"{category} at {location}", "impact": impact}

def write_jsonl(path: Path, lines: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\n".join(orjson.dumps(x) for x in lines) + b"\n")
    return path

def failure(fid: int, step: int, category: str, agent: str) -> dict:
    return {"failure_id": fid, "step_number": step, "step_reason": "it went wrong", "failure_category": category,
            "category_reason": "because", "failed_agent": agent}

def write_agentrx(root: Path) -> Path:
    """Two Magentic-One trajectories of six messages: x fails at AgentRx steps 2 (WebSurfer, Invalid
    Invocation) and 4 (Coder, Invention: the root cause), y at step 3 (FileSurfer, Instruction Adherence)."""
    (root / "ground_truth").mkdir(parents=True)
    (root / "magentic_dataset").mkdir()
    roles = ["human", "Orchestrator (thought)", "WebSurfer", "Orchestrator (-> Coder)", "Coder", "FileSurfer"]
    for tid in ("traj-x", "traj-y"):
        (root / "magentic_dataset" / f"{tid}.json").write_text(json.dumps(
            [{"role": role, "content": f"message {i}"} for i, role in enumerate(roles)]))
    (root / "ground_truth" / "magentic_one_ground_truth.json").write_text(json.dumps([
        {"trajectory_id": "traj-x", "failures": [failure(1, 2, "Invalid Invocation", "WebSurfer"),
                                                 failure(2, 4, "Invention of new information", "Coder")],
         "root_cause": {"failure_id": 2, "reason_for_root_cause": "first not recovered"}, "failure_summary": "x"},
        {"trajectory_id": "traj-y", "failures": [failure(1, 3, "Instruction Adherence Failure", "FileSurfer")],
         "root_cause": {"failure_id": 1, "reason_for_root_cause": "only one"}, "failure_summary": "y"}]))
    return root
