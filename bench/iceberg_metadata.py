"""Iceberg publication over many builds: its time per build and the metadata each table is left with.

A warehouse published as Iceberg gets one snapshot per table and build (pipelines/storage/iceberg.py). This
script publishes ``--builds`` builds of ``--tables`` tables of ``--files`` Parquet files each, every
build replacing one file of every table (as a rebuild of one changed split does), and prints, per build,
the seconds the publication took and, per table, the manifests its current snapshot is read from and
the metadata files (Avro and JSON) left in its folder. The metadata must stay bounded however many
builds there were (BENCHMARKS.md, "Iceberg metadata over 50 builds").

    .venv/bin/python bench/iceberg_metadata.py --builds 50 [--json bench/iceberg-results.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipelines.storage import iceberg  # noqa: E402
from pipelines.storage.warehouse import Warehouse, write_parquet_atomic  # noqa: E402


def data_file(folder: Path, table: int, slot: int, build: int) -> str:
    rows = pa.table({"graph_id": [f"g{table}-{slot}-{i}" for i in range(50)], "n": pa.array(range(50), pa.int64()),
                     "build": pa.array([build] * 50, pa.int64())})
    return str(write_parquet_atomic(rows, folder / f"t{table}-s{slot}-b{build}.parquet"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builds", type=int, default=50)
    parser.add_argument("--tables", type=int, default=16)
    parser.add_argument("--files", type=int, default=6)
    parser.add_argument("--json", type=Path, help="write the figures here as well")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="iceberg-metadata-"))
    warehouse = Warehouse(root)
    data = root / "data"
    data.mkdir()
    files = {t: [data_file(data, t, s, 0) for s in range(args.files)] for t in range(args.tables)}
    schema = pa.schema([("graph_id", pa.string()), ("n", pa.int64()), ("build", pa.int64())])
    catalog = iceberg.open_catalog(warehouse)
    seconds: list[float] = []
    history: dict[tuple[int, int], list[str]] = {}  # (build, table) -> its files
    try:
        for build in range(1, args.builds + 1):
            for t in range(args.tables):
                files[t][build % args.files] = data_file(data, t, build % args.files, build)
                history[build, t] = list(files[t])
            kept = set(range(max(1, build - 2), build + 1))
            started = time.perf_counter()
            for t in range(args.tables):
                iceberg.publish_table(catalog, f"table_{t}", schema, files[t], build, kept,
                                      earlier=lambda number, t=t: history.get((number, t)))
            seconds.append(time.perf_counter() - started)
        table = catalog.load_table(("tracehouse", "table_0"))
        snapshot = table.current_snapshot()
        manifests = len(snapshot.manifests(table.io)) if snapshot else 0
        folder = Path(table.location().removeprefix("file://")) / "metadata"
        avro = len(list(folder.glob("*.avro")))
        metadata_json = len(list(folder.glob("*.metadata.json")))
        rows = table.scan().to_arrow().num_rows
    finally:
        catalog.close()
    result = {
        "builds": args.builds, "tables": args.tables, "files_per_table": args.files,
        "seconds_per_build_median": round(statistics.median(seconds), 3),
        "seconds_per_build_max": round(max(seconds), 3),
        "seconds_first_10_median": round(statistics.median(seconds[:10]), 3),
        "seconds_last_10_median": round(statistics.median(seconds[-10:]), 3),
        "manifests_of_current_snapshot": manifests, "avro_files": avro, "metadata_json_files": metadata_json,
        "snapshots": len(table.metadata.snapshots), "rows": rows,
    }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
