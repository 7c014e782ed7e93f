"""Reader for AgentRx (microsoft/AgentRx's ``data/``): failure labels in ``ground_truth/*.json`` on
Magentic-One trajectories (``magentic_dataset/<trajectory_id>.json``) and tau-bench runs
(``tau_retail/*.json``, matched to a label by ``task_id``). Any part may be absent.

A trajectory and its labels live in different files, so the whole source folder is one split and
one partition, read as a whole (``whole_partition``: a changed file re-reads the partition, never
reusing one file's rows, which depend on the others). Each file's read serves its part of one index
of the folder, built once per listing:

* one graph per labelled trajectory, ``agentrx:<dataset>/<trajectory_id>`` (dataset ``magentic_one``
  or ``tau_retail``), from its trajectory file, made as the other multi-agent trajectories are
  (pipelines.readers.trajectory): one operation ``step-<i>`` per message;
* one annotation per failure: ``error_type`` = ``failure_category`` and ``responsible_agent`` =
  ``failed_agent`` as written, ``decisive_step`` = ``step_number`` - 1 (AgentRx counts messages from
  1), ``is_root_cause`` for the root cause's failure, ``taxonomy`` ``agentrx``;
* a ground-truth file accounts for itself by the labels it holds (:class:`Labels`); a trajectory
  labelled again with the same failures counts once, with other failures it goes to ingest_errors,
  as do labels whose trajectory or step is missing and trajectories no label names.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from pipelines import schema
from pipelines.readers.base import (
    CONFLICTING_LABELS,
    DANGLING_REFERENCE,
    MISSING_KEY,
    UNLABELLED_TRAJECTORY,
    WRONG_FIELD_TYPE,
    WRONG_TOP_LEVEL_TYPE,
    GraphRows,
    IngestError,
    Labels,
    SourceFile,
    file_sha256,
    list_files,
    load_json,
    read_bytes,
    require_keys,
    size_and_mtime,
    source_root,
)
from pipelines.readers.trajectory import QUESTION_NODE, Trajectory, classify, task_benchmark, to_rows
from pipelines.storage.warehouse import relative_name

kind = "agentrx"
whole_partition = True  # a graph's rows depend on two files: the ingest never reuses one file's rows

SPLIT = "agentrx"  # the whole folder is one split: a trajectory and its labels stay in one partition
TAXONOMY = "agentrx"
GROUND_TRUTH = "ground_truth"
MAGENTIC = "magentic_dataset"
TAU = "tau_retail"
DATASETS = {MAGENTIC: "magentic_one", TAU: "tau_retail"}  # folder -> the dataset in the graph id
SYSTEMS = {MAGENTIC: "magentic-one", TAU: "tau-bench"}


def discover(root: Path, source: str) -> list[SourceFile]:
    """The JSON files of ground_truth/, magentic_dataset/ and tau_retail/ under ``root``, one split."""
    root = root.absolute()
    found = []
    for folder in (GROUND_TRUTH, MAGENTIC, TAU):
        if (root / folder).is_dir():
            found += [SourceFile(source, SPLIT, path, relative_name(root, path))
                      for path in list_files(root / folder, "**/*.json") if path.parent == root / folder]
    return sorted(found, key=lambda f: f.relpath)


def read(file: SourceFile) -> Iterator[GraphRows | IngestError | Labels]:
    root = source_root(file)
    # the files the ingest reads: a broken link or hidden name is rejected on its own, not indexed
    listing = tuple((f.relpath, *size_and_mtime(f.path)) for f in discover(root, file.source) if f.problem is None)
    index = _index(str(root), file.source, listing)
    items = index.items.get(file.relpath)
    if items is None:  # listed after the index was built: read it on its own
        items = _build(root, [file], file.source).items.get(file.relpath, [])
    yield from items


@dataclass
class _Failure:
    failure_id: Any
    step: int  # 0-based
    category: str | None
    agent: str | None
    reason: str | None
    extra: dict[str, Any]


@dataclass
class _Label:
    """One ground-truth entry: the failures of one trajectory, where it was read."""

    dataset_folder: str
    trajectory_id: str
    failures: list[dict[str, Any]]
    root_cause: Any
    summary: Any
    file: str
    position: str

    def same_as(self, other: _Label) -> bool:
        return orjson.dumps((self.failures, self.root_cause), option=orjson.OPT_SORT_KEYS) == orjson.dumps(
            (other.failures, other.root_cause), option=orjson.OPT_SORT_KEYS)


@dataclass
class _Run:
    """One trajectory: its file, position, and steps."""

    file: SourceFile
    position: str | None
    trajectory: Trajectory
    sha256: str
    reward: float | None = None


@dataclass
class _Index:
    items: dict[str, list[Any]] = field(default_factory=dict)

    def add(self, relpath: str, item: Any) -> None:
        self.items.setdefault(relpath, []).append(item)


@functools.lru_cache(maxsize=1)  # the listing being ingested; a changed listing replaces it
def _index(root: str, source: str, listing: tuple[tuple[str, int, int], ...]) -> _Index:
    """The index of one listing of the folder (``listing`` keys the cache: a changed file rebuilds it)."""
    base = Path(root)
    return _build(base, [f for f in discover(base, source) if f.problem is None], source)


def _build(root: Path, files: list[SourceFile], source: str) -> _Index:
    index = _Index()
    for f in files:
        index.items.setdefault(f.relpath, [])
    labels = _read_labels([f for f in files if f.relpath.startswith(GROUND_TRUTH + "/")], index)
    runs = _read_runs([f for f in files if not f.relpath.startswith(GROUND_TRUTH + "/")], index)
    used: set[int] = set()  # the runs a label took (by id)
    for (folder, tid), label in sorted(labels.items()):
        candidates = runs.get((folder, tid), [])
        if not candidates:
            index.add(label.file, IngestError(
                DANGLING_REFERENCE, f"trajectory {tid!r} is labelled but {folder}/ holds no such trajectory",
                label.position))
            continue
        # Several runs of one task (tau_dataset_failed.json and tau_dataset_full.json): the labels
        # describe a failed run, so a failed one first, then the first in path order.
        run = sorted(candidates, key=lambda r: (r.reward is not None and r.reward >= 1))[0]
        used.add(id(run))
        rows = _graph(run, label, folder, tid, index)
        index.add(run.file.relpath, rows)
    for (folder, tid), candidates in sorted(runs.items()):
        for run in candidates:
            if id(run) in used:
                continue
            if (folder, tid) in labels:
                taken = next(r for r in candidates if id(r) in used)
                where = taken.file.relpath + (f" {taken.position}" if taken.position else "")
                index.add(run.file.relpath, IngestError(
                    UNLABELLED_TRAJECTORY, f"another run of trajectory {tid!r} ({where}) carries its labels",
                    run.position))
            else:
                index.add(run.file.relpath, IngestError(
                    UNLABELLED_TRAJECTORY, f"no ground_truth/*.json file labels trajectory {tid!r}", run.position))
    return index


def _read_labels(files: list[SourceFile], index: _Index) -> dict[tuple[str, str], _Label]:
    """Every ground-truth entry, first come first served; a repeat with the same failures counts
    once (its file's Labels count it), with other failures it is rejected."""
    labels: dict[tuple[str, str], _Label] = {}
    for f in files:
        try:
            doc = load_json(read_bytes(f.path))
            if not isinstance(doc, list):
                raise IngestError(WRONG_TOP_LEVEL_TYPE, f"expected a list of labels, got {type(doc).__name__}", "$")
        except IngestError as error:
            index.add(f.relpath, error)
            continue
        n = 0
        for i, entry in enumerate(doc):
            pos = f"$[{i}]"
            try:
                label = _label(entry, f.relpath, pos)
            except IngestError as error:
                index.add(f.relpath, error)
                continue
            key = (label.dataset_folder, label.trajectory_id)
            first = labels.get(key)
            if first is None:
                labels[key] = label
                n += 1
            elif first.same_as(label):
                n += 1  # the same failures again: counted once, from the first file
            else:
                index.add(f.relpath, IngestError(
                    CONFLICTING_LABELS, f"trajectory {label.trajectory_id!r} is labelled with other failures "
                    f"in {first.file} {first.position}; those are loaded", pos))
        if n:
            index.add(f.relpath, Labels(n))
    return labels


def _label(entry: Any, file: str, pos: str) -> _Label:
    if not isinstance(entry, dict):
        raise IngestError(WRONG_TOP_LEVEL_TYPE, "a label must be an object", pos)
    require_keys(entry, ("trajectory_id", "failures"), pos)
    tid = entry["trajectory_id"]
    if isinstance(tid, bool) or not isinstance(tid, str | int):
        raise IngestError(WRONG_FIELD_TYPE, "trajectory_id must be a string or an integer", f"{pos}.trajectory_id")
    failures = entry["failures"]
    if not isinstance(failures, list) or not all(isinstance(x, dict) for x in failures):
        raise IngestError(WRONG_FIELD_TYPE, "failures must be a list of objects", f"{pos}.failures")
    # tau-bench task ids are integers (also written as digit strings); Magentic-One's are GAIA /
    # AssistantBench question ids
    folder = TAU if isinstance(tid, int) or str(tid).strip().isdigit() else MAGENTIC
    return _Label(folder, str(tid).strip(), failures, entry.get("root_cause"), entry.get("failure_summary"), file, pos)


def _read_runs(files: list[SourceFile], index: _Index) -> dict[tuple[str, str], list[_Run]]:
    runs: dict[tuple[str, str], list[_Run]] = {}
    for f in files:
        folder = f.relpath.split("/", 1)[0]
        try:
            data = read_bytes(f.path)
            doc = load_json(data)
            sha = file_sha256(data)
            if folder == MAGENTIC:
                tid = Path(f.relpath).stem
                runs.setdefault((folder, tid), []).append(_Run(f, None, _magentic(doc, f, tid), sha))
                continue
            if not isinstance(doc, list):
                raise IngestError(WRONG_TOP_LEVEL_TYPE, f"expected a list of runs, got {type(doc).__name__}", "$")
        except IngestError as error:
            index.add(f.relpath, error)
            continue
        for i, record in enumerate(doc):
            try:
                run = _tau(record, f, f"$[{i}]", sha)
            except IngestError as error:
                index.add(f.relpath, error)
                continue
            runs.setdefault((folder, run.trajectory.graph_id.rsplit("/", 1)[1]), []).append(run)
    return runs


def _magentic(doc: Any, file: SourceFile, tid: str) -> Trajectory:
    if not isinstance(doc, list):
        raise IngestError(WRONG_TOP_LEVEL_TYPE, f"expected a list of messages, got {type(doc).__name__}", "$")
    steps = []
    question = None
    for i, message in enumerate(doc):
        pos = f"$[{i}]"
        role, content = _message(message, pos)
        if question is None and role.strip().lower() == "human":
            question = content
        steps.append(classify(role, role, SYSTEMS[MAGENTIC], content))
    return Trajectory(graph_id=f"agentrx:{DATASETS[MAGENTIC]}/{tid}", system=SYSTEMS[MAGENTIC],
                      dataset=task_benchmark(tid), question=question, ground_truth=None, steps=steps)


def _message(message: Any, pos: str) -> tuple[str, str]:
    if not isinstance(message, dict):
        raise IngestError(WRONG_FIELD_TYPE, "a message must be an object", pos)
    role = message.get("role")
    if not isinstance(role, str) or not role.strip():
        raise IngestError(MISSING_KEY if role is None else WRONG_FIELD_TYPE, "a message needs a role (text)", pos)
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        content = orjson.dumps(content).decode()
    calls = message.get("tool_calls")
    if calls:  # an assistant turn that calls tools (content null): the calls are what it says
        content = orjson.dumps({"tool_calls": calls}, option=orjson.OPT_SORT_KEYS).decode() + (
            f"\n{content}" if content else "")
    return role, content or ""


def _tau(record: Any, file: SourceFile, pos: str, sha: str) -> _Run:
    if not isinstance(record, dict):
        raise IngestError(WRONG_TOP_LEVEL_TYPE, "a run must be an object", pos)
    require_keys(record, ("task_id", "traj"), pos)
    task_id = record["task_id"]
    if isinstance(task_id, bool) or not isinstance(task_id, int | str):
        raise IngestError(WRONG_FIELD_TYPE, "task_id must be an integer", f"{pos}.task_id")
    traj = record["traj"]
    if not isinstance(traj, list):
        raise IngestError(WRONG_FIELD_TYPE, "traj must be a list of messages", f"{pos}.traj")
    steps = []
    for i, message in enumerate(traj):
        mpos = f"{pos}.traj[{i}]"
        role, content = _message(message, mpos)
        index = message.get("index")
        if index is not None and index != i + 1:
            raise IngestError(WRONG_FIELD_TYPE, f"index {index!r} is not the message's position from 1 ({i + 1})",
                              f"{mpos}.index")
        steps.append(classify(role, role, SYSTEMS[TAU], content))
    info = record.get("info") if isinstance(record.get("info"), dict) else {}
    task = info.get("task") if isinstance(info.get("task"), dict) else {}
    instruction = task.get("instruction")
    actions = task.get("actions")
    reward = record.get("reward")
    tid = str(task_id).strip()
    trajectory = Trajectory(
        graph_id=f"agentrx:{DATASETS[TAU]}/{tid}", system=SYSTEMS[TAU], dataset=DATASETS[TAU],
        question=instruction if isinstance(instruction, str) else None,
        ground_truth=orjson.dumps(actions).decode() if actions is not None else None,  # the expected actions
        steps=steps,
        metadata={k: v for k, v in (("task_id", task_id), ("reward", reward), ("trial", record.get("trial")),
                                    ("user_id", task.get("user_id")), ("position", pos)) if v is not None},
    )
    return _Run(file, pos, trajectory, sha, reward if isinstance(reward, int | float) else None)


_FAILURE_KEYS = {"failure_id", "step_number", "failure_category", "failed_agent", "step_reason"}


def _graph(run: _Run, label: _Label, folder: str, tid: str, index: _Index) -> GraphRows:
    """The trajectory's graph with one annotation per failure of its label; a failure whose step is
    not a message of the trajectory is rejected (on the label's file)."""
    traj = run.trajectory
    n = len(traj.steps)
    root = label.root_cause.get("failure_id") if isinstance(label.root_cause, dict) else None
    failures: list[_Failure] = []
    for j, failure in enumerate(label.failures):
        pos = f"{label.position}.failures[{j}]"
        step = failure.get("step_number")
        if isinstance(step, str) and step.strip().isdigit():
            step = int(step)
        if isinstance(step, bool) or not isinstance(step, int):
            index.add(label.file, IngestError(WRONG_FIELD_TYPE, "step_number must be an integer", f"{pos}.step_number"))
            continue
        if not 1 <= step <= n:
            index.add(label.file, IngestError(
                DANGLING_REFERENCE, f"step_number {step} is outside trajectory {tid!r} (messages 1..{n})", pos))
            continue
        failures.append(_Failure(
            failure.get("failure_id"), step - 1, _text(failure.get("failure_category")),
            _text(failure.get("failed_agent")), _text(failure.get("step_reason")),
            {k: v for k, v in failure.items() if k not in _FAILURE_KEYS} | {"failure_id": failure.get("failure_id")}))
    shared = {"failure_summary": label.summary, "root_cause": label.root_cause, "ground_truth_file": label.file}
    rows = to_rows(traj, run.file, run.sha256)
    gid = traj.graph_id
    k = len(failures)
    annotations = pa.Table.from_pydict({
        "graph_id": [gid] * k,
        "annotation_id": [f"{gid}#a{j}" for j in range(k)],
        "system": [traj.system] * k,
        "dataset": [traj.dataset] * k,
        "query_id": [QUESTION_NODE] * k,
        "query": [traj.question] * k,
        "golden_answers": [[traj.ground_truth] if traj.ground_truth is not None else None] * k,
        "prediction": [None] * k,
        "error_type": [f.category for f in failures],
        "taxonomy": [TAXONOMY if f.category is not None else None for f in failures],
        "faulty_op_id": [f"step-{f.step}" for f in failures],
        "responsible_agent": [f.agent for f in failures],
        "decisive_step": [f.step for f in failures],
        "is_root_cause": [root is not None and str(f.failure_id) == str(root) for f in failures],
        "reason": [f.reason for f in failures],
        "source_evidence_ids": [None] * k,
        "provenance": [f"agentrx/{label.file.rsplit('/', 1)[-1]}"] * k,
        "annotator_kind": [schema.BENCHMARK_ANNOTATOR] * k,
        "extra": [orjson.dumps(f.extra | shared, option=orjson.OPT_SORT_KEYS).decode() for f in failures],
    }, schema=schema.ANNOTATIONS)
    graphs = rows.tables["graphs"]
    at = graphs.schema.get_field_index("n_annotations")
    graphs = graphs.set_column(at, graphs.schema.field(at), pa.array([k], pa.int64()))
    return GraphRows(rows.tables | {"annotations": annotations, "graphs": graphs})


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return str(value) if isinstance(value, int | float) else orjson.dumps(value).decode()

