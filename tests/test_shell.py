"""`tracehouse sql` as a user meets it: the interactive shell through a pseudo-terminal (pexpect), and
scripts, queries and output modes through pipes. Every process is the real command."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest
from conftest import REPO, build_warehouse, query
from smartcomment_graphs import write_memtracebench

CLI = [sys.executable, "-m", "pipelines.interfaces.cli"]
PROMPT = "tracehouse> "
CONTINUATION = "...> "


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shell")
    write_memtracebench(root / "corpus", {"rag": 3, "mem0": 2})
    assert build_warehouse(root / "w", [f"memtracebench={root / 'corpus'}"]).ok
    return root / "w"


def sql(warehouse: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "sql", "--warehouse", str(warehouse), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120, input=stdin)


# -- the interactive shell, through a pseudo-terminal --------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A HOME of its own (the history file goes there) and a neutral readline configuration."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".inputrc").write_text("set enable-bracketed-paste off\nset bell-style none\n")
    return home


def spawn(warehouse: Path, home: Path, *args: str, columns: int = 220):
    # the terminal's own size decides the width, as in a user's terminal: no COLUMNS or LINES (which
    # pytest-xdist's workers have set to 80x24)
    env = {k: v for k, v in os.environ.items() if k not in ("TRACEHOUSE_HISTORY", "COLUMNS", "LINES")}
    env.update(HOME=str(home), INPUTRC=str(home / ".inputrc"), TERM="xterm", GX_ANALYTICS_ENABLED="false")
    child = pexpect.spawn(CLI[0], [*CLI[1:], "sql", "--warehouse", str(warehouse), *args], cwd=str(REPO), env=env,
                          encoding="utf-8", timeout=60, dimensions=(50, columns))
    child.expect_exact(PROMPT)
    return child


def answer(child, statement: str) -> str:
    """Type ``statement``, return what the shell printed up to the next prompt."""
    child.sendline(statement)
    child.expect_exact(PROMPT)
    return child.before


def leave(child) -> int:
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus


def test_up_arrow_recalls_the_previous_statement_in_the_session_and_the_next(warehouse: Path, home: Path) -> None:
    graphs = query(warehouse, "select count(*) from graphs")[0][0]
    statement = "select count(*) * 1000 + 7 as code from graphs;"
    expected = str(graphs * 1000 + 7)

    child = spawn(warehouse, home)
    assert expected in answer(child, statement)
    assert "xy" in answer(child, "select 'x' || 'y' as other;")
    recalled = answer(child, "\x1b[A\x1b[A")  # Up, Up, Enter: the statement before the last runs again
    assert expected in recalled and "xy" not in recalled
    assert "xy" in answer(child, "\x1b[A\x1b[A")  # Up, Up: the one before that now
    assert leave(child) == 0
    assert (home / ".tracehouse_history").read_text().splitlines() == [
        statement, "select 'x' || 'y' as other;", statement, "select 'x' || 'y' as other;"]

    again = spawn(warehouse, home)  # a new session recalls the last one's statements
    recalled = answer(again, "\x1b[A\x1b[A")
    assert expected in recalled and "xy" not in recalled
    assert leave(again) == 0


def test_dot_tables_lists_every_table_mart_and_seed(warehouse: Path, home: Path) -> None:
    from pipelines import schema
    from pipelines.analytics import catalog

    child = spawn(warehouse, home)
    shown = answer(child, ".tables")
    names = set(re.findall(r"│ (\w+) +│ (table|view|mart|seed|build) +│", shown))
    assert names == ({(v, "table" if v in schema.TABLES else "view") for v in catalog.views()}
                     | {(m, "mart") for m in catalog.marts()} | {(s, "seed") for s in catalog.seeds()}
                     | {("tracehouse_build", "build")})
    assert "error:" not in shown.lower()
    assert leave(child) == 0


def test_in_an_ordinary_terminal_schema_and_tables_show_names_types_and_shortened_descriptions(
        warehouse: Path, home: Path) -> None:
    from pipelines.analytics import catalog

    child = spawn(warehouse, home, columns=100)
    schema = answer(child, ".schema failure_rates")
    tables = answer(child, ".tables")
    assert leave(child) == 0
    for shown in (schema, tables):
        assert "columns (" not in shown and "error:" not in shown.lower()
        assert all(len(line.rstrip("\r")) <= 100 for line in shown.splitlines())
    types = dict(query(warehouse, "select column_name, data_type from duckdb_columns() "
                                  "where table_name = 'failure_rates'"))
    rows = re.findall(r"^│ (\w+) +│ (\S+) +│ (.*?) *│\r?$", schema, re.M)
    assert {name: kind for name, kind, _ in rows} == types
    described = catalog.marts()["failure_rates"].columns
    for name, _, description in rows:  # whole where it fits, else its beginning and "…"
        assert description == described[name] or (
            description.endswith("…") and described[name].startswith(description[:-1])), name
    assert any(d.endswith("…") for _, _, d in rows)  # a long one was shortened, not dropped
    listed = dict(re.findall(r"^│ (\w+) +│ (table|view|mart|seed|build) +│ \S", tables, re.M))
    assert listed["failure_rates"] == "mart" and listed["graphs"] == "table"


def test_ctrl_c_clears_the_statement_being_typed(warehouse: Path, home: Path) -> None:
    child = spawn(warehouse, home)
    child.sendline("select 1 +")
    child.expect_exact(CONTINUATION)
    child.sendintr()
    child.expect_exact(PROMPT)
    shown = answer(child, "select 20 + 3 as n;")  # runs alone: "select 1 + select 20 + 3" would not parse
    assert re.search(r"│ +23 │", shown) and "error" not in shown.lower()
    child.sendintr()  # on an empty prompt Ctrl-C does not leave either
    child.expect_exact(PROMPT)
    assert child.isalive()
    assert leave(child) == 0


def test_ctrl_c_stops_a_running_query_and_the_shell_goes_on(warehouse: Path, home: Path) -> None:
    child = spawn(warehouse, home)
    child.sendline("select count(*) from range(1000000000000) a;")
    time.sleep(1.5)
    child.sendintr()
    child.expect_exact("Interrupted")
    child.expect_exact(PROMPT)
    assert re.search(r"│ +31 │", answer(child, "select 30 + 1 as n;"))
    assert leave(child) == 0


def test_a_statement_ends_at_its_semicolon_not_at_one_inside_a_string_or_comment(warehouse: Path, home: Path) -> None:
    child = spawn(warehouse, home)
    for line in ("select 'a;", "b' as s, $$ ; $$ as d -- ;", "/* ; */"):
        child.sendline(line)
        child.expect_exact(CONTINUATION)  # still being typed
    shown = answer(child, ";")
    assert re.search(r"│ a; b +│  ; +│", shown) and "error" not in shown.lower()
    assert leave(child) == 0


def test_a_syntax_error_then_a_good_query(warehouse: Path, home: Path) -> None:
    child = spawn(warehouse, home)
    shown = answer(child, "selec 1;")
    assert "Parser Error" in shown and "Traceback" not in shown
    shown = answer(child, "select 50 + 8 as good;")
    assert re.search(r"│ +58 │", shown) and "error" not in shown.lower()
    assert leave(child) == 0  # the status of the last statement


def test_in_the_shell_each_entry_prints_its_own_json_document(warehouse: Path, home: Path) -> None:
    child = spawn(warehouse, home, "--format", "json")
    both = answer(child, "select 1 as a; select interval 90 minute as b;")
    assert json.loads(both.split("\n", 1)[1]) == [[{"a": 1}], [{"b": "PT1H30M"}]]  # after the echoed line
    alone = answer(child, "select 2 as c;")
    assert json.loads(alone.split("\n", 1)[1]) == [{"c": 2}]
    assert leave(child) == 0


def test_tab_completes_tables_and_dot_commands(warehouse: Path, home: Path) -> None:
    files = query(warehouse, "select count(*) from input_files")[0][0]  # ingest_err: also ingest_error_kinds
    child = spawn(warehouse, home)
    child.send("select count(*) + 400 as n from input_fi")
    child.send("\t")
    child.expect_exact("input_files")
    child.send(";\r")
    child.expect(r"│ +(\d+) │")
    assert int(child.match.group(1)) == files + 400
    child.expect_exact(PROMPT)
    child.send(".sch\t")  # .schema, then the mart's name
    time.sleep(0.3)
    child.send("failure_ra\t")
    time.sleep(0.3)
    shown = answer(child, "")
    assert "ci_low" in shown and "Wilson" in shown and "error:" not in shown
    assert leave(child) == 0


# -- scripts on a pipe and queries as arguments ---------------------------------------------------------------


def test_a_script_stops_at_its_first_error_with_status_1_and_no_prompt(warehouse: Path) -> None:
    script = "select 40 + 2 as first;\n.mode json\nselect 'b' as second;\nselec 3;\nselect 4 as never;\n"
    done = sql(warehouse, "--format", "csv", stdin=script)
    assert done.returncode == 1
    assert done.stdout.splitlines() == ["first", "42", '[{"second":"b"}]']
    assert "error: line 4: Parser Error" in done.stderr and "Traceback" not in done.stderr
    assert "tracehouse>" not in done.stdout + done.stderr and "...>" not in done.stdout + done.stderr
    assert "build" not in done.stdout  # no banner

    ok = sql(warehouse, "--format", "csv", stdin="select 1 as a; select 2 as b\n;\nselect\n 3 as c\n")
    assert ok.returncode == 0 and ok.stdout.splitlines() == ["a", "1", "b", "2", "c", "3"] and ok.stderr == ""


def test_a_query_argument_runs_every_statement_and_dot_command(warehouse: Path) -> None:
    graphs = query(warehouse, "select count(*) from graphs")[0][0]
    done = sql(warehouse, "--format", "csv", "select count(*) as n from graphs; select 'a;b' as s; -- ;\n.mode json\n"
               "select $$x;y$$ as d, /* ; /* ; */ */ 1 as e")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["n", str(graphs), "s", "a;b", '[{"d":"x;y","e":1}]']
    assert sql(warehouse, ".nope").returncode == 1
    assert sql(warehouse, "select 1; .tables").returncode == 1  # a dot-command only starts a line
    # a ';' in a comment ends nothing: the next line continues the statement, and is no dot-command
    continued = sql(warehouse, "--format", "csv", "select 1 as one -- ;\n.mode json")  # DuckDB reads `one.mode`
    assert continued.returncode == 1 and continued.stdout == "" and "error: line 1: " in continued.stderr


def strict_json(text: str) -> list:
    """Every JSON array in ``text``; NaN or Infinity tokens are an error, as in any strict parser."""
    def refuse(token: str) -> None:
        raise AssertionError(f"{token} is not JSON")

    decoder, found, at = json.JSONDecoder(parse_constant=refuse), [], 0
    while at < len(text.rstrip()):
        value, at = decoder.raw_decode(text, at)
        found.append(value)
        while at < len(text) and text[at].isspace():
            at += 1
    return found


def test_json_output_is_valid_json(warehouse: Path) -> None:
    done = sql(warehouse, "--format", "json",
               "select 'nan'::double as x, 'inf'::double as y, '-inf'::double as z, {'a': 1, 'b': [true, null]}::json"
               " as j, date '2024-02-29' as d, timestamp '2024-02-29 10:30:00' as t, 12.50::decimal(6, 2) as m,"
               " [1, null] as l, {'k': 'v', 'n': ['1', '2']::json[]} as s, null as nothing, '' as empty;"
               " select graph_id from graphs order by graph_id")
    assert done.returncode == 0, done.stderr
    (document,) = strict_json(done.stdout)  # one document: an array of the two results
    first, second = document
    assert first == [{"x": None, "y": None, "z": None, "j": {"a": 1, "b": [True, None]}, "d": "2024-02-29",
                      "t": "2024-02-29T10:30:00", "m": 12.5, "l": [1, None], "s": {"k": "v", "n": [1, 2]},
                      "nothing": None, "empty": ""}]
    assert second == [{"graph_id": g} for (g,) in query(warehouse, "select graph_id from graphs order by graph_id")]
    assert strict_json(sql(warehouse, "--format", "json", "select 1 where false").stdout) == [[]]


def table_rows(text: str) -> list[list[str]]:
    """The cells of the data rows of a table box (after the names and types)."""
    body = text.split("├", 1)[1]
    return [[c.strip() for c in line.strip("│").split("│")] for line in body.splitlines()
            if line.startswith("│") and "rows" not in line and "row " not in line[:8]]


def test_a_table_shows_the_first_and_last_rows_and_a_footer(warehouse: Path) -> None:
    done = sql(warehouse, "select range as n, range * 2 as twice from range(1000)")
    assert done.returncode == 0, done.stderr
    rows = table_rows(done.stdout)
    assert rows[20] == ["…", "…"]
    assert [int(r[0]) for r in rows[:20] + rows[21:]] == list(range(20)) + list(range(980, 1000))
    assert all(int(r[1]) == 2 * int(r[0]) for r in rows if r[0] != "…")
    assert "│ 1000 rows (40 shown)" in done.stdout

    few = sql(warehouse, "--max-rows", "10", "select * from range(1000)").stdout
    assert [r[0] for r in table_rows(few)] == ["0", "1", "2", "3", "4", "…", "995", "996", "997", "998", "999"]
    every = sql(warehouse, "--max-rows", "0", "select * from range(1000)").stdout
    assert [int(r[0]) for r in table_rows(every)] == list(range(1000)) and "│ 1000 rows " in every
    assert "shown" not in every
    assert sql(warehouse, "--format", "csv", "select * from range(1000)").stdout.splitlines() == [
        "range", *map(str, range(1000))]
    assert sql(warehouse, "--format", "markdown", "select * from range(1000)").stdout.count("\n") == 1002


def test_null_and_the_empty_string_are_told_apart(warehouse: Path) -> None:
    statement = "select null as a, '' as b, 'NULL' as c, 'x, \"y\"' as d"
    table = sql(warehouse, statement).stdout
    assert table_rows(table) == [["NULL", "", "NULL", 'x, "y"']]  # as DuckDB: a NULL string looks the same
    assert sql(warehouse, "--format", "csv", statement).stdout.splitlines() == ["a,b,c,d", ',"",NULL,"x, ""y"""']
    assert json.loads(sql(warehouse, "--format", "json", statement).stdout) == [
        {"a": None, "b": "", "c": "NULL", "d": 'x, "y"'}]
    assert sql(warehouse, "--format", "markdown", statement).stdout.splitlines()[2] == '| NULL |  | NULL | x, "y" |'


def test_long_values_are_cut_with_an_ellipsis_and_every_type_is_shown(warehouse: Path) -> None:
    done = sql(warehouse, "select repeat('x', 200) as long, 'a' || chr(10) || 'b' as two_lines")
    assert table_rows(done.stdout) == [["x" * 79 + "…", "a b"]]
    exotic = ("select 'a\\x00b'::blob as b, interval 3 day as i, '5f4c2e7a-4f3b-4a86-9b3b-8a5d2d1f0c11'::uuid as u,"
              " time '10:00' as t, map {1: 'one'} as m, [1, 2]::integer[2] as arr,"
              " union_value(n := 2)::union(n integer, s varchar) as un, 1e300 * 10 as big")
    for mode in ("table", "csv", "json", "markdown"):
        done = sql(warehouse, "--format", mode, exotic)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (mode, done.stderr)
    (row,) = json.loads(sql(warehouse, "--format", "json", exotic).stdout)
    assert row["u"] == "5f4c2e7a-4f3b-4a86-9b3b-8a5d2d1f0c11" and row["m"] == {"1": "one"} and row["arr"] == [1, 2]
    assert row["un"] == 2 and row["t"] == "10:00:00" and row["big"] == 1e301 and row["i"] == "P3D"
    assert table_rows(sql(warehouse, exotic).stdout)[0][1] == "3 days"


def test_json_of_a_script_is_one_document_with_its_results_in_order(warehouse: Path) -> None:
    done = sql(warehouse, "--format", "json", "select 1 as a; select interval 3 day as b")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[{"a": 1}], [{"b": "P3D"}]]
    # one result (whatever else the script does): its rows, as a single query gives them
    alone = sql(warehouse, "--format", "json", "set threads = 1; create temp table t as select 2 as c;\n"
                "select c from t; reset threads")
    assert alone.returncode == 0 and json.loads(alone.stdout) == [{"c": 2}], alone.stderr
    assert sql(warehouse, "--format", "json", "set threads = 1").stdout == ""  # no result: no document
    # a script on standard input, dot-commands included; .mode in between: what is no JSON ends a document
    piped = sql(warehouse, "--format", "json", stdin=".tables graphs\nselect 3 as d;\n.mode csv\nselect 4 as e;\n"
                ".mode json\nselect 5 as f;\n")
    assert piped.returncode == 0, piped.stderr
    tables, _, rest = piped.stdout.partition("\ne\n4\n")
    assert json.loads(tables) == [[{"name": "graphs", "kind": "table", "description": ANY_TEXT}], [{"d": 3}]]
    assert json.loads(rest) == [{"f": 5}]
    # an error ends the script: the results before it are still one document, the error on stderr
    failed = sql(warehouse, "--format", "json", "select 6 as g; select 7 as h; select 'x'::integer; select 8")
    assert failed.returncode == 1 and "Conversion Error" in failed.stderr
    assert json.loads(failed.stdout) == [[{"g": 6}], [{"h": 7}]]
    # an error part way through a result's rows: the rows before it, the array closed
    cut = sql(warehouse, "--format", "json", "select 1 as i; select case when range < 3000 then range::varchar "
              "else error('stop') end as r from range(5000)")
    assert cut.returncode == 1 and "stop" in cut.stderr
    first, rows = json.loads(cut.stdout)
    assert first == [{"i": 1}] and rows == [{"r": str(n)} for n in range(len(rows))] and len(rows) < 5000


class _AnyText:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and bool(other)


ANY_TEXT = _AnyText()


def test_intervals_are_iso_8601_durations_in_json_and_duckdb_text_elsewhere(warehouse: Path) -> None:
    import pandas as pd

    values = ["3 days", "1 day", "90 minutes", "1 day 1 hour", "-1 hour", "1500 milliseconds", "0 seconds",
              "1 microsecond", "-1 day -1 hour", "2 days 0.25 seconds", "1 month 2 days"]
    statement = ("select i, epoch(i) as seconds, i::varchar as duckdb from "
                 "(select unnest([" + ", ".join(f"interval '{v}'" for v in values) + "]) as i)")
    done = sql(warehouse, "--format", "json", statement)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [r["i"] for r in rows][:4] == ["P3D", "P1D", "PT1H30M", "P1DT1H"]
    for row in rows:  # an independent ISO 8601 reader agrees with DuckDB on the length of each
        assert re.fullmatch(r"-?P(\d+D)?(T(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?", row["i"]), row
        assert pd.Timedelta(row["i"]).total_seconds() == pytest.approx(row["seconds"], abs=1e-9), row
    # table, csv and markdown: DuckDB's own text (a month as 30 days, as DuckDB hands it to Python)
    csv_rows = [line.split(",") for line in sql(warehouse, "--format", "csv", statement).stdout.splitlines()[1:]]
    assert [r[0] for r in csv_rows[:-1]] == [r[2] for r in csv_rows[:-1]]
    assert csv_rows[-1][0] == "32 days" and csv_rows[-1][2] == "1 month 2 days"
    assert [r[0] for r in table_rows(sql(warehouse, statement).stdout)] == [r[0] for r in csv_rows]


def test_read_only_unless_write_and_writes_go_to_scratch(warehouse: Path, tmp_path: Path) -> None:
    mine = tmp_path / "w"
    shutil.copytree(warehouse, mine, symlinks=True)
    refused = sql(mine, "create table mine as select 1 as a")
    assert refused.returncode == 1 and "--write" in refused.stderr and "Traceback" not in refused.stderr
    assert sql(mine, "create temporary table t as select 1 as a; select a from t", "--format", "csv").stdout == "a\n1\n"
    made = sql(mine, "--write", "create table mine as select system, count(*) as n from graphs group by all;"
               " insert into mine values ('extra', 1)")
    assert made.returncode == 0 and made.stdout == "", made.stderr  # no 'Count' result, as DuckDB's CLI
    expected = sorted(query(warehouse, "select system, count(*) from graphs group by all") + [("extra", 1)])
    read = sql(mine, "--format", "csv", "select * from scratch.mine order by all")
    assert read.stdout.splitlines() == ["system,n", *(f"{s},{n}" for s, n in expected)]
    assert "scratch.mine,scratch," in sql(mine, "--format", "csv", ".tables").stdout


def test_dot_schema_and_macros_come_from_the_catalog(warehouse: Path) -> None:
    from pipelines.analytics import catalog

    rates = catalog.marts()["failure_rates"]
    schema = sql(warehouse, "--format", "json", ".schema failure_rates")
    assert json.loads(schema.stdout) == [{"column": c, "type": t, "description": rates.columns.get(c)}
                                         for c, t in query(warehouse, "select column_name, data_type from "
                                                           "duckdb_columns() where table_name = 'failure_rates' "
                                                           "order by column_index")]
    macros = json.loads(sql(warehouse, "--format", "json", ".macros").stdout)
    assert {m["macro"] for m in macros} >= {e.get("signature") for e in catalog.macros().values()}
    missing = sql(warehouse, ".schema no_such_table")
    assert missing.returncode == 1 and "no table or view named no_such_table" in missing.stderr


def test_dot_schema_of_a_table_shows_each_columns_type_and_description(warehouse: Path) -> None:
    from pipelines import schema
    from pipelines.analytics import catalog

    shown = json.loads(sql(warehouse, "--format", "json", ".schema annotations").stdout)
    described = catalog.views()["annotations"]["columns"]
    assert [c["column"] for c in shown] == schema.ANNOTATIONS.names
    assert {c["column"]: c["description"] for c in shown} == described
    assert {c["column"]: c["type"] for c in shown}["golden_answers"] == "VARCHAR[]"
    assert described["faulty_op_id"].startswith("the decisive faulty operation")
    table = sql(warehouse, ".schema annotations").stdout
    assert re.search(r"│ faulty_op_id +│ VARCHAR +│ the decisive faulty operation", table)


def test_help_says_what_to_query() -> None:
    from pipelines.analytics import catalog

    done = subprocess.run([*CLI, "sql", "--help"], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0 and done.stderr == ""
    text = done.stdout
    assert "Run SQL (DuckDB) over the last committed build" in text and "examples:" in text
    assert 'tracehouse sql "select' in text
    listed = dict(re.findall(r"^  ([a-z_]+(?:\([^)]*\))?) {2,}(\S.*)$", text, re.M))
    for name, entry in catalog.views().items():
        assert listed[name] and entry["description"].startswith(listed[name].rstrip("…")), name
    for name, mart in catalog.marts().items():
        assert mart.description.startswith(listed[name].rstrip("…")), name
    for name in catalog.seeds():
        assert name in listed
    for entry in catalog.macros().values():
        assert entry["description"].startswith(listed[entry["signature"]].rstrip("…")), entry["name"]


# -- the parts, without a process ----------------------------------------------------------------------------


def test_completion_offers_tables_columns_macros_keywords_and_dot_commands(warehouse: Path) -> None:
    from pipelines.analytics import db
    from pipelines.interfaces.shell import Shell
    from pipelines.storage.warehouse import Warehouse

    con = db.connect(Warehouse(warehouse))
    try:
        shell = Shell(con)
        assert "failure_rates" in shell.complete("failure_ra", "select * from ")
        assert "ci_low" in shell.complete("ci_l", "select ")  # a mart's column
        assert "full_node_id" in shell.complete("full_no", "select ")  # a table's column
        assert "upstream" in shell.complete("upstr", "select * from ")  # a macro
        assert "SELECT" in shell.complete("SELE", "")  # keywords in the case typed
        assert shell.complete("sch", ".") == ["schema"]
        assert shell.complete("failure_ra", ".schema ") == ["failure_rates"]
        assert shell.complete("", ".mode ") == ["table", "csv", "json", "markdown"]
        assert shell.run_sql("create temporary table zz_mine (a integer);", 1)
        assert shell.complete("zz_m", "select * from ") == ["zz_mine"]  # names made in the session too
    finally:
        con.close()


@pytest.mark.parametrize(
    ("lines", "units"),
    [
        (["select 1;"], [("sql", "select 1;")]),
        (["select 1; select", "2;"], [("sql", "select 1;"), ("sql", " select\n2;")]),
        (["select 'a;", "b';"], [("sql", "select 'a;\nb';")]),
        (["select E'\\';' ;"], [("sql", "select E'\\';' ;")]),
        (['select 1 as "x;y";'], [("sql", 'select 1 as "x;y";')]),
        (["select $t$ ; $t$, $$;$$;"], [("sql", "select $t$ ; $t$, $$;$$;")]),
        (["select /* ; /* ; */ ; */ 1;"], [("sql", "select /* ; /* ; */ ; */ 1;")]),
        (["select 1 -- ;", ";"], [("sql", "select 1 -- ;\n;")]),
        (["  .tables  ", "select 1", ".5;"], [("dot", ".tables"), ("sql", "select 1\n.5;")]),
        (["-- a comment", ".mode csv"], [("dot", ".mode csv")]),
        (["select 'x", ".tables';"], [("sql", "select 'x\n.tables';")]),
        (["select 1"], [("sql", "select 1\n")]),
        (["-- only a comment"], []),
        (["select '漢;字' as k; select 2;"], [("sql", "select '漢;字' as k; select 2;")]),  # DuckDB counts bytes
        (["select $$ a;", "b $$;"], [("sql", "select $$ a;\nb $$;")]),
        (["select /* ;", " ; */ 1;"], [("sql", "select /* ;\n ; */ 1;")]),
        (["select 1 from;"], [("sql", "select 1 from;")]),  # a wrong statement ends too: DuckDB says why
    ],
)
def test_statements_end_at_a_semicolon_outside_strings_and_comments(lines: list[str], units: list) -> None:
    from pipelines.interfaces.shell import Splitter

    splitter = Splitter()
    found = [u for line in lines for u in splitter.feed(line)] + splitter.finish()
    assert [(u.kind, u.text.rstrip("\n") if u.kind == "sql" else u.text) for u in found] == [
        (k, t.rstrip("\n")) for k, t in units]


@pytest.mark.parametrize("typed", ["select 'a;", "select \"x;", "select /* ;", "select $$ ;", "select 1 -- ;",
                                   "select $t$ ; $$ ;"])
def test_a_statement_still_being_typed_is_not_run(typed: str) -> None:
    import duckdb

    from pipelines.interfaces.shell import Splitter, statements_end

    splitter = Splitter()
    assert splitter.feed(typed) == [] and splitter.pending  # the prompt continues
    assert statements_end(typed) is None
    with pytest.raises(duckdb.ParserException):  # why the tokenizer, not extract_statements, tells
        duckdb.extract_statements("select 1 from ;")
    assert statements_end("select 1 from ;") == len("select 1 from ;")
    splitter.reset()
    assert not splitter.pending and [u.text for u in splitter.feed(".tables")] == [".tables"]


def test_the_history_file_keeps_multi_line_statements_and_other_sessions_entries(tmp_path: Path) -> None:
    from pipelines.interfaces.shell import HISTORY_LENGTH, load_history, save_history

    path = tmp_path / "history"
    save_history(path, ["select 1;", "select\n 'a\\b';"])
    save_history(path, [".tables"])  # a second session adds, it does not overwrite
    assert load_history(path) == ["select 1;", "select\n 'a\\b';", ".tables"]
    assert path.stat().st_mode & 0o077 == 0
    save_history(path, [f"select {i};" for i in range(HISTORY_LENGTH)])
    assert len(load_history(path)) == HISTORY_LENGTH and load_history(path)[-1] == f"select {HISTORY_LENGTH - 1};"
