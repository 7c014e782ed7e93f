"""AgentRx failure labels (source kind agentrx) and the taxonomy crosswalk, on real builds of the
AgentRx data in ../shared/data/agentrx: every count is counted again here from the JSON files."""

from __future__ import annotations

import csv
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from conftest import REPO, SHARED_DATA, build_warehouse, query

from pipelines import schema

AGENTRX = SHARED_DATA / "agentrx"
TRAIL_LABELS = SHARED_DATA / "otel" / "otlp-sample" / "labels" / "trail_labels.jsonl"

needs_agentrx = pytest.mark.skipif(
    not (AGENTRX / "ground_truth").is_dir(),
    reason="../shared/data/agentrx (AgentRx's ground truth and trajectories) is not present in this clone")


def load(path: Path) -> object:
    return json.loads(path.read_text())


def expected(root: Path) -> dict[str, dict]:
    """graph id -> what its files say: messages, failures (step_number, category, agent), root cause;
    a trajectory is loaded when a ground-truth file labels it and its trajectory is there."""
    runs: dict[str, list] = {}
    for path in sorted((root / "magentic_dataset").glob("*.json")) if (root / "magentic_dataset").is_dir() else []:
        runs[f"agentrx:magentic_one/{path.stem}"] = load(path)
    for path in sorted((root / "tau_retail").glob("*.json")) if (root / "tau_retail").is_dir() else []:
        for run in load(path):
            runs.setdefault(f"agentrx:tau_retail/{run['task_id']}", run["traj"])
    graphs: dict[str, dict] = {}
    for path in sorted((root / "ground_truth").glob("*.json")):
        for label in load(path):
            tid = label["trajectory_id"]
            gid = f"agentrx:{'tau_retail' if isinstance(tid, int) else 'magentic_one'}/{tid}"
            if gid in runs and gid not in graphs:
                graphs[gid] = {"messages": len(runs[gid]), "failures": label["failures"],
                               "root": label["root_cause"]["failure_id"]}
    return graphs


@pytest.fixture(scope="module")
def agentrx_warehouse(tmp_path_factory: pytest.TempPathFactory):
    if not (AGENTRX / "ground_truth").is_dir():
        pytest.skip("../shared/data/agentrx is not present in this clone")
    warehouse = tmp_path_factory.mktemp("wh-agentrx") / "warehouse"
    return warehouse, build_warehouse(warehouse, [f"agentrx={AGENTRX}"])


@needs_agentrx
def test_counts_equal_what_the_files_say(agentrx_warehouse) -> None:
    warehouse, summary = agentrx_warehouse
    assert summary.failed_checks == [] and summary.warned_checks == []
    want = expected(AGENTRX)
    magentic_labels = load(AGENTRX / "ground_truth" / "magentic_one_ground_truth.json")
    tau_labels = load(AGENTRX / "ground_truth" / "tau_ground_truth.json")
    assert len(want) == len(magentic_labels) + len(tau_labels) == 51
    graphs = dict(query(warehouse, "select graph_id, n_operations from graphs"))
    assert graphs == {gid: g["messages"] for gid, g in want.items()}
    per_graph = dict(query(warehouse, "select graph_id, count(*) from annotations group by all"))
    assert per_graph == {gid: len(g["failures"]) for gid, g in want.items()}
    assert dict(query(warehouse, "select graph_id, n_annotations from graphs")) == per_graph
    assert sum(per_graph.values()) == sum(len(x["failures"]) for x in magentic_labels + tau_labels)
    # each failure as written: category, agent, 0-based step, root cause
    rows = query(warehouse, "select graph_id, error_type, responsible_agent, decisive_step, faulty_op_id, "
                            "is_root_cause, taxonomy, json_extract(extra, '$.failure_id')::int from annotations")
    got = Counter((gid, cat, agent, step, root) for gid, cat, agent, step, _, root, _, _ in rows)
    assert got == Counter((gid, f["failure_category"], f["failed_agent"], f["step_number"] - 1,
                           str(f["failure_id"]) == str(g["root"])) for gid, g in want.items() for f in g["failures"])
    # one root cause per trajectory (one file writes a root cause's failure_id "1" for the failure 1)
    assert query(warehouse, "select count(*) filter (where is_root_cause) from annotations group by graph_id "
                            "having count(*) filter (where is_root_cause) <> 1") == []
    assert all(op == f"step-{step}" and taxonomy == "agentrx" for _, _, _, step, op, _, taxonomy, _ in rows)
    # the operation a failure points at is a message of its trajectory (the relationship checks passed)
    assert query(warehouse, "select count(*) from annotations a left join operations o "
                            "on o.graph_id = a.graph_id and o.op_id = a.faulty_op_id where o.op_id is null") == [(0,)]
    assert query(warehouse, "select system, dataset, count(*) from graphs group by all order by all") == [
        ("magentic-one", "assistantbench", sum(1 for g in want if g.startswith("agentrx:magentic_one/")
                                                and len(g.rsplit("/", 1)[1]) == 64)),
        ("magentic-one", "gaia", sum(1 for g in want if g.startswith("agentrx:magentic_one/")
                                      and len(g.rsplit("/", 1)[1]) == 36)),
        ("tau-bench", "tau_retail", len(tau_labels))]
    # every file accounted for: trajectories by graphs, ground truth by its labels
    assert query(warehouse, "select file, outcome, n_graphs, n_labels from input_files where n_labels > 0 "
                            "order by file") == [
        ("ground_truth/magentic_one_ground_truth.json", "loaded", 0, len(magentic_labels)),
        ("ground_truth/tau_ground_truth.json", "loaded", 0, len(tau_labels))]
    assert query(warehouse, "select count(*) from ingest_errors") == [(0,)]


@needs_agentrx
def test_magentic_one_message_at_step_number_is_the_failed_agents(agentrx_warehouse) -> None:
    """AgentRx counts messages from 1: the message at decisive_step is (in 293 of the repository's 295
    Magentic-One failures) the failed agent's, its role naming the agent (``Orchestrator (-> WebSurfer)``
    for WebSurfer), compared case- and space-insensitively."""
    warehouse, _ = agentrx_warehouse
    rows = query(warehouse, "select contains(lower(replace(json_extract_string(o.metadata, '$.role'), ' ', '')), "
                            "lower(replace(a.responsible_agent, ' ', ''))) "
                            "from annotations a join operations o on o.graph_id = a.graph_id and o.op_id = "
                            "a.faulty_op_id where a.system = 'magentic-one'")
    assert sum(ok for (ok,) in rows) >= 0.98 * len(rows) > 0


def copy_source(tmp_path: Path, parts: tuple[str, ...] = ("ground_truth", "magentic_dataset", "tau_retail")) -> Path:
    root = tmp_path / "agentrx"
    for part in parts:
        shutil.copytree(AGENTRX / part, root / part)
    return root


@needs_agentrx
def test_a_repeated_label_counts_once_and_a_differing_one_goes_to_ingest_errors(tmp_path: Path) -> None:
    root = copy_source(tmp_path)
    tau = load(root / "ground_truth" / "tau_ground_truth.json")
    repeats = tau[:24]  # as the repository's tau_retail.json repeats tau_ground_truth.json
    (root / "ground_truth" / "tau_retail.json").write_text(json.dumps(repeats))
    warehouse = tmp_path / "warehouse"
    summary = build_warehouse(warehouse, [f"agentrx={root}"])
    assert summary.failed_checks == []
    want = expected(AGENTRX)
    assert query(warehouse, "select count(*) from annotations") == [(sum(len(g["failures"]) for g in want.values()),)]
    assert query(warehouse, "select n_labels, outcome from input_files where file = 'ground_truth/tau_retail.json'") \
        == [(24, "loaded")]
    assert query(warehouse, "select count(*) from ingest_errors") == [(0,)]

    # the same trajectory labelled with another category: the first labels load, the other is rejected
    changed = json.loads(json.dumps(repeats))
    changed[3]["failures"][0]["failure_category"] = "Invalid Invocation" if changed[3]["failures"][0][
        "failure_category"] != "Invalid Invocation" else "System Failure"
    (root / "ground_truth" / "tau_retail.json").write_text(json.dumps(changed))
    summary = build_warehouse(warehouse, [f"agentrx={root}"])
    assert summary.failed_checks == []
    errors = query(warehouse, "select file, kind, position, rejected, reason from ingest_errors")
    assert [e[:4] for e in errors] == [("ground_truth/tau_retail.json", "conflicting_labels", "$[3]", True)]
    assert "tau_ground_truth.json" in errors[0][4]
    tid = repeats[3]["trajectory_id"]
    assert query(warehouse, "select error_type from annotations where graph_id = ? order by annotation_id",
                 [f"agentrx:tau_retail/{tid}"]) == [(f["failure_category"],) for f in repeats[3]["failures"]]
    assert query(warehouse, "select n_labels, outcome from input_files where file = 'ground_truth/tau_retail.json'") \
        == [(23, "partly loaded")]


@needs_agentrx
def test_magentic_one_alone_unlabelled_and_dangling_and_a_changed_label_file_rebuilds(tmp_path: Path) -> None:
    """Only the Magentic-One part is a valid source; a trajectory no label names and a label whose
    trajectory is absent go to ingest_errors; editing only the ground truth re-reads the partition."""
    root = copy_source(tmp_path, ("ground_truth", "magentic_dataset"))
    (root / "ground_truth" / "tau_ground_truth.json").unlink()
    labels = load(root / "ground_truth" / "magentic_one_ground_truth.json")
    gone = labels[0]["trajectory_id"]
    shutil.move(root / "magentic_dataset" / f"{gone}.json", root / "magentic_dataset" / "unlabelled-run.json")
    warehouse = tmp_path / "warehouse"
    summary = build_warehouse(warehouse, [f"agentrx={root}"])
    assert summary.failed_checks == []
    assert query(warehouse, "select count(*), sum(n_annotations) from graphs") == [
        (len(labels) - 1, sum(len(x["failures"]) for x in labels[1:]))]
    assert query(warehouse, "select file, kind, position, rejected from ingest_errors order by file") == [
        ("ground_truth/magentic_one_ground_truth.json", "dangling_reference", "$[0]", True),
        ("magentic_dataset/unlabelled-run.json", "unlabelled_trajectory", None, True)]

    # drop one failure of one trajectory: only the label file changed, the trajectory's rows follow
    target = labels[1]
    target["failures"] = target["failures"][1:]
    (root / "ground_truth" / "magentic_one_ground_truth.json").write_text(json.dumps(labels))
    summary = build_warehouse(warehouse, [f"agentrx={root}"])
    assert summary.failed_checks == []
    gid = f"agentrx:magentic_one/{target['trajectory_id']}"
    n = len(target["failures"])
    assert query(warehouse, "select n_annotations from graphs where graph_id = ?", [gid]) == [(n,)]
    assert query(warehouse, "select count(*) from annotations where graph_id = ?", [gid]) == [(n,)]


@needs_agentrx
def test_a_step_outside_the_trajectory_rejects_that_failure_only(tmp_path: Path) -> None:
    root = copy_source(tmp_path, ("ground_truth", "tau_retail"))
    (root / "ground_truth" / "magentic_one_ground_truth.json").unlink()
    labels = load(root / "ground_truth" / "tau_ground_truth.json")
    labels[0]["failures"][0]["step_number"] = 10_000
    (root / "ground_truth" / "tau_ground_truth.json").write_text(json.dumps(labels))
    warehouse = tmp_path / "warehouse"
    summary = build_warehouse(warehouse, [f"agentrx={root}"])
    assert summary.failed_checks == []
    assert query(warehouse, "select kind, position from ingest_errors") == [("dangling_reference", "$[0].failures[0]")]
    gid = f"agentrx:tau_retail/{labels[0]['trajectory_id']}"
    assert query(warehouse, "select n_annotations from graphs where graph_id = ?", [gid]) == [
        (len(labels[0]["failures"]) - 1,)]


# -- the crosswalk and failure_modes_common ----------------------------------------------------------


def crosswalk() -> list[dict[str, str]]:
    with (REPO / "sql" / "seeds" / "taxonomy_crosswalk.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_the_crosswalk_maps_every_taxonomy_onto_the_documented_categories() -> None:
    rows = crosswalk()
    assert len({(r["taxonomy"], r["label"]) for r in rows}) == len(rows)
    assert {r["common_category"] for r in rows} <= set(schema.FAILURE_CATEGORIES)
    by = Counter(r["taxonomy"] for r in rows)
    assert by["trail"] == 20 and by["mast"] == 14
    assert {r["label"] for r in rows if r["taxonomy"] == "memtracebench"} == set(schema.ERROR_TYPES)
    paper = ["Instruction/Plan Adherence Failure", "Invention of New Information", "Invalid Invocation",
             "Misinterpretation of Tool Output", "Intent-Plan Misalignment", "Underspecified User Intent",
             "Intent Not Supported", "Guardrails Triggered", "System Failure", "Inconclusive"]
    assert set(paper) <= {r["label"] for r in rows if r["taxonomy"] == "agentrx"}
    assert "unmapped" not in schema.FAILURE_CATEGORIES and "unlabelled" not in schema.FAILURE_CATEGORIES


@needs_agentrx
def test_the_crosswalk_covers_every_label_in_the_shared_data() -> None:
    labels = {(r["taxonomy"], r["label"]) for r in crosswalk()}
    agentrx = {("agentrx", f["failure_category"]) for path in (AGENTRX / "ground_truth").glob("*.json")
               for x in load(path) for f in x["failures"]}
    assert agentrx and agentrx <= labels
    if TRAIL_LABELS.is_file():
        trail = {("trail", e["category"]) for line in TRAIL_LABELS.read_text().splitlines() if line.strip()
                 for e in json.loads(line)["errors"]}
        assert trail and trail <= labels


@needs_agentrx
def test_failure_modes_common_counts_every_annotation_once(agentrx_warehouse) -> None:
    warehouse, _ = agentrx_warehouse
    assert query(warehouse, "select sum(n) from failure_modes_common") == query(
        warehouse, "select count(*) from annotations")
    mapping = {r["label"]: r["common_category"] for r in crosswalk() if r["taxonomy"] == "agentrx"}
    want: Counter = Counter()
    for gid, g in expected(AGENTRX).items():
        system = "tau-bench" if gid.startswith("agentrx:tau_retail/") else "magentic-one"
        for f in g["failures"]:
            want[(system, "agentrx", mapping[f["failure_category"]])] += 1
    got = Counter()
    for system, taxonomy, category, n in query(warehouse, "select system, taxonomy, common_category, n "
                                                          "from failure_modes_common"):
        got[(system, taxonomy, category)] += n
    assert got == want


@needs_agentrx
def test_an_unknown_label_is_unmapped_and_named_by_a_warning(tmp_path: Path) -> None:
    root = copy_source(tmp_path, ("ground_truth", "tau_retail"))
    (root / "ground_truth" / "magentic_one_ground_truth.json").unlink()
    labels = load(root / "ground_truth" / "tau_ground_truth.json")
    labels[0]["failures"][0]["failure_category"] = "Cosmic Ray"
    labels[1]["failures"][0]["failure_category"] = "intent  not-SUPPORTED"  # another spelling: still mapped
    (root / "ground_truth" / "tau_ground_truth.json").write_text(json.dumps(labels))
    warehouse = tmp_path / "warehouse"
    summary = build_warehouse(warehouse, [f"agentrx={root}"])
    assert summary.failed_checks == []
    assert "annotations:taxonomy_labels_unmapped" in summary.warned_checks
    assert query(warehouse, "select n from failure_modes_common where common_category = 'unmapped'") == [(1,)]
    assert query(warehouse, "select taxonomy, error_type, n_annotations from (" +
                 (REPO / "sql" / "checks" / "taxonomy_labels_unmapped.sql").read_text() + ")") == [
        ("agentrx", "Cosmic Ray", 1)]


@needs_agentrx
def test_several_runs_of_a_task_the_labels_go_to_the_failed_one(tmp_path: Path) -> None:
    """As the repository's tau_dataset_full.json repeats the failed runs beside passing ones: a
    labelled task's labels go to its failed run; the other runs, and runs no label names, are
    rejected as unlabelled_trajectory; a JSON file of another shape in magentic_dataset/ is rejected."""
    root = copy_source(tmp_path, ("ground_truth", "tau_retail"))
    (root / "ground_truth" / "magentic_one_ground_truth.json").unlink()
    failed = load(root / "tau_retail" / "tau_dataset_failed.json")
    passing = json.loads(json.dumps(failed[:2]))
    for run in passing:
        run["reward"] = 1.0
        run["traj"] = run["traj"][:1]  # shorter: the labels' steps would not fit it
    extra = json.loads(json.dumps(failed[0]))
    extra["task_id"] = 100_000
    # "all" sorts before "failed": the passing runs come first in path order, yet the labels skip them
    (root / "tau_retail" / "tau_dataset_all.json").write_text(json.dumps([*passing, extra]))
    (root / "magentic_dataset").mkdir()
    (root / "magentic_dataset" / "steps_by_id.json").write_text(json.dumps({"x": 3}))
    warehouse = tmp_path / "warehouse"
    summary = build_warehouse(warehouse, [f"agentrx={root}"])
    assert summary.failed_checks == []
    labels = load(root / "ground_truth" / "tau_ground_truth.json")
    assert query(warehouse, "select count(*), sum(n_annotations) from graphs") == [
        (len(labels), sum(len(x["failures"]) for x in labels))]
    assert query(warehouse, "select count(*) from graphs where file <> 'tau_retail/tau_dataset_failed.json'") == [(0,)]
    assert query(warehouse, "select file, kind, position from ingest_errors order by file, position") == [
        ("magentic_dataset/steps_by_id.json", "wrong_top_level_type", "$"),
        ("tau_retail/tau_dataset_all.json", "unlabelled_trajectory", "$[0]"),
        ("tau_retail/tau_dataset_all.json", "unlabelled_trajectory", "$[1]"),
        ("tau_retail/tau_dataset_all.json", "unlabelled_trajectory", "$[2]")]
