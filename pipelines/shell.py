"""``tracehouse sql``: a SQL shell over the last committed build, with the DuckDB CLI's habits.

One :class:`Shell` runs every input the same way: a query given as an argument, a script on
standard input and the interactive prompt all go through :class:`Splitter`, which cuts lines into
statements (at a ``;`` outside quotes and comments, as DuckDB's own parser does) and into
dot-commands (a line starting with ``.`` at the start of a statement; never sent to DuckDB). Each
statement's result is shown, in order, in the current mode:

- ``table``: a box like DuckDB's, NULL shown as NULL, values cut at :data:`MAX_WIDTH` (and to the
  terminal's width) ending with "…", at most ``--max-rows`` rows (the first and the last, a "…" row
  between, and the footer "N rows (M shown)");
- ``csv``: every row; NULL an empty field, '' a quoted empty field ``""``;
- ``json``: every row, one JSON document per invocation (:class:`JsonDocument`): a result's rows are
  an array of objects, and a script of several results gives an array of those arrays. NaN and
  ±Infinity are null, JSON columns JSON values, dates, times and timestamps ISO 8601 text, intervals
  ISO 8601 durations, decimals numbers with all their digits, lists and structs arrays and objects;
- ``markdown``: every row, a GitHub table.

Table, csv and markdown show values as DuckDB's CLI does (an interval as ``1 day 01:30:00``, a
month in it as 30 days: DuckDB's Python client hands intervals over as ``timedelta``).

Interactively: GNU readline line editing, a history that survives the session
(``~/.tracehouse_history``, or ``$TRACEHOUSE_HISTORY``; one entry per statement, written on exit),
Tab completion of tables, views, columns, macros, functions, keywords and dot-commands, Ctrl-C
clears the statement being typed (or stops the running one) and Ctrl-D leaves. On a pipe: no
prompt, no banner, and the first error ends the script with exit status 1.

Nothing here imports DuckDB or the catalog at import time: ``pipelines.cli`` builds its parser
(and the help text of ``tracehouse sql``) from this module for every command.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import sys
import tempfile
import threading
import unicodedata
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, TextIO

from pipelines.text import ELLIPSIS, NULL

MODES = ("table", "csv", "json", "markdown")
MODE_ALIASES = {"duckbox": "table", "box": "table", "md": "markdown"}
DEFAULT_MAX_ROWS = 40  # rows a table shows (0: all), as DuckDB's CLI does
MAX_WIDTH = 80  # display width of one value in table mode
MIN_WIDTH = 6  # a column squeezed to fit the terminal keeps at least this width
FETCH_ROWS = 2048
PROMPT = "tracehouse> "
CONTINUATION = "       ...> "
HISTORY_FILE = "~/.tracehouse_history"
HISTORY_ENV = "TRACEHOUSE_HISTORY"
HISTORY_LENGTH = 2000
READ_ONLY = ("tracehouse sql is read-only; with --write, statements that create or change tables run in the "
             "warehouse's scratch catalog (scratch.duckdb), which builds keep")

DOT_COMMANDS = {
    "tables": ("[PATTERN]", "the tables, views, marts and seeds you can query (PATTERN: a LIKE pattern)"),
    "schema": ("[TABLE]", "the columns of TABLE (or of every table), their types and descriptions"),
    "macros": ("", "the macros of the warehouse: signature, what they return, description"),
    "mode": ("[MODE]", "show or set the output mode: " + ", ".join(MODES)),
    "maxrows": ("[N]", "show or set how many rows a table shows (0: all; csv, json and markdown show all)"),
    "help": ("", "this list"),
    "quit": ("", "leave the shell (also .exit, Ctrl-D)"),
    "exit": ("", "leave the shell"),
}

# -- command line ----------------------------------------------------------------------------------------

HELP = "run SQL over the warehouse (read-only unless --write); no query: an interactive shell"
DESCRIPTION = """\
Run SQL (DuckDB) over the last committed build of the warehouse: its tables, marts, seeds and macros.

With QUERY, run each of its statements and show each result, in order. Without it, read statements
from standard input: on a terminal, an interactive shell like DuckDB's (line editing, Up/Down recall
past statements, kept in ~/.tracehouse_history or $TRACEHOUSE_HISTORY; Tab completes names;
Ctrl-C clears the statement, Ctrl-D leaves); on a pipe, a script (no prompt; the first error stops
it with exit status 1).
A line that starts with '.' at the start of a statement is a dot-command, not SQL (.help lists them).

Read-only: statements that create or change tables are refused unless --write, which sends them to
the warehouse's scratch catalog (scratch.duckdb), kept by every build.

Output formats (--format, or .mode):
  table     a box like DuckDB's, at most --max-rows rows
  csv       every row, a header line per result; NULL is an empty field, '' is ""
  markdown  every row, a GitHub table per result
  json      one JSON document per invocation: the rows of a result are an array of objects,
            [{"a":1}]; a script whose statements give several results prints an array of those
            arrays, one per result in order, [[{"a":1}],[{"b":2}]] (statements without a result,
            such as SET, add none; no result at all prints nothing). Dates, times and timestamps
            are ISO 8601 text ("2024-02-29T10:30:00"), intervals ISO 8601 durations ("P3D",
            "PT1H30M"; a month counts 30 days, as DuckDB hands intervals to Python), decimals JSON
            numbers with all their digits (12.50), NaN and Infinity null, JSON columns JSON values.
            After an error the document holds the results before it, the failing one cut where it
            failed. (In the interactive shell, each entry prints its own document.)
Table, csv and markdown show intervals as DuckDB does (1 day 01:30:00; a month as 30 days)."""

EXAMPLES = """\
examples:
  tracehouse sql "select system, error_type, n from failure_modes_by_system order by system, n desc"
  tracehouse sql --format json "select * from failure_rates" > rates.json
  tracehouse sql --max-rows 0 "select graph_id, system, n_nodes from graphs order by n_nodes desc"
  tracehouse sql < report.sql            # each statement's result, in order; exit 1 at the first error
  echo .tables | tracehouse sql          # dot-commands work in scripts and as QUERY too
  tracehouse sql                         # the interactive shell

exit status: 0 ok, 1 an error (named on standard error; a script stops there), 2 usage error (a bad
option or tracehouse.toml), 130 interrupted (Ctrl-C while QUERY or a script runs)"""

CATALOG_EPILOG = "\x00tracehouse-sql-catalog\x00"  # replaced by :func:`help_epilog` when help is printed


def max_rows_arg(text: str) -> int:
    """``--max-rows``: a whole number, 0 meaning every row."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (every row) or more, got {value}")
    return value


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Lists the catalog (read from sql/ only when the help is printed, not for every command)."""

    def add_text(self, text: str | None) -> None:
        if text == CATALOG_EPILOG:
            text = help_epilog(shutil.get_terminal_size().columns - 2)
        super().add_text(text)


def _entries(title: str, entries: list[tuple[str, str]], width: int) -> list[str]:
    if not entries:
        return []
    column = min(max(len(name) for name, _ in entries), 30)
    lines = [title]
    for name, description in entries:
        head = f"  {name.ljust(column)}  "
        lines.append(head + one_line(description, max(20, width - len(head))))
    return lines + [""]


def help_epilog(width: int = 100) -> str:
    """The examples, the dot-commands and the catalog: every table, mart, seed and macro with a
    one-line description (from sql/*/_*.yml through pipelines.catalog)."""
    lines = [EXAMPLES, "", "dot-commands (at the start of a statement; never sent to DuckDB):"]
    lines += [f"  .{name} {args}".rstrip().ljust(20) + f"  {one_line(text, max(20, width - 22))}"
              for name, (args, text) in DOT_COMMANDS.items() if name != "exit"]
    lines.append("")
    try:
        from pipelines import catalog, schema

        views = catalog.views()
        lines += _entries("tables (one view each over the files of the last committed build):",
                          [(n, e["description"]) for n, e in views.items() if n in schema.TABLES], width)
        lines += _entries("views:", [(n, e["description"]) for n, e in views.items() if n not in schema.TABLES],
                          width)
        lines += _entries("marts (computed by every build; columns: .schema MART):",
                          [(n, m.description) for n, m in catalog.marts().items()], width)
        lines += _entries("seeds (reference tables of sql/seeds):",
                          [(n, e["description"]) for n, e in catalog.seeds().items()], width)
        lines += _entries("macros (call them in SQL):",
                          [(e.get("signature") or n, e["description"]) for n, e in catalog.macros().items()],
                          width)
    except Exception as exc:  # a broken declaration must not break --help
        lines += [f"(the catalog of sql/ could not be read: {exc})", ""]
    lines.append("also: tracehouse_build (the build you are reading), scratch.<table> (your own tables, --write)")
    return "\n".join(lines)


# -- values as text ----------------------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ud800-\udfff]")
_LINE_BREAKS = re.compile(r"\r\n|[\t\n\r]")


def to_text(value: Any) -> str:
    """A value as DuckDB's CLI shows it (NULL inside lists and structs; None at the top is the
    caller's business)."""
    if value is None:
        return NULL
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return interval_text(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return "".join(chr(b) if 32 <= b < 127 and b != 92 else f"\\x{b:02X}" for b in bytes(value))
    if isinstance(value, dict):
        return "{" + ", ".join(f"'{to_text(k)}': {to_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(to_text(v) for v in value) + "]"
    return str(value)


def _interval_parts(value: timedelta) -> tuple[str, int, int, int, int, int]:
    """(sign, days, hours, minutes, seconds, microseconds) of an interval as DuckDB's Python client
    gives it (a timedelta: a month is 30 days there), the parts all of the same sign."""
    micros = value // timedelta(microseconds=1)
    sign = "-" if micros < 0 else ""
    days, micros = divmod(abs(micros), 86_400_000_000)
    seconds, micros = divmod(micros, 1_000_000)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    return sign, days, hours, minutes, seconds, micros


def interval_text(value: timedelta) -> str:
    """An interval as DuckDB's CLI writes one: ``3 days``, ``01:30:00``, ``-1 day -01:00:00.5``."""
    sign, days, hours, minutes, seconds, micros = _interval_parts(value)
    parts = [f"{sign}{days} day{'' if days == 1 else 's'}"] if days else []
    if hours or minutes or seconds or micros:
        fraction = f".{micros:06d}".rstrip("0") if micros else ""
        parts.append(f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}{fraction}")
    return " ".join(parts) or "00:00:00"


def iso_duration(value: timedelta) -> str:
    """An interval as an ISO 8601 duration: ``P3D``, ``PT1H30M``, ``-P1DT0.5S``, ``PT0S``."""
    sign, days, hours, minutes, seconds, micros = _interval_parts(value)
    clock = (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "")
    if seconds or micros:
        clock += f"{seconds}.{micros:06d}".rstrip("0") + "S" if micros else f"{seconds}S"
    if not days and not clock:
        return "PT0S"
    return f"{sign}P" + (f"{days}D" if days else "") + (f"T{clock}" if clock else "")


def _char_width(char: str) -> int:
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def display_width(text: str) -> int:
    """Columns ``text`` takes on a terminal (wide East Asian characters count two)."""
    if text.isascii():
        return len(text)
    return sum(_char_width(c) for c in text)


def one_line(text: str, width: int) -> str:
    """``text`` on one line (line breaks and tabs as spaces, control characters as U+FFFD) in at
    most ``width`` columns, a cut ending with "…"."""
    text = _CONTROL.sub("\ufffd", _LINE_BREAKS.sub(" ", text[: 4 * width + 8]))
    if display_width(text) <= width:
        return text
    out, used = [], 0
    for char in text:
        w = _char_width(char)
        if used + w > width - 1:
            break
        out.append(char)
        used += w
    return "".join(out) + ELLIPSIS


def _pad(text: str, width: int, align: str) -> str:
    space = width - display_width(text)
    if align == "right":
        return " " * space + text
    if align == "center":
        return " " * (space // 2) + text + " " * (space - space // 2)
    return text + " " * space


_INTEGERS = {"tinyint", "smallint", "integer", "bigint", "hugeint", "utinyint", "usmallint", "uinteger", "ubigint",
             "uhugeint"}
_NUMERIC = _INTEGERS | {"float", "double", "decimal"}

# -- JSON --------------------------------------------------------------------------------------------------


_json_string = json.encoder.encode_basestring  # a str as a JSON string, not escaping non-ASCII


def _plain_json(value: Any) -> Any:
    """A parsed JSON value with NaN and ±Infinity made null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _plain_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_json(v) for v in value]
    return value


def _json_text(value: str) -> str:
    """A DuckDB JSON value (text) as JSON."""
    try:
        parsed = json.loads(value, parse_constant=lambda _: None)
    except (ValueError, RecursionError):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(_plain_json(parsed), ensure_ascii=False, separators=(",", ":"))


def json_value(value: Any) -> str:
    """Any value DuckDB returns, as JSON text (typed columns go through :func:`json_converter`)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else "null"
    if isinstance(value, Decimal):
        return format(value, "f") if value.is_finite() else "null"
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, datetime | date | time):
        return json.dumps(value.isoformat())
    if isinstance(value, timedelta):
        return json.dumps(iso_duration(value))
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(to_text(k), ensure_ascii=False)}:{json_value(v)}"
                              for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(json_value(v) for v in value) + "]"
    return json.dumps(to_text(value), ensure_ascii=False)


def json_converter(column_type: Any) -> Callable[[Any], str]:
    """A function from a value of ``column_type`` (a DuckDBPyType) to JSON text: JSON columns, also
    inside lists, structs and maps, become JSON values instead of strings."""
    if column_type is None:
        return json_value
    if str(column_type) == "JSON":
        return lambda v: _json_text(v) if isinstance(v, str) else json_value(v)
    kind = getattr(column_type, "id", None)
    if kind in _INTEGERS:
        return lambda v: "null" if v is None else str(v) if type(v) is int else json_value(v)
    if kind == "varchar":
        return lambda v: "null" if v is None else _json_string(v) if type(v) is str else json_value(v)
    try:
        children = column_type.children if kind in ("list", "array", "struct", "map") else []
    except Exception:  # a type DuckDB cannot describe: no special JSON inside
        return json_value
    if kind in ("list", "array"):
        child = json_converter(children[0][1])

        def convert_list(v: Any) -> str:
            if not isinstance(v, list | tuple):
                return json_value(v)
            return "[" + ",".join(child(x) for x in v) + "]"

        return convert_list
    if kind in ("struct", "map"):
        if kind == "struct":
            fields = {name: json_converter(t) for name, t in children}
        else:
            value_type = json_converter(dict(children).get("value"))
            fields = None

        def convert_object(v: Any) -> str:
            if not isinstance(v, dict):
                return json_value(v)
            parts = []
            for k, x in v.items():
                convert = value_type if fields is None else fields.get(k, json_value)
                parts.append(f"{json.dumps(to_text(k), ensure_ascii=False)}:{convert(x)}")
            return "{" + ",".join(parts) + "}"

        return convert_object
    return json_value


# -- results -----------------------------------------------------------------------------------------------



@dataclass
class Result:
    """One statement's result: column names, DuckDB types, and its rows (read once, lazily)."""

    columns: list[str]
    types: list[Any]
    rows: Iterable[Sequence[Any]]

    @classmethod
    def of(cls, cursor: Any) -> Result:
        def rows() -> Iterator[Sequence[Any]]:
            while batch := cursor.fetchmany(FETCH_ROWS):
                yield from batch

        return cls([d[0] for d in cursor.description], [d[1] for d in cursor.description], rows())


def _capped(rows: Iterable[Sequence[Any]], max_rows: int) -> tuple[int, list[Sequence[Any]], int | None]:
    """(row count, the rows to show, where the "…" row goes or None) for at most ``max_rows`` rows
    (0: all): the first half and the last half, keeping no more than that in memory."""
    if max_rows <= 0:
        shown = list(rows)
        return len(shown), shown, None
    iterator = iter(rows)
    first: list[Sequence[Any]] = []
    for row in iterator:
        first.append(row)
        if len(first) > max_rows:
            break
    if len(first) <= max_rows:
        return len(first), first, None
    top = (max_rows + 1) // 2
    last: deque[Sequence[Any]] = deque(first[top:], maxlen=max_rows - top)
    total = len(first)
    for row in iterator:
        last.append(row)
        total += 1
    return total, first[:top] + list(last), top


def _rows_label(total: int, shown: int) -> str:
    label = f"{total} row{'' if total == 1 else 's'}"
    return label if shown == total else f"{label} ({shown} shown)"


def write_table(out: TextIO, result: Result, max_rows: int = DEFAULT_MAX_ROWS, width: int | None = None,
                cell_width: int = MAX_WIDTH) -> None:
    """A box as DuckDB's CLI draws it: names, types, rows; at most ``max_rows`` rows (0: all),
    fitted to ``width`` columns when given (a terminal)."""
    total, shown, gap = _capped(result.rows, max_rows)
    n = len(result.columns)
    if not n:  # a result without columns: its row count only
        out.write(_rows_label(total, len(shown)) + "\n")
        return
    align = ["right" if getattr(t, "id", None) in _NUMERIC else "left" for t in result.types]
    names = [one_line(str(c), 4 * cell_width) for c in result.columns]
    types = [one_line(str(t).lower(), 4 * cell_width) for t in result.types]
    cells = [[NULL if v is None else one_line(to_text(v), cell_width) for v in row] for row in shown]
    widths = []
    for i in range(n):
        values = max((display_width(row[i]) for row in cells), default=0)
        widths.append(max(1, min(cell_width, max(display_width(names[i]), min(display_width(types[i]), 20), values))))
    if width is not None:
        while sum(widths) + 3 * n + 1 > width and max(widths) > MIN_WIDTH:
            widths[widths.index(max(widths))] -= 1
    footer = _rows_label(total, len(shown))
    inner = sum(widths) + 3 * (n - 1)
    if display_width(footer) > inner:
        widths[-1] += display_width(footer) - inner
        inner = display_width(footer)

    def line(left: str, middle: str, right: str) -> str:
        return left + middle.join("─" * (w + 2) for w in widths) + right + "\n"

    def row_line(values: list[str], aligns: list[str]) -> str:
        return "│" + "│".join(f" {_pad(one_line(v, w), w, a)} " for v, w, a in zip(values, widths, aligns,
                                                                                      strict=True)) + "│\n"

    out.write(line("┌", "┬", "┐"))
    out.write(row_line(names, ["center"] * n))
    out.write(row_line(types, ["center"] * n))
    out.write(line("├", "┼", "┤"))
    for index, row in enumerate(cells):
        if index == gap:
            out.write(row_line([ELLIPSIS] * n, align))
        out.write(row_line(row, align))
    out.write(line("├", "┴", "┤"))
    out.write(f"│ {_pad(footer, inner, 'left')} │\n")
    out.write("└" + "─" * (inner + 2) + "┘\n")


_CSV_QUOTE = re.compile(r'[",\r\n]|^\s|\s$')


def _csv_field(value: Any) -> str:
    if value is None:
        return ""
    text = to_text(value)
    if text == "" or _CSV_QUOTE.search(text):
        return '"' + text.replace('"', '""') + '"'
    return text


def _csv_integer(value: Any) -> str:
    return "" if value is None else str(value) if type(value) is int else _csv_field(value)


def write_csv(out: TextIO, result: Result) -> None:
    """Every row; NULL is an empty field, an empty string a quoted one (``""``)."""
    out.write(",".join(_csv_field(str(c)) for c in result.columns) + "\n")
    fields = [_csv_integer if getattr(t, "id", None) in _INTEGERS else _csv_field for t in result.types]
    for row in result.rows:
        out.write(",".join([field(v) for field, v in zip(fields, row, strict=True)]) + "\n")


def write_json(out: TextIO, result: Result) -> None:
    """One JSON array of objects, one row a line, without a line break after it; closed also when
    reading the rows fails part way (the error is the caller's to report), so it stays JSON."""
    keys = [json.dumps(str(c), ensure_ascii=False) + ":" for c in result.columns]
    converters = [json_converter(t) for t in result.types]
    out.write("[")
    try:
        for index, row in enumerate(result.rows):
            line = "{" + ",".join(k + convert(v) for k, convert, v in zip(keys, converters, row, strict=True)) + "}"
            out.write(",\n" + line if index else line)
    finally:
        out.write("]")


SPOOL_BYTES = 8 << 20  # the first JSON result of a script waits in memory up to this size, then on disk


class JsonDocument:
    """The JSON results of one invocation as one JSON document: the only result's array of rows as it
    is, or, from a second result on, an array of such arrays, one per result in order. The first
    result waits in a temporary file until a second one comes or the document ends (:meth:`end`);
    later ones are written out as they come."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.results = 0
        self.first: Any = None

    def add(self, result: Result) -> None:
        self.results += 1  # before writing: a result cut by an error still counts, its array closed
        if self.results == 1:
            # open across calls: closed once copied out (_write_first)
            self.first = tempfile.SpooledTemporaryFile(  # noqa: SIM115
                max_size=SPOOL_BYTES, mode="w+", encoding="utf-8")
            write_json(self.first, result)
            return
        if self.results == 2:
            self.out.write("[")
            self._write_first()
        self.out.write(",\n")
        write_json(self.out, result)

    def _write_first(self) -> None:
        self.first.seek(0)
        shutil.copyfileobj(self.first, self.out)
        self.first.close()
        self.first = None

    def end(self) -> None:
        """Write what is left: the first result (if it was the only one) or the closing bracket."""
        if self.results == 1:
            self._write_first()
            self.out.write("\n")
        elif self.results > 1:
            self.out.write("]\n")
        self.results = 0


def _markdown_cell(value: Any) -> str:
    text = NULL if value is None else to_text(value)
    return _CONTROL.sub("\ufffd", text.replace("\\", "\\\\").replace("|", "\\|").replace("\r\n", "<br>")
                        .replace("\n", "<br>").replace("\r", "<br>"))


def write_markdown(out: TextIO, result: Result) -> None:
    """A GitHub markdown table of every row (numbers right-aligned)."""
    out.write("| " + " | ".join(_markdown_cell(str(c)) for c in result.columns) + " |\n")
    out.write("|" + "|".join("--:" if getattr(t, "id", None) in _NUMERIC else "---" for t in result.types) + "|\n")
    for row in result.rows:
        out.write("| " + " | ".join(_markdown_cell(v) for v in row) + " |\n")


def write_result(out: TextIO, result: Result, mode: str, max_rows: int = DEFAULT_MAX_ROWS,
                 width: int | None = None) -> None:
    if mode == "csv":
        write_csv(out, result)
    elif mode == "json":
        write_json(out, result)
        out.write("\n")
    elif mode == "markdown":
        write_markdown(out, result)
    else:
        write_table(out, result, max_rows, width)


# -- statements --------------------------------------------------------------------------------------------

_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
_NORMAL, _QUOTE, _IDENT, _LINE_COMMENT, _BLOCK, _DOLLAR_QUOTE = range(6)


@dataclass
class Unit:
    """A dot-command or SQL text (one or more statements), with the line it starts on."""

    kind: str  # "dot" | "sql"
    text: str
    line: int


class Splitter:
    """Lines in, :class:`Unit` out: SQL up to a ``;`` outside strings, quoted names and comments
    (DuckDB's lexical rules: '' and E'\\'' strings, $tag$ strings, nested /* */ comments), and a
    dot-command for a line starting with '.' at the start of a statement."""

    def __init__(self) -> None:
        self.reset()
        self.line = 0  # lines fed so far

    def reset(self) -> None:
        """Forget the statement being typed (Ctrl-C)."""
        self.text = ""
        self.start = 0
        self.state = _NORMAL
        self.depth = 0
        self.tag = ""
        self.escapes = False
        self.significant = False  # the pending statement has more than blanks and comments

    @property
    def pending(self) -> bool:
        """A statement has been started (the prompt shows that it continues)."""
        return bool(self.text.strip())

    def feed(self, line: str) -> list[Unit]:
        self.line += 1
        line = line.rstrip("\n")
        if self.state == _NORMAL and not self.significant and line.lstrip().startswith("."):
            self.reset()
            return [Unit("dot", line.strip(), self.line)]
        if not self.text:
            self.start = self.line
        line += "\n"
        ends = self._scan(line)
        if not ends:
            self.text += line
            return []
        done = Unit("sql", self.text + line[: ends[-1]], self.start)
        self.text = line[ends[-1]:]
        self.start = self.line
        if not self.text.strip():
            self.text = ""
        return [done]

    def finish(self) -> list[Unit]:
        """What is left at the end of the input, run as it is (a last statement needs no ';')."""
        left = Unit("sql", self.text, self.start) if self.significant else None
        self.reset()
        return [left] if left else []

    def _scan(self, line: str) -> list[int]:
        """Positions just after each ';' of ``line`` that ends a statement; updates the state."""
        ends: list[int] = []
        i, n = 0, len(line)
        while i < n:
            char = line[i]
            state = self.state
            if state == _NORMAL:
                if char == ";":
                    ends.append(i + 1)
                    self.significant = False
                elif char == "'":
                    before = line[i - 1] if i else ""
                    word = line[i - 2] if i > 1 else ""
                    self.escapes = before in ("e", "E") and not (word.isalnum() or word == "_")
                    self.state, self.significant = _QUOTE, True
                elif char == '"':
                    self.state, self.significant = _IDENT, True
                elif char == "-" and line.startswith("--", i):
                    self.state = _LINE_COMMENT
                    i += 1
                elif char == "/" and line.startswith("/*", i):
                    self.state, self.depth = _BLOCK, 1
                    i += 1
                elif char == "$" and (match := _DOLLAR.match(line, i)) and not (i and (line[i - 1].isalnum()
                                                                                     or line[i - 1] == "_")):
                    self.state, self.tag, self.significant = _DOLLAR_QUOTE, match.group(0), True
                    i = match.end() - 1
                elif not char.isspace():
                    self.significant = True
            elif state == _QUOTE:
                if char == "\\" and self.escapes:
                    i += 1
                elif char == "'":
                    self.state = _NORMAL
            elif state == _IDENT:
                if char == '"':
                    self.state = _NORMAL
            elif state == _LINE_COMMENT:
                if char == "\n":
                    self.state = _NORMAL
            elif state == _BLOCK:
                if line.startswith("/*", i):
                    self.depth += 1
                    i += 1
                elif line.startswith("*/", i):
                    self.depth -= 1
                    i += 1
                    if self.depth == 0:
                        self.state = _NORMAL
            elif state == _DOLLAR_QUOTE and line.startswith(self.tag, i):
                self.state = _NORMAL
                i += len(self.tag) - 1
            i += 1
        return ends


_TEMPORARY = re.compile(r"^\s*create\s+(or\s+replace\s+)?(temp|temporary)\b", re.I)
_LEADING = re.compile(r"^(?:\s+|;|--[^\n]*(?:\n|$)|/\*.*?\*/)*", re.S)  # blanks, empty statements, comments


def writes(statement: Any) -> bool:
    """A statement that would create or change a table or view (temporary ones excepted)."""
    import duckdb

    kinds = duckdb.StatementType
    if statement.type in (kinds.CREATE, kinds.CREATE_FUNC):
        return not _TEMPORARY.match(statement.query[_LEADING.match(statement.query).end():])
    return statement.type in (kinds.INSERT, kinds.UPDATE, kinds.DELETE, kinds.ALTER, kinds.DROP, kinds.MERGE_INTO,
                              kinds.COPY_DATABASE)


def _is_status(statement: Any, description: list[tuple]) -> bool:
    """The one-value 'Count' or 'Success' a statement that is no query returns: DuckDB's CLI shows none."""
    import duckdb

    if statement.type == duckdb.StatementType.SELECT or len(description) != 1:
        return False
    return (description[0][0], str(description[0][1])) in {("Count", "BIGINT"), ("Success", "BOOLEAN")}


def execute_interruptibly(con: Any, query: str) -> Any:
    """``con.execute(query)`` in a worker thread while this one waits, so that Ctrl-C (which Python
    delivers to the main thread only between bytecodes, never inside DuckDB) interrupts the query."""
    done = threading.Event()
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["cursor"] = con.execute(query)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=work, name="tracehouse-sql", daemon=True).start()
    try:
        while not done.wait(0.05):
            pass
    except KeyboardInterrupt:
        con.interrupt()
        done.wait()
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["cursor"]


class Quit(Exception):
    """.quit, .exit."""


class ShellError(Exception):
    """An error of a dot-command (shown like a statement's)."""


# -- the shell ---------------------------------------------------------------------------------------------


class Shell:
    """Runs statements and dot-commands on one connection, showing each result on ``out``."""

    def __init__(self, con: Any, *, mode: str = "table", max_rows: int = DEFAULT_MAX_ROWS, write: bool = False,
                 out: TextIO | None = None, err: TextIO | None = None, numbered: bool = False) -> None:
        self.con = con
        self.mode = mode
        self.max_rows = max_rows
        self.write = write
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.numbered = numbered  # name the line of an error (scripts)
        self.splitter = Splitter()
        self._names: list[str] | None = None
        self.document = JsonDocument(self.out)  # the JSON results of this invocation (or entry)

    # output

    def _width(self) -> int | None:
        """The terminal's width when the output is a terminal (tables are fitted to it)."""
        try:
            return shutil.get_terminal_size().columns if self.out.isatty() else None
        except (AttributeError, ValueError, OSError):
            return None

    def show(self, result: Result, *, capped: bool = True) -> None:
        if self.mode == "json":
            self.document.add(result)
            return
        self.document.end()  # after .mode: the JSON results so far are one document
        write_result(self.out, result, self.mode, self.max_rows if capped else 0, self._width())
        self.out.flush()

    def say(self, text: str) -> None:
        """Text that is no result (.mode, .help): after the JSON document so far, never inside it."""
        self.document.end()
        self.out.write(text)
        self.out.flush()

    def end_output(self) -> None:
        """The end of an invocation (a script, or one interactive entry): close its JSON document."""
        self.document.end()
        self.out.flush()

    def error(self, message: str, line: int | None = None) -> None:
        self.end_output()  # the results before the error, as a whole document, then the error
        where = f"line {line}: " if self.numbered and line else ""
        self.err.write(f"error: {where}{message.rstrip()}\n")
        self.err.flush()

    # input

    def run_unit(self, unit: Unit) -> bool:
        """Run one unit; False after an error (shown), :class:`Quit` to leave."""
        if unit.kind == "dot":
            import duckdb

            try:
                self.dot(unit.text)
            except (Quit, OSError):
                raise
            except (ShellError, duckdb.Error) as exc:
                self.error(str(exc), unit.line)
                return False
            except Exception as exc:  # e.g. a broken declaration in sql/: an error, never a traceback
                self.error(f"{type(exc).__name__}: {exc}", unit.line)
                return False
            return True
        return self.run_sql(unit.text, unit.line)

    def feed(self, lines: Iterable[str], *, stop_on_error: bool) -> int:
        """Run ``lines`` (a script, or an interactive entry); the exit status of what ran."""
        status = 0
        for line in lines:
            for unit in self.splitter.feed(line):
                if not self.run_unit(unit):
                    status = 1
                    if stop_on_error:
                        return 1
        return status

    def finish(self) -> int:
        return 0 if all(self.run_unit(unit) for unit in self.splitter.finish()) else 1

    def run_script(self, lines: Iterable[str]) -> int:
        """A script (QUERY, or standard input that is no terminal): each result in order, exit status
        1 at the first error."""
        try:
            status = self.feed(lines, stop_on_error=True) or self.finish()
        except Quit:
            status = 0
        self.end_output()
        return status

    def run_sql(self, text: str, line: int) -> bool:
        """Every statement of ``text``, each result shown; False at the first error."""
        import duckdb

        try:
            statements = duckdb.extract_statements(text)
        except duckdb.Error as exc:
            self.error(str(exc), line)
            return False
        position = 0
        for statement in statements:
            found = text.find(statement.query, position)
            if found >= 0:
                start = found + len(statement.query) - len(statement.query.lstrip())
                position = found + len(statement.query)
            else:
                start = position
            at = line + text.count("\n", 0, start)
            if not self.write and writes(statement):
                self.error(READ_ONLY, at)
                return False
            if not self.run_statement(statement, at):
                return False
        return True

    def run_statement(self, statement: Any, line: int) -> bool:
        import duckdb

        try:
            try:
                cursor = execute_interruptibly(self.con, statement.query)
                if cursor.description is not None and not _is_status(statement, cursor.description):
                    self.show(Result.of(cursor))
            finally:
                if statement.type != duckdb.StatementType.SELECT:
                    self._names = None  # tables may have come or gone
        except duckdb.InterruptException:
            raise KeyboardInterrupt from None
        except duckdb.Error as exc:
            self.error(str(exc), line)
            return False
        except OSError:  # the output is gone (a closed pipe): the caller's business
            raise
        except RuntimeError as exc:
            if "interrupt" in str(exc).lower():
                raise KeyboardInterrupt from None
            self.error(f"{type(exc).__name__}: {exc}", line)
            return False
        except Exception as exc:  # a value this shell cannot show: an error, never a traceback
            self.error(f"{type(exc).__name__}: {exc}", line)
            return False
        return True

    # dot-commands

    def dot(self, text: str) -> None:
        words = text[1:].split()
        if not words:
            raise ShellError("a dot-command needs a name; .help lists them")
        name, args = words[0].lower(), words[1:]
        if name in ("quit", "exit", "q"):
            raise Quit
        handler = getattr(self, f"_dot_{name}", None)
        if name not in DOT_COMMANDS or handler is None:
            raise ShellError(f"unknown command .{words[0]}; .help lists the commands")
        usage, _ = DOT_COMMANDS[name]
        if len(args) > (1 if usage else 0):
            raise ShellError(f"usage: .{name} {usage}".rstrip())
        handler(*args)

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self.con.execute(sql, list(params)).fetchall()

    def _relations(self) -> list[tuple[str, str, str, str | None]]:
        """(name to use, kind, database, description) of every table and view a user can query."""
        from pipelines import catalog, db, schema

        rows = self._query(
            "select database_name, schema_name, table_name, temporary from duckdb_tables() where not internal "
            "union all select database_name, schema_name, view_name, temporary from duckdb_views() where not internal"
        )
        views, marts, seeds = catalog.views(), catalog.marts(), catalog.seeds()
        found = []
        for database, schema_name, name, temporary in rows:
            qualified = name if schema_name == "main" else f"{schema_name}.{name}"
            if temporary:
                found.append((qualified, "temporary", database, None))
            elif database == db.SCRATCH_CATALOG:
                found.append((f"{database}.{qualified}", "scratch", database, "your table (scratch.duckdb)"))
            elif database != db.WAREHOUSE_CATALOG:
                found.append((f"{database}.{qualified}", "attached", database, None))
            elif name in schema.TABLES:
                found.append((qualified, "table", database, views.get(name, {}).get("description")))
            elif name in views:
                found.append((qualified, "view", database, views[name]["description"]))
            elif name in marts:
                found.append((qualified, "mart", database, marts[name].description))
            elif name in seeds:
                found.append((qualified, "seed", database, seeds[name]["description"]))
            elif name == "tracehouse_build":
                found.append((qualified, "build", database, "the committed build you are reading"))
            else:
                found.append((qualified, "view", database, None))
        order = ["table", "view", "mart", "seed", "build", "scratch", "temporary", "attached"]
        return sorted(found, key=lambda r: (order.index(r[1]), r[0]))

    def _dot_tables(self, pattern: str | None = None) -> None:
        rows = [(name, kind, description) for name, kind, _, description in self._relations()]
        if pattern is not None:
            like = re.compile("".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern), re.I)
            rows = [r for r in rows if like.fullmatch(r[0]) or like.fullmatch(r[0].rsplit(".", 1)[-1])]
        self.show(Result(["name", "kind", "description"], ["varchar"] * 3, rows), capped=False)

    def _dot_schema(self, table: str | None = None) -> None:
        from pipelines import catalog

        described: dict[str, dict[str, str]] = {name: view["columns"] for name, view in catalog.views().items()}
        described |= {name: mart.columns for name, mart in catalog.marts().items()}
        described |= {name: dict(seed.get("columns") or {}) for name, seed in catalog.seeds().items()}
        relations = self._relations()
        if table is not None:
            wanted = table.lower()
            relations = [r for r in relations if r[0].lower() == wanted or (
                "." not in wanted and r[0].lower().rsplit(".", 1)[-1] == wanted)][:1]
            if not relations:
                raise ShellError(f"no table or view named {table}; .tables lists them")
        rows = []
        for name, _kind, database, _ in relations:
            bare = name.rsplit(".", 1)[-1]
            columns = self._query(
                "select column_name, data_type from duckdb_columns() where database_name = ? and table_name = ? "
                "order by column_index", [database, bare])
            descriptions = described.get(bare, {}) if database != "scratch" else {}
            rows += [(name, column, kind, descriptions.get(column)) for column, kind in columns]
        if table is not None:
            self.show(Result(["column", "type", "description"], ["varchar"] * 3, [r[1:] for r in rows]), capped=False)
        else:
            self.show(Result(["table", "column", "type", "description"], ["varchar"] * 4, rows), capped=False)

    def _dot_macros(self) -> None:
        from pipelines import catalog

        declared = catalog.macros()
        rows = [(e.get("signature") or n, e.get("returns"), e.get("description")) for n, e in declared.items()]
        others = self._query(
            "select function_name, any_value(parameters) from duckdb_functions() where not internal "
            "and function_type in ('macro', 'table_macro') group by all order by all")
        rows += [(f"{name}({', '.join(params or [])})", None, None) for name, params in others
                 if name not in declared]
        self.show(Result(["macro", "returns", "description"], ["varchar"] * 3, rows), capped=False)

    def _dot_mode(self, mode: str | None = None) -> None:
        if mode is None:
            self.say(self.mode + "\n")
            return
        mode = MODE_ALIASES.get(mode.lower(), mode.lower())
        if mode not in MODES:
            raise ShellError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
        self.mode = mode

    def _dot_maxrows(self, count: str | None = None) -> None:
        if count is None:
            self.say(f"{self.max_rows}\n")
            return
        try:
            self.max_rows = max_rows_arg(count)
        except argparse.ArgumentTypeError as exc:
            raise ShellError(f".maxrows: {exc}") from None

    def _dot_help(self) -> None:
        lines = [f".{name} {usage}".rstrip().ljust(20) + f" {text}\n" for name, (usage, text) in DOT_COMMANDS.items()]
        self.say("".join(lines) + "Statements end with ';' (the last one of a script needs none). Ctrl-C clears the "
                 "statement being typed or stops the one running; Ctrl-D leaves.\n")

    # completion

    def names(self) -> list[str]:
        """Every name worth completing: tables, views, columns, macros, functions, keywords."""
        if self._names is None:
            try:
                rows = self._query(
                    "select table_name from duckdb_tables() union select view_name from duckdb_views() "
                    "union select column_name from duckdb_columns() "
                    "union select function_name from duckdb_functions() "
                    "union select database_name from duckdb_databases() where not internal "
                    "union select keyword_name from duckdb_keywords()")
            except Exception:  # an aborted transaction, say: no completion rather than an error
                return []
            self._names = sorted({r[0] for r in rows if r[0] and re.fullmatch(r"[A-Za-z_][\w$]*", r[0])})
        return self._names

    def complete(self, text: str, before: str) -> list[str]:
        """Completions of ``text``, the word after ``before`` on the line being typed."""
        if not self.splitter.pending and before.lstrip().startswith("."):
            words = before.lstrip()[1:].split()
            if before.lstrip() == ".":
                return [name for name in DOT_COMMANDS if name.startswith(text.lower())]
            command = words[0].lower() if words else ""
            if command in ("schema", "tables"):
                choices = sorted({r[0] for r in self._relations()})
            elif command == "mode":
                choices = list(MODES)
            else:
                return []
            return [c for c in choices if c.lower().startswith(text.lower())]
        low = text.lower()
        upper = text != low  # typed in capitals: offer capitals
        found = [n for n in self.names() if n.lower().startswith(low)]
        return [n.upper() if upper and n == n.lower() else n for n in found]


# -- history and the interactive loop ----------------------------------------------------------------------


def history_path() -> Path:
    return Path(os.environ.get(HISTORY_ENV) or os.path.expanduser(HISTORY_FILE))


def _unescape(line: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), line)


def load_history(path: Path) -> list[str]:
    """The entries of a history file: one a line, a statement's line breaks written as \\n."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [_unescape(line) for line in text.splitlines() if line]


def save_history(path: Path, new: list[str]) -> None:
    """Add this session's entries to the file (as it is now: other sessions may have written to it),
    keeping the last :data:`HISTORY_LENGTH`; written atomically, readable by its owner only."""
    if not new:
        return
    entries = (load_history(path) + new)[-HISTORY_LENGTH:]
    text = "".join(e.replace("\\", "\\\\").replace("\n", "\\n") + "\n" for e in entries)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tracehouse_history.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _readline(shell: Shell, history: list[str]) -> Any:
    """GNU readline (or libedit) set up for the shell, or None where there is none."""
    try:
        import readline
    except ImportError:  # pragma: no cover - Python built without readline
        return None
    readline.set_auto_history(False)
    readline.clear_history()
    for entry in history[-HISTORY_LENGTH:]:
        readline.add_history(entry)
    readline.set_completer_delims(" \t\n`~!@#%^&*()=+[{]}\\|;:'\",<>/?.")

    matches: list[str] = []

    def completer(text: str, state: int) -> str | None:
        if state == 0:
            try:
                before = readline.get_line_buffer()[: readline.get_begidx()]
                matches[:] = [m + " " for m in shell.complete(text, before)]  # a whole word, then a space
            except Exception:  # completion never breaks the prompt
                matches[:] = []
        return matches[state] if state < len(matches) else None

    readline.set_completer(completer)
    if "libedit" in (readline.__doc__ or ""):  # pragma: no cover - macOS's Python
        readline.parse_and_bind("bind ^I rl_complete")
    else:
        readline.parse_and_bind("tab: complete")
    return readline


def interactive(shell: Shell, banner: str) -> int:
    """The prompt: one statement after another until .quit or Ctrl-D; the last statement's status."""
    import signal

    path = history_path()
    new: list[str] = []
    editing = sys.stdin.isatty() and sys.stdout.isatty()
    readline = _readline(shell, load_history(path)) if editing else None

    leaving: list[int] = []

    def leave(signum: int, _frame: object) -> None:  # a closed terminal or `kill`: keep the history
        leaving.append(128 + signum)
        raise SystemExit(128 + signum)

    for signum in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, leave)
    # Ctrl-C is the shell's own, whatever the process inherited: a parent that ignored or blocked
    # SIGINT (a background job, a test runner) passes that on through exec.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def read(prompt: str) -> str:
        if editing:
            return input(prompt)
        shell.err.write(prompt)  # stdout is a file or a pipe: keep it for results
        shell.err.flush()
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n")

    shell.err.write(banner + "\n")
    status = 0
    entered: list[str] = []
    try:
        while True:
            try:
                text = read(CONTINUATION if shell.splitter.pending else PROMPT)
            except EOFError:
                shell.err.write("\n")
                break
            except KeyboardInterrupt:  # Ctrl-C: a new, empty statement
                shell.err.write("^C\n" if not editing else "\n")
                shell.splitter.reset()
                entered = []
                continue
            if not shell.splitter.pending and text.strip().lower() in ("quit", "exit"):
                break
            entered.append(text)
            try:
                status = shell.feed(text.split("\n"), stop_on_error=False)
            except KeyboardInterrupt:
                if leaving:  # SIGTERM or SIGHUP stopped the query: leave, as asked
                    raise SystemExit(leaving[0]) from None
                shell.end_output()
                shell.err.write("Interrupted\n")
                shell.splitter.reset()
                status = 1
            except Quit:
                new.append("\n".join(entered))
                break
            finally:
                with contextlib.suppress(OSError):  # a closed terminal: leave as asked all the same
                    shell.end_output()  # each entry's JSON results: a document of their own
            if not shell.splitter.pending:
                entry = "\n".join(e for e in entered if e.strip())
                entered = []
                if entry and (not new or new[-1] != entry):
                    new.append(entry)
                    if readline is not None:
                        readline.add_history(entry)
        with contextlib.suppress(Quit, KeyboardInterrupt):
            if shell.splitter.pending:
                status = shell.finish()
        shell.end_output()
    finally:
        save_history(path, new)
    return status


def main(args: argparse.Namespace) -> int:
    """``tracehouse sql``: QUERY, a script on standard input, or the interactive shell."""
    import duckdb

    from pipelines import db
    from pipelines.config import warehouse_for_reading
    from pipelines.state import KEEP_BUILDS, CommitLog
    from pipelines.storage import Warehouse

    build = getattr(args, "build", None)
    warehouse = Warehouse(warehouse_for_reading(args.warehouse, args.config, build))
    kept = CommitLog(warehouse).numbers()[-KEEP_BUILDS:]
    if build is not None and build not in kept:
        print(f"tracehouse: build {build} is not one the warehouse keeps (its files are deleted once {KEEP_BUILDS} "
              f"newer builds are committed); builds kept: {', '.join(map(str, kept)) or 'none'}", file=sys.stderr)
        return 1
    try:
        con = db.connect(warehouse, build=build, write=args.write)
    except (FileNotFoundError, LookupError, duckdb.Error) as exc:
        print(f"tracehouse: {exc}", file=sys.stderr)
        return 1
    max_rows = DEFAULT_MAX_ROWS if args.max_rows is None else args.max_rows
    try:
        if args.query is not None:
            lines = args.query.splitlines() or [""]
            shell = Shell(con, mode=args.format, max_rows=max_rows, write=args.write,
                          numbered=len(args.query.strip().splitlines()) > 1)
            return shell.run_script(lines)
        if not sys.stdin.isatty():
            return Shell(con, mode=args.format, max_rows=max_rows, write=args.write, numbered=True).run_script(
                sys.stdin)
        shell = Shell(con, mode=args.format, max_rows=max_rows, write=args.write)
        build = con.execute("select build from tracehouse_build").fetchone()[0]
        access = "read-write: new tables go to scratch" if args.write else "read-only"
        banner = (f"tracehouse sql: build {build} of {warehouse.root} ({access}). End statements with ';'; "
                  ".help lists the commands; Ctrl-D leaves.")
        return interactive(shell, banner)
    finally:
        con.close()
