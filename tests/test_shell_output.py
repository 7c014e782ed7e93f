"""`tracehouse sql`'s table box, drawn for a given terminal width (pipelines/interfaces/shell_output.py), from
results of a real DuckDB query: whole columns that fit, the first and the last ones first."""

from __future__ import annotations

import io

import duckdb
import pytest

from pipelines.interfaces.shell_output import Result, shown_columns, write_table

SEVEN = ("select range as id, 'r' || range as c1, 'two' as c2, 3 as c3, null as c4, repeat('x', 30) as c5, "
         "'last' as c6 from range(5)")


def table(query: str, width: int | None, max_rows: int = 40) -> str:
    out = io.StringIO()
    with duckdb.connect() as con:
        write_table(out, Result.of(con.execute(query)), max_rows=max_rows, width=width)
    return out.getvalue()


def test_a_wide_result_shows_the_whole_first_and_last_columns_that_fit_and_says_how_many() -> None:
    assert table(SEVEN, 40, max_rows=4) == """\
┌────────┬─────────┬───┬─────────┐
│   id   │   c1    │ … │   c6    │
│ bigint │ varchar │   │ varchar │
├────────┼─────────┼───┼─────────┤
│      0 │ r0      │ … │ last    │
│      1 │ r1      │ … │ last    │
│      … │ …       │ … │ …       │
│      3 │ r3      │ … │ last    │
│      4 │ r4      │ … │ last    │
├────────┴─────────┴───┴─────────┤
│ 5 rows (4 shown)               │
│            7 columns (3 shown) │
└────────────────────────────────┘
"""
    wide = table(SEVEN, 200, max_rows=4)  # all fit: every column, no column count
    assert wide.splitlines()[1] == "│   id   │   c1    │   c2    │   c3    │   c4   │" + " " * 15 + "c5" + " " * 15 + \
        "│   c6    │"
    assert "│      0 │ r0      │ two     │       3 │ NULL   │ " + "x" * 30 + " │ last    │" in wide
    assert "columns" not in wide and table(SEVEN, None, max_rows=4) == wide  # not a terminal: every column


def test_the_footer_shares_a_line_when_there_is_room() -> None:
    query = "select " + ", ".join(f"{i} as column_{i}" for i in range(15))
    assert table(query, 60) == """\
┌──────────┬──────────┬───┬───────────┬───────────┐
│ column_0 │ column_1 │ … │ column_13 │ column_14 │
│ integer  │ integer  │   │  integer  │  integer  │
├──────────┼──────────┼───┼───────────┼───────────┤
│        0 │        1 │ … │        13 │        14 │
├──────────┴──────────┴───┴───────────┴───────────┤
│ 1 row                      15 columns (4 shown) │
└─────────────────────────────────────────────────┘
"""


def test_a_column_wider_than_the_terminal_is_cut_with_an_ellipsis_and_null_shows_as_null() -> None:
    assert table("select repeat('y', 60) as wide, null as n", 24) == """\
┌──────────────────┬───┐
│       wide       │ … │
│     varchar      │   │
├──────────────────┼───┤
│ yyyyyyyyyyyyyyy… │ … │
├──────────────────┴───┤
│ 1 row                │
│  2 columns (1 shown) │
└──────────────────────┘
"""
    assert "│ NULL    │" in table("select null::varchar as n", 80)


@pytest.mark.parametrize(("width", "shown"), [(200, [0, 1, 2, 3, 4, 5, 6]), (40, [0, 1, 6]), (10, [0]),
                                              (34, [0, 1, 6]), (33, [0, 6])])
def test_columns_are_taken_from_either_end_in_turn(width: int, shown: list[int]) -> None:
    assert shown_columns([6, 7, 7, 7, 6, 30, 7], width) == shown


def test_long_text_columns_are_narrowed_before_any_column_is_dropped() -> None:
    described = ("select 'denominator_note' as column, 'VARCHAR' as type, 'NULL when the rate is computed; "
                 "otherwise why it is not, said in a sentence long enough to need a cut' as description, "
                 "123456789012345 as n")
    drawn = table(described, 70)
    assert "columns" not in drawn  # every column shown
    lines = drawn.splitlines()
    assert all(len(line) == 70 for line in lines)
    assert [c.strip() for c in lines[1].split("│")[1:-1]] == ["column", "type", "description", "n"]
    (row,) = [line for line in lines if "denominator_note" in line]
    # the name and the type whole, the number whole (a cut number reads as another), the long text cut
    assert row == "│ denominator_note │ VARCHAR │ NULL when the rate… │ 123456789012345 │"


def test_too_many_columns_for_the_terminal_even_narrowed_are_dropped_and_counted() -> None:
    query = "select " + ", ".join(f"repeat('{chr(97 + i)}', 40) as text_{i}" for i in range(15))
    drawn = table(query, 100)
    header = drawn.splitlines()[1]
    assert [c.strip() for c in header.split("│")[1:-1]] == ["text_0", "text_1", "text_2", "…", "text_12", "text_13",
                                                           "text_14"]
    assert "│ aaaaaaaaaaa… │" in drawn and "15 columns (6 shown)" in drawn
    assert all(len(line) <= 100 for line in drawn.splitlines())
