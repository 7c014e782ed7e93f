"""The embedded default corpus: deterministic, MemTraceBench-shaped, with attributed failures.

Everything runs the real generator and the real smartcomment package; no mocks.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import orjson
import pytest
from smartcomment.runtime import ExecNetwork  # not re-exported at the package top level

from pipelines.sample import facts, models
from pipelines.sample.corpus import SPLITS, generate_corpus
from pipelines.sample.faults import ERROR_CATEGORY_FIT, ERROR_TYPES, NULL_OP_ALLOWED
from pipelines.sample.models import judge

PROJECTS = {"rag": "NaiveRAG", "mem0": "Mem0", "evermemos": "EverMemOS", "long_context": "Long-Context"}
COMMON_OPS = {"question-answering": "evaluation", "llm-judge": "evaluation"}
# FORMATS.md section 1: op_name -> category, per system.
SYSTEM_OPS = {
    "rag": {"memory_system.message_buffer_update": "update",
            "memory_system.finalize_memory_unit": "extraction",
            "memory_system.add": "update", "memory_system.retrieve": "retrieval"},
    "long_context": {"memory_system.memory_update": "update", "memory_system.retrieve": "retrieval"},
    "mem0": {"memory_system.extract_facts": "extraction", "memory_system.update_memory_decision": "update",
             "memory_system.add_to_vector_store": "embedding",
             "memory_system.search_vector_store": "retrieval"},
    "evermemos": {"evermemos.boundary_detection": "boundary_detection",
                  "memory_system.message_buffer_update": "update",
                  "memory_system.finalize_memory_unit": "initialization",
                  "memory_system.extract_memory": "extraction",
                  **{f"memory_system.{n}": "retrieval" for n in (
                      "bm25_retrieval", "embedding_retrieval", "hybrid_retrieval", "agentic_round1_bundle",
                      "agentic_round2_bundle", "agentic_final_rerank")}},
}
TOP_KEYS = ["graph_id", "user_id", "project_id", "storage_path", "strict", "driver_type", "created_at",
            "metadata", "data"]
ANNOTATION_KEYS = {"query_id", "query", "golden_answers", "prediction", "source_evidence_ids",
                   "final_error_type", "final_op_id", "golden_answers_id", "prediction_id"}
Corpus = tuple[Path, list[dict], dict[str, dict]]  # output folder, returned records, parsed graphs
RECORD_KEYS = {"split", "system", "dataset", "graph_id", "file", "query_id", "failed", "error_type", "op_id",
               "op_name"}
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}$")


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def default_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict], dict[str, dict]]:
    out = tmp_path_factory.mktemp("default")
    messages: list[str] = []
    records = generate_corpus(out, progress=messages.append)
    assert len(messages) == 100
    graphs = {f"{split}/{p.name}": orjson.loads(p.read_bytes())
              for split in SPLITS for p in sorted((out / split).glob("*.json"))}
    return out, records, graphs


def test_layout_and_graph_header(default_corpus: Corpus) -> None:
    out, _, graphs = default_corpus
    assert len(graphs) == 100
    assert sorted(p.name for p in out.iterdir()) == sorted([*SPLITS, "injected_faults.jsonl"])
    for rel, g in graphs.items():
        split, name = rel.split("/")
        assert list(g) == TOP_KEYS
        assert g["project_id"] == PROJECTS[split]
        meta = g["metadata"]
        assert name == f"{meta['memtracebench_dataset_source']}_{g['user_id']}.json"
        assert meta["memtracebench_graph_filename"] == name
        assert {"save_dir", "layer_type", "traj_metadata", "dataset_cls"} <= set(meta)
        assert g["driver_type"] == "in_memory" and g["storage_path"] is None and g["strict"] is False
        assert re.fullmatch(r"graph-[0-9a-f]{32}", g["graph_id"])
        assert set(g["data"]) == {"nodes", "edges", "operations", "sessions", "annotations"}
    total = sum(len(b) for b in _files(out).values())
    assert 1e6 < total < 40e6


def test_same_seed_is_byte_identical(default_corpus: Corpus,
                                     tmp_path: Path) -> None:
    out, records, _ = default_corpus
    again = generate_corpus(tmp_path / "again")
    assert again == records
    first, second = _files(out), _files(tmp_path / "again")
    assert list(first) == list(second)
    for name, payload in first.items():
        assert second[name] == payload, name


def test_graphs_do_not_depend_on_corpus_size(default_corpus: Corpus,
                                             tmp_path: Path) -> None:
    out, _, _ = default_corpus
    generate_corpus(tmp_path, graphs_per_split=2)
    small = {k: v for k, v in _files(tmp_path).items() if k.endswith(".json")}
    assert len(small) == 8
    big = _files(out)
    for name, payload in small.items():
        assert big[name] == payload, name


def test_different_seed_differs(default_corpus: Corpus, tmp_path: Path) -> None:
    out, _, _ = default_corpus
    other = generate_corpus(tmp_path, seed=1, graphs_per_split=3)
    assert len({r["file"] for r in other}) == 12
    base, changed = _files(out), _files(tmp_path)
    assert changed["injected_faults.jsonl"] != base["injected_faults.jsonl"]
    common = [name for name in changed if name in base and name.endswith(".json")]
    assert common  # e.g. locomo_locomo-1.json: same trajectory id, other dialogue, faults, ids and times
    for name in common:
        assert changed[name] != base[name], name


def test_every_file_round_trips(default_corpus: Corpus) -> None:
    out, _, _ = default_corpus
    for path in sorted(out.rglob("*.json")):
        raw = orjson.loads(path.read_bytes())
        graph = ExecNetwork.import_graph(orjson.loads(path.read_bytes()))
        data = raw["data"]
        assert graph.node_count == len(data["nodes"])
        assert graph.edge_count == len(data["edges"])
        assert graph.op_count == len(data["operations"])
        assert graph.session_count == len(data["sessions"])
        exported = graph.export_graph()
        assert "annotations" not in exported["data"]  # import_graph drops them
        exported["data"]["annotations"] = data["annotations"]
        assert orjson.dumps(exported) == path.read_bytes(), path


def test_ops_are_exactly_the_documented_ones(default_corpus: Corpus) -> None:
    _, _, graphs = default_corpus
    seen: dict[str, set[str]] = {s: set() for s in SPLITS}
    for rel, g in graphs.items():
        split = rel.split("/")[0]
        allowed = SYSTEM_OPS[split] | COMMON_OPS
        for op in g["data"]["operations"]:
            assert allowed.get(op["op_name"]) == op["category"], (rel, op["op_name"], op["category"])
            seen[split].add(op["op_name"])
    for split in SPLITS:
        assert seen[split] == set(SYSTEM_OPS[split] | COMMON_OPS), split


def test_node_and_session_conventions(default_corpus: Corpus) -> None:
    _, _, graphs = default_corpus
    for rel, g in graphs.items():
        data, uid = g["data"], g["user_id"]
        nodes = {n["full_node_id"]: n for n in data["nodes"]}
        messages = [n for n in data["nodes"] if n["category"] == "message"]
        assert messages and all(re.fullmatch(r"U\d+:D\d+:\d+", n["name"]) for n in messages)
        for q in (n for n in data["nodes"] if n["class_name"] == "query"):
            assert q["category"] == "message & query"
            assert q["metadata"]["evidence"]
            assert all(nodes[f"{e}@1"]["category"] == "message" for e in q["metadata"]["evidence"])
        assert any(n["category"] == "memory_entry" for n in data["nodes"])
        cats = Counter(s["category"] for s in data["sessions"])
        assert cats["memory_search"] == 1 and cats["memory_evaluation"] == 1
        construction = [s["session_id"] for s in data["sessions"] if s["category"] == "memory_construction"]
        assert construction == [f"{uid}-session-{i}" for i in range(1, len(construction) + 1)]
        if rel.startswith("mem0/"):
            assert any(n["class_name"] == "delete_marker" for n in data["nodes"]) or not any(
                a["final_error_type"] == "DeletionError" for a in data["annotations"])


def test_ids_times_and_paths_are_controlled(default_corpus: Corpus) -> None:
    _, _, graphs = default_corpus
    for rel, g in graphs.items():
        data = g["data"]
        assert TIMESTAMP.match(g["created_at"])
        for kind in ("nodes", "edges", "operations", "sessions"):
            stamps = [o["created_at"] for o in data[kind]]
            assert all(TIMESTAMP.match(s) for s in stamps), (rel, kind)
            assert stamps == sorted(stamps), (rel, kind)
            assert stamps[0] >= g["created_at"]
            for o in data[kind]:
                assert not o["filename"].startswith("/"), (rel, o["filename"])
                assert o["trigger_point"] == f"{o['filename']}:{o['lineno']}"
        assert all(re.fullmatch(r"op-[0-9a-f]{32}", o["op_id"]) for o in data["operations"])
        assert all(re.fullmatch(r"edge-[0-9a-f]{32}", e["edge_id"]) for e in data["edges"])
        assert {o["filename"] for o in data["operations"]} <= {
            "pipelines/sample/systems/base.py", f"pipelines/sample/systems/{rel.split('/')[0]}.py"}


def test_annotations_point_at_fitting_ops(default_corpus: Corpus) -> None:
    _, _, graphs = default_corpus
    golden_kinds = set()
    for rel, g in graphs.items():
        data = g["data"]
        ops = {o["op_id"]: o for o in data["operations"]}
        nodes = {n["full_node_id"]: n for n in data["nodes"]}
        for ann in data["annotations"]:
            assert set(ann) == ANNOTATION_KEYS
            et = ann["final_error_type"]
            assert et in ERROR_TYPES
            if ann["final_op_id"] == "null":
                assert et in NULL_OP_ALLOWED, (rel, ann)
            else:
                assert ops[ann["final_op_id"]]["category"] in ERROR_CATEGORY_FIT[et], (rel, ann)
            if et == "ResponseError":
                assert ops[ann["final_op_id"]]["op_name"] == "question-answering"
            if et in NULL_OP_ALLOWED and ann["final_op_id"] != "null":
                assert ops[ann["final_op_id"]]["op_name"] == "llm-judge"
            golden = ann["golden_answers"]
            golden_kinds.add(type(golden).__name__)
            golden_list = [golden] if isinstance(golden, str) else golden
            assert nodes[ann["query_id"]]["class_name"] == "query"
            assert nodes[ann["query_id"]]["value"] == ann["query"]
            assert nodes[ann["prediction_id"]]["value"] == ann["prediction"]
            assert nodes[ann["golden_answers_id"]]["value"] == ", ".join(golden_list)
            assert all(nodes[e]["category"] == "message" for e in ann["source_evidence_ids"])
            assert [e.removesuffix("@1") for e in ann["source_evidence_ids"]] == \
                nodes[ann["query_id"]]["metadata"]["evidence"]
            # The system really failed for a memory error, and was really right for a judge error.
            if et in ERROR_CATEGORY_FIT and et not in NULL_OP_ALLOWED:
                assert not judge(ann["prediction"], golden_list), (rel, ann)
            if et == "LLMAsAJudgeError":
                assert judge(ann["prediction"], golden_list), (rel, ann)
    assert golden_kinds == {"str", "list"}


def _op_outputs(data: dict, op_id: str) -> list[dict]:
    nodes = {n["full_node_id"]: n for n in data["nodes"]}
    targets = dict.fromkeys(e["target_full_node_id"] for e in data["edges"] if e["op_id"] == op_id)
    return [nodes[t] for t in targets]


def test_faults_really_happen_in_the_traced_pipeline(default_corpus: Corpus) -> None:
    """Each fault is visible in the graph at the op it is attributed to, and every prediction is what
    the reader makes of the traced context (except where the answer itself is the fault)."""
    _, _, graphs = default_corpus
    checked: Counter[str] = Counter()
    for rel, g in graphs.items():
        split, data = rel.split("/")[0], g["data"]
        user = g["metadata"]["traj_metadata"]["speakers"][0]
        nodes = {n["full_node_id"]: n for n in data["nodes"]}
        anns = {a["query_id"]: a for a in data["annotations"]}
        for query in (n for n in data["nodes"] if n["class_name"] == "query"):
            qid = query["name"]
            ctx = next(n for n in data["nodes"] if n["name"] == qid
                       and n["class_name"] in ("retrieved_context", "retrieved_memories"))
            prediction = nodes[f"prediction:{qid}@1"]["value"]
            ann = anns.get(query["full_node_id"])
            if ann is None or ann["final_error_type"] != "ResponseError":
                assert models.answer(query["value"], ctx["value"], user) == prediction, (rel, qid)
            if ann is None:
                continue
            et, op_id = ann["final_error_type"], ann["final_op_id"]
            decisive = query["metadata"]["evidence"][-1]  # the chain's last event
            message = nodes[f"{decisive}@1"]
            label = f"[{decisive}]"
            outs = _op_outputs(data, op_id) if op_id != "null" else []
            if et == "ExtractionError":
                if split == "rag":
                    (unit,) = outs
                    assert label in unit["value"] and message["value"] not in unit["value"]
                elif split == "mem0":
                    event = facts.extract_events(message["value"], message["metadata"]["speaker"])[0]
                    fact = facts.canonical(event.subject, event.slot, event.value, event.old)
                    assert fact not in json.loads(outs[0]["value"])
                else:
                    assert f"fact-{decisive}" not in {o["name"] for o in outs}
            elif et == "UpdateError":
                if split == "mem0":
                    event = facts.extract_events(message["value"], message["metadata"]["speaker"])[0]
                    fact = facts.canonical(event.subject, event.slot, event.value, event.old)
                    assert all(o["value"] != fact for o in outs)
                else:  # a stale copy of the decisive message was stored
                    stored = "\n".join(o["value"] for o in outs)
                    assert label in stored and message["value"] not in stored
            elif et == "DeletionError":
                if split == "mem0":
                    assert any(o["class_name"] == "delete_marker" for o in outs)
                elif split == "evermemos":
                    assert any(o["name"] == f"fact-{decisive}" and o["value"].startswith("[evicted]")
                               for o in outs)
                else:
                    memories = [o for o in outs if o["class_name"] in ("memory_unit", "memory")]
                    assert memories and all(label not in o["value"] for o in memories)
            elif et == "RetrievalError":
                assert label not in ctx["value"]
            checked[et] += 1
    assert set(checked) == set(ERROR_TYPES)


def test_default_corpus_coverage(default_corpus: Corpus) -> None:
    _, _, graphs = default_corpus
    anns = [a for g in graphs.values() for a in g["data"]["annotations"]]
    assert Counter(a["final_error_type"] for a in anns).keys() == set(ERROR_TYPES)
    assert {g["project_id"] for g in graphs.values()} == set(PROJECTS.values())
    for split in SPLITS:
        datasets = {g["metadata"]["memtracebench_dataset_source"]
                    for r, g in graphs.items() if r.startswith(split + "/")}
        assert datasets == {"locomo", "longmemeval", "realmem"}, split
    for et in NULL_OP_ALLOWED:
        targets = {a["final_op_id"] == "null" for a in anns if a["final_error_type"] == et}
        assert targets == {True, False}, et
    for rel, g in graphs.items():
        scores = [n["value"] for n in g["data"]["nodes"] if n["class_name"] == "judge_score"]
        queries = [n for n in g["data"]["nodes"] if n["class_name"] == "query"]
        assert 3 <= len(queries) <= 8 and len(scores) == len(queries), rel
        assert set(scores) == {"0.0", "1.0"}, rel
        assert scores.count("0.0") == len(g["data"]["annotations"]), rel


def test_injected_faults_agree_with_annotations(default_corpus: Corpus) -> None:
    out, records, graphs = default_corpus
    lines = (out / "injected_faults.jsonl").read_bytes().splitlines()
    assert [orjson.loads(line) for line in lines] == records
    by_file: dict[str, list[dict]] = {}
    for r in records:
        assert set(r) == RECORD_KEYS
        by_file.setdefault(r["file"], []).append(r)
    assert set(by_file) == set(graphs)
    for rel, recs in by_file.items():
        g = graphs[rel]
        ops = {o["op_id"]: o["op_name"] for o in g["data"]["operations"]}
        anns = {a["query_id"]: a for a in g["data"]["annotations"]}
        assert {r["query_id"] for r in recs if r["failed"]} == set(anns)
        for r in recs:
            split = rel.split("/")[0]
            assert (r["split"], r["system"], r["graph_id"]) == (split, g["project_id"], g["graph_id"])
            assert r["dataset"] == g["metadata"]["memtracebench_dataset_source"]
            if not r["failed"]:
                assert r["error_type"] is None and r["op_id"] == "null" and r["op_name"] is None
                continue
            ann = anns[r["query_id"]]
            assert (r["error_type"], r["op_id"]) == (ann["final_error_type"], ann["final_op_id"])
            assert r["op_name"] == (None if r["op_id"] == "null" else ops[r["op_id"]])


def test_scale_grows_files(tmp_path: Path) -> None:
    generate_corpus(tmp_path / "s1", graphs_per_split=1, scale=1.0)
    generate_corpus(tmp_path / "s3", graphs_per_split=1, scale=3.0)
    small, large = _files(tmp_path / "s1"), _files(tmp_path / "s3")
    graphs = [name for name in small if name.endswith(".json")]
    assert len(graphs) == 4 and set(graphs) <= set(large)
    for name in graphs:
        assert len(large[name]) > 1.5 * len(small[name]), name
    lc = next(name for name in graphs if name.startswith("long_context/"))
    assert len(large[lc]) > 2 * len(small[lc])  # the whole history in every memory version


def test_rejects_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="scale"):
        generate_corpus(tmp_path, scale=0.001)
    with pytest.raises(ValueError, match="graphs_per_split"):
        generate_corpus(tmp_path, graphs_per_split=-1)


def test_the_shipped_corpus_is_what_the_generator_makes(tmp_path: Path) -> None:
    """`make run` unpacks pipelines/sample/default_corpus.tar.xz instead of generating; it must hold
    exactly what generation makes now (if not: `make sample-archive`)."""
    from pipelines.sample import archive

    archive.generate_into(tmp_path)
    fresh = archive.files_under(tmp_path)
    shipped = archive.members()
    assert sorted(shipped) == sorted(fresh), "the shipped corpus is stale: run `make sample-archive`"
    assert [n for n in fresh if shipped[n] != fresh[n]] == [], "the shipped corpus is stale: run `make sample-archive`"
    assert {n.split("/")[0] for n in shipped} == set(archive.FOLDERS)


def test_a_warehouse_unpacks_the_shipped_corpus_whole_in_one_pass(tmp_path: Path) -> None:
    """ensure_sample_corpus writes both folders of the archive (from one decompression) into the
    warehouse, each renamed into place whole; a folder already there is left as it is."""
    from pipelines.sample import archive
    from pipelines.sample.ensure import ensure_sample_corpus
    from pipelines.storage.warehouse import Warehouse

    warehouse = Warehouse(tmp_path / "warehouse")
    warehouse.root.mkdir()
    ensure_sample_corpus(warehouse)
    assert archive.files_under(warehouse.root) == archive.members()
    assert not list(warehouse.root.glob(".*.tmp"))

    shutil.rmtree(warehouse.sample_predictions_dir)
    (warehouse.corpus_dir / "kept.txt").write_text("mine")
    ensure_sample_corpus(warehouse)
    assert (warehouse.corpus_dir / "kept.txt").read_text() == "mine"
    unpacked = archive.files_under(warehouse.root)
    assert {n: b for n, b in unpacked.items() if n.startswith("corpus-predictions/")} == {
        n: b for n, b in archive.members().items() if n.startswith("corpus-predictions/")}
