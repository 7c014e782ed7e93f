"""The nine tables' column descriptions: declared once per column in sql/views/_views.yml (what
`tracehouse sql`'s .schema shows), in the order of pipelines/schema.py, and docs/TABLES.md saying the same."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REPO

from pipelines import catalog, schema


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
