"""The nine tables' column descriptions: declared once per column in sql/views/_views.yml (what
`tracehouse sql`'s .schema shows), in the order of pipelines/schema.py, and docs/TABLES.md saying the same."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REPO

from pipelines import schema
from pipelines.analytics import catalog


def documented_columns(text: str) -> dict[str, list[tuple[str, str]]]:
    """(column, meaning) of each table section of docs/TABLES.md ("## name — ..."); a row naming
    several columns ("source, split, file") gives each of them the row's meaning."""
    found: dict[str, list[tuple[str, str]]] = {}
    table = None
    for line in text.splitlines():
        if line.startswith("## "):
            heading = re.match(r"## (\w+) — ", line)
            table = heading.group(1) if heading else None
            if table:
                found[table] = []
            continue
        row = re.match(r"\| (.+?) \| (.+?) \| (.+) \|$", line)
        if table and row and row.group(1) != "column" and not row.group(1).startswith("---"):
            found[table] += [(column, row.group(3)) for column in row.group(1).split(", ")]
    return found


def test_every_column_of_every_table_has_one_description_in_views_yml() -> None:
    views = catalog.views()
    for table, table_schema in schema.TABLES.items():
        described = views[table]["columns"]
        assert list(described) == table_schema.names, table  # each column once, in the schema's order
        assert all(text.strip() for text in described.values()), table
    assert {name for name, view in views.items() if view["columns"]} == set(schema.TABLES)


def test_docs_tables_md_says_what_views_yml_says() -> None:
    documented = documented_columns((REPO / "docs" / "TABLES.md").read_text())
    assert set(documented) == set(schema.TABLES)
    for table in schema.TABLES:
        assert documented[table] == list(catalog.views()[table]["columns"].items()), table


def test_a_column_declared_twice_or_without_a_description_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "_views.yml"
    for columns, reason in (([{"name": "a", "description": "x"}, {"name": "a", "description": "y"}], "twice"),
                            ([{"name": "a", "description": " "}], "empty"),
                            ([{"name": "a"}], "needs a name and a description")):
        with pytest.raises(catalog.CatalogError, match=reason):
            catalog.view_columns(path, {"name": "t", "columns": columns})


def test_keys_and_relationships_come_from_views_yml() -> None:
    declared = {e["name"]: e for e in catalog.read_yaml(schema.VIEWS_DECLARATION)["views"]}
    assert {t: tuple(e["primary_key"]) for t, e in declared.items() if "primary_key" in e} == schema.PRIMARY_KEYS
    assert set(schema.PRIMARY_KEYS) == set(schema.PARTITION_TABLES)  # ingest_errors has no key
    assert {(r.table, r.name, r.to) for r in schema.RELATIONSHIPS} == {
        *((t, "unknown_graph", "graphs") for t in ("sessions", "nodes", "edges", "operations", "annotations",
                                                   "attribution_scope")),
        *((t, "unknown_session", "sessions") for t in ("nodes", "edges", "operations")),
        ("edges", "unknown_operation", "operations"), ("edges", "unknown_source_node", "nodes"),
        ("edges", "unknown_target_node", "nodes"), ("annotations", "unknown_faulty_op", "operations"),
        ("annotations", "unknown_query_node", "nodes"), ("attributions", "unknown_annotation", "annotations")}
    assert {r.unlisted for r in schema.RELATIONSHIPS if r.to == "sessions"} == {(schema.NONE_SESSION,)}
    assert all(t.defined_in == "sql/views/_views.yml" for t in catalog.table_tests()
               if t.name == "duplicate_keys" or t.name.startswith("unknown_"))
