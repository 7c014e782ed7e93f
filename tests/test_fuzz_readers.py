"""Property-based fuzzing of every reader: a mutated file yields canonical rows or IngestErrors,
never another exception, never a hang.

The CI run uses a modest number of examples; a longer local run:
    TRACEHOUSE_FUZZ_EXAMPLES=5000 .venv/bin/python -m pytest tests/test_fuzz_readers.py -q
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from smartcomment_graphs import make_graph

from pipelines import schema
from pipelines.readers import reader_for
from pipelines.readers.base import GraphRows, IngestError, SourceFile

EXAMPLES = int(os.environ.get("TRACEHOUSE_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=5000, suppress_health_check=list(HealthCheck))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)

BASE_GRAPH = make_graph("graph-fuzz", "locomo-1", "Mem0", queries=3)
BASE_WHOWHEN = {
    "is_correct": False,
    "question": "q?",
    "question_ID": "4d51c4bf-4b0e-4f3d-897b-3f6687a7d9f2",
    "level": "1",
    "ground_truth": "8",
    "mistake_agent": "Excel_Expert",
    "mistake_step": "1",
    "mistake_reason": "r",
    "history": [
        {"content": "plan", "role": "assistant", "name": "Excel_Expert"},
        {"content": "```python\nx\n```", "role": "user", "name": "Computer_terminal"},
        {"content": "done", "role": "user", "name": "Excel_Expert"},
    ],
    "system_prompt": {"Excel_Expert": "You are an expert."},
}
BASE_TRACERTRAJ = {
    "question_ID": "Leetcode_1_I",
    "question": "q",
    "ground_truth": "def f(): pass",
    "history": [
        {"content": "a", "name": "Team Leader", "role": "assistant", "step": 0},
        {"content": "b", "name": "Engineer", "role": "assistant", "step": 1},
    ],
    "mistake_agent": "Engineer",
    "mistake_step": "1",
    "mistake_reason": "r",
}


def paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into a JSON document (dict keys and list indexes)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value[:4]):
            found += paths(child, (*prefix, i))
    return found


@st.composite
def mutated(draw: st.DrawFn, base: Any) -> Any:
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        all_paths = paths(doc)
        path = draw(st.sampled_from(all_paths))
        if not path:
            doc = draw(json_values)
            continue
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        if draw(st.booleans()) and isinstance(parent, dict):
            parent.pop(path[-1], None)
        else:
            parent[path[-1]] = draw(json_values)
    return doc


@st.composite
def byte_mutated(draw: st.DrawFn, data: bytes) -> bytes:
    choice = draw(st.sampled_from(["truncate", "flip", "insert"]))
    at = draw(st.integers(0, max(0, len(data) - 1)))
    if choice == "truncate":
        return data[:at]
    if choice == "flip":
        return data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
    return data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]


def read_everything(kind: str, root: Path) -> list[GraphRows | IngestError]:
    reader = reader_for(kind)
    out: list[GraphRows | IngestError] = []
    for file in reader.discover(root, kind):
        try:
            out.extend(reader.read(file))
        except IngestError as error:
            out.append(error)
    for item in out:
        assert isinstance(item, GraphRows | IngestError)
        if isinstance(item, GraphRows):
            for name, table in item.tables.items():
                assert table.schema.equals(schema.GRAPH_TABLES[name])
        else:
            assert item.kind and item.reason
    return out


def dump(doc: Any) -> bytes:
    """JSON text of any document, big integers included (orjson stops at 64 bits)."""
    return json.dumps(doc).encode()


def write(root: Path, rel: str, data: bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@FUZZ
@given(doc=mutated(BASE_GRAPH))
def test_memtracebench_reader_survives_structural_mutations(doc: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        write(Path(tmp), "mem0/locomo_locomo-1.json", dump(doc))
        read_everything("memtracebench", Path(tmp))


@FUZZ
@given(data=byte_mutated(orjson.dumps(BASE_GRAPH)))
def test_smartcomment_reader_survives_byte_mutations(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        write(Path(tmp), "runs/g.json", data)
        read_everything("smartcomment", Path(tmp))


@FUZZ
@given(doc=mutated(BASE_WHOWHEN))
def test_whowhen_reader_survives_structural_mutations(doc: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        write(Path(tmp), "Algorithm-Generated/1.json", dump(doc))
        read_everything("whowhen", Path(tmp))


@FUZZ
@given(data=byte_mutated(json.dumps(BASE_WHOWHEN).encode()))
def test_whowhen_reader_survives_byte_mutations(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        write(Path(tmp), "Hand-Crafted/1.json", data)
        read_everything("whowhen", Path(tmp))


@FUZZ
@given(records=st.lists(mutated(BASE_TRACERTRAJ), min_size=1, max_size=3))
def test_tracertraj_reader_survives_mutated_records(records: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        lines = b"\n".join(dump(r) for r in records)
        write(Path(tmp), "tracertraj-code-fuzz.jsonl", lines)
        # as Parquet too, when pyarrow can give the mutated records one schema
        with contextlib.suppress(pa.ArrowException, TypeError, ValueError, OverflowError):
            pq.write_table(
                pa.Table.from_pylist([r for r in records if isinstance(r, dict)]),
                Path(tmp) / "tracertraj-code-fuzz.parquet",
            )
        read_everything("tracertraj", Path(tmp))


def _parquet_bytes() -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.parquet"
        pq.write_table(pa.Table.from_pylist([BASE_TRACERTRAJ, BASE_TRACERTRAJ]), path)
        return path.read_bytes()


@FUZZ
@given(data=byte_mutated(_parquet_bytes()))
def test_tracertraj_reader_survives_corrupt_parquet(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        write(Path(tmp), "tracertraj-code-x.parquet", data)
        read_everything("tracertraj", Path(tmp))


def test_unreadable_file_is_an_ingest_error(tmp_path: Path) -> None:
    write(tmp_path, "mem0/a.json", orjson.dumps(BASE_GRAPH))
    (tmp_path / "mem0" / "a.json").chmod(0)
    file = SourceFile("memtracebench", "mem0", (tmp_path / "mem0" / "a.json").resolve(), "mem0/a.json")
    try:
        if os.geteuid() == 0:  # root reads anything: make it a directory instead
            (tmp_path / "mem0" / "a.json").unlink()
            (tmp_path / "mem0" / "a.json").mkdir()
        list(reader_for("memtracebench").read(file))
    except IngestError as error:
        assert error.kind == "unreadable"
    else:
        raise AssertionError("an unreadable file must raise IngestError")
