"""Scores a researcher can trust (issue 45), on real builds of the shared data: a measure is scored only
where the annotation gives its truth (TRAIL labels name a span and a category, no agent and no step);
agent names are compared one way, without case and surrounding spaces (AgentRx labels `Assistant` for
the role `assistant`); the spellings of one failure label count once (the crosswalk's canonical_label)."""

from __future__ import annotations

import csv
import json
import re
from collections import Counter

import orjson
import pytest
from conftest import REPO, SHARED_DATA, build_warehouse, query

OTLP_SAMPLE = SHARED_DATA / "otel" / "otlp-sample"
AGENTRX = SHARED_DATA / "agentrx"

pytestmark = pytest.mark.skipif(
    not (OTLP_SAMPLE / "labels").is_dir() or not (AGENTRX / "ground_truth").is_dir(),
    reason="../shared/data (the OTLP sample with TRAIL-form labels, the AgentRx records) is not present in this clone")


def crosswalk() -> list[dict[str, str]]:
    with (REPO / "sql" / "seeds" / "taxonomy_crosswalk.csv").open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def fold(label: str) -> str:
    return re.sub(r"[^a-z0-9]", "", label.lower())


def canonical(taxonomy: str, label: str) -> str:
    """error_label() in Python: the crosswalk row written the same, else folded the same, else as written."""
    rows = [r for r in crosswalk() if r["taxonomy"] == taxonomy]
    exact = [r["canonical_label"] for r in rows if r["label"] == label]
    folded = sorted(r["canonical_label"] for r in rows if fold(r["label"]) == fold(label) and fold(label))
    return (exact or folded or [label])[0]


def chart_sql(name: str) -> str:
    from dashboards import CHARTS

    return CHARTS[name].sql


def agentrx_failures() -> list[dict]:
    """Every failure of the AgentRx ground truth, with its trajectory id and file."""
    out = []
    for path in sorted((AGENTRX / "ground_truth").glob("*.json")):
        for record in json.loads(path.read_text()):
            out += [{**f, "trajectory_id": record["trajectory_id"], "file": path.name} for f in record["failures"]]
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The OTLP sample with its TRAIL-form labels and the AgentRx records, then a method that predicts
    on every annotation an agent and a step (the annotated ones, upper-cased; on the TRAIL traces,
    which name none, an agent 'Orchestrator' and step 0) with the annotated span and label."""
    root = tmp_path_factory.mktemp("scoring")
    warehouse = root / "warehouse"
    sources = [f"otlp={OTLP_SAMPLE / 'otlp'}", f"trail:trail_labels={OTLP_SAMPLE / 'labels'}", f"agentrx={AGENTRX}"]
    assert build_warehouse(warehouse, sources).failed_checks == []
    lines = [{"annotation_id": aid, "agent": (agent or "Orchestrator").upper(), "step": step or 0, "op_id": op,
              "error_type": label}
             for aid, agent, step, op, label in query(
                 warehouse, "select annotation_id, responsible_agent, decisive_step, faulty_op_id, error_type "
                            "from annotations order by annotation_id")]
    jsonl = root / "upper.jsonl"
    jsonl.write_bytes(b"\n".join(orjson.dumps(x) for x in lines) + b"\n")
    summary = build_warehouse(warehouse, [*sources, f"upper:attribution_jsonl={jsonl}"])
    assert summary.ok, summary.failed_steps + summary.failed_checks
    trail_systems = {s for (s,) in query(warehouse, "select distinct system from annotations where taxonomy = 'trail'")}
    assert trail_systems and not trail_systems & {"tau-bench", "magentic-one"}
    return {"warehouse": warehouse, "trail_systems": trail_systems}


# -- 1. an unknown truth is never scored ------------------------------------------------------------------


def test_trail_traces_score_no_method_on_agent_or_step(built) -> None:
    warehouse, trail = built["warehouse"], built["trail_systems"]
    n_trail = query(warehouse, "select count(*) from annotations where taxonomy = 'trail'")[0][0]
    rows = query(warehouse, "select method, system, n_cases, n_predicted, n_agent_cases, n_step_cases, agent_correct, "
                            "agent_accuracy, agent_ci_low, agent_ci_high, step_correct, step_accuracy, step_ci_low, "
                            "step_ci_high, agent_accuracy_legacy, step_accuracy_legacy from attribution_accuracy "
                            "where system in (select unnest(?::varchar[])) order by method", [sorted(trail)])
    # both methods predicted an agent and a step on every TRAIL case: there is nothing to compare them with
    assert [r[:2] for r in rows] == [("baseline:last_step", s) for s in sorted(trail)] + [
        ("upper", s) for s in sorted(trail)]
    assert sum(r[2] for r in rows) == 2 * n_trail and all(r[3] == r[2] for r in rows)
    assert all(r[4:] == (0, 0) + (None,) * 10 for r in rows)
    # the leaderboard draws no agent or step bar for them
    board = query(warehouse, "select method, system, metric, n_cases, accuracy from ("
                             f"{chart_sql('attribution_leaderboard')})")
    assert [r for r in board if r[1] in trail and r[2] in ("responsible agent", "decisive step")] == []
    assert all(r[3] > 0 and r[4] is not None for r in board)
    # the failure view's flags: not scored (NULL) on agent and step; span and category scored as TRAIL does
    predictions = query(warehouse, "with failure_rows as (select graph_id, annotation_id from annotations) "
                                   "select c.method, c.agent_right, c.step_right, c.op_right, c.error_type_right, "
                                   "a.taxonomy from (" + (REPO / "sql" / "drilldown" / "failure_predictions.sql")
                        .read_text() + ") c join annotations a using (annotation_id)")
    on_trail = [r for r in predictions if r[5] == "trail"]
    assert len(on_trail) == 2 * n_trail
    assert {r[1:3] for r in on_trail} == {(None, None)}
    assert {(r[0], r[3], r[4]) for r in on_trail} == {("upper", True, True), ("baseline:last_step", False, False)}
    # where the truth is known it is scored: true or false, never NULL
    on_agentrx = [r for r in predictions if r[5] == "agentrx"]
    assert on_agentrx and all(r[1] is not None and r[2] is not None for r in on_agentrx)


# -- 2. one comparison of agent names -----------------------------------------------------------------------


def test_agentrx_agent_spoke_step_wherever_the_actor_is_the_agent_but_for_case(built) -> None:
    warehouse = built["warehouse"]
    rows = query(warehouse, "select f.system, f.step_actor, f.responsible_agent, f.agent_spoke_step "
                            "from failure_propagation f join annotations a using (annotation_id) "
                            "where a.taxonomy = 'agentrx'")
    assert len(rows) == len(agentrx_failures())
    for system, actor, agent, spoke in rows:
        assert spoke == (actor.strip().lower() == agent.strip().lower()), (system, actor, agent)
    # the tau-bench files: the role of the message at step_number (from 1) against the labelled agent
    runs = {run["task_id"]: run["traj"] for path in (AGENTRX / "tau_retail").glob("*.json")
            for run in json.loads(path.read_text())}
    tau = [f for f in agentrx_failures() if f["file"] == "tau_ground_truth.json"]
    spoke_in_files = sum(runs[f["trajectory_id"]][f["step_number"] - 1]["role"].lower() == f["failed_agent"].lower()
                         for f in tau)
    assert spoke_in_files > 0.9 * len(tau)  # the files write Assistant / User for the roles assistant / user
    assert query(warehouse, "select count(*) filter (where agent_spoke_step), count(*) from failure_propagation "
                            "where system = 'tau-bench'") == [(spoke_in_files, len(tau))]
    # the decisive-position chart paints them as spoken by the agent
    painted = query(warehouse, f"select sum(n) from ({chart_sql('decisive_position')}) "
                               "where system = 'tau-bench' and spoke = 'agent acted in the step'")
    assert painted == [(spoke_in_files,)]


def test_agent_names_are_one_agent_whatever_their_case(built) -> None:
    warehouse = built["warehouse"]
    # the method names each annotated agent upper-cased: right on every case that has an agent
    rows = query(warehouse, "select system, n_agent_cases, agent_correct from attribution_accuracy "
                            "where method = 'upper' and system in ('tau-bench', 'magentic-one')")
    assert rows and all(n > 0 and right == n for _, n, right in rows)
    assert query(warehouse, "select min(agent_accuracy) from attribution_agentrx_scores where method = 'upper'") \
        == [(1.0,)]
    # Magentic-One's labels write Websurfer beside WebSurfer: one agent, shown as most labels write it
    written = Counter(f["failed_agent"] for f in agentrx_failures() if f["file"] == "magentic_one_ground_truth.json")
    assert written["Websurfer"] and written["WebSurfer"] > written["Websurfer"]
    agents = dict(query(warehouse, f"select agent, n from ({chart_sql('responsible_agents')}) "
                                   "where system = 'magentic-one'"))
    assert "Websurfer" not in agents and agents["WebSurfer"] == written["Websurfer"] + written["WebSurfer"]
    # a label that names no agent (TRAIL) is no "(none)" agent
    assert query(warehouse, f"select count(*) from ({chart_sql('responsible_agents')}) "
                            "where system in (select unnest(?::varchar[]))", [sorted(built["trail_systems"])]) == [(0,)]
    assert query(warehouse, "select same_agent(' Assistant ', 'assistant'), same_agent('Web Surfer', 'WebSurfer'), "
                            "same_agent(null, 'x'), agent_key('  ')") == [(True, False, None, None)]


# -- 3. the spellings of one label count once ------------------------------------------------------------------


def test_the_crosswalk_gives_every_spelling_one_canonical_label() -> None:
    rows = crosswalk()
    by_label = {(r["taxonomy"], r["label"]): r for r in rows}
    for r in rows:
        target = by_label[(r["taxonomy"], r["canonical_label"])]  # the canonical spelling is a row itself
        assert target["canonical_label"] == target["label"]
        assert target["common_category"] == r["common_category"], r
    # AgentRx's ten categories, each spelling of its files onto one of them
    assert len({r["canonical_label"] for r in rows if r["taxonomy"] == "agentrx"}) == 10
    assert {canonical("agentrx", f["failure_category"]) for f in agentrx_failures()} <= {
        r["canonical_label"] for r in rows if r["taxonomy"] == "agentrx"}


def test_error_mix_and_the_crosswalk_count_a_category_once(built) -> None:
    warehouse = built["warehouse"]
    want = Counter(("tau-bench" if f["file"] == "tau_ground_truth.json" else "magentic-one",
                    canonical("agentrx", f["failure_category"])) for f in agentrx_failures())
    assert want[("magentic-one", "Intent Not Supported")] and want[("tau-bench", "Intent Not Supported")]
    mix = query(warehouse, f"select system, error_type, n from ({chart_sql('error_mix')}) "
                           "where system in ('tau-bench', 'magentic-one') and error_type <> 'unlabelled'")
    assert Counter({(s, t): n for s, t, n in mix}) == want
    labels = {t for _, t, _ in mix}
    assert "Intent not supported" not in labels and "Instruction Adherence Failure" not in labels
    assert query(warehouse, "select error_type from annotations where error_type = 'Intent not supported' limit 1") \
        == [("Intent not supported",)]  # the table keeps what the source wrote
    # the crosswalk chart: every annotation once, no spelling unmapped
    across = query(warehouse, f"select common_category, sum(n) from ({chart_sql('failure_modes_across_taxonomies')}) "
                              "where taxonomy = 'agentrx' group by all")
    mapping = {r["canonical_label"]: r["common_category"] for r in crosswalk() if r["taxonomy"] == "agentrx"}
    assert dict(across) == Counter(mapping[label] for (_, label), n in want.items() for _ in range(n))
    # unseen spellings fold onto the canonical label; an unknown label stays as written
    got = query(warehouse, "select error_label('agentrx', 'intent  not-SUPPORTED'), error_label('agentrx', "
                           "'INSTRUCTION/PLAN adherence failure'), error_label('trail', 'formatting errors'), "
                           "error_label('agentrx', 'Cosmic Ray'), error_label('agentrx', null)")
    assert got == [("Intent Not Supported", "Instruction/Plan Adherence Failure", "Formatting Errors", "Cosmic Ray",
                    None)]
    # the check names an unknown label once, whatever its spellings
    check = (REPO / "sql" / "checks" / "taxonomy_labels_unmapped.sql").read_text()
    unmapped = query(warehouse, "with picked as (select annotation_id, row_number() over (order by annotation_id) as i "
                                "from annotations where taxonomy = 'agentrx' order by annotation_id limit 3), "
                                "annotations as (select a.* replace (coalesce(['Cosmic Ray', 'cosmic-ray', "
                                "'COSMIC RAY '][p.i], a.error_type) as error_type) "
                                "from annotations a left join picked p using (annotation_id)) "
                                "select taxonomy, n_annotations from (" + check + ")")
    assert unmapped == [("agentrx", 3)]
