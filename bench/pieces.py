"""What keeping data files by reference buys, and what it costs queries (docs/BUILDS.md, "Pieces").

For one split of the benchmark's large corpus (by default its biggest, long_context: 100 files,
838 MB), in this process, with the piece size set three ways (one piece a split, the default
``ingest.PIECE_BYTES``, and 1 MB pieces, the "thousands of tiny files" a design without compaction
drifts to):

- the fresh flatten of the split, then the flatten after one changed file (a node value edited, as
  bench/run.py's rebuild does) taking the previous generation's unchanged rows: copied when the
  split is one piece, kept by reference otherwise;
- the data files and bytes the rebuild wrote;
- three queries over the split's data files in DuckDB (a count, a group-by over nodes, a join of
  edges and operations), each the median of ``--repeat`` runs on a new connection.

    .venv/bin/python bench/pieces.py [--split long_context] [--repeat 5]

Writes bench/pieces-results.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

import duckdb  # noqa: E402

from pipelines.builds import ingest  # noqa: E402
from pipelines.readers import memtracebench  # noqa: E402
from pipelines.storage.warehouse import Warehouse  # noqa: E402

EDIT = (b'"value":"', b'"value":"(edited) ')  # bench/run.py's edit: one node value

QUERIES = {
    "count nodes": "select count(*) from read_parquet($nodes)",
    "nodes by category": "select category, count(*), sum(value_bytes) from read_parquet($nodes) group by category",
    "edges joined to their operations": (
        "select o.category, count(*) from read_parquet($edges) e "
        "join read_parquet($operations) o on o.graph_id = e.graph_id and o.op_id = e.op_id group by o.category"
    ),
}


def flatten(warehouse: Warehouse, split: str, corpus: Path, previous: Path | None) -> tuple[Path, float]:
    files = [f for f in memtracebench.discover(corpus, "memtracebench") if f.split == split]
    started = time.perf_counter()
    result = ingest.ingest_partition(warehouse, f"memtracebench__{split}", "memtracebench", files, previous=previous)
    return result.generation, time.perf_counter() - started


def query_seconds(warehouse: Warehouse, generation: Path, repeat: int) -> dict[str, float]:
    params = {table: [str(p) for p in ingest.generation_files(warehouse, generation, table)]
              for table in ("nodes", "operations", "edges")}
    timings = {}
    for name, sql in QUERIES.items():
        runs = []
        for _ in range(repeat):
            con = duckdb.connect()
            started = time.perf_counter()
            con.execute(sql, {k: v for k, v in params.items() if f"${k}" in sql}).fetchall()
            runs.append(time.perf_counter() - started)
            con.close()
        timings[name] = statistics.median(runs)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(BENCH / "out" / "corpus"), help="bench/run.py's large corpus")
    parser.add_argument("--split", default="long_context")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--work", default=str(BENCH / "out" / "pieces"))
    args = parser.parse_args()
    corpus, work = Path(args.corpus), Path(args.work)
    files = sorted((corpus / args.split).glob("*.json"))
    if not files:
        raise SystemExit(f"{corpus / args.split} holds no files: run bench/run.py once (it generates the corpus)")
    target = next(f for f in files if EDIT[0] in f.read_bytes()[:1 << 20])
    original = target.read_bytes()
    layouts = {"one piece a split": 1 << 50, "default pieces": ingest.PIECE_BYTES, "1 MB pieces": 1 << 20}
    results: dict = {"split": args.split, "files": len(files), "mb": sum(f.stat().st_size for f in files) / 1e6,
                     "changed_file": target.name, "changed_file_mb": len(original) / 1e6, "layouts": {}}
    for name, piece_bytes in layouts.items():
        ingest.PIECE_BYTES = piece_bytes
        shutil.rmtree(work, ignore_errors=True)
        warehouse = Warehouse(work)
        first, fresh_s = flatten(warehouse, args.split, corpus, None)
        target.write_bytes(original.replace(*EDIT, 1))
        try:
            second, rebuild_s = flatten(warehouse, args.split, corpus, first)
        finally:
            target.write_bytes(original)
        manifest = ingest.load_manifest(second) or {}
        own = [p for p in manifest["pieces"] if p.startswith(warehouse.rel(second))]
        written = sum(f.stat().st_size for f in second.rglob("*.parquet"))
        results["layouts"][name] = {
            "piece_bytes": piece_bytes, "pieces": len(manifest["pieces"]), "pieces_rewritten": len(own),
            "data_files": 8 * len(manifest["pieces"]) + 1, "fresh_flatten_s": fresh_s, "rebuild_flatten_s": rebuild_s,
            "rebuild_wrote_mb": written / 1e6, "queries_s": query_seconds(warehouse, second, args.repeat),
        }
        print(f"{name}: {len(manifest['pieces'])} pieces ({len(own)} rewritten); fresh {fresh_s:.2f} s, "
              f"1-file rebuild {rebuild_s:.2f} s writing {written / 1e6:.1f} MB; queries "
              + ", ".join(f"{q} {s * 1000:.0f} ms" for q, s in results["layouts"][name]["queries_s"].items()),
              flush=True)
    shutil.rmtree(work, ignore_errors=True)
    results["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    (BENCH / "pieces-results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
