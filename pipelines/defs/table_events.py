"""What a flattened split's tables report to Dagster: a materialization of each table's partition, with
its rows, bytes, data files and a preview, read from the generation it wrote.

The same metadata for both ways a split is flattened: a partition run of ``flattened_tables`` (from the
UI, the sensor or automation) yields it as the asset's results; ``tracehouse build`` flattens the
splits it decided itself, one after another, outside any run (a run per split cost 0.2-0.35 s of
Dagster's run overhead each, and a second plan), and its one run reports them from its first step
(:func:`report_flattened`), so each partition's page still names the run that brought it in.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq

from pipelines import schema
from pipelines.ingest import generation_files, load_manifest
from pipelines.records import GENERATION_TABLE
from pipelines.state import Attempt
from pipelines.storage import Warehouse
from pipelines.text import markdown_table


def _preview(paths: list[Path], rows: int = 5) -> str:
    """A small markdown preview of a table's first data file with rows (trace values are untrusted:
    :func:`pipelines.text.markdown_table` shortens and escapes them, as for the marts' previews)."""
    parquet = next((f for f in map(pq.ParquetFile, paths) if f.metadata.num_rows), None)
    if parquet is None:
        return "_empty_"
    head = next(parquet.iter_batches(batch_size=rows))
    return markdown_table(head.schema.names, [list(row.values()) for row in head.to_pylist()])


def table_metadata(warehouse: Warehouse, generation: Path) -> dict[str, dict[str, object]]:
    """Per table, the metadata of its materialization for one complete generation of a split: its
    rows (the manifest's count per file; ingest errors from their data file's footer), bytes, data
    files, the split's input files and ingest errors, the generation, a preview."""
    entries = (load_manifest(generation) or {}).get("files", [])
    errors = pq.read_metadata(generation / f"{GENERATION_TABLE}.parquet").num_rows
    metadata = {}
    for name in schema.TABLES:
        paths = generation_files(warehouse, generation, name)
        rows = errors if name == GENERATION_TABLE else sum(entry["rows"].get(name, 0) for entry in entries)
        metadata[name] = {
            "rows": rows,
            "bytes": sum(path.stat().st_size for path in paths),
            "data_files": len(paths),
            "files": len(entries),
            "ingest_errors": errors,
            "generation": generation.name,
            "preview": dg.MetadataValue.md(_preview(paths)),
        }
    return metadata


def report_flattened(
    warehouse: Warehouse, attempt: Attempt, log_event: Callable[[dg.AssetMaterialization], None]
) -> int:
    """Log a materialization of every table's partition for each split the build ``attempt`` brought
    in (flattened by it, or adopted from a build killed before its commit); returns how many splits."""
    keys = [*attempt.summary.get("partitions_built", []), *attempt.summary.get("partitions_adopted", [])]
    for key in keys:
        generation = warehouse.path(attempt.snapshot.partitions[key].generation)
        for name, metadata in table_metadata(warehouse, generation).items():
            log_event(dg.AssetMaterialization(
                asset_key=name, partition=key, metadata=metadata,
                description=f"{key} as build {attempt.build} brought it in (generation {generation.name})",
            ))
    return len(keys)
