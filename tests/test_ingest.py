"""The ingest engine itself: rows stay in file order however the writes overlap, and the Parquet
files carry the layout docs/TABLES.md describes."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from pipelines import schema
from pipelines.builds import ingest
from pipelines.readers import memtracebench
from pipelines.storage.warehouse import Warehouse


def _ingest(corpus: Path, warehouse: Path, split: str) -> Path:
    files = [f for f in memtracebench.discover(corpus, "memtracebench") if f.split == split]
    assert len(files) > 5, "the sample corpus should give this split several files"
    return ingest.ingest_partition(Warehouse(warehouse), f"memtracebench__{split}", "memtracebench", files).generation


def _file(generation: Path, table: str) -> Path:
    """The one data file of ``table`` in a generation of a small split (one piece)."""
    (path,) = ingest.generation_files(Warehouse(generation.parents[2]), generation, table)
    return path


def test_rows_keep_file_order_when_many_writes_overlap(sample_corpus: Path, tmp_path: Path, monkeypatch) -> None:
    """Tiny flushes make every table's rows go out in many writes on two threads, overlapping the
    next files' parsing; the result must be the same rows in the same order as one write per table."""
    one_write = _ingest(sample_corpus, tmp_path / "one", "rag")
    monkeypatch.setattr(ingest, "FLUSH_BYTES", 1 << 10)
    monkeypatch.setattr(ingest, "ROW_GROUP_ROWS", 7)
    many_writes = _ingest(sample_corpus, tmp_path / "many", "rag")
    for table in schema.GRAPH_TABLES:
        before, after = pq.ParquetFile(_file(one_write, table)), pq.ParquetFile(_file(many_writes, table))
        assert after.metadata.num_row_groups > before.metadata.num_row_groups or before.metadata.num_rows <= 7
        assert after.read().equals(before.read()), f"{table} differs when written in many overlapping writes"
    files = pq.read_table(_file(many_writes, "graphs"), columns=["file"])["file"].to_pylist()
    assert files == sorted(files) and len(files) > 5


def test_long_texts_have_no_statistics_and_ids_do(sample_corpus: Path, tmp_path: Path) -> None:
    generation = _ingest(sample_corpus, tmp_path / "wh", "rag")
    row_group = pq.ParquetFile(_file(generation, "nodes")).metadata.row_group(0)
    columns = {row_group.column(i).path_in_schema: row_group.column(i) for i in range(row_group.num_columns)}
    assert columns["value"].statistics is None or not columns["value"].statistics.has_min_max
    assert columns["graph_id"].statistics.has_min_max
    assert columns["value"].compression == "ZSTD"


def test_long_values_are_shared_not_copied_and_short_ones_converted() -> None:
    """A value of SHARED_VALUE_CHARS or more becomes a chunk over the str's own UTF-8 bytes (ASCII
    or not), which keeps the str alive after the items let go of it; runs of shorter values are
    converted between them, in order."""
    import gc
    from types import SimpleNamespace

    import pyarrow as pa

    from pipelines.readers.base import SHARED_VALUE_CHARS, IngestError, large_string_array

    long_ascii, long_utf8 = "a" * SHARED_VALUE_CHARS, "日本" * SHARED_VALUE_CHARS
    values = [long_ascii, "é" * 3000, None, "short", long_utf8, "", "x" * (SHARED_VALUE_CHARS - 1)]
    expected = [None if v is None else "".join(v) for v in values]  # copies, not the same objects
    items = [SimpleNamespace(value=v) for v in values]
    allocated = pa.total_allocated_bytes()
    array = large_string_array(items, "value", "$.data.nodes")
    grown = pa.total_allocated_bytes() - allocated
    assert all(item.value is None for item in items)
    lengths = [len(chunk) for chunk in array.chunks]
    assert lengths == [1, 3, 1, 2]
    # Arrow allocated the short values' bytes but not the long ones': their chunks are the strs' own
    shared = len(long_ascii) + len(long_utf8.encode())
    copied = sum(len(v.encode()) for v in values[1:4] + values[5:] if v is not None)
    assert copied <= grown < copied + SHARED_VALUE_CHARS < shared
    del items, values, long_ascii, long_utf8
    gc.collect()
    assert array.to_pylist() == expected
    for value in ("a" * SHARED_VALUE_CHARS + "\ud800", "a\ud800"):  # a lone surrogate rejects the file
        with pytest.raises(IngestError) as rejected:
            large_string_array([SimpleNamespace(value=value)], "value", "$.data.nodes")
        assert rejected.value.kind == "not_utf8"


def test_make_room_bounds_what_the_writers_hold(tmp_path: Path) -> None:
    """Rows collected behind a write in flight count against the budget; make_room waits until the
    next file fits, and does not wait when it already fits."""
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow as pa

    table_schema = pa.schema([("text", pa.large_string())])
    chunk = pa.table({"text": ["x" * 1000] * 1000}, schema=table_schema)  # ~1 MB a write
    with ThreadPoolExecutor(max_workers=1) as pool:
        writer = ingest.TableWriter(tmp_path / "t.parquet", table_schema, pool)
        writers = {"t": writer}
        writer.write(chunk)
        writer.flush()  # one write in flight
        writer.write(chunk)  # collects behind it
        held = writer.pending_bytes + writer.in_flight_bytes
        assert held == 2 * chunk.nbytes
        ingest.make_room(writers, file_bytes=0, budget=10 * held)
        assert writer.pending_bytes > 0, "room enough: nothing should have been forced out"
        ingest.make_room(writers, file_bytes=held, budget=2 * held)
        assert writer.backlog == 0, "no room for the file: every write should have been awaited"
        writer.close()
    assert pq.read_table(tmp_path / "t.parquet").num_rows == 2000


def test_metadata_that_is_not_utf8_rejects_its_file_naming_the_item(tmp_path: Path) -> None:
    """Metadata stays raw JSON through the decode; turning it into text finds the bad bytes and names
    the item that holds them, and the other file of the split still loads."""
    root = tmp_path / "corpus" / "rag"
    root.mkdir(parents=True)
    node = '{{"full_node_id": "{0}", "session_id": "s", "metadata": {{"note": "{1}"}}}}'
    for name, note in (("bad.json", b"\xff"), ("good.json", b"fine")):
        nodes = ",".join(node.format(nid, "NOTE") for nid in ("a", "b", "c")).encode()
        nodes = nodes.replace(b"NOTE", b"ok", 2).replace(b"NOTE", note)
        (root / name).write_bytes(
            b'{"graph_id": "' + name.encode() + b'", "data": {"nodes": [' + nodes
            + b'], "edges": [], "operations": [], "sessions": [{"session_id": "s"}]}}'
        )
    files = memtracebench.discover(tmp_path / "corpus", "memtracebench")
    result = ingest.ingest_partition(Warehouse(tmp_path / "wh"), "memtracebench__rag", "memtracebench", files)
    assert [(e["file"], e["kind"], e["position"]) for e in result.errors] == [
        ("rag/bad.json", "not_utf8", "$.data.nodes[2].metadata")
    ]
    assert result.rows["graphs"] == 1 and result.rows["nodes"] == 3


def _rows(warehouse: Warehouse, generation: Path, table: str) -> list[dict]:
    rows = [r for f in ingest.generation_files(warehouse, generation, table) for r in pq.read_table(f).to_pylist()]
    keys = schema.PRIMARY_KEYS.get(table, ("source", "file", "kind", "position"))
    return sorted(rows, key=lambda r: tuple(str(r[k]) for k in keys))


def _add_graph(folder: Path, template: Path, n: int) -> None:
    """A new file: ``template``'s graph under a graph id of its own."""
    graph = orjson.loads(template.read_bytes())
    graph["graph_id"] = f"graph-added-{n:03d}"
    (folder / f"added_{n:03d}.json").write_bytes(orjson.dumps(graph))


def test_unchanged_pieces_are_kept_by_reference_and_small_ones_compacted(
    sample_corpus: Path, tmp_path: Path, monkeypatch
) -> None:
    """A rebuild takes over the pieces whose files are all unchanged (the same data files, not read
    again), rewrites the piece of a changed file, and gives rows equal to a fresh ingest. Files added
    one build at a time leave small pieces, which are compacted once there are PIECE_SLACK too many."""
    folder = tmp_path / "corpus" / "rag"
    shutil.copytree(sample_corpus / "rag", folder)
    sizes = sorted(p.stat().st_size for p in folder.iterdir())
    monkeypatch.setattr(ingest, "PIECE_BYTES", 3 * sizes[-1])  # pieces of 3-6 files
    warehouse = Warehouse(tmp_path / "wh")

    def build(previous: Path | None, target: Warehouse = warehouse) -> tuple[Path, dict]:
        files = memtracebench.discover(folder.parent, "memtracebench")
        generation = ingest.ingest_partition(target, "memtracebench__rag", "memtracebench", files,
                                             previous=previous).generation
        return generation, ingest.load_manifest(generation)

    first, first_manifest = build(None)
    pieces = first_manifest["pieces"]
    assert len(pieces) >= 3 and all(p.startswith(warehouse.rel(first)) for p in pieces)

    changed = sorted(folder.iterdir())[len(sorted(folder.iterdir())) // 2]
    piece_of_changed = pieces[next(e["piece"] for e in first_manifest["files"] if e["file"] == f"rag/{changed.name}")]
    graph = orjson.loads(changed.read_bytes())
    graph["user_id"] = "someone-else"
    changed.write_bytes(orjson.dumps(graph))
    second, manifest = build(first)
    kept = [p for p in manifest["pieces"] if p.startswith(warehouse.rel(first))]
    assert kept == [p for p in pieces if p != piece_of_changed]  # the same files, by reference
    own = [p for p in manifest["pieces"] if p.startswith(warehouse.rel(second))]
    assert len(own) == 1  # the changed file's piece, rewritten
    fresh, _ = build(None, Warehouse(tmp_path / "fresh"))
    for table in schema.PARTITION_TABLES:
        assert _rows(warehouse, second, table) == _rows(Warehouse(tmp_path / "fresh"), fresh, table), table
    users = [r["user_id"] for r in _rows(warehouse, second, "graphs") if r["file"] == f"rag/{changed.name}"]
    assert users == ["someone-else"]

    previous, counts = second, []
    template = sorted(folder.iterdir())[0]
    for n in range(ingest.PIECE_SLACK + 3):  # one small new piece a build, until they are compacted
        _add_graph(folder, template, n)
        previous, manifest = build(previous)
        counts.append(len(manifest["pieces"]))
    total = sum(p.stat().st_size for p in folder.iterdir())
    needed = -(-total // ingest.PIECE_BYTES)
    assert counts[-1] < max(counts)  # compacted: the small pieces merged
    assert all(c <= needed + ingest.PIECE_SLACK + 1 for c in counts)
    assert {r["graph_id"] for r in _rows(warehouse, previous, "graphs")} >= {
        f"graph-added-{n:03d}" for n in range(ingest.PIECE_SLACK + 3)}
