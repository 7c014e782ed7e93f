"""Every mart's unit tests (its ``unit_tests`` in sql/marts/_marts.yml): its SQL over a few inline rows
in DuckDB, without a build (pipelines/analytics/mart_units.py). A mart without a unit test fails here.

The expected rows are worked out by hand from what each mart means (its description in the YAML,
docs/MARTS.md and docs/ATTRIBUTION.md), never copied from the mart's output."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipelines.analytics import catalog, mart_units


@pytest.mark.parametrize("mart", list(catalog.marts()))
def test_mart_unit_tests(mart: str) -> None:
    tests = catalog.marts()[mart].unit_tests
    assert tests, f"{mart} has no unit test: add unit_tests to its entry in sql/marts/_marts.yml (docs/MARTS.md)"
    failed = [f"{r.name}: {r.message}" for r in mart_units.run_all(mart) if not r.passed]
    assert not failed, "\n".join(failed)


# A real bug written into a mart's SQL (the text it replaces occurs once), and a column its failed unit
# test names: each mart's cases must catch it.
BROKEN_MARTS = [
    pytest.param("failure_rates", "filter (where j.score = 0)", "filter (where j.score is not null)", "failure_rate",
                 id="rates-count-passed-as-failed"),
    pytest.param("failure_propagation", "when qss.ordinal is null or fs.ordinal is null then null",
                 "when false then null", "sessions_between", id="propagation-greatest-skips-null"),
    pytest.param("attribution_accuracy", "same_agent(predicted_agent, responsible_agent)",
                 "predicted_agent = responsible_agent", "agent_correct", id="accuracy-agent-compared-with-case"),
    pytest.param("attribution_op_distance", "min(hops) as hops from walk", "max(hops) as hops from walk", "hops",
                 id="op-distance-longest-path"),
    pytest.param("attribution_confusion", "where graph_kind = 'memory' and error_type", "where error_type",
                 "annotated_error_type", id="confusion-multi-agent-labels"),
    pytest.param("attribution_trail_scores", "semi join trail t using (annotation_id)", "", "location_accuracy",
                 id="trail-scores-other-taxonomies"),
    pytest.param("attribution_agentrx_scores", "order by is_root_cause desc, predicted_step", "order by predicted_step",
                 "step_accuracy", id="agentrx-earliest-over-root-cause"),
    pytest.param("attribution_published", "on p.benchmark = s.benchmark and lower(p.split) = lower(s.split) and "
                 "p.leaderboard_metric = s.metric", "on p.benchmark = s.benchmark and lower(p.split) = lower(s.split)",
                 "n_reported", id="published-any-metric"),
]


@pytest.mark.parametrize(("mart", "old", "new", "column"), BROKEN_MARTS)
def test_a_broken_mart_fails_its_unit_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mart: str, old: str,
                                           new: str, column: str) -> None:
    """The mart's SQL with the bug written in: one of its unit tests fails, naming what differs."""
    sql_dir = tmp_path / "sql"
    shutil.copytree(catalog.SQL_DIR, sql_dir)
    path = sql_dir / "marts" / f"{mart}.sql"
    text = path.read_text()
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))
    monkeypatch.setattr(catalog, "SQL_DIR", sql_dir)
    catalog.marts.cache_clear()
    try:
        results = mart_units.run_all(mart)
    finally:
        monkeypatch.undo()
        catalog.marts.cache_clear()
    failed = [r for r in results if not r.passed]
    assert failed, f"every unit test of {mart} passes with {new!r} for {old!r}"
    assert any(column in r.message for r in failed), [r.message for r in failed]


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
