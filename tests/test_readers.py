"""Each reader on real records: row counts equal the source list lengths, references resolve,
and multi-agent annotations keep mistake_step and the decisive step's actor."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path, PurePosixPath

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import SHARED_DATA, needs_shared_data, query
from smartcomment_graphs import make_graph, write_memtracebench

from pipelines import schema
from pipelines.readers import READERS, reader_for, tier
from pipelines.readers.base import Case, Cases, GraphRows, IngestError, Labels, Rows
from pipelines.readers.trajectory import task_benchmark
from pipelines.sample.predictions import simulate_predictions


def read_all(kind: str, root: Path, source: str | None = None) -> list[GraphRows]:
    reader = reader_for(kind)
    out = []
    for file in reader.discover(root, source or kind):
        for item in reader.read(file):
            assert isinstance(item, GraphRows), f"{file.relpath}: {item}"
            out.append(item)
    return out


def concat(graphs: list[GraphRows], table: str) -> pa.Table:
    return pa.concat_tables([g.tables[table] for g in graphs])


# -- every registered reader on an input of its format -------------------------------------------------

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# What each tier of source must fill (readers.tier): graph sources their graphs, label sources the
# annotations of graphs another source holds, prediction sources their attributions.
FILLS = {0: "graphs", 1: "annotations", 2: "attributions"}
# The graph source a label or prediction source is read against (its Cases).
LABELLED_KIND = {"trail_labels": "otlp", "memtrace_attribution": "memtracebench", "attribution_jsonl": "memtracebench",
                 "whowhen_predictions": "whowhen"}


def shared(*parts: str) -> Path:
    """A folder of real records in ../shared/data, or a skip naming it."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"../shared/data/{'/'.join(parts)} is not present in this clone")
    return path


def graph_input(kind: str, folder: Path) -> Path:
    """An input of a graph source's format: real records where this clone has them, else written here."""
    if kind == "memtracebench":
        write_memtracebench(folder, {"mem0": 2, "rag": 1})
        return folder
    if kind == "smartcomment":
        (folder / "agents").mkdir(parents=True)
        (folder / "agents" / "run.json").write_bytes(orjson.dumps(make_graph("graph-run", "u1", "agents", queries=3)))
        return folder
    if kind == "whowhen":
        return FIXTURES / "whowhen"
    if kind == "tracertraj":
        return shared("tracertraj")
    if kind == "otlp":
        return shared("otel", "otlp-sample", "otlp")
    if kind == "otel_spans":
        return shared("otel", "anyagent")
    if kind == "agentrx":
        return shared("agentrx")
    if kind == "mlflow":
        return shared("platforms", "mlflow", "traces")
    if kind == "phoenix":
        return shared("platforms", "phoenix")
    if kind == "langfuse":
        return shared("platforms", "langfuse")
    raise AssertionError(f"no input of the graph source kind {kind!r}: add one to graph_input")


def labelled_input(kind: str, folder: Path, graphs_root: Path, cases: Cases) -> Path:
    """An input of a label or prediction source's format, about the graphs in ``graphs_root``."""
    folder.mkdir(parents=True)
    if kind == "trail_labels":
        return shared("otel", "otlp-sample", "labels")
    if kind == "memtrace_attribution":
        simulate_predictions(graphs_root, folder)
        return folder / "simulated-careful"
    if kind == "attribution_jsonl":
        lines = [{"annotation_id": case.annotation_id, "error_type": "RetrievalError"} for case in cases.cases]
        (folder / "mine.jsonl").write_bytes(b"\n".join(orjson.dumps(line) for line in lines) + b"\n")
        return folder
    if kind == "whowhen_predictions":  # as Automated_FA/inference.py logs a run on the Hand-Crafted subset
        blocks = [f"Prediction for {case.file_name}:\nAgent Name: WebSurfer\nStep Number: 1\n"
                  f"Reason for Mistake: it went wrong\n\n{'=' * 50}\n" for case in cases.cases
                  if case.split == "Hand-Crafted"]
        (folder / "all_at_once_handcrafted.txt").write_text(
            "--- Starting Analysis: all_at_once ---\nIs Handcrafted: True\n\n" + "\n".join(blocks))
        return folder
    raise AssertionError(f"no input of the source kind {kind!r}: add one to labelled_input")


def read_source(kind: str, root: Path, cases: Cases | None = None) -> list[GraphRows | Rows | Labels | IngestError]:
    """Everything the reader of ``kind`` yields for the files it discovers under ``root``, as the ingest
    reads them: a partition at once for a reader that reads partitions, the cases for one that needs them."""
    reader = reader_for(kind)
    files = reader.discover(root, kind)
    assert files, f"the {kind} reader discovered no file under {root}"
    if getattr(reader, "reads_partition", False):
        return [item for _, item, _, _ in reader.read_traces(files)]  # as the ingest reads them
    items: list[GraphRows | Rows | Labels | IngestError] = []
    for file in files:
        try:
            items.extend(reader.read(file, cases) if getattr(reader, "needs_cases", False) else reader.read(file))
        except IngestError as error:
            items.append(error)
    return items


def cases_of(graphs: list[GraphRows]) -> Cases:
    """What a build hands a label or prediction reader (pipelines.analytics.attribution.load_cases), from the rows of
    the graph source it is read against (each read with its kind as its source name)."""
    # each graph's (source, kind, split, file name); the source is named after its kind
    where = {r["graph_id"]: (r["source"], r["source"], r["split"], PurePosixPath(r["file"]).name)
             for g in graphs for r in g.tables["graphs"].to_pylist()}
    cases = [Case(a["annotation_id"], a["graph_id"], a["system"], a["dataset"], *where[a["graph_id"]], a["query_id"])
             for g in graphs for a in g.tables["annotations"].to_pylist()]
    spans = {g.graph_id: (g.tables["graphs"]["system"][0].as_py(), g.tables["graphs"]["dataset"][0].as_py(),
                          frozenset(op for op in g.tables["operations"]["op_id"].to_pylist() if op is not None))
             for g in graphs if g.graph_id.startswith("otel:")}
    return Cases(cases, [(gid, *place) for gid, place in where.items()], spans=spans)


@pytest.mark.parametrize("kind", sorted(READERS))
def test_every_reader_yields_the_canonical_schemas(kind: str, tmp_path: Path) -> None:
    """Each registered source kind on an input of its format yields rows, and every table it yields has
    its canonical schema (pipelines/schema.py) with no null where the schema allows none."""
    if tier(kind) == 0:
        items = read_source(kind, graph_input(kind, tmp_path / "graphs"))
    else:
        graphs_root = graph_input(LABELLED_KIND[kind], tmp_path / "graphs")
        graphs = [g for g in read_source(LABELLED_KIND[kind], graphs_root) if isinstance(g, GraphRows)]
        cases = cases_of(graphs)
        assert cases.cases or cases.spans, f"the {LABELLED_KIND[kind]} input holds nothing to label or predict"
        items = read_source(kind, labelled_input(kind, tmp_path / kind, graphs_root, cases), cases)
    tables = [(name, table) for item in items if isinstance(item, GraphRows | Rows)
              for name, table in item.tables.items()]
    filled = sum(table.num_rows for name, table in tables if name == FILLS[tier(kind)])
    errors = [str(item) for item in items if isinstance(item, IngestError)]
    assert filled > 0, f"the {kind} reader yielded no {FILLS[tier(kind)]} row; its errors: {errors[:5]}"
    for name, table in tables:
        canonical = schema.PARTITION_TABLES[name]
        assert table.schema.equals(canonical), f"{kind}: {name}"
        table.validate(full=True)
        for field in canonical:
            if not field.nullable:
                assert table[field.name].null_count == 0, f"{kind}: {name}.{field.name} holds a null"


@needs_shared_data()
def test_whowhen_rows_match_the_files(shared_data: Path) -> None:
    root = shared_data / "whowhen"
    graphs = read_all("whowhen", root)
    files = sorted(root.glob("*/*.json"))
    assert len(graphs) == len(files)
    by_id = {g.graph_id: g for g in graphs}
    for path in files:
        record = json.loads(path.read_text())
        subset = path.parent.name
        graph = by_id[f"whowhen:{subset}/{path.stem}"]
        history = record["history"]
        ops = graph.tables["operations"].to_pylist()
        assert len(ops) == len(history)
        assert graph.tables["graphs"]["n_operations"][0].as_py() == len(history)
        # nodes: question, ground truth, one per system prompt, one per message
        assert graph.tables["nodes"].num_rows == 2 + len(record.get("system_prompt", {})) + len(history)
        agent_key = "role" if subset == "Hand-Crafted" else "name"
        annotation = graph.tables["annotations"].to_pylist()[0]
        step = int(record["mistake_step"])
        assert annotation["decisive_step"] == step
        assert annotation["faulty_op_id"] == f"step-{step}"
        assert annotation["responsible_agent"] == record["mistake_agent"]
        assert annotation["reason"] == record["mistake_reason"]
        assert annotation["golden_answers"] == [record["ground_truth"]]
        assert annotation["system"] == ("magentic-one" if subset == "Hand-Crafted" else "captainagent")
        assert annotation["dataset"] == task_benchmark(record["question_ID"])
        decisive = ops[step]
        raw_agent = history[step].get(agent_key) or history[step]["role"]
        # the decisive op's actor is the agent that spoke that step (delegations name the orchestrator)
        assert decisive["actor"] == raw_agent or raw_agent.startswith(decisive["actor"] + " (")
        extra = json.loads(annotation["extra"] or "{}")
        assert set(extra) == set(record) - {
            "question",
            "ground_truth",
            "history",
            "mistake_agent",
            "mistake_step",
            "mistake_reason",
            "system_prompt",
        }
        _assert_edges_resolve(graph)


@needs_shared_data()
def test_whowhen_datasets_match_published_counts_computed_from_ids(shared_data: Path) -> None:
    graphs = read_all("whowhen", shared_data / "whowhen")
    got = Counter((g.tables["graphs"]["system"][0].as_py(), g.tables["graphs"]["dataset"][0].as_py()) for g in graphs)
    expected = Counter()
    for path in (shared_data / "whowhen").glob("*/*.json"):
        qid = json.loads(path.read_text())["question_ID"]
        system = "magentic-one" if path.parent.name == "Hand-Crafted" else "captainagent"
        expected[(system, "gaia" if len(qid) == 36 else "assistantbench")] += 1
    assert got == expected
    assert got[("captainagent", "gaia")] == 98 and got[("captainagent", "assistantbench")] == 28


@needs_shared_data()
def test_tracertraj_rows_match_the_parquet(shared_data: Path) -> None:
    path = shared_data / "tracertraj" / "tracertraj-code-sample.parquet"
    records = pq.read_table(path).to_pylist()
    graphs = read_all("tracertraj", shared_data / "tracertraj")
    assert len(graphs) == len(records)
    for row, (graph, record) in enumerate(zip(graphs, records, strict=True)):
        assert graph.graph_id == f"tracertraj:{path.name}#{row}"
        meta = graph.tables["graphs"].to_pylist()[0]
        assert (meta["system"], meta["dataset"]) == ("metagpt", "code")
        ops = graph.tables["operations"].to_pylist()
        assert [op["actor"] for op in ops] == [h["name"] for h in record["history"]]
        assert [op["step"] for op in ops] == [h["step"] for h in record["history"]]
        annotation = graph.tables["annotations"].to_pylist()[0]
        assert annotation["decisive_step"] == int(record["mistake_step"])
        assert annotation["responsible_agent"] == record["mistake_agent"]
        assert ops[annotation["decisive_step"]]["actor"] == record["history"][int(record["mistake_step"])]["name"]
        _assert_edges_resolve(graph)


def test_tracertraj_json_records_load_like_parquet_rows(tmp_path: Path) -> None:
    record = {
        "question_ID": "Leetcode_1_I",
        "question": "q",
        "ground_truth": "def f(): pass",
        "history": [
            {"content": "plan", "name": "Team Leader", "role": "assistant", "step": 0},
            {"content": "```python\ncode\n```", "name": "Engineer", "role": "assistant", "step": 1},
        ],
        "mistake_agent": "Engineer",
        "mistake_step": "1",
        "mistake_reason": "wrong code",
        "is_correct": False,
        "model_prediction": "def f(): return 1",
    }
    (tmp_path / "tracertraj-math-run.jsonl").write_bytes(orjson.dumps(record) + b"\n" + orjson.dumps(record) + b"\n")
    graphs = read_all("tracertraj", tmp_path)
    assert [g.graph_id for g in graphs] == [
        "tracertraj:tracertraj-math-run.jsonl#1",
        "tracertraj:tracertraj-math-run.jsonl#2",
    ]
    annotation = graphs[0].tables["annotations"].to_pylist()[0]
    assert annotation["dataset"] == "math" and annotation["prediction"] == "def f(): return 1"
    assert json.loads(annotation["extra"]) == {"is_correct": False, "question_ID": "Leetcode_1_I"}


def test_memtracebench_layout_loads_one_row_per_source_item(tmp_path: Path) -> None:
    written = write_memtracebench(tmp_path, {"rag": 2, "mem0": 2, "evermemos": 1, "long_context": 1})
    graphs = read_all("memtracebench", tmp_path)
    assert len(graphs) == len(written)
    by_id = {g.graph_id: g for g in graphs}
    for rel, exported in written.items():
        graph = by_id[exported["graph_id"]]
        data = exported["data"]
        for table, key in [
            ("nodes", "nodes"),
            ("edges", "edges"),
            ("operations", "operations"),
            ("sessions", "sessions"),
            ("annotations", "annotations"),
        ]:
            assert graph.tables[table].num_rows == len(data[key]), (rel, table)
        meta = graph.tables["graphs"].to_pylist()[0]
        assert meta["system"] == rel.split("/")[0]
        assert meta["file"] == rel
        assert meta["dataset"] == rel.split("/")[1].split("_")[0]
        assert graph.tables["nodes"]["full_node_id"].to_pylist() == [n["full_node_id"] for n in data["nodes"]]
        values = graph.tables["nodes"].to_pylist()
        assert [v["value_bytes"] for v in values] == [len(n["value"].encode()) for n in data["nodes"]]
        for ann_row, ann in zip(graph.tables["annotations"].to_pylist(), data["annotations"], strict=True):
            assert ann_row["faulty_op_id"] == ann["final_op_id"]
            assert ann_row["error_type"] == ann["final_error_type"]
            gold = ann["golden_answers"]
            assert ann_row["golden_answers"] == ([gold] if isinstance(gold, str) else gold)
            extra = json.loads(ann_row["extra"])
            assert extra["annotator_note"] == "kept in extra" and extra["prediction_id"] == ann["prediction_id"]
        _assert_edges_resolve(graph)


def test_smartcomment_source_takes_any_export_and_names_system_by_project(tmp_path: Path) -> None:
    graph = make_graph("graph-own", "user-7", "MyAgentMemory")
    del graph["data"]["annotations"]  # annotations are optional for plain smartcomment exports
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "a.json").write_bytes(orjson.dumps(graph, option=orjson.OPT_INDENT_2))
    (graphs,) = [read_all("smartcomment", tmp_path)]
    meta = graphs[0].tables["graphs"].to_pylist()[0]
    assert (meta["system"], meta["split"], meta["dataset"], meta["n_annotations"]) == (
        "MyAgentMemory",
        "runs",
        "unknown",
        0,
    )
    node_meta = graphs[0].tables["nodes"]["metadata"].to_pylist()
    assert all(json.loads(m) == n["metadata"] for m, n in zip(node_meta, graph["data"]["nodes"], strict=True))


def test_large_single_graph_has_no_object_size_limit(tmp_path: Path) -> None:
    graph = make_graph("graph-big", "realmem-1", "Mem0")
    graph["data"]["nodes"][0]["value"] = "x" * (20 << 20)  # one 20 MB value: over DuckDB's 16 MB default
    (tmp_path / "mem0").mkdir()
    (tmp_path / "mem0" / "realmem_realmem-1.json").write_bytes(orjson.dumps(graph))
    (graph_rows,) = read_all("memtracebench", tmp_path)
    assert graph_rows.tables["nodes"]["value_bytes"][0].as_py() == 20 << 20


def _assert_edges_resolve(graph: GraphRows) -> None:
    nodes = set(graph.tables["nodes"]["full_node_id"].to_pylist())
    ops = set(graph.tables["operations"]["op_id"].to_pylist())
    for edge in graph.tables["edges"].to_pylist():
        assert edge["op_id"] in ops
        assert edge["source_full_node_id"] in nodes and edge["target_full_node_id"] in nodes
    for annotation in graph.tables["annotations"].to_pylist():
        assert annotation["faulty_op_id"] is None or annotation["faulty_op_id"] in ops
        assert annotation["query_id"] in nodes


@needs_shared_data()
def test_agent_disagreement_is_queryable(multi_agent_warehouse, shared_data: Path) -> None:
    """The decisive op's actor is kept, so annotations naming another agent can be found in SQL."""
    warehouse, _ = multi_agent_warehouse
    rows = query(
        warehouse,
        """
        select a.graph_id from annotations a
        join operations o on o.graph_id = a.graph_id and o.op_id = a.faulty_op_id
        where o.actor <> a.responsible_agent order by 1""",
    )
    mismatches = []
    for path in (shared_data / "whowhen").glob("*/*.json"):
        record = json.loads(path.read_text())
        entry = record["history"][int(record["mistake_step"])]
        actor_field = entry["role"] if path.parent.name == "Hand-Crafted" else entry.get("name", entry["role"])
        if actor_field.split(" (")[0] != record["mistake_agent"]:
            mismatches.append(f"whowhen:{path.parent.name}/{path.stem}")
    for path in (shared_data / "tracertraj").glob("*.parquet"):
        for row, record in enumerate(pq.read_table(path).to_pylist()):
            if record["history"][int(record["mistake_step"])]["name"] != record["mistake_agent"]:
                mismatches.append(f"tracertraj:{path.name}#{row}")
    assert [r[0] for r in rows] == sorted(mismatches)
    assert mismatches, "the real records hold a few disagreements (FORMATS.md); none found means a mapping bug"


@pytest.mark.parametrize(
    "qid,expected",
    [
        ("4d51c4bf-4b0e-4f3d-897b-3f6687a7d9f2", "gaia"),
        ("6e3be83d1949fa52cba03fb1ce4b5b3bf7e37a83fd7d67694b10b2e439d90cf8", "assistantbench"),
        ("other", "unknown"),
    ],
)
def test_task_benchmark_from_question_id(qid: str, expected: str) -> None:
    assert task_benchmark(qid) == expected


def test_listed_files_are_named_relative_to_their_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file's name and split come from its path under the source folder, also when the folder is
    given relatively; hidden folders are not entered, and a hidden file is listed with the reason it
    is not read (the ingest rejects it: no file is dropped without a word)."""
    from pipelines.readers.base import SourceFile, list_files, split_of
    from pipelines.storage.warehouse import relative_name

    for rel in ("rag/a.json", "rag/deep/b.json", "top.json", ".hidden/c.json", "rag/.d.json", "rag/e.txt"):
        (tmp_path / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / rel).write_text("{}")
    root = tmp_path / "src"
    found = list_files(root, "**/*.json")
    assert [relative_name(root, p) for p in found] == ["rag/.d.json", "rag/a.json", "rag/deep/b.json", "top.json"]
    assert [split_of(root, p, "root") for p in found] == ["rag", "rag", "rag", "root"]
    problems = [SourceFile("s", "x", p, relative_name(root, p)).problem for p in found]
    assert [p and p.kind for p in problems] == ["hidden_name", None, None, None]
    monkeypatch.chdir(tmp_path)
    relative = list_files(Path("src"), "**/*.json")
    assert [relative_name(Path("src"), p) for p in relative] == [
        "rag/.d.json", "rag/a.json", "rag/deep/b.json", "top.json"]
    assert relative_name(Path("."), Path("src/rag/a.json")) == "src/rag/a.json"
    with pytest.raises(ValueError):
        relative_name(root / "rag", root / "top.json")


def test_hashing_a_file_leaves_no_thread_that_holds_the_process_exit(tmp_path: Path) -> None:
    """The file's sha256 is right, and the thread that computed it is a daemon: a Ctrl-C landing as
    a pool started its hashing thread left that thread outside the pool's shutdown, and the
    interrupted build waited for it at exit for ever."""
    import hashlib
    import threading

    from pipelines.readers.base import read_while_hashing

    path = tmp_path / "graph.json"
    path.write_bytes(b"x" * 100_000)
    before = set(threading.enumerate())
    data, hashing = read_while_hashing(path)
    assert hashing.result() == hashlib.sha256(data).hexdigest()
    started = [t for t in threading.enumerate() if t not in before]
    assert not [t.name for t in started if not t.daemon]


def test_a_function_on_a_thread_gives_its_error_to_the_caller() -> None:
    """What failed on the thread (opening the Dagster instance, say) is raised where the value is asked for."""
    from pipelines.on_thread import OnThread

    failing = OnThread(int, "not a number", name="parse", daemon=False)
    with pytest.raises(ValueError, match="not a number"):
        failing.result()
    assert OnThread(int, "42", name="parse", daemon=False).result() == 42
