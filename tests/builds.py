"""What tests of builds share: a change to one source file of a corpus, and every table and mart of a
warehouse as `tracehouse sql` reads it, comparable across builds, storages and Iceberg."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from pipelines import schema
from pipelines.analytics import db
from pipelines.storage.warehouse import Warehouse


def add_node(corpus: Path, system: str, name: str) -> None:
    """One changed source file: a graph of ``system`` gains a node."""
    path = sorted((corpus / system).glob("*.json"))[0]
    graph = json.loads(path.read_text())
    node = dict(graph["data"]["nodes"][0], name=name, full_name=name, node_id=f"{name}@1", full_node_id=f"{name}@1")
    graph["data"]["nodes"].append(node)
    path.write_text(json.dumps(graph))


def rows(table: pa.Table) -> list[str]:
    """A table's rows, comparable whatever their order and Arrow types (NaN equals NaN)."""
    return sorted(repr(tuple(row.values())) for row in table.to_pylist())


def warehouse_rows(warehouse: Path, build: int | None = None) -> dict[str, list[str]]:
    """Every table and mart as `tracehouse sql` reads it (the latest committed build, or ``build``)."""
    con = db.connect(Warehouse(warehouse), build=build)
    try:
        names = [*schema.TABLES, *db.mart_names()]
        return {name: rows(con.sql(f"select * from {name}").to_arrow_table()) for name in names}
    finally:
        con.close()
