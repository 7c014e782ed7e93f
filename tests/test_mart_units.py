"""Every mart's unit tests (its ``unit_tests`` in sql/marts/_marts.yml): its SQL over a few inline rows
in DuckDB, without a build (pipelines/mart_units.py). A mart without a unit test fails here."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipelines import catalog, mart_units

# Marts whose unit tests are still to write: each fails here (strict) once it has them, so the name goes.
WITHOUT_UNIT_TESTS = {"failure_propagation", "attribution_accuracy", "attribution_op_distance", "attribution_confusion",
                      "attribution_trail_scores", "attribution_agentrx_scores", "attribution_published"}


@pytest.mark.parametrize("mart", [
    pytest.param(name, marks=pytest.mark.xfail(strict=True, reason="no unit test yet"))
    if name in WITHOUT_UNIT_TESTS else name for name in catalog.marts()])
def test_mart_unit_tests(mart: str) -> None:
    tests = catalog.marts()[mart].unit_tests
    assert tests, f"{mart} has no unit test: add unit_tests to its entry in sql/marts/_marts.yml (docs/MARTS.md)"
    failed = [f"{r.name}: {r.message}" for r in mart_units.run_all(mart) if not r.passed]
    assert not failed, "\n".join(failed)


def test_a_broken_mart_fails_its_unit_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """failure_rates counting passed judgements as failed: its unit test fails, naming what differs."""
    sql_dir = tmp_path / "sql"
    shutil.copytree(catalog.SQL_DIR, sql_dir)
    path = sql_dir / "marts" / "failure_rates.sql"
    text = path.read_text()
    assert text.count("filter (where j.score = 0)") == 1
    path.write_text(text.replace("filter (where j.score = 0)", "filter (where j.score is not null)"))
    monkeypatch.setattr(catalog, "SQL_DIR", sql_dir)
    catalog.marts.cache_clear()
    try:
        results = mart_units.run_all("failure_rates")
    finally:
        monkeypatch.undo()
        catalog.marts.cache_clear()
    assert results and not all(r.passed for r in results)
    assert any("no row like" in r.message and "failure_rate" in r.message for r in results if not r.passed)


def test_inputs_leave_out_columns_and_refuse_unknown_ones() -> None:
    from pipelines import schema

    table = mart_units.input_table("graphs", schema.TABLES["graphs"], [{"graph_id": "g1", "system": "rag"}])
    assert table.schema.names == schema.TABLES["graphs"].names
    assert table.to_pylist()[0]["dataset"] is None
    with pytest.raises(mart_units.UnitTestError, match="no column"):
        mart_units.input_table("graphs", schema.TABLES["graphs"], [{"graph_idd": "g1"}])
    with pytest.raises(mart_units.UnitTestError, match="no table, seed or mart"):
        mart_units.run("failure_rates", {"name": "t", "given": {"graphz": [{}]}, "expect": []})
    with pytest.raises(mart_units.UnitTestError, match="no column"):
        mart_units.run("failure_rates", {"name": "t", "given": {"error_types": [{"label": "x"}]}, "expect": []})


def test_a_given_seed_holds_its_rows_instead_of_the_csvs() -> None:
    """A label the seed error_types lacks is a memory error; given as non_memory, it has no memory share."""
    given = {"graphs": [{"graph_id": "g1", "source": "s", "system": "rag", "dataset": "locomo"}],
             "annotations": [{"graph_id": "g1", "annotation_id": "a1", "system": "rag", "error_type": "Flaky",
                              "taxonomy": "memtracebench"}]}
    as_memory = {"error_type": "Flaky", "error_class": "memory", "memory_share": 1.0}
    as_given = {"error_type": "Flaky", "error_class": "non_memory", "memory_share": None}
    assert mart_units.run("failure_modes_by_system", {"name": "csv", "given": given, "expect": [as_memory]}).passed
    result = mart_units.run("failure_modes_by_system", {
        "name": "given", "given": {**given, "error_types": [{"error_type": "Flaky", "error_class": "non_memory"}]},
        "expect": [as_given]})
    assert result.passed, result.message
