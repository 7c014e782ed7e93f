"""The failure marts (sql/marts/*.sql) against expectations computed independently in Python.

* Multi-agent marts on the real Who&When and TracerTraj records, counted from the raw files.
* Memory marts on the default sample corpus, counted from its injected_faults.jsonl (and, for the
  propagation mart, from the graphs' own JSON).
* Edge cases on small graphs traced with smartcomment: judge scores stored by content, prediction
  nodes found without prediction_id, labels without an operation, an unknown system.
* The Dagster side: one asset per SQL file, with its group, kinds, upstream tables and metadata.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from collections import Counter, defaultdict, deque
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import orjson
import pyarrow.parquet as pq
import pytest
from conftest import build_warehouse, query
from smartcomment import comment_graph, comment_op, comment_session, comment_variable

from pipelines import schema
from pipelines.analytics import catalog, db
from pipelines.builds.step_errors import cause
from pipelines.readers.trajectory import classify

Z = 1.959963984540054
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
_HEX64 = re.compile(r"^[0-9a-f]{64}$", re.I)
MEMORY_LABELS = {"ExtractionError", "UpdateError", "DeletionError", "RetrievalError", "ResponseError"}


def wilson(k: int, n: int) -> tuple[float, float]:
    p = k / n
    center = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z / (1 + Z * Z / n) * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return center - half, center + half


def rows_as_dicts(warehouse: Path, sql: str, params: list | None = None) -> list[dict[str, Any]]:
    from pipelines.storage.warehouse import Warehouse

    con = db.connect(Warehouse(warehouse))
    try:
        cursor = con.execute(sql, params or [])
        columns = [d[0] for d in cursor.description]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
    finally:
        con.close()


# =============================================================================================
# Multi-agent sources: the real records


def raw_multi_agent(shared: Path) -> list[dict[str, Any]]:
    """One dict per record, read straight from the files: what the marts must agree with."""
    records = []
    for path in sorted((shared / "whowhen").glob("*/*.json")):
        record = json.loads(path.read_text())
        hand = path.parent.name == "Hand-Crafted"
        qid = record["question_ID"].strip()
        # Hand-Crafted: the agent is `role` ("Orchestrator (thought)" is the Orchestrator);
        # Algorithm-Generated: the agent is `name`.
        labels = [h["role"] if hand else h.get("name") or h["role"] for h in record["history"]]
        contents = [h.get("content") or "" for h in record["history"]]
        records.append(
            {
                "graph_id": f"whowhen:{path.parent.name}/{path.stem}",
                "system": "magentic-one" if hand else "captainagent",
                "dataset": "gaia" if _UUID.match(qid) else "assistantbench" if _HEX64.match(qid) else "unknown",
                "labels": labels,
                "contents": contents,
                "agent": record["mistake_agent"],
                "step": int(str(record["mistake_step"])),
            }
        )
    for path in sorted((shared / "tracertraj").glob("*.parquet")):
        for i, record in enumerate(pq.read_table(path).to_pylist()):
            records.append(
                {
                    "graph_id": f"tracertraj:{path.name}#{i}",
                    "system": "metagpt",
                    "dataset": "code",
                    "labels": [h["name"] for h in record["history"]],
                    "contents": [h.get("content") or "" for h in record["history"]],
                    "agent": record["mistake_agent"],
                    "step": int(str(record["mistake_step"])),
                }
            )
    for r in records:
        label = r["labels"][r["step"]]
        r["actor"] = re.sub(r"\s*\(.*\)\s*$", "", label)  # "Orchestrator (-> WebSurfer)" -> Orchestrator
        r["n_steps"] = len(r["labels"])
        # what the step does is the seed's step rules on its label and content (tests/test_step_classes.py
        # holds the rules to the frameworks' formats); here the marts must count each step as classified
        r["op_name"] = classify(label, None, r["system"], r["contents"][r["step"]]).op_name
    return records


def expected_role(system: str, agent: str) -> str:
    fixed = {
        ("magentic-one", "Orchestrator"): "orchestrator",
        ("magentic-one", "WebSurfer"): "web_surfer",
        ("magentic-one", "FileSurfer"): "file_surfer",
        ("magentic-one", "ComputerTerminal"): "terminal",
        ("magentic-one", "Assistant"): "coder",
        ("metagpt", "Team Leader"): "team_leader",
        ("metagpt", "Product Manager"): "product_manager",
        ("metagpt", "Architect"): "architect",
        ("metagpt", "Engineer"): "engineer",
        ("metagpt", "Data Analyst"): "data_analyst",
    }
    if (system, agent) in fixed:
        return fixed[(system, agent)]
    if agent.replace("_", "").lower() == "computerterminal":
        return "terminal"
    if agent.endswith(("Expert", "Specialist")):
        return "expert"
    return "agent"


@pytest.fixture(scope="module")
def multi(multi_agent_warehouse, shared_data: Path) -> tuple[Path, list[dict[str, Any]]]:
    warehouse, summary = multi_agent_warehouse
    assert not summary.failed_steps, summary.failed_steps  # warning checks may flag data; marts must run
    return warehouse, raw_multi_agent(shared_data)


def test_multi_agent_failure_modes_by_system_and_dataset(multi) -> None:
    warehouse, records = multi
    per_system = Counter(r["system"] for r in records)
    rows = rows_as_dicts(warehouse, "select * from failure_modes_by_system")
    assert {r["system"]: r["n"] for r in rows} == per_system
    for r in rows:  # no error type published: one unlabelled row per system
        assert (r["error_type"], r["error_class"], r["share"], r["memory_share"]) == (None, "unlabelled", 1.0, None)
        assert r["graph_kind"] == "multi_agent"

    per_dataset = Counter((r["system"], r["dataset"]) for r in records)
    rows = rows_as_dicts(warehouse, "select * from failure_modes_by_dataset")
    assert {(r["system"], r["dataset"]): r["n"] for r in rows} == per_dataset
    assert all(r["share"] == 1.0 and r["error_type"] is None for r in rows)


def test_multi_agent_failure_modes_by_operation(multi) -> None:
    warehouse, records = multi
    rows = rows_as_dicts(warehouse, "select * from failure_modes_by_operation")
    expected = Counter((r["system"], r["op_name"], r["agent"]) for r in records)
    assert {(r["system"], r["op_name"], r["responsible_agent"]): r["n"] for r in rows} == expected
    per_agent = Counter((r["system"], r["agent"]) for r in records)
    got_per_agent: Counter = Counter()
    for r in rows:
        got_per_agent[(r["system"], r["responsible_agent"])] += r["n"]
        assert r["agent_role"] == expected_role(r["system"], r["responsible_agent"]), r
        assert r["share"] == pytest.approx(r["n"] / Counter(x["system"] for x in records)[r["system"]])
    assert got_per_agent == per_agent
    op_types = {(r["op_name"], r["operation_type"]) for r in rows}
    assert op_types <= {
        ("agent_message", "communication"), ("browse", "tool_use"), ("tool_call", "tool_use"),
        ("read_file", "file_read"), ("code_execution", "code"), ("write_code", "code"), ("delegate", "delegation"),
        ("plan", "planning"), ("orchestrate", "planning"), ("verify", "verification"),
        ("terminate", "final_answer"), ("final_answer", "final_answer"), ("user_request", "input"),
    }


def test_multi_agent_failure_rates_publish_no_denominator(multi) -> None:
    warehouse, records = multi
    rows = rows_as_dicts(warehouse, "select * from failure_rates")
    per_dataset = Counter((r["system"], r["dataset"]) for r in records)
    assert {(r["system"], r["dataset"]): r["queries_failed"] for r in rows} == per_dataset
    for r in rows:
        assert r["queries_judged"] is None and r["failure_rate"] is None
        assert r["ci_low"] is None and r["ci_high"] is None
        assert "failed runs only" in r["denominator_note"]
        assert r["n_annotations"] == r["n_graphs"] == r["queries_failed"]


def test_multi_agent_failure_propagation(multi) -> None:
    warehouse, records = multi
    rows = {r["graph_id"]: r for r in rows_as_dicts(warehouse, "select * from failure_propagation")}
    assert rows.keys() == {r["graph_id"] for r in records}
    mismatches = 0
    for rec in records:
        row = rows[rec["graph_id"]]
        assert row["decisive_step"] == rec["step"]
        assert row["n_steps"] == rec["n_steps"]
        assert row["decisive_position"] == pytest.approx(rec["step"] / (rec["n_steps"] - 1))
        assert row["steps_after_decisive"] == rec["n_steps"] - 1 - rec["step"]
        assert row["step_actor"] == rec["actor"]
        # one agent named twice compares without its case and surrounding spaces (same_agent())
        assert row["agent_spoke_step"] == (rec["actor"].strip().lower() == rec["agent"].strip().lower())
        assert row["faulty_op_id"] == f"step-{rec['step']}"
        assert row["phase"] is None and row["hops_to_prediction"] is None
        mismatches += not row["agent_spoke_step"]
    assert mismatches > 0  # FORMATS.md: some records name an agent that did not speak that step


# =============================================================================================
# The default sample corpus: memory systems with injected faults


def test_multi_agent_failure_modes_common_are_unlabelled(multi) -> None:
    """Who&When and TracerTraj publish no error type: taxonomy 'none', category 'unlabelled', each annotation once."""
    warehouse, records = multi
    rows = rows_as_dicts(warehouse, "select * from failure_modes_common")
    assert {(r["system"], r["dataset"]): r["n"] for r in rows} == Counter((r["system"], r["dataset"]) for r in records)
    assert {(r["taxonomy"], r["common_category"]) for r in rows} == {("none", "unlabelled")}
    assert query(warehouse, "select count(*) from annotations where taxonomy is not null "
                            "or not is_root_cause") == [(0,)]


def injected(corpus: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (corpus / "injected_faults.jsonl").read_text().splitlines() if line]


@pytest.fixture(scope="module")
def sample(sample_warehouse, sample_corpus: Path) -> tuple[Path, Path, list[dict[str, Any]]]:
    warehouse, summary = sample_warehouse
    assert not summary.failed_steps, summary.failed_steps
    return warehouse, sample_corpus, injected(sample_corpus)


def test_readers_and_build_steps_keep_the_parquet_footers_they_read(sample) -> None:
    """A mart scans several tables, some twice, and a user's session runs many queries over the same
    immutable data files: DuckDB keeps their footers (BENCHMARKS.md: the slowest marts at 10 M nodes
    10.7 s -> 8.2 s). Both kinds of connection have it, and it changes no result."""
    from pipelines.storage.state import CommitLog
    from pipelines.storage.warehouse import Warehouse

    warehouse = Warehouse(sample[0])
    record = CommitLog(warehouse).latest()
    setting = "select current_setting('parquet_metadata_cache')"
    reader = db.connect(warehouse)
    step = db.connection(warehouse, record.snapshot)  # a build step's cursor on the shared database
    plain = duckdb.connect()
    try:
        assert reader.sql(setting).fetchall() == [(True,)] and step.sql(setting).fetchall() == [(True,)]
        files = record.snapshot.table_files("nodes")
        assert len(files) >= 2  # one data file per partition at least
        paths = [str(warehouse.path(f)) for f in files]
        count = "select graph_id, count(*), sum(value_bytes) from read_parquet(?) group by all order by all"
        first = reader.execute(count, [paths]).fetchall()
        assert first == reader.execute(count, [paths]).fetchall() == plain.execute(count, [paths]).fetchall()
        assert len(first) == query(sample[0], "select count(*) from graphs")[0][0]
    finally:
        reader.close()
        step.close()
        plain.close()


def test_sample_failure_modes_by_system_match_injected_faults(sample) -> None:
    warehouse, _, faults = sample
    failed = [f for f in faults if f["failed"]]
    expected = Counter((f["split"], f["error_type"]) for f in failed)
    rows = rows_as_dicts(warehouse, "select * from failure_modes_by_system")
    assert {(r["system"], r["error_type"]): r["n"] for r in rows} == expected
    totals = Counter(f["split"] for f in failed)
    memory_totals = Counter(f["split"] for f in failed if f["error_type"] in MEMORY_LABELS)
    for r in rows:
        assert r["share"] == pytest.approx(r["n"] / totals[r["system"]])
        if r["error_type"] in MEMORY_LABELS:
            assert r["error_class"] == "memory"
            assert r["memory_share"] == pytest.approx(r["n"] / memory_totals[r["system"]])
        else:
            assert r["error_class"] == "non_memory" and r["memory_share"] is None


def test_sample_failure_modes_common_map_memtracebench_labels_through_the_crosswalk(sample) -> None:
    warehouse, _, faults = sample
    crosswalk = {r["label"]: r["common_category"] for r in schema.seed_rows("taxonomy_crosswalk")
                 if r["taxonomy"] == "memtracebench"}
    expected = Counter((f["split"], crosswalk[f["error_type"]]) for f in faults if f["failed"])
    got: Counter = Counter()
    for r in rows_as_dicts(warehouse, "select * from failure_modes_common"):
        assert r["taxonomy"] == "memtracebench"
        got[(r["system"], r["common_category"])] += r["n"]
    assert got == expected


def test_sample_failure_modes_by_dataset_match_injected_faults(sample) -> None:
    warehouse, _, faults = sample
    failed = [f for f in faults if f["failed"]]
    expected = Counter((f["split"], f["dataset"], f["error_type"]) for f in failed)
    rows = rows_as_dicts(warehouse, "select * from failure_modes_by_dataset")
    assert {(r["system"], r["dataset"], r["error_type"]): r["n"] for r in rows} == expected
    totals = Counter((f["split"], f["dataset"]) for f in failed)
    for r in rows:
        assert r["share"] == pytest.approx(r["n"] / totals[(r["system"], r["dataset"])])


def test_sample_failure_modes_by_operation_match_injected_faults(sample) -> None:
    warehouse, _, faults = sample
    failed = [f for f in faults if f["failed"]]
    expected = Counter((f["split"], f["op_name"], f["error_type"]) for f in failed)
    rows = rows_as_dicts(warehouse, "select * from failure_modes_by_operation")
    got: Counter = Counter()
    for r in rows:
        got[(r["system"], r["op_name"], r["error_type"])] += r["n"]
        assert r["responsible_agent"] is None and r["agent_role"] is None
    assert got == expected
    types = {(r["system"], r["op_name"]): r["operation_type"] for r in rows}
    # FORMATS.md: every memory op name of every system has a cross-system type from the seed.
    assert all(t not in (None, "other") for (_, op), t in types.items() if op is not None)
    assert all(t is None for (_, op), t in types.items() if op is None)
    for (system, op), t in types.items():
        if op in ("question-answering", "llm-judge"):
            assert t == {"question-answering": "response", "llm-judge": "judge"}[op]
        elif op is not None and ("retriev" in op or "search" in op or "bundle" in op or "rerank" in op):
            assert t == "retrieval", (system, op)
        elif op is not None and ("extract" in op or "finalize" in op):
            assert t in ("extraction", "segmentation"), (system, op)


def test_sample_failure_rates_match_injected_faults(sample) -> None:
    warehouse, _, faults = sample
    judged = Counter((f["split"], f["dataset"]) for f in faults)
    failed = Counter((f["split"], f["dataset"]) for f in faults if f["failed"])
    rows = rows_as_dicts(warehouse, "select * from failure_rates")
    assert {(r["system"], r["dataset"]) for r in rows} == set(judged)
    for r in rows:
        key = (r["system"], r["dataset"])
        assert r["queries_judged"] == judged[key]
        assert r["queries_failed"] == failed[key] == r["n_annotations"]
        assert r["queries_passed"] == judged[key] - failed[key]
        assert r["failure_rate"] == pytest.approx(failed[key] / judged[key])
        low, high = wilson(failed[key], judged[key])
        assert (r["ci_low"], r["ci_high"]) == (pytest.approx(low), pytest.approx(high))
        assert r["ci_low"] <= r["failure_rate"] <= r["ci_high"]
        assert r["denominator_note"] is None


def min_hops(edges: list[tuple[str, str]], sources: set[str], target: str) -> int | None:
    adjacent: dict[str, set[str]] = defaultdict(set)
    for src, dst in edges:
        adjacent[src].add(dst)
    distance = {s: 0 for s in sources}
    frontier = deque(sources)
    while frontier:
        node = frontier.popleft()
        if node == target:
            return distance[node]
        for nxt in adjacent[node]:
            if nxt not in distance:
                distance[nxt] = distance[node] + 1
                frontier.append(nxt)
    return None


def expected_phase(op_name: str | None, error_type: str, session_category: str | None) -> str | None:
    if op_name == "llm-judge" or (op_name is None and error_type in ("AnnotationError", "LLMAsAJudgeError")):
        return "judge"
    if op_name == "question-answering":
        return "answer"
    return {"memory_construction": "construction", "memory_search": "search"}.get(session_category)


def test_sample_failure_propagation_matches_the_graphs(sample) -> None:
    warehouse, corpus, faults = sample
    rows = {(r["graph_id"], r["query_id"]): r for r in rows_as_dicts(warehouse, "select * from failure_propagation")}
    failed = [f for f in faults if f["failed"]]
    assert rows.keys() == {(f["graph_id"], f["query_id"]) for f in failed}
    by_file: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f in failed:
        by_file[f["file"]].append(f)
    reached = 0
    for file, file_faults in by_file.items():
        data = orjson.loads((corpus / file).read_bytes())["data"]
        edges = [(e["source_full_node_id"], e["target_full_node_id"]) for e in data["edges"]]
        ordinal = {s["session_id"]: i for i, s in enumerate(data["sessions"])}
        session_category = {s["session_id"]: s["category"] for s in data["sessions"]}
        op_session = {o["op_id"]: o["session_id"] for o in data["operations"]}
        node_session = {n["full_node_id"]: n["session_id"] for n in data["nodes"]}
        annotation = {a["query_id"]: a for a in data["annotations"]}
        for f in file_faults:
            row = rows[(f["graph_id"], f["query_id"])]
            op = None if f["op_id"] == "null" else f["op_id"]
            assert (row["error_type"], row["faulty_op_id"], row["op_name"]) == (f["error_type"], op, f["op_name"])
            assert row["prediction_resolved_by"] == "prediction_id"
            assert row["prediction_node_id"] == annotation[f["query_id"]]["prediction_id"]
            category = session_category[op_session[op]] if op else None
            assert row["phase"] == expected_phase(f["op_name"], f["error_type"], category), row
            if op is None:
                assert row["hops_to_prediction"] is None and row["faulty_session_id"] is None
                continue
            outputs = {e["target_full_node_id"] for e in data["edges"] if e["op_id"] == op}
            hops = min_hops(edges, outputs, row["prediction_node_id"])
            assert row["hops_to_prediction"] == hops, row
            reached += hops is not None
            if f["op_name"] == "question-answering":
                assert hops == 0
            assert row["faulty_session_id"] == op_session[op]
            assert row["faulty_session_category"] == category
            q_ordinal = ordinal[node_session[f["query_id"]]]
            assert row["session_distance"] == q_ordinal - ordinal[op_session[op]]
            assert row["sessions_between"] == max(abs(q_ordinal - ordinal[op_session[op]]) - 1, 0)
    assert reached > 0


# =============================================================================================
# Edge cases on small traced graphs


def var(value: str, name: str | None = None, **options: Any):
    """A traced variable; named by hand, or (name None) by content hash as smartcomment does by default."""
    if name is None:
        return comment_variable(value, to_runtime=True, **options)
    return comment_variable(value, id_strategy=lambda _v: name, to_runtime=True, **options)


def edge_case_graph() -> dict[str, Any]:
    """Two dialogue sessions, a search and an evaluation session; five queries, four failed.

    q1 RetrievalError (prediction_id given), q2 ExtractionError in session 1 (no prediction_id:
    found by lineage), q3 LLMAsAJudgeError without an op, q4 ResponseError whose QA reads a
    rewritten query (found by value), q5 passes. Judge scores are stored by content, so the failed
    queries share one judge_score node."""
    with comment_graph(graph_id="graph-edge", user_id="locomo-9", project_id="Mem0") as graph:
        with comment_session(session_id="locomo-9-session-1", category="memory_construction"):
            m1 = var("I moved to Porto.", "D1:1", category="message")
            e1 = var("home city is Porto", "mem_1", category="memory_entry")
            extract = comment_op(inputs=[m1], outputs=[e1], op_name="memory_system.extract_facts",
                                 category="extraction")
        with comment_session(session_id="locomo-9-session-2", category="memory_construction"):
            m2 = var("My dog is Rex.", "D2:1", category="message")
            e2 = var("dog is Rex", "mem_2", category="memory_entry")
            comment_op(inputs=[m2], outputs=[e2], op_name="memory_system.extract_facts", category="extraction")
        queries, found = {}, {}
        retrievals = {}
        with comment_session(session_id="locomo-9-search", category="memory_search"):
            for q in range(1, 6):
                queries[q] = var(f"question {q}?", f"q{q}", class_name="query", category="message & query")
                source = queries[q]
                if q == 4:
                    source = var("rewritten question 4?", "q4_rewritten", class_name="query")
                    comment_op(inputs=[queries[q]], outputs=[source], op_name="query_rewrite", category="weird")
                found[q] = var(f"retrieved {q}", f"retrieved_{q}", category="memory_entry")
                retrievals[q] = comment_op(inputs=[source, e1, e2], outputs=[found[q]],
                                           op_name="memory_system.search_vector_store", category="retrieval")
                if q == 4:
                    queries[q] = (queries[q], source)
        predictions, qa_ops = {}, {}
        with comment_session(session_id="locomo-9-evaluation", category="memory_evaluation"):
            for q in range(1, 6):
                query_node = queries[q][1] if q == 4 else queries[q]
                predictions[q] = var(f"answer {q}", f"prediction_{q}", class_name="prediction")
                qa_ops[q] = comment_op(inputs=[query_node, found[q]], outputs=[predictions[q]],
                                       op_name="question-answering", category="evaluation")
                gold = var(f"gold {q}", f"gold_{q}", class_name="golden_answers")
                score = var("1.0" if q == 5 else "0.0", None, class_name="judge_score")
                comment_op(inputs=[query_node, predictions[q], gold], outputs=[score], op_name="llm-judge",
                           category="evaluation")
        export = graph.export_graph()

    def ann(q: int, error: str, op: Any, **extra: Any) -> dict[str, Any]:
        query_node = queries[q][0] if q == 4 else queries[q]
        return {"query_id": query_node.full_node_id, "query": f"question {q}?", "golden_answers": f"gold {q}",
                "prediction": f"answer {q}", "source_evidence_ids": [], "final_error_type": error,
                "final_op_id": op.op_id if op is not None else "null", **extra}

    export["data"]["annotations"] = [
        ann(1, "RetrievalError", retrievals[1], prediction_id=predictions[1].full_node_id),
        ann(2, "ExtractionError", extract),
        ann(3, "LLMAsAJudgeError", None),
        ann(4, "ResponseError", qa_ops[4]),
    ]
    return export


def custom_graph() -> dict[str, Any]:
    """A graph with op names the seed does not know: typed by their category alone."""
    with comment_graph(graph_id="graph-custom", user_id="realmem-u1", project_id="Mem0") as graph:
        with comment_session(session_id="s1", category="memory_construction"):
            m = var("hello", "m1", category="message")
            x = var("note", "x1", category="memory_entry")
            op1 = comment_op(inputs=[m], outputs=[x], op_name="my.extract", category="extraction")
            y = var("other", "y1")
            op2 = comment_op(inputs=[x], outputs=[y], op_name="my.mystery", category="weird")
        export = graph.export_graph()
    q = "m1@1"
    export["data"]["annotations"] = [
        {"query_id": q, "query": "hello", "final_error_type": "ExtractionError", "final_op_id": op1.op_id},
        {"query_id": q, "query": "hello", "final_error_type": "RetrievalError", "final_op_id": op2.op_id},
    ]
    return export


@pytest.fixture(scope="module")
def edge_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("edge")
    (root / "mtb" / "mem0").mkdir(parents=True)
    (root / "mtb" / "mem0" / "locomo_locomo-9.json").write_bytes(orjson.dumps(edge_case_graph()))
    (root / "mtb" / "mem0" / "realmem_realmem-u1.json").write_bytes(orjson.dumps(custom_graph()))
    warehouse = root / "W"
    summary = build_warehouse(warehouse, [f"mtb:memtracebench={root / 'mtb'}"])
    assert not summary.failed_steps and not summary.files_rejected, summary
    return warehouse


def test_judge_scores_stored_by_content_still_count_per_query(edge_warehouse: Path) -> None:
    # Four failed scores collapse into one "0.0" node; the rate counts judge outputs, not nodes.
    assert query(edge_warehouse, "select count(*) from nodes where class_name = 'judge_score'") == [(2,)]
    rows = rows_as_dicts(edge_warehouse, "select * from failure_rates where system = 'mem0' and dataset = 'locomo'")
    assert len(rows) == 1
    r = rows[0]
    assert (r["queries_judged"], r["queries_failed"], r["queries_passed"], r["n_annotations"]) == (5, 4, 1, 4)
    assert r["failure_rate"] == pytest.approx(0.8)
    assert (r["ci_low"], r["ci_high"]) == tuple(pytest.approx(v) for v in wilson(4, 5))
    custom = rows_as_dicts(edge_warehouse, "select * from failure_rates where dataset = 'realmem'")[0]
    assert custom["queries_judged"] == 0 and custom["failure_rate"] is None
    assert "no judge_score" in custom["denominator_note"]


def test_prediction_node_resolution_and_hops(edge_warehouse: Path) -> None:
    rows = {r["query_id"]: r for r in rows_as_dicts(edge_warehouse, "select * from failure_propagation")}
    q = {i: next(k for k in rows if k.startswith(f"query:q{i}@")) for i in (1, 2, 3, 4)}
    # q1: named by prediction_id; retrieval output -> QA -> prediction = 1 hop.
    r1 = rows[q[1]]
    assert (r1["prediction_resolved_by"], r1["prediction_node_id"]) == ("prediction_id", "prediction:prediction_1@1")
    assert (r1["hops_to_prediction"], r1["phase"], r1["session_distance"]) == (1, "search", 0)
    # q2: found through the QA op that reads the query; extraction in session 1 (ordinal 0) of a
    # query recorded in the search session (ordinal 2): mem_1 -> retrieval -> retrieved_2 -> QA.
    r2 = rows[q[2]]
    assert (r2["prediction_resolved_by"], r2["prediction_node_id"]) == ("lineage", "prediction:prediction_2@1")
    assert (r2["hops_to_prediction"], r2["phase"], r2["operation_type"]) == (2, "construction", "extraction")
    assert (r2["faulty_session_ordinal"], r2["query_session_ordinal"]) == (0, 2)
    assert (r2["session_distance"], r2["sessions_between"]) == (2, 1)
    # q3: a judge error without an operation.
    r3 = rows[q[3]]
    assert (r3["prediction_resolved_by"], r3["faulty_op_id"], r3["hops_to_prediction"]) == ("lineage", None, None)
    assert (r3["phase"], r3["error_class"]) == ("judge", "non_memory")
    # q4: the QA reads a rewritten query, so only the prediction's value identifies it.
    r4 = rows[q[4]]
    assert (r4["prediction_resolved_by"], r4["prediction_node_id"]) == ("value", "prediction:prediction_4@1")
    assert (r4["hops_to_prediction"], r4["phase"], r4["session_distance"]) == (0, "answer", -1)


def test_unknown_operations_are_typed_by_category(edge_warehouse: Path) -> None:
    rows = rows_as_dicts(
        edge_warehouse,
        "select op_name, operation_type, n, share from failure_modes_by_operation where op_name like 'my.%' "
        "order by op_name",
    )
    assert [(r["op_name"], r["operation_type"], r["n"], r["share"]) for r in rows] == [
        ("my.extract", "extraction", 1, pytest.approx(1 / 6)),
        ("my.mystery", "other", 1, pytest.approx(1 / 6)),
    ]
    system = rows_as_dicts(
        edge_warehouse, "select * from failure_modes_by_dataset where system = 'mem0' and dataset = 'locomo'"
    )
    got = {r["error_type"]: (r["n"], r["memory_share"]) for r in system}
    assert got == {
        "RetrievalError": (1, pytest.approx(1 / 3)),
        "ExtractionError": (1, pytest.approx(1 / 3)),
        "ResponseError": (1, pytest.approx(1 / 3)),
        "LLMAsAJudgeError": (1, None),
    }


def test_classification_macros_are_callable_from_sql(edge_warehouse: Path) -> None:
    assert query(
        edge_warehouse,
        "select operation_type('evermemos', 'memory_system.finalize_memory_unit', 'initialization'), "
        "operation_type('rag', 'memory_system.finalize_memory_unit', 'extraction'), "
        "agent_role('captainagent', 'VerificationExpert'), agent_role('magentic-one', 'WebSurfer'), "
        "agent_role('captainagent', 'Computer_terminal'), agent_operation_type('magentic-one', 'Orchestrator'), "
        "error_class(null), error_class('AnnotationError'), error_class('UpdateError')",
    ) == [("segmentation", "extraction", "expert", "web_surfer", "terminal", "planning",
           "unlabelled", "non_memory", "memory")]
    low, high = query(edge_warehouse, "select wilson_low(3, 10), wilson_high(3, 10)")[0]
    assert (low, high) == (pytest.approx(wilson(3, 10)[0]), pytest.approx(wilson(3, 10)[1]))
    assert query(edge_warehouse, "select wilson_low(0, 0)") == [(None,)]


# =============================================================================================
# Dagster: one asset per SQL file


def materializations(result: dg.ExecuteInProcessResult, asset: str) -> list[dg.AssetMaterialization]:
    """The materializations of one asset in a run (the marts share one step, so not by node)."""
    return [m for m in result.asset_materializations_for_node("marts") if m.asset_key == dg.AssetKey(asset)]


def test_one_asset_per_mart_file_with_its_upstream_tables() -> None:
    from pipelines.defs import analytics, build_definitions
    from pipelines.defs.resources import TracehouseResource

    names = db.mart_names()
    [step] = analytics.MART_ASSETS  # one step computes them all
    assert step.keys == {dg.AssetKey(n) for n in names}
    specs = {spec.key.to_user_string(): spec for spec in step.specs}
    for name, spec in specs.items():
        assert spec.group_name == "analytics"
        assert set(spec.kinds) == {"duckdb", "parquet"}
        assert spec.description and name not in spec.description.split(":")[0]
    deps = {name: {d.asset_key.to_user_string() for d in spec.deps} for name, spec in specs.items()}
    assert deps["failure_modes_by_system"] == {"annotations", "graphs", "sessions", "operations"}
    assert deps["failure_rates"] == {"annotations", "graphs", "sessions", "edges", "nodes"}
    assert deps["failure_propagation"] == {"annotations", "graphs", "sessions", "operations", "edges", "nodes"}
    assert deps["operation_links"] == {"edges"}
    assert "operation_links" in deps["attribution_op_distance"]  # a mart it reads

    defs = build_definitions(TracehouseResource(warehouse="/nonexistent"))
    graph = defs.resolve_asset_graph()
    commit_parents = {k.to_user_string() for k in graph.get(dg.AssetKey("committed_build")).parent_keys}
    assert set(names) <= commit_parents


def test_materialized_marts_report_rows_and_preview(multi) -> None:
    from pipelines.defs import analytics
    from pipelines.defs.resources import TracehouseResource

    warehouse, _ = multi
    result = dg.materialize(
        analytics.MART_ASSETS,
        resources={"tracehouse": TracehouseResource(warehouse=str(warehouse))},
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    for name in db.mart_names():
        [event] = materializations(result, name)
        metadata = event.metadata
        path = Path(metadata["path"].value)
        assert path.is_relative_to(warehouse / "marts" / name)
        rows = pq.ParquetFile(path).metadata.num_rows
        assert metadata["rows"].value == rows
        # attribution_confusion counts memory cases; this warehouse holds multi-agent graphs only, and
        # no TRAIL or AgentRx labels (the marts of those benchmarks' own rules)
        empty = {"attribution_confusion", "attribution_trail_scores", "attribution_agentrx_scores"}
        assert rows == 0 if name in empty else rows > 0, name
        assert name in metadata["path"].value
        assert "|" in metadata["preview"].value if rows else metadata["preview"].value == "_empty_"
        columns = [c.name for c in metadata["dagster/column_schema"].schema.columns]
        assert columns == pq.ParquetFile(path).schema_arrow.names
        assert all(c.description for c in metadata["dagster/column_schema"].schema.columns), name


def clear_catalog() -> None:
    """Forget the declarations read so far (a test pointed catalog.SQL_DIR elsewhere, or back)."""
    for cached in (catalog.marts, catalog.mart_order):
        cached.cache_clear()


RUNS_PER_SYSTEM = ("  - name: runs_per_system\n    description: Graphs per system.\n"
                   "    grain: [system]\n"
                   "    columns:\n      - {name: system, description: the system}\n"
                   "      - {name: n, description: graphs}\n")


def test_a_new_mart_is_one_sql_file(multi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pipelines.defs import analytics
    from pipelines.defs.resources import TracehouseResource

    warehouse, records = multi
    sql_dir = tmp_path / "sql"
    shutil.copytree(db.SQL_DIR, sql_dir)
    (sql_dir / "marts" / "runs_per_system.sql").write_text(
        "select system, count(*) as n from graphs group by system order by system\n"
    )
    with (sql_dir / "marts" / "_marts.yml").open("a") as declarations:
        declarations.write(RUNS_PER_SYSTEM)
    monkeypatch.setattr(catalog, "SQL_DIR", sql_dir)
    monkeypatch.setattr(db, "SQL_DIR", sql_dir)
    clear_catalog()
    try:
        assert "runs_per_system" in catalog.marts()
        asset = analytics.marts_asset(["runs_per_system"])
        assert {d.asset_key for spec in asset.specs for d in spec.deps} == {dg.AssetKey("graphs")}
        result = dg.materialize(
            [asset], resources={"tracehouse": TracehouseResource(warehouse=str(warehouse))},
            instance=dg.DagsterInstance.ephemeral(),
        )
    finally:
        monkeypatch.undo()
        clear_catalog()
    assert result.success
    [check] = result.get_asset_check_evaluations()  # the mart's declared tests, one check
    assert (check.check_name, check.passed, check.metadata["failed_tests"].value) == ("declared_tests", True, "")
    assert "| unique_grain | 0 |" in check.metadata["tests"].value
    [event] = materializations(result, "runs_per_system")
    path = Path(event.metadata["path"].value)
    table = pq.read_table(path)
    assert dict(zip(table["system"].to_pylist(), table["n"].to_pylist(), strict=True)) == Counter(
        r["system"] for r in records
    )
    shutil.rmtree(path.parent)


def test_a_failing_mart_fails_the_step_after_the_others(multi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """The marts share one step: a mart whose SQL fails neither stops the marts after it nor passes
    unseen. The others are materialized; the step fails naming the broken mart and the one reading it."""
    from pipelines.defs import analytics
    from pipelines.defs.resources import TracehouseResource

    warehouse, records = multi
    sql_dir = tmp_path / "sql"
    shutil.copytree(db.SQL_DIR, sql_dir)
    (sql_dir / "marts" / "runs_per_system.sql").write_text("select system, count(*) as n from graphs group by system\n")
    (sql_dir / "marts" / "broken_mart.sql").write_text("select system, no_such_column as n from graphs\n")
    (sql_dir / "marts" / "repeated_grain.sql").write_text("select system, 1 as n from graphs\n")  # a row per graph
    (sql_dir / "marts" / "after_broken.sql").write_text("select system, n from broken_mart\n")
    with (sql_dir / "marts" / "_marts.yml").open("a") as declarations:
        declarations.write(RUNS_PER_SYSTEM)
        declarations.write(RUNS_PER_SYSTEM.replace("runs_per_system", "broken_mart"))
        declarations.write(RUNS_PER_SYSTEM.replace("runs_per_system", "after_broken"))
        declarations.write(RUNS_PER_SYSTEM.replace("runs_per_system", "repeated_grain"))
    monkeypatch.setattr(catalog, "SQL_DIR", sql_dir)
    monkeypatch.setattr(db, "SQL_DIR", sql_dir)
    clear_catalog()
    try:
        asset = analytics.marts_asset(["after_broken", "broken_mart", "repeated_grain", "runs_per_system"])
        result = dg.materialize([asset], resources={"tracehouse": TracehouseResource(warehouse=str(warehouse))},
                                instance=dg.DagsterInstance.ephemeral(), raise_on_error=False)
    finally:
        monkeypatch.undo()
        clear_catalog()
    assert not result.success
    [failure] = result.get_step_failure_events()
    message = cause(failure.step_failure_data.error)  # what the build's summary says of the step
    assert "mart broken_mart: " in message and "no_such_column" in message
    assert "mart after_broken: not computed: it reads broken_mart, which failed" in message
    [done] = materializations(result, "runs_per_system")
    table = pq.read_table(done.metadata["path"].value)
    assert dict(zip(table["system"].to_pylist(), table["n"].to_pylist(), strict=True)) == Counter(
        r["system"] for r in records)
    assert not materializations(result, "broken_mart") and not materializations(result, "after_broken")
    # a mart whose declared test fails: materialized, its one check failed, naming the test
    checks = {c.asset_key.to_user_string(): c for c in result.get_asset_check_evaluations()}
    assert sorted(checks) == ["repeated_grain", "runs_per_system"]
    assert checks["runs_per_system"].passed and not checks["repeated_grain"].passed
    failed = checks["repeated_grain"].metadata
    assert failed["failed_tests"].value == "unique_grain" and failed["failing"].value == len(
        {r["system"] for r in records if sum(1 for q in records if q["system"] == r["system"]) > 1})
    shutil.rmtree(Path(materializations(result, "repeated_grain")[0].metadata["path"].value).parent)
    shutil.rmtree(Path(done.metadata["path"].value).parent)


def test_a_mart_reads_another_mart_computed_before_it(multi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """A mart may read a mart (as attribution_op_distance reads operation_links): its asset depends on
    it, it is computed from that mart's rows, and its code fingerprint covers that mart's SQL. Marts
    that read each other in a cycle, and a per-partition mart that reads a mart, are refused."""
    from pipelines.analytics import marts
    from pipelines.defs import analytics
    from pipelines.defs.resources import TracehouseResource

    warehouse, records = multi
    sql_dir = tmp_path / "sql"
    shutil.copytree(db.SQL_DIR, sql_dir)
    (sql_dir / "marts" / "runs_per_system.sql").write_text("select system, count(*) as n from graphs group by system\n")
    (sql_dir / "marts" / "busiest_system.sql").write_text(
        "select system, n from runs_per_system order by n desc, system limit 1\n")
    declarations = (sql_dir / "marts" / "_marts.yml").read_text() + RUNS_PER_SYSTEM + RUNS_PER_SYSTEM.replace(
        "runs_per_system", "busiest_system").replace("Graphs per system.", "The system with the most graphs.")
    (sql_dir / "marts" / "_marts.yml").write_text(declarations)
    monkeypatch.setattr(catalog, "SQL_DIR", sql_dir)
    monkeypatch.setattr(db, "SQL_DIR", sql_dir)
    clear_catalog()
    try:
        assert catalog.marts_read("busiest_system") == ("runs_per_system",)
        assert catalog.marts_read("attribution_op_distance") == ("operation_links",)
        order = catalog.mart_order()
        assert order.index("runs_per_system") < order.index("busiest_system")
        assert order.index("operation_links") < order.index("attribution_op_distance")
        asset = analytics.marts_asset(["busiest_system", "runs_per_system"])
        deps = {spec.key.to_user_string(): {d.asset_key for d in spec.deps} for spec in asset.specs}
        assert deps["busiest_system"] == {dg.AssetKey("runs_per_system")}
        result = dg.materialize([asset], resources={"tracehouse": TracehouseResource(warehouse=str(warehouse))},
                                instance=dg.DagsterInstance.ephemeral())
        code = marts.mart_code("busiest_system")
        (sql_dir / "marts" / "runs_per_system.sql").write_text(
            "select system, count(*) as n from graphs where true group by system\n")
        assert marts.mart_code("busiest_system") != code  # a new upstream SQL: a new file, computed again

        (sql_dir / "marts" / "runs_per_system.sql").write_text("select system, n from busiest_system\n")
        clear_catalog()
        with pytest.raises(catalog.CatalogError, match="busiest_system -> runs_per_system -> busiest_system"):
            catalog.mart_order()

        (sql_dir / "marts" / "runs_per_system.sql").write_text("select system, count(*) as n from graphs group by 1\n")
        (sql_dir / "marts" / "links_per_graph.sql").write_text(
            "select graph_id, count(*) as n from operation_links group by graph_id\n")
        (sql_dir / "marts" / "_marts.yml").write_text(declarations + (
            "  - name: links_per_graph\n    description: Links per graph.\n"
            "    grain: [graph_id]\n"
            "    config: {compute: per_partition, combine_order: [graph_id]}\n"
            "    columns:\n      - {name: graph_id, description: the graph}\n      - {name: n, description: links}\n"))
        clear_catalog()
        with pytest.raises(catalog.CatalogError, match="links_per_graph.sql: a per_partition mart reads marts"):
            catalog.mart_order()
    finally:
        monkeypatch.undo()
        clear_catalog()
    assert result.success
    paths = {name: Path(materializations(result, name)[0].metadata["path"].value)
             for name in ("runs_per_system", "busiest_system")}
    [(system, n)] = sorted(Counter(r["system"] for r in records).items(), key=lambda kv: (-kv[1], kv[0]))[:1]
    assert pq.read_table(paths["busiest_system"]).to_pylist() == [{"system": system, "n": n}]
    for path in paths.values():
        shutil.rmtree(path.parent)


@pytest.mark.parametrize("name", [n for n, m in catalog.marts().items() if m.compute == "per_partition"])
@pytest.mark.parametrize("built", ["sample_warehouse", "multi_agent_warehouse"])
def test_mart_computed_per_partition_equals_the_whole_computation(built, name, request, tmp_path: Path) -> None:
    """Each per-partition mart (failure_propagation, operation_links) is combined from per-partition
    fragments: the same rows as its SQL run over the whole warehouse, in its combine_order (which
    failure_propagation's SQL orders by too); a fragment is reused until its partition is rebuilt.
    A fresh build computes the fragments together, split by graph: each equals the fragment computed
    on its partition alone."""
    from pipelines.analytics.marts import build_fragment, build_fragments_together, build_mart, compute_mart, mart_code
    from pipelines.storage.warehouse import Warehouse

    warehouse = Warehouse(tmp_path / "warehouse")
    shutil.copytree(request.getfixturevalue(built)[0], warehouse.root)
    shutil.rmtree(warehouse.marts_dir, ignore_errors=True)
    snapshot = warehouse.committed().snapshot
    out = build_mart(warehouse, snapshot, name)
    assert out.computed
    combined = pq.read_table(out.path)
    order = [(column, "ascending") for column in catalog.marts()[name].combine_order]
    whole = compute_mart(warehouse, snapshot, name).sort_by(order)
    assert combined.num_rows > 0 and combined.to_pylist() == whole.to_pylist()
    fragments = sorted((warehouse.marts_dir / "fragments" / name).glob("*.parquet"))
    assert fragments == out.fragments and len(fragments) == len(snapshot.partitions) > 1
    stamps = [f.stat().st_mtime_ns for f in fragments]
    out.path.unlink()  # the combined file again, from the fragments that are there
    again = build_mart(warehouse, snapshot, name)
    assert again.path == out.path and again.computed and pq.read_table(again.path).equals(combined)
    assert [f.stat().st_mtime_ns for f in fragments] == stamps
    together = {f: pq.read_table(f) for f in fragments}
    for fragment in fragments:
        fragment.unlink()
    code = mart_code(name)
    alone = [build_fragment(warehouse, name, part, code) for part in snapshot.partitions.values()]
    assert sorted(alone) == fragments
    assert sum(t.num_rows for t in together.values()) == combined.num_rows
    assert all(pq.read_table(f).equals(together[f]) for f in fragments)
    # partitions sharing graphs cannot be split by graph: nothing is written, each is computed alone
    part = next(p for p in snapshot.partitions.values()
                if sum(pq.read_metadata(warehouse.path(f)).num_rows for f in p.files("graphs")))
    assert not build_fragments_together(warehouse, name, [part, part], code)


def test_hops_are_shortest_and_the_walk_ends_in_a_cyclic_graph(tmp_path: Path) -> None:
    """The walk keeps every path length it finds and takes the least: in a graph whose edges run in
    a cycle (a prediction fed back into the memory it was answered from) it still ends, at the
    graph's edge count, and hops are the shortest paths."""
    export = edge_case_graph()
    data = export["data"]
    first = data["edges"][0]
    prediction_2 = "prediction:prediction_2@1"
    sources = sorted({e["source_full_node_id"] for e in data["edges"]} - {prediction_2})
    back = [{**first, "edge_id": f"edge-back-{i}", "source_full_node_id": prediction_2,
             "target_full_node_id": node} for i, node in enumerate(sources)]  # every node is now on a cycle
    data["edges"] = data["edges"] + back
    (tmp_path / "mtb" / "mem0").mkdir(parents=True)
    (tmp_path / "mtb" / "mem0" / "locomo_locomo-9.json").write_bytes(orjson.dumps(export))
    summary = build_warehouse(tmp_path / "W", [f"mtb:memtracebench={tmp_path / 'mtb'}"])
    assert summary.committed, summary
    edges = [(e["source_full_node_id"], e["target_full_node_id"]) for e in data["edges"]
             if e["source_full_node_id"] != e["target_full_node_id"]]
    rows = rows_as_dicts(tmp_path / "W", "select * from failure_propagation where faulty_op_id is not null")
    assert len(rows) == 3
    for row in rows:
        outputs = {e["target_full_node_id"] for e in data["edges"] if e["op_id"] == row["faulty_op_id"]}
        assert row["hops_to_prediction"] == min_hops(edges, outputs, row["prediction_node_id"]), row
    assert any(row["hops_to_prediction"] for row in rows)


def test_declarations_read_the_same_with_libyaml_as_with_pure_python() -> None:
    """The declarations are read with libyaml's loader when PyYAML has it (catalog.read_yaml)."""
    import yaml

    from pipelines.analytics.catalog import SQL_DIR, read_yaml

    files = sorted(SQL_DIR.glob("*/_*.yml"))
    assert len(files) >= 5
    for path in files:
        assert read_yaml(path) == yaml.safe_load(path.read_text()), path
