"""An otlp partition rebuilt after new, changed and deleted batch files reads only the files
holding a span of a trace those touch, takes every other trace over from the previous generation,
and ends row for row (in order) what reading every file gives."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from conftest import build_warehouse, every_row, query
from otlp_files import otlp_line, otlp_span, write_lines

from pipelines import schema
from pipelines.builds import ingest
from pipelines.readers import otlp
from pipelines.storage.records import GENERATION_TABLE, MANIFEST
from pipelines.storage.warehouse import Warehouse

KEY = "otlp__traces"


def trace(letter: str) -> str:
    return letter * 32


def ingest_folder(warehouse: Warehouse, folder: Path, previous: Path | None) -> ingest.PartitionResult:
    return ingest.ingest_partition(warehouse, KEY, "otlp", otlp.discover(folder, "otlp"), previous=previous)


def tables(warehouse: Warehouse, generation: Path) -> dict[str, Any]:
    """Every table of a generation in its stored order, and its manifest's file entries."""
    out: dict[str, Any] = {}
    for name in [*schema.PARTITION_TABLES, GENERATION_TABLE]:
        parts = [pq.read_table(path) for path in ingest.generation_files(warehouse, generation, name)]
        out[name] = pa.concat_tables(parts).to_pylist()
    entries = json.loads((generation / MANIFEST).read_text())["files"]
    out["manifest"] = [{k: v for k, v in entry.items() if k not in ("piece", "mtime_ns")} for entry in entries]
    return out


def same_as_fresh(tmp_path: Path, folder: Path, result: ingest.PartitionResult, warehouse: Warehouse) -> None:
    fresh_home = Warehouse(tmp_path / f"fresh-{result.generation.name}")
    fresh = ingest_folder(fresh_home, folder, None)
    assert fresh.parsed == fresh.files
    got, want = tables(warehouse, result.generation), tables(fresh_home, fresh.generation)
    for name in want:
        assert got[name] == want[name], name
    assert result.rows == fresh.rows


def test_a_new_batch_reads_only_the_files_of_the_traces_it_touches(tmp_path: Path) -> None:
    a, b, c, d, e, f, g, h, n, z = (trace(x) for x in "abcdef78" + "9" + "2")
    source = tmp_path / "landing"
    repeat = otlp_span(b, "b000000000000002", "b000000000000001", name="child")
    write_lines(source / "00.jsonl", [otlp_line([otlp_span(z, "f000000000000001", name="z root")])])
    write_lines(source / "01.jsonl", [
        otlp_line([otlp_span(a, "a000000000000001", name="a root", session__id="s1"),
                   otlp_span(b, "b000000000000001", name="b root", session__id="s2")]),
        otlp_line([repeat, otlp_span(e, "e000000000000001", name="e root"),
                   otlp_span(a, "a00000000000000f", "a0000000000000ee", name="a orphan"),  # a defect, noted
                   otlp_span(e, "e00000000000000f", "e0000000000000ee", name="e orphan")]),
        otlp_line([repeat]),  # an exporter's retry: kept once, noted
    ])
    write_lines(source / "02.jsonl", [
        otlp_line([otlp_span(a, "a000000000000002", "a000000000000001", name="a child", input__value="question")]),
        otlp_line([otlp_span(f, "f000000000000002", name="f root")]),
    ])
    write_lines(source / "03.jsonl", [
        otlp_line([otlp_span(c, "c000000000000001", name="c root"),
                   otlp_span(g, "0000000000000009", "0000000000000008")]),
        '{"resourceSpans": [',  # a bad line (not the last one)
        otlp_line([otlp_span(c, "c000000000000002", "c000000000000001", name="c child")], service="other"),
    ])
    write_lines(source / "04.jsonl", [otlp_line([otlp_span(h, "d000000000000001", name="h root")])])
    warehouse = Warehouse(tmp_path / "wh")
    first = ingest_folder(warehouse, source, None)
    same_as_fresh(tmp_path, source, first, warehouse)

    # a new batch extends trace a and starts n; 02 is rewritten (f goes, d comes); 04 is deleted
    write_lines(source / "05.jsonl", [
        otlp_line([otlp_span(n, "9000000000000001", name="n root"),
                   otlp_span(a, "a000000000000003", "a000000000000002", name="a grandchild", output__value="answer")]),
        otlp_line([otlp_span(a, "a000000000000001", name="a root, again and different")]),  # rejected: differs
    ])
    write_lines(source / "02.jsonl", [
        otlp_line([otlp_span(d, "d000000000000002", name="d root")]),
        otlp_line([otlp_span(a, "a000000000000002", "a000000000000001", name="a child", input__value="question")]),
    ])
    (source / "04.jsonl").unlink()
    second = ingest_folder(warehouse, source, first.generation)
    same_as_fresh(tmp_path, source, second, warehouse)
    # 05 and 02 (changed) and 01 (holds a span of a) are read; 00 and 03 are taken over
    assert (second.files, second.parsed, second.reused) == (5, 3, 2)
    graphs = {row["graph_id"]: row for row in tables(warehouse, second.generation)["graphs"]}
    assert sorted(graphs) == sorted(f"otel:{t}" for t in (a, b, c, d, e, g, n, z))
    assert graphs[f"otel:{a}"]["files"] == ["01.jsonl", "02.jsonl", "05.jsonl"]

    # a later batch holding a span of c reads 03 again, and nothing else old
    write_lines(source / "06.jsonl", [otlp_line([otlp_span(c, "c000000000000003", "c000000000000002", name="c late")])])
    os.utime(source / "00.jsonl", ns=(10**18, 10**18))  # touched, the same bytes: kept, under its new mtime
    third = ingest_folder(warehouse, source, second.generation)
    same_as_fresh(tmp_path, source, third, warehouse)
    assert (third.files, third.parsed, third.reused) == (6, 2, 4)
    entries = json.loads((third.generation / MANIFEST).read_text())["files"]
    assert [e["mtime_ns"] for e in entries if e["file"] == "00.jsonl"] == [10**18]

    # nothing new: nothing is read
    fourth = ingest_folder(warehouse, source, third.generation)
    same_as_fresh(tmp_path, source, fourth, warehouse)
    assert (fourth.parsed, fourth.reused) == (0, 6)


def test_a_rebuild_after_a_new_batch_equals_a_fresh_build(tmp_path: Path) -> None:
    """The whole build (checks, views, marts) of a landing folder that grew, against a fresh one."""
    a, b, c = trace("a"), trace("b"), trace("c")
    source = tmp_path / "landing"
    write_lines(source / "batch-1.jsonl", [otlp_line([otlp_span(a, "a000000000000001", name="a root", session__id="s"),
                                                      otlp_span(b, "b000000000000001", name="b root")])])
    write_lines(source / "batch-2.jsonl", [otlp_line([otlp_span(c, "c000000000000001", name="c root")])])
    warehouse = tmp_path / "wh"
    build_warehouse(warehouse, [f"otlp={source}"])
    write_lines(source / "batch-3.jsonl", [otlp_line([
        otlp_span(a, "a000000000000002", "a000000000000001", name="a child", input__value="q", output__value="r")])])
    again = build_warehouse(warehouse, [])
    assert again.partitions_built == ["otlp__traces"]
    fresh = tmp_path / "fresh"
    build_warehouse(fresh, [f"otlp={source}"])
    assert every_row(warehouse) == every_row(fresh)
    assert query(warehouse, "select graph_id, files from graphs order by graph_id") == [
        (f"otel:{a}", ["batch-1.jsonl", "batch-3.jsonl"]), (f"otel:{b}", ["batch-1.jsonl"]),
        (f"otel:{c}", ["batch-2.jsonl"])]
