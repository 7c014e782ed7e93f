"""Bad input is quarantined in ingest_errors and nothing else is lost.

One corpus per reader, in tmp_path, holding each kind of bad file beside good ones: smartcomment
graphs made with the real ``smartcomment`` package (memtracebench and smartcomment kinds), and copies
of real Who&When and TracerTraj records (../shared/data), corrupted. One real build loads them all;
the tests assert the exact ingest_errors rows and that every good row is there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import TRACERTRAJ, WHOWHEN, build_warehouse, needs_shared_data, query

from pipelines.storage.warehouse import Warehouse

pytestmark = needs_shared_data()

TRACERTRAJ_FILE = TRACERTRAJ / "tracertraj-code-sample.parquet"


# ---------------------------------------------------------------------------------------------
# Corpus builders


def smartcomment_graph(graph_id: str, project_id: str = "Mem0", user_id: str = "locomo-1") -> dict[str, Any]:
    """A small real smartcomment export (2 sessions, 4 nodes, 3 edges, 2 operations) plus one annotation."""
    from smartcomment import comment_graph, comment_op, comment_session, comment_variable

    with comment_graph(
        graph_id=graph_id, user_id=user_id, project_id=project_id,
        metadata={"memtracebench_dataset_source": "locomo"},
    ) as graph:
        with comment_session(session_id=f"{user_id}-session-1", category="memory_construction"):
            message = comment_variable("I like cats", variable_name="U1:D1:1", category="message", to_runtime=True)
            fact = comment_variable(
                "likes cats", variable_name="fact", category="memory_entry", class_name="fact", to_runtime=True
            )
            comment_op(inputs=[message], outputs=[fact], op_name="memory_system.extract_facts", category="extraction")
        with comment_session(session_id="search", category="memory_search"):
            question = comment_variable(
                "what does the user like?", variable_name="q1", class_name="query", category="message & query",
                to_runtime=True,
            )
            found = comment_variable("likes cats", variable_name="retrieved", category="memory_entry", to_runtime=True)
            comment_op(
                inputs=[question, fact], outputs=[found], op_name="memory_system.search_vector_store",
                category="retrieval",
            )
        exported = graph.export_graph()
    query_node = next(n for n in exported["data"]["nodes"] if n["class_name"] == "query")
    exported["data"]["annotations"] = [{
        "query_id": query_node["full_node_id"],
        "query": "what does the user like?",
        "golden_answers": ["cats"],
        "prediction": "dogs",
        "source_evidence_ids": [],
        "final_error_type": "RetrievalError",
        "final_op_id": exported["data"]["operations"][-1]["op_id"],
        "golden_answers_id": None,
        "prediction_id": None,
    }]
    return exported


def _dump(path: Path, data: Any) -> bytes:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw)
    return raw


def make_smartcomment_corpus(root: Path, split: str, prefix: str, project_id: str) -> dict[str, Any]:
    """Good graphs and one file per defect; returns the good exports and the expected error rows."""
    good = {f"{split}a_good.json": smartcomment_graph(f"graph-{prefix}-1", project_id)}
    good[f"{split}z_good.json"] = smartcomment_graph(f"graph-{prefix}-2", project_id)
    for name, graph in good.items():
        _dump(root / name, graph)
    raw = json.dumps(good[f"{split}a_good.json"]).encode()
    expected: list[tuple[str, str, str | None]] = []  # (file, kind, position)

    truncated = raw[: len(raw) // 2]
    _dump(root / f"{split}b_truncated.json", truncated)
    expected.append((f"{split}b_truncated.json", "invalid_json", f"byte {len(truncated)}"))
    _dump(root / f"{split}c_empty.json", b"")
    expected.append((f"{split}c_empty.json", "empty_file", None))
    _dump(root / f"{split}d_top_level_list.json", [smartcomment_graph(f"graph-{prefix}-list", project_id)])
    expected.append((f"{split}d_top_level_list.json", "wrong_top_level_type", "$"))

    graph = smartcomment_graph(f"graph-{prefix}-missing", project_id)
    del graph["data"]["edges"]
    _dump(root / f"{split}e_missing_edges.json", graph)
    expected.append((f"{split}e_missing_edges.json", "missing_key", "$.data"))

    graph = smartcomment_graph(f"graph-{prefix}-type", project_id)
    graph["data"]["nodes"][1]["version"] = "two"
    _dump(root / f"{split}f_version_is_text.json", graph)
    expected.append((f"{split}f_version_is_text.json", "wrong_field_type", "$.data.nodes[1].version"))

    bad = json.dumps(smartcomment_graph(f"graph-{prefix}-utf8", project_id)).encode()
    bad = bad.replace(b"I like cats", b"I like \xff\xfe cats", 1)
    _dump(root / f"{split}g_not_utf8.json", bad)
    expected.append((f"{split}g_not_utf8.json", "not_utf8", f"byte {bad.index(b'\xff')}"))

    graph = smartcomment_graph(f"graph-{prefix}-dangling", project_id)
    graph["data"]["edges"][2]["target_full_node_id"] = "ghost@1"
    _dump(root / f"{split}h_dangling_edge.json", graph)
    expected.append((f"{split}h_dangling_edge.json", "dangling_reference", "$.data.edges[2]"))

    graph = smartcomment_graph(f"graph-{prefix}-annotation", project_id)
    graph["data"]["annotations"][0]["final_op_id"] = "op-that-never-ran"
    _dump(root / f"{split}i_dangling_annotation.json", graph)
    expected.append((f"{split}i_dangling_annotation.json", "dangling_reference", "$.data.annotations[0]"))

    _dump(root / f"{split}j_duplicate_graph_id.json", raw)  # same graph_id as a_good, a later file
    expected.append((f"{split}j_duplicate_graph_id.json", "duplicate_graph_id", None))

    graph = smartcomment_graph(f"graph-{prefix}-session", project_id)
    graph["data"]["operations"][0]["session_id"] = "a-session-nobody-opened"
    _dump(root / f"{split}k_unknown_session.json", graph)
    expected.append((f"{split}k_unknown_session.json", "dangling_reference", "$.data.operations[0]"))
    return {"good": good, "errors": expected}


def make_whowhen_corpus(root: Path) -> dict[str, Any]:
    good = ["Algorithm-Generated/1.json", "Algorithm-Generated/2.json"]
    for rel in good:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(WHOWHEN / rel, root / rel)
    raw = (WHOWHEN / "Algorithm-Generated/3.json").read_bytes()
    record = json.loads(raw)
    ag = "Algorithm-Generated"
    expected: list[tuple[str, str, str | None]] = []

    truncated = raw[: len(raw) // 2]
    _dump(root / ag / "b_truncated.json", truncated)
    lines = truncated.decode().split("\n")
    expected.append((f"{ag}/b_truncated.json", "invalid_json", f"line {len(lines)} column {len(lines[-1]) + 1}"))
    _dump(root / ag / "c_empty.json", b"  \n")
    expected.append((f"{ag}/c_empty.json", "empty_file", None))
    _dump(root / ag / "d_top_level_list.json", [record])
    expected.append((f"{ag}/d_top_level_list.json", "wrong_top_level_type", "$"))
    _dump(root / ag / "e_missing_history.json", {k: v for k, v in record.items() if k != "history"})
    expected.append((f"{ag}/e_missing_history.json", "missing_key", "$"))
    _dump(root / ag / "f_history_is_text.json", record | {"history": "hello"})
    expected.append((f"{ag}/f_history_is_text.json", "wrong_field_type", "$.history"))
    _dump(root / ag / "f_question_is_object.json", record | {"question": {"text": "?"}})
    expected.append((f"{ag}/f_question_is_object.json", "wrong_field_type", "$.question"))
    text = json.dumps(record).encode()
    at = text.index(b'"question": "') + len(b'"question": "')
    _dump(root / ag / "g_not_utf8.json", text[:at] + b"\xc3\x28" + text[at:])
    expected.append((f"{ag}/g_not_utf8.json", "not_utf8", f"byte {at}"))
    _dump(root / ag / "h_step_outside_history.json", record | {"mistake_step": "99"})
    expected.append((f"{ag}/h_step_outside_history.json", "dangling_reference", "$.mistake_step"))
    _dump(root / ag / "i_history_entry_is_number.json", record | {"history": [*record["history"], 7]})
    n_steps = len(record["history"])
    expected.append((f"{ag}/i_history_entry_is_number.json", "wrong_field_type", f"$.history[{n_steps}]"))
    good.append(f"{ag}/j_byte_order_mark.json")  # a UTF-8 BOM is valid UTF-8: the file loads
    _dump(root / ag / "j_byte_order_mark.json", b"\xef\xbb\xbf" + raw)
    return {"good": {rel: json.loads((root / rel).read_bytes().removeprefix(b"\xef\xbb\xbf")) for rel in good},
            "errors": expected}


def _with_column(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, values)


def make_tracertraj_corpus(root: Path) -> dict[str, Any]:
    """Parquet files (one partition each) and a json/ folder and a .jsonl file of records."""
    source = pq.read_table(TRACERTRAJ_FILE)
    root.mkdir(parents=True)
    good: dict[str, list[dict[str, Any]]] = {}
    expected: list[tuple[str, str, str | None]] = []

    # Row-level defects: each bad row is rejected alone, the rest of the file (rows 0, 4, 5) loads.
    mixed = source.slice(3, 6)
    steps = mixed.column("mistake_step").to_pylist()
    steps[1] = "500"
    mixed = _with_column(mixed, "mistake_step", pa.array(steps))
    questions: list[bytes | None] = [q.encode() for q in mixed.column("question").to_pylist()]
    questions[2] = b"not \xff utf-8"  # Arrow does not validate on write: a real file can hold this
    questions[3] = None
    binary = pa.array(questions, pa.binary())
    text = pa.Array.from_buffers(pa.string(), len(questions), binary.buffers(), null_count=1)
    pq.write_table(_with_column(mixed, "question", text), root / "tracertraj-code-mixed.parquet")
    good["tracertraj-code-mixed.parquet"] = [source.slice(3, 6).to_pylist()[i] for i in (0, 4, 5)]
    expected.append(("tracertraj-code-mixed.parquet", "dangling_reference", "row 1 $.mistake_step"))
    expected.append(("tracertraj-code-mixed.parquet", "not_utf8", "row 2 $.question"))
    expected.append(("tracertraj-code-mixed.parquet", "missing_key", "row 3 $.question"))

    # File-level defects.
    good_bytes = (root / "tracertraj-code-mixed.parquet").read_bytes()
    (root / "tracertraj-code-truncated.parquet").write_bytes(good_bytes[: len(good_bytes) // 2])
    expected.append(("tracertraj-code-truncated.parquet", "invalid_parquet", None))
    pq.write_table(source.slice(0, 0), root / "tracertraj-code-no-rows.parquet")
    expected.append(("tracertraj-code-no-rows.parquet", "no_records", None))
    pq.write_table(source.slice(8, 2).drop_columns(["history"]), root / "tracertraj-code-no-history.parquet")
    expected.append(("tracertraj-code-no-history.parquet", "missing_key", None))
    history_text = _with_column(source.slice(10, 2), "history", pa.array(["x", "y"]))
    pq.write_table(history_text, root / "tracertraj-code-history-text.parquet")
    expected += [("tracertraj-code-history-text.parquet", "wrong_field_type", f"row {i} $.history") for i in (0, 1)]

    # JSON records (the AgenTracer pipeline's other output): a json/ folder is one partition.
    records = source.slice(12, 4).to_pylist()
    _dump(root / "json/tracertraj-code-list.json", [records[0], records[1], "not a record"])
    good["json/tracertraj-code-list.json"] = records[:2]
    expected.append(("json/tracertraj-code-list.json", "wrong_top_level_type", "$[2] $"))
    _dump(root / "json/tracertraj-code-one.json", records[2])
    good["json/tracertraj-code-one.json"] = [records[2]]
    text = json.dumps(records[3]).encode()
    _dump(root / "json/tracertraj-code-truncated.json", text[:100])
    expected.append(("json/tracertraj-code-truncated.json", "invalid_json", "line 1 column 101"))
    _dump(root / "json/tracertraj-code-empty.json", b"")
    expected.append(("json/tracertraj-code-empty.json", "empty_file", None))
    _dump(root / "json/tracertraj-code-empty-list.json", [])
    expected.append(("json/tracertraj-code-empty-list.json", "no_records", None))
    _dump(root / "json/tracertraj-code-missing-history.json", {k: v for k, v in records[3].items() if k != "history"})
    expected.append(("json/tracertraj-code-missing-history.json", "missing_key", "$"))
    at = text.index(b'"question": "') + len(b'"question": "')
    _dump(root / "json/tracertraj-code-not-utf8.json", text[:at] + b"\xc3\x28" + text[at:])
    expected.append(("json/tracertraj-code-not-utf8.json", "not_utf8", f"byte {at}"))

    # JSON lines: a bad line is rejected alone.
    lines = [json.dumps(records[0]), "{not json", json.dumps(records[1])]
    (root / "tracertraj-code-lines.jsonl").write_text("\n".join(lines) + "\n")
    good["tracertraj-code-lines.jsonl"] = [records[0], records[1]]
    expected.append(("tracertraj-code-lines.jsonl", "invalid_json", "line 2 column 2"))
    return {"good": good, "errors": expected}


# ---------------------------------------------------------------------------------------------
# One build over every corpus


@pytest.fixture(scope="module")
def bad_build(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("bad-input")
    corpora = {
        "memtracebench": make_smartcomment_corpus(root / "memtracebench", "mem0/", "mtb", "Mem0"),
        # The smartcomment kind takes the system from project_id; a canonical one keeps the warn checks quiet.
        "smartcomment": make_smartcomment_corpus(root / "own", "", "own", "mem0"),
        "whowhen": make_whowhen_corpus(root / "whowhen"),
        "tracertraj": make_tracertraj_corpus(root / "tracertraj"),
    }
    folders = {"memtracebench": "memtracebench", "smartcomment": "own", "whowhen": "whowhen",
               "tracertraj": "tracertraj"}
    warehouse = root / "warehouse"
    sources = [f"{kind}={root / folder}" for kind, folder in folders.items()]
    summary = build_warehouse(warehouse, sources)
    return {"warehouse": warehouse, "summary": summary, "corpora": corpora, "sources": sources}


def _split(source: str, file: str) -> str:
    if source == "memtracebench" or source == "whowhen":
        return file.split("/")[0]
    if source == "smartcomment":
        return "root"
    return "json" if file.startswith("json/") else Path(file).stem


def test_every_bad_file_is_recorded_exactly(bad_build: dict[str, Any]) -> None:
    expected = sorted(
        ((source, _split(source, file), file, kind, position, True)
         for source, corpus in bad_build["corpora"].items() for file, kind, position in corpus["errors"]),
        key=lambda row: tuple(v or "" for v in row[:5]),
    )
    rows = query(bad_build["warehouse"], "select source, split, file, kind, position, rejected from ingest_errors")
    assert sorted(rows, key=lambda row: tuple(v or "" for v in row[:5])) == expected
    # Every reason says something, and the build summary lists exactly the rejected rows.
    assert query(bad_build["warehouse"], "select count(*) from ingest_errors where length(reason) < 5") == [(0,)]
    assert len(bad_build["summary"].files_rejected) == len(expected)


def test_a_build_with_nothing_changed_lists_the_same_rejected_files(bad_build: dict[str, Any]) -> None:
    """It reads them from the committed build's ingest_errors (a database with that one view)."""
    again = build_warehouse(bad_build["warehouse"], bad_build["sources"])
    assert not again.checked and again.build == bad_build["summary"].build  # nothing changed: no new build
    assert again.files_rejected == bad_build["summary"].files_rejected
    assert len(again.files_rejected) == sum(len(corpus["errors"]) for corpus in bad_build["corpora"].values())


def test_reasons_name_the_defect(bad_build: dict[str, Any]) -> None:
    reasons = dict(query(bad_build["warehouse"], "select source || ':' || file, reason from ingest_errors "
                                                 "where file not like '%mixed%' and file not like '%history-text%'"))
    assert reasons["memtracebench:mem0/b_truncated.json"] == "the JSON is truncated"
    assert reasons["memtracebench:mem0/e_missing_edges.json"] == "missing required key 'edges'"
    assert reasons["memtracebench:mem0/j_duplicate_graph_id.json"].startswith(
        "graph_id 'graph-mtb-1' was already loaded from memtracebench/mem0/"
    )
    assert "op-that-never-ran" in reasons["memtracebench:mem0/i_dangling_annotation.json"]
    assert "'ghost@1'" in reasons["smartcomment:h_dangling_edge.json"]
    assert reasons["whowhen:Algorithm-Generated/h_step_outside_history.json"].startswith("mistake_step 99 is outside")
    assert reasons["tracertraj:tracertraj-code-no-history.parquet"] == "missing required column 'history'"
    assert reasons["tracertraj:json/tracertraj-code-empty-list.json"] == "the file holds no records"


def test_every_good_row_is_present(bad_build: dict[str, Any]) -> None:
    wh = bad_build["warehouse"]
    per_source = {
        (source, table): n
        for table in ("graphs", "sessions", "nodes", "edges", "operations", "annotations")
        for source, n in query(
            wh, f"select g.source, count(*) from {table} as t join graphs as g using (graph_id) group by all"
            if table != "graphs" else "select source, count(*) from graphs group by all",
        )
    }
    for source in ("memtracebench", "smartcomment"):
        good = bad_build["corpora"][source]["good"]
        assert per_source[(source, "graphs")] == len(good)
        for table in ("sessions", "nodes", "edges", "operations", "annotations"):
            assert per_source[(source, table)] == sum(len(g["data"][table]) for g in good.values()), (source, table)
    whowhen = bad_build["corpora"]["whowhen"]["good"]
    assert per_source[("whowhen", "graphs")] == len(whowhen) == 3
    assert per_source[("whowhen", "operations")] == sum(len(r["history"]) for r in whowhen.values())
    assert per_source[("whowhen", "annotations")] == len(whowhen)
    records = [r for rs in bad_build["corpora"]["tracertraj"]["good"].values() for r in rs]
    assert per_source[("tracertraj", "graphs")] == len(records) == 8
    assert per_source[("tracertraj", "operations")] == sum(len(r["history"]) for r in records)
    assert per_source[("tracertraj", "sessions")] == len(records)
    # The good files are exactly the files in graphs.
    files = {(s, f) for s, f in query(wh, "select distinct source, file from graphs")}
    assert files == {(s, f) for s, c in bad_build["corpora"].items() for f in c["good"]}


def test_quarantined_input_passes_validation(bad_build: dict[str, Any]) -> None:
    """Rejected files are accounted for: every check passes, the build says 'built with rejected input'."""
    from pipelines.analytics import db

    summary = bad_build["summary"]
    assert summary.failed_checks == [] and summary.failed_steps == []
    assert summary.exit_code == 3
    corpora = bad_build["corpora"]
    loaded = {(source, file) for source, corpus in corpora.items() for file in corpus["good"]}
    failed = {(source, file) for source, corpus in corpora.items() for file, _, _ in corpus["errors"]}
    expected = {(s, f, "loaded") for s, f in loaded - failed} | {(s, f, "rejected") for s, f in failed - loaded}
    expected |= {(s, f, "partly loaded") for s, f in loaded & failed}
    rows = query(bad_build["warehouse"], "select split_part(partition, '__', 1), file, outcome from input_files")
    assert set(rows) == expected and len(rows) == len(expected)
    assert {f for _, f, outcome in rows if outcome == "partly loaded"} == {
        "tracertraj-code-mixed.parquet", "json/tracertraj-code-list.json", "tracertraj-code-lines.jsonl"
    }
    n_errors = sum(len(c["errors"]) for c in corpora.values())
    report = json.loads((bad_build["warehouse"] / "reports" / "validation.json").read_text())
    assert all(check["passed"] for check in report["checks"])
    marts = set(Warehouse(bad_build["warehouse"]).committed().snapshot.marts)
    assert marts == set(db.mart_names())  # nothing blocked: every mart was computed and committed
    assert report["ingest_errors"] == n_errors


def test_duplicate_graph_id_across_partitions_is_quarantined(tmp_path: Path) -> None:
    """The same graph id in two splits loads once, from the split that comes first; the other file
    is quarantined in ingest_errors naming the first, and everything else is built and committed."""
    from pipelines.analytics import db

    corpus = tmp_path / "corpus"
    twin = smartcomment_graph("graph-twin")
    _dump(corpus / "mem0" / "twin.json", twin)
    _dump(corpus / "rag" / "twin-copy.json", twin)
    _dump(corpus / "rag" / "other.json", smartcomment_graph("graph-other"))
    warehouse = tmp_path / "warehouse"
    summary = build_warehouse(warehouse, [f"memtracebench={corpus}"])

    assert summary.ok and summary.exit_code == 3
    assert query(warehouse, "select file from graphs order by all") == [("mem0/twin.json",), ("rag/other.json",)]
    assert query(warehouse, "select file, kind, reason, rejected from ingest_errors") == [
        ("rag/twin-copy.json", "duplicate_graph_id",
         "graph_id 'graph-twin' was already loaded from memtracebench/mem0/twin.json", True)]
    report = json.loads((warehouse / "reports" / "validation.json").read_text())
    assert all(c["passed"] for c in report["checks"])
    assert set(Warehouse(warehouse).committed().snapshot.marts) == set(db.mart_names())


@pytest.fixture(scope="module")
def strict_build(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``tracehouse build --strict`` through the CLI, on a bad file in split mem0 before a good split rag."""
    root = tmp_path_factory.mktemp("strict")
    corpus = root / "corpus"
    _dump(corpus / "mem0" / "a_good.json", smartcomment_graph("graph-strict"))
    _dump(corpus / "mem0" / "b_bad.json", b'{"graph_id": "graph-cut", "data": {"nodes": [')
    _dump(corpus / "mem0" / "c_good.json", smartcomment_graph("graph-strict-2"))
    _dump(corpus / "rag" / "d_good.json", smartcomment_graph("graph-strict-3"))
    warehouse = root / "warehouse"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "tracehouse"), "build", "--strict", "--quiet",
         "--warehouse", str(warehouse), "--source", f"memtracebench={corpus}"],
        capture_output=True, text=True, timeout=300, env=os.environ | {"GX_ANALYTICS_ENABLED": "false"},
    )
    return {"done": done, "warehouse": warehouse}


def test_strict_build_fails_on_the_bad_file(strict_build: dict[str, Any]) -> None:
    done, warehouse = strict_build["done"], strict_build["warehouse"]
    assert done.returncode == 1, done.stderr
    assert "mem0/b_bad.json: invalid_json" in done.stderr  # named, with what is wrong with it
    # Nothing is committed: the good files of the bad file's partition did not load either.
    assert Warehouse(warehouse).committed() is None
    assert not Warehouse(warehouse).generations("memtracebench__mem0")


def test_strict_build_stops_before_the_next_partition(strict_build: dict[str, Any]) -> None:
    done, warehouse = strict_build["done"], strict_build["warehouse"]
    assert "tracehouse: --strict: stopped at" in done.stderr and "b_bad.json" in done.stderr
    assert not (warehouse / "tables" / "memtracebench__rag").exists()
