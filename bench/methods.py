"""One ingest method per function, run by bench/run.py in its own process (so peak RSS is its own).

    python bench/methods.py METHOD CORPUS OUT   -> prints one JSON line: seconds, bytes, graphs, rows

(a) ``read_bytes`` / ``parse_orjson`` / ``parse_msgspec``: the floor, on one core (the faster parser
    on these files counts, so both are measured);
(b) ``duckdb``: what a user would write in pure DuckDB (sql/bench/duckdb_flatten.sql);
(c) ``smartcomment``: smartcomment.ExecNetwork.import_graph per file, then DataFrames -> Parquet;
(d) ``tracehouse``: tracehouse's ingest engine (every split through ingest_partition).

The clock starts after each method's modules are imported (``IMPORTS``; pandas for tracehouse
because pyarrow imports it at its first conversion): this measures throughput, not interpreter
start-up, which the README-run-command benchmark covers end to end.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def corpus_files(corpus: Path) -> list[Path]:
    return sorted(p for p in corpus.glob("*/*.json"))


def read_bytes(corpus: Path, out: Path) -> dict:
    total = 0
    for path in corpus_files(corpus):
        total += len(path.read_bytes())
    return {"bytes": total}


def _parse_all(corpus: Path, loads) -> dict:
    """Read and parse every file, keeping nothing: the floor a parser sets."""
    total = graphs = 0
    for path in corpus_files(corpus):
        data = path.read_bytes()
        total += len(data)
        doc = loads(data)
        graphs += 1
        del doc, data
    return {"bytes": total, "graphs": graphs}


def parse_orjson(corpus: Path, out: Path) -> dict:
    import orjson

    return _parse_all(corpus, orjson.loads)


def parse_msgspec(corpus: Path, out: Path) -> dict:
    import msgspec

    return _parse_all(corpus, msgspec.json.decode)


def duckdb_sql(corpus: Path, out: Path) -> dict:
    import duckdb

    out.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute("set temp_directory = ?", [str(out / "spill")])
    con.execute("set preserve_insertion_order = false")
    con.execute("set variable corpus_glob = ?", [str(corpus / "*" / "*.json")])
    con.execute((BENCH.parent / "sql" / "bench" / "duckdb_flatten.sql").read_text())
    rows = {}
    for table in ("graphs", "nodes", "edges", "operations", "sessions", "annotations"):
        # COPY takes no parameter for its target; the path is the benchmark's own output folder.
        con.execute(f"copy {table} to '{out / table}.parquet' (format parquet, compression zstd)")
        rows[table] = con.execute(f"select count(*) from {table}").fetchone()[0]
    return {"bytes": sum(p.stat().st_size for p in corpus_files(corpus)), "graphs": rows["graphs"], "rows": rows}


# The public attributes of smartcomment's runtime objects, as a user would read them.
FIELDS = {
    "nodes": ("graph_id", "full_node_id", "name", "class_name", "version", "category", "session_id", "value",
              "comment", "created_at", "metadata"),
    "edges": ("graph_id", "edge_id", "op_id", "source_full_node_id", "target_full_node_id", "category",
              "session_id", "created_at"),
    "operations": ("graph_id", "op_id", "op_name", "category", "session_id", "comment", "created_at", "metadata"),
    "sessions": ("graph_id", "session_id", "session_name", "category", "comment", "created_at", "metadata"),
}


def smartcomment_loader(corpus: Path, out: Path) -> dict:
    import orjson
    import pandas as pd
    from smartcomment.runtime.network import ExecNetwork

    out.mkdir(parents=True, exist_ok=True)
    frames: dict[str, list] = {"nodes": [], "edges": [], "operations": [], "sessions": []}
    total = graphs = 0
    for path in corpus_files(corpus):
        data = path.read_bytes()
        total += len(data)
        network = ExecNetwork.import_graph(orjson.loads(data))
        graphs += 1
        for name, items in (("nodes", network.get_all_nodes()), ("edges", network.get_all_edges()),
                            ("operations", network.get_all_operations()), ("sessions", network.get_all_sessions())):
            frames[name].append(pd.DataFrame([{f: getattr(item, f) for f in FIELDS[name]} for item in items]))
        del network, data
    rows = {}
    for name, parts in frames.items():
        frame = pd.concat(parts, ignore_index=True)
        for column in frame.columns:  # free-form dicts as JSON text, as the warehouse keeps them
            if frame[column].dtype == object and frame[column].map(lambda v: isinstance(v, dict | list)).any():
                frame[column] = frame[column].map(json.dumps)
        frame.to_parquet(out / f"{name}.parquet", compression="zstd")
        rows[name] = len(frame)
    return {"bytes": total, "graphs": graphs, "rows": rows}


def tracehouse_ingest(corpus: Path, out: Path) -> dict:
    """Every split through ingest_partition in key order, as a build flattens a fresh warehouse: no
    earlier generation to copy from, each split told the graph ids the splits before it loaded."""
    from pipelines.builds.ingest import ingest_partition, load_manifest, loaded_graphs
    from pipelines.readers import memtracebench
    from pipelines.storage.warehouse import Warehouse, partition_key

    warehouse = Warehouse(out / "warehouse")
    files = memtracebench.discover(corpus, "bench")
    rows: dict[str, int] = {}
    claimed: dict[str, str] = {}
    for split in sorted({f.split for f in files}):
        result = ingest_partition(warehouse, partition_key("bench", split), "memtracebench",
                                  [f for f in files if f.split == split], claimed=dict(claimed))
        claimed.update(loaded_graphs(load_manifest(result.generation) or {"files": []}))
        for table, n in result.rows.items():
            rows[table] = rows.get(table, 0) + n
    return {"bytes": sum(f.size for f in files), "graphs": rows["graphs"], "rows": rows}


METHODS = {
    "read_bytes": read_bytes,
    "parse_orjson": parse_orjson,
    "parse_msgspec": parse_msgspec,
    "duckdb": duckdb_sql,
    "smartcomment": smartcomment_loader,
    "tracehouse": tracehouse_ingest,
}

IMPORTS = {
    "parse_orjson": ["orjson"],
    "parse_msgspec": ["msgspec"],
    "duckdb": ["duckdb"],
    "smartcomment": ["orjson", "pandas", "pyarrow", "smartcomment.runtime.network"],
    "tracehouse": ["pandas", "pipelines.builds.ingest", "pipelines.readers.memtracebench"],
}

if __name__ == "__main__":
    method, corpus, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    imports_started = time.perf_counter()
    for module in IMPORTS.get(method, []):
        importlib.import_module(module)
    imports_s = time.perf_counter() - imports_started
    started = time.perf_counter()
    result = METHODS[method](corpus, out)
    result["seconds"] = time.perf_counter() - started
    result["imports_s"] = imports_s
    print(json.dumps(result))
