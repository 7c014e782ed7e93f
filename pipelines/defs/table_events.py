"""What the flattened tables report to Dagster: one materialization per table and build, naming
the splits that changed, with its rows, the files written and a preview."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq

from pipelines import schema
from pipelines.builds.plan import Plan, manifest_of
from pipelines.storage.records import GENERATION_TABLE
from pipelines.storage.state import Attempt
from pipelines.storage.warehouse import Warehouse
from pipelines.text import markdown_table


def _preview(paths: list[Path], rows: int = 5) -> str:
    """A small markdown preview of a table's first data file with rows (trace values are untrusted:
    :func:`pipelines.text.markdown_table` shortens and escapes them, as for the marts' previews)."""
    parquet = next((f for f in map(pq.ParquetFile, paths) if f.metadata.num_rows), None)
    if parquet is None:
        return "_empty_"
    head = next(parquet.iter_batches(batch_size=rows))
    return markdown_table(head.schema.names, [list(row.values()) for row in head.to_pylist()])


def tables_metadata(warehouse: Warehouse, attempt: Attempt, plan: Plan) -> dict[str, dict[str, object]]:
    """Per table, the metadata of its materialization by a build: its rows in the build (the
    manifests' counts per file; ingest errors from their data files' footers), the splits it holds,
    which of them changed (flattened, or taken over from a build killed before its commit) and which
    were removed, the data files and bytes the changed splits wrote, and a preview."""
    changed = plan.keys("built", "adopt")
    partitions = attempt.snapshot.partitions
    manifests = {key: manifest_of(warehouse, part.generation) or {} for key, part in partitions.items()}
    metadata = {}
    for name in schema.TABLES:
        if name == GENERATION_TABLE:
            rows = {key: pq.read_metadata(warehouse.path(part.generation) / f"{GENERATION_TABLE}.parquet").num_rows
                    for key, part in partitions.items()}
        else:
            rows = {key: sum(entry["rows"].get(name, 0) for entry in manifests[key].get("files", []))
                    for key in partitions}
        written = [warehouse.path(path) for key in changed for path in partitions[key].files(name)]
        metadata[name] = {
            "rows": sum(rows.values()),
            "rows_in_changed_splits": sum(rows[key] for key in changed),
            "splits": len(partitions),
            "splits_changed": ", ".join(changed) or "none",
            "splits_removed": ", ".join(plan.removed) or "none",
            "data_files_written": len(written),
            "bytes_written": sum(path.stat().st_size for path in written),
            "build": attempt.build,
            "preview": dg.MetadataValue.md(_preview(written) if written else "_no split changed_"),
        }
    return metadata
