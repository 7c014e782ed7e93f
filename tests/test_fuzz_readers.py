"""Property-based fuzzing of every reader: a mutated file yields canonical rows or IngestErrors,
never another exception, never a hang.

The CI run uses a modest number of examples; a longer local run:
    TRACEHOUSE_FUZZ_EXAMPLES=5000 .venv/bin/python -m pytest tests/test_fuzz_readers.py -q
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from fuzzing import FUZZ, byte_mutated, dump, mutated, read_everything, write
from hypothesis import given
from hypothesis import strategies as st
from smartcomment_graphs import make_graph

from pipelines.readers import reader_for
from pipelines.readers.base import IngestError, SourceFile

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
