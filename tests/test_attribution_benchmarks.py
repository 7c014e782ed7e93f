"""Attribution scored by each benchmark's own rule (issue 33): TRAIL's location accuracy, weighted
category F1 and joint accuracy (mart attribution_trail_scores) and AgentRx's root-cause step,
category and agent accuracies (mart attribution_agentrx_scores), on real builds.

Hand-made fixtures with the values worked out by hand in the comments, then the shared data (the
OTLP sample with TRAIL-form labels, the AgentRx records) with predictions written here, whose scores
are computed again in Python from the raw label files by the benchmarks' rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmark_inputs import error, trace_graph, write_agentrx, write_jsonl
from conftest import SHARED_DATA, build_warehouse, query

TRACE_1, TRACE_2 = "4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c"
A, B, C, D, E = "00f067aa0ba902b7", "b7ad6b7169203331", "53995c3f42cd8ad8", "1111111111111111", "2222222222222222"
OTLP_SAMPLE = SHARED_DATA / "otel" / "otlp-sample"
AGENTRX = SHARED_DATA / "agentrx"

TRAIL_COLUMNS = ("n_traces, n_errors, n_traces_predicted, n_traces_location, location_accuracy, n_traces_category, "
                 "category_f1, n_traces_joint, joint_accuracy")
AGENTRX_COLUMNS = ("n_trajectories, n_predicted, n_step, step_correct, step_accuracy, step_accuracy_within_1, "
                   "step_accuracy_within_2, step_accuracy_within_3, step_mae, n_category, category_accuracy, "
                   "n_agent, agent_accuracy")


def by_method(warehouse: Path, mart: str, columns: str) -> dict[str, tuple]:
    rows = query(warehouse, f"select method, {columns} from {mart} order by method")
    return {r[0]: tuple(round(v, 6) if isinstance(v, float) else v for v in r[1:]) for r in rows}


def leaderboard(warehouse: Path, metric: str) -> list[tuple]:
    """The dashboard leaderboard chart's rows (sql/charts/attribution_leaderboard.sql) of some metrics."""
    from dashboards import CHARTS

    rows = query(warehouse, f"select method, metric, correct, n_cases, accuracy, ci_low "
                            f"from ({CHARTS['attribution_leaderboard'].sql}) where metric like ? order by all",
                 [metric])
    return [tuple(round(v, 6) if isinstance(v, float) else v for v in r) for r in rows]


# -- TRAIL ---------------------------------------------------------------------------------------------


def test_trail_scores_by_hand(tmp_path: Path) -> None:
    traces, labels = tmp_path / "traces" / "agents", tmp_path / "labels"
    traces.mkdir(parents=True)
    labels.mkdir()
    trace_graph(traces, TRACE_1, [A, B, C])
    trace_graph(traces, TRACE_2, [D, E])
    write_jsonl(labels / "labels.jsonl", [
        {"trace_id": TRACE_1, "errors": [error("Formatting Errors", A), error("Goal Deviation", B),
                                         error("Formatting Errors", C)]},
        {"trace_id": TRACE_2, "errors": [error("Tool Selection Errors", D), error("Rate Limiting", E)]}])
    warehouse = tmp_path / "warehouse"
    sources = [f"smartcomment={tmp_path / 'traces'}", f"trail:trail_labels={labels}"]
    assert build_warehouse(warehouse, sources).failed_checks == []
    ids = dict(query(warehouse, "select graph_id || ' ' || faulty_op_id, annotation_id from annotations"))
    t1 = {op: ids[f"otel:{TRACE_1} {op}"] for op in (A, B, C)}
    t2 = {op: ids[f"otel:{TRACE_2} {op}"] for op in (D, E)}
    # m1: on trace 1 locations {A, C} (categories as TRAIL's scorer reads them: case and spaces ignored),
    # nothing on trace 2. m2: locations without categories on trace 1; on trace 2 location D named
    # "Tool Selection" (a part of the leaf's name: TRAIL's substring rule).
    m1 = write_jsonl(tmp_path / "m1.jsonl", [
        {"annotation_id": t1[A], "op_id": A, "error_type": "formatting errors"},
        {"annotation_id": t1[B], "op_id": C, "error_type": " Goal  Deviation"}])
    m2 = write_jsonl(tmp_path / "m2.jsonl", [
        {"annotation_id": t1[C], "op_id": B},
        {"annotation_id": t2[D], "op_id": D, "error_type": "Tool Selection"}])
    summary = build_warehouse(warehouse, [*sources, f"m1:attribution_jsonl={m1}", f"m2:attribution_jsonl={m2}"])
    assert summary.ok, summary.failed_steps + summary.failed_checks
    got = by_method(warehouse, "attribution_trail_scores", TRAIL_COLUMNS)
    # m1, trace 1: locations 2/3, pairs {(A, FE)} of 3 = 1/3; trace 2 (no prediction): 0 and 0.
    # Category sets: trace 1 {FE, GD} both right; trace 2 {TSE, RL} both missed: per-category F1 1, 1, 0, 0,
    # each support 1: weighted F1 0.5.
    assert got["m1"] == (2, 5, 1, 2, round((2 / 3 + 0) / 2, 6), 2, 0.5, 2, round((1 / 3 + 0) / 2, 6))
    # m2, trace 1: location {B} 1/3, no category anywhere: not scored for category or joint.
    # trace 2: location {D} 1/2, pair (D, TSE) 1/2; categories {TSE} of {TSE, RL}: F1 1 and 0, weighted 0.5.
    assert got["m2"] == (2, 5, 2, 2, round((1 / 3 + 1 / 2) / 2, 6), 1, 0.5, 1, 0.5)
    # the baseline names an agent and a step, no span or category: TRAIL's rule cannot score it
    assert got["baseline:last_step"][:2] == (2, 5)
    assert got["baseline:last_step"][3:] == (0, None, 0, None, 0, None)
    # the dashboard's leaderboard shows them beside the exact scores (no interval for TRAIL's means)
    board = leaderboard(warehouse, "TRAIL%")
    assert board == [("m1", "TRAIL category F1", None, 2, 0.5, None),
                     ("m1", "TRAIL joint", None, 2, round(1 / 6, 6), None),
                     ("m1", "TRAIL location", None, 2, round(1 / 3, 6), None),
                     ("m2", "TRAIL category F1", None, 1, 0.5, None), ("m2", "TRAIL joint", None, 1, 0.5, None),
                     ("m2", "TRAIL location", None, 2, round(5 / 12, 6), None)]


def trail_expected(labels: list[dict], predictions: dict[str, list[tuple[str | None, str | None]]]) -> tuple:
    """TRAIL's rules in Python over the raw label records: predictions = trace id -> (location, category)."""
    loc, joint, cat_sets = [], [], []
    for record in labels:
        gt = [(e["location"], e["category"]) for e in record["errors"]]
        pred = predictions.get(record["trace_id"], [])
        gt_loc, pred_loc = {g[0] for g in gt}, {p[0] for p in pred if p[0]}
        gt_pairs, pred_pairs = set(gt), {p for p in pred if p[0] and p[1]}
        loc.append(len(gt_loc & pred_loc) / len(gt_loc))
        joint.append(len(gt_pairs & pred_pairs) / len(gt_pairs))
        cat_sets.append(({g[1] for g in gt}, {p[1] for p in pred if p[1]}))
    categories = set().union(*(g | p for g, p in cat_sets))
    weighted = 0.0
    support_total = 0
    for c in categories:
        tp = sum(c in g and c in p for g, p in cat_sets)
        fp = sum(c in p and c not in g for g, p in cat_sets)
        fn = sum(c in g and c not in p for g, p in cat_sets)
        support = tp + fn
        weighted += support * (2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
        support_total += support
    return (round(sum(loc) / len(loc), 6), round(weighted / support_total, 6), round(sum(joint) / len(joint), 6))


# -- AgentRx ---------------------------------------------------------------------------------------------


def failure_case(label: str) -> str:
    """AgentRx's convert_to_failure_case (agentrx/judge/judge.py) on a category name, in Python."""
    text = label.strip().lower()
    rules = [(("instruction", "adherence"), "Instruction/Plan Adherence Failure"),
             (("invention", "information"), "Invention of New Information"),
             (("invalid", "invocation"), "Invalid Invocation")]
    for words, case in rules:
        if all(w in text for w in words):
            return case
    if "misinterpretation" in text or "handoff" in text:
        return "Misinterpretation of Tool Output"
    if "intent" in text and "misalignment" in text:
        return "Intent-Plan Misalignment"
    if "underspecified" in text:
        return "Underspecified User Intent"
    if "unsupported" in text or ("intent" in text and "not supported" in text):
        return "Intent Not Supported"
    if "guardrail" in text:
        return "Guardrails Triggered"
    if "system" in text and "failure" in text:
        return "System Failure"
    return "Inconclusive"


def test_agentrx_scores_by_hand(tmp_path: Path) -> None:
    root = write_agentrx(tmp_path / "agentrx")
    warehouse = tmp_path / "warehouse"
    assert build_warehouse(warehouse, [f"agentrx={root}"]).failed_checks == []
    ids = {(g, s): a for g, s, a in query(warehouse, "select graph_id, decisive_step, annotation_id from annotations")}
    x1, x2 = ids[("agentrx:magentic_one/traj-x", 1)], ids[("agentrx:magentic_one/traj-x", 3)]
    y1 = ids[("agentrx:magentic_one/traj-y", 2)]
    # rx: on x a prediction on the non-root failure only (it stands for the trajectory): step 3 = the
    # root cause's (AgentRx step 4, tracehouse step 3), "Invention of New Information" = the root's case,
    # agent "coder" = Coder ignoring case. On y: step 5 (3 off), category "2" (AgentRx's number for
    # Invention: wrong), no agent.
    rx = write_jsonl(tmp_path / "rx.jsonl", [
        {"annotation_id": x1, "step": 3, "error_type": "Invention of New Information", "agent": "coder"},
        {"annotation_id": y1, "step": 5, "error_type": "2"}])
    # rx2: two predictions on x, the root cause's wins (step 5: 2 off); nothing on y.
    rx2 = write_jsonl(tmp_path / "rx2.jsonl", [
        {"annotation_id": x1, "step": 1}, {"annotation_id": x2, "step": 5}])
    summary = build_warehouse(warehouse, [f"agentrx={root}", f"rx:attribution_jsonl={rx}",
                                          f"rx2:attribution_jsonl={rx2}"])
    assert summary.ok, summary.failed_steps + summary.failed_checks
    got = by_method(warehouse, "attribution_agentrx_scores", AGENTRX_COLUMNS)
    assert got["rx"] == (2, 2, 2, 1, 0.5, 0.5, 0.5, 1.0, 1.5, 2, 0.5, 1, 1.0)
    assert got["rx2"] == (2, 1, 1, 0, 0.0, 0.0, 1.0, 1.0, 2.0, 0, None, 0, None)
    # the baseline blames the last message (index 5, FileSurfer): x is 2 off, y 3 off; y's agent right
    assert got["baseline:last_step"] == (2, 2, 2, 0, 0.0, 0.0, 0.5, 1.0, 2.5, 0, None, 2, 0.5)
    board = [r[:5] for r in leaderboard(warehouse, "AgentRx%") if r[0] == "rx"]
    assert board == [("rx", "AgentRx agent", 1, 1, 1.0), ("rx", "AgentRx failure case", 1, 2, 0.5),
                     ("rx", "AgentRx root-cause step", 1, 2, 0.5)]
    # agentrx_failure_case() = AgentRx's convert_to_failure_case, on its files' spellings and numbers
    labels = ["Instruction/Plan Adherence Failure", "Instruction Adherence Failure", "Invention of new information",
              "Intent Plan Misalignment", "Intent-Plan Misalignment", "Intent not supported",
              "Underspecified User Intent",
              "Guardrails Triggered", "System Failure", "Misinterpretation of Tool Output", "5", "42", "no idea"]
    got = [query(warehouse, "select agentrx_failure_case(?)", [label])[0][0] for label in labels]
    assert got == ["Instruction/Plan Adherence Failure", "Instruction/Plan Adherence Failure",
                   "Invention of New Information", "Intent-Plan Misalignment", "Intent-Plan Misalignment",
                   "Intent Not Supported", "Underspecified User Intent", "Guardrails Triggered", "System Failure",
                   "Misinterpretation of Tool Output", "Intent-Plan Misalignment", "Inconclusive", "Inconclusive"]


# -- the shared data ---------------------------------------------------------------------------------------


@pytest.mark.skipif(not (OTLP_SAMPLE / "labels").is_dir() or not (AGENTRX / "ground_truth").is_dir(),
                    reason="../shared/data (the OTLP sample with TRAIL-form labels, the AgentRx records) "
                           "is not present in this clone")
def test_shared_data_scores_equal_the_benchmarks_rules_in_python(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    sources = [f"otlp={OTLP_SAMPLE / 'otlp'}", f"trail:trail_labels={OTLP_SAMPLE / 'labels'}", f"agentrx={AGENTRX}"]
    assert build_warehouse(warehouse, sources).failed_checks == []
    trail_labels = [json.loads(line) for line in (OTLP_SAMPLE / "labels" / "trail_labels.jsonl").read_text()
                    .splitlines() if line.strip()]
    # TRAIL: for each labelled error, every other one is predicted right; the rest at the right span with
    # another category; the first error of every third trace is left unpredicted.
    trail_rows = query(warehouse, "select annotation_id, graph_id, faulty_op_id, error_type from annotations "
                                  "where taxonomy = 'trail' order by annotation_id")
    lines, predicted = [], {}
    for i, (aid, gid, op, category) in enumerate(trail_rows):
        guess = category if i % 2 == 0 else ("Goal Deviation" if category != "Goal Deviation" else "Rate Limiting")
        lines.append({"annotation_id": aid, "op_id": op, "error_type": guess})
        predicted.setdefault(gid.removeprefix("otel:"), []).append((op, guess))
    # AgentRx: the root cause's step +1 on every trajectory, the category right on the even ones, the
    # agent as written but lower-cased
    rx_rows = query(warehouse, "select annotation_id, graph_id, decisive_step, error_type, responsible_agent "
                               "from annotations where taxonomy = 'agentrx' and is_root_cause order by graph_id")
    for i, (aid, _, step, category, agent) in enumerate(rx_rows):
        lines.append({"annotation_id": aid, "step": step + 1, "agent": agent.lower(),
                      "error_type": category if i % 2 == 0 else "System Failure"})
    jsonl = write_jsonl(tmp_path / "mine.jsonl", lines)
    summary = build_warehouse(warehouse, [*sources, f"mine:attribution_jsonl={jsonl}"])
    assert summary.ok, summary.failed_steps + summary.failed_checks

    got = query(warehouse, "select sum(n_traces), sum(n_errors) from attribution_trail_scores where method = 'mine'")
    assert got == [(len(trail_labels), sum(len(r["errors"]) for r in trail_labels))]
    systems = query(warehouse, "select count(*) from attribution_trail_scores where method = 'mine'")[0][0]
    assert systems == 1  # the sample is one system and dataset
    row = query(warehouse, "select location_accuracy, category_f1, joint_accuracy from attribution_trail_scores "
                           "where method = 'mine'")[0]
    assert tuple(round(v, 6) for v in row) == trail_expected(trail_labels, predicted)

    truth = json.loads((AGENTRX / "ground_truth" / "magentic_one_ground_truth.json").read_text()) + json.loads(
        (AGENTRX / "ground_truth" / "tau_ground_truth.json").read_text())
    n_roots = len(rx_rows)
    assert n_roots == len({str(t["trajectory_id"]) for t in truth
                           if query(warehouse, "select 1 from graphs where graph_id like ?",
                                    [f"agentrx:%/{t['trajectory_id']}"])})
    got = query(warehouse, "select sum(n_trajectories), sum(n_step), sum(step_correct), "
                           "sum(step_accuracy_within_1 * n_step), sum(category_correct), sum(agent_correct) "
                           "from attribution_agentrx_scores where method = 'mine'")[0]
    assert got[:3] == (n_roots, n_roots, 0)  # every step one off: none exact, all within ±1
    assert round(got[3]) == n_roots
    assert got[4] == sum(i % 2 == 0 or failure_case(row[3]) == "System Failure" for i, row in enumerate(rx_rows))
    assert got[5] == n_roots
