"""The output formats of ``tracehouse sql`` (pipelines/interfaces/shell.py runs the session): a result as a
table, CSV, JSON or markdown, and the values as text.

- ``table``: a box like DuckDB's CLI draws (drawn by rich), NULL shown as NULL, values cut at
  :data:`MAX_WIDTH` ending with "…", at most ``--max-rows`` rows (the first and the last, a "…" row
  between, and the footer "N rows (M shown)"). On a terminal, a result wider than it first narrows
  its long text columns, the widest first, each down to :data:`SHRUNK_WIDTH` or its name (values cut
  with "…"); then, if that is not enough, it keeps the columns that fit so narrowed, the first and
  the last ones first, with a "…" column between, and says "N columns (M shown)"; a single column
  wider than the terminal is cut with "…";
- ``csv``: every row; NULL an empty field, '' a quoted empty field ``""``;
- ``json``: every row, one JSON document per invocation (:class:`JsonDocument`): a result's rows are
  an array of objects, and a script of several results gives an array of those arrays. NaN and
  ±Infinity are null, JSON columns JSON values, dates, times and timestamps ISO 8601 text, intervals
  ISO 8601 durations, decimals numbers with all their digits, lists and structs arrays and objects;
- ``markdown``: every row, a GitHub table.

Table, csv and markdown show values as DuckDB's CLI does (an interval as ``1 day 01:30:00``, a
month in it as 30 days: DuckDB's Python client hands intervals over as ``timedelta``).
Nothing here imports DuckDB or rich at import time (``pipelines.interfaces.cli`` imports the shell for every command).
"""

from __future__ import annotations

import io
import json
import math
import re
import shutil
import tempfile
import unicodedata
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, TextIO

from pipelines.text import ELLIPSIS, NULL

MODES = ("table", "csv", "json", "markdown")
DEFAULT_MAX_ROWS = 40  # rows a table shows (0: all), as DuckDB's CLI does
MAX_WIDTH = 80  # display width of one value in table mode
MIN_WIDTH = 6  # a column squeezed to fit the terminal keeps at least this width
SHRUNK_WIDTH = 12  # a long text column narrowed to fit the terminal keeps at least this width, or its name's
NAME_KEPT = 24  # ... up to this width
FETCH_ROWS = 2048


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


def shown_columns(widths: list[int], width: int) -> list[int]:
    """The columns (by index) a table ``width`` terminal columns wide shows whole: all when they fit;
    else, as DuckDB's CLI does, the first and the last, then the next ones from either end in turn
    while they fit beside a "…" column, which stands for the rest (the first one always)."""
    n = len(widths)

    def size(columns: list[int]) -> int:
        return sum(widths[i] for i in columns) + 3 * len(columns) + 1 + (4 if len(columns) < n else 0)

    if size(list(range(n))) <= width:
        return list(range(n))
    shown = [0]
    low, high, from_right = 1, n - 1, True
    while low <= high:
        candidate = high if from_right else low
        if size([*shown, candidate]) > width:
            break
        shown.append(candidate)
        if from_right:
            high -= 1
        else:
            low += 1
        from_right = not from_right
    return sorted(shown)


def _narrow(widths: list[int], floors: list[int], room: int) -> None:
    """Narrow ``widths`` in place until they add up to ``room`` at most: the widest column first,
    none below its floor; then, when the floors alone are wider (a single column wider than the
    terminal), any column down to :data:`MIN_WIDTH`."""
    for lowest in (floors, [min(w, MIN_WIDTH) for w in widths]):
        while sum(widths) > room:
            narrowable = [k for k, w in enumerate(widths) if w > lowest[k]]
            if not narrowable:
                break
            widest = max(narrowable, key=lambda k: widths[k])
            widths[widest] -= 1


def _columns_label(total: int, shown: int) -> str:
    return "" if shown == total else f"{total} columns ({shown} shown)"


def write_table(out: TextIO, result: Result, max_rows: int = DEFAULT_MAX_ROWS, width: int | None = None,
                cell_width: int = MAX_WIDTH) -> None:
    """A box as DuckDB's CLI draws it (drawn by rich): names, types, rows; at most ``max_rows`` rows
    (0: all). Fitted to ``width`` terminal columns when given: whole columns that fit
    (:func:`shown_columns`), a "…" column for the others, and the footer says how many there are."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

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
    # what each column can be narrowed to before columns are dropped: text down to SHRUNK_WIDTH (its
    # name kept), numbers not at all (a cut number reads as another number)
    floors = [w if align[i] == "right" else min(w, max(SHRUNK_WIDTH, min(display_width(names[i]), NAME_KEPT)))
              for i, w in enumerate(widths)]
    columns = shown_columns(floors, width) if width is not None else list(range(n))
    elided = len(columns) < n
    # the "…" column goes after the last of the first columns shown
    cut = next((k + 1 for k, (i, j) in enumerate(zip(columns, columns[1:], strict=False)) if j != i + 1), len(columns))
    layout: list[int | None] = [*columns[:cut], None, *columns[cut:]] if elided else list(columns)
    shown_widths = [1 if i is None else widths[i] for i in layout]
    if width is not None:
        _narrow(shown_widths, [1 if i is None else floors[i] for i in layout], width - 3 * len(layout) - 1)
    rows_label, columns_label = _rows_label(total, len(shown)), _columns_label(n, len(columns))
    inner = sum(shown_widths) + 3 * (len(layout) - 1)
    # the footer: the rows on the left, the columns on the right; on two lines where one is too narrow
    one_line_footer = display_width(rows_label) + (display_width(columns_label) + 4 if columns_label else 0)
    footer = [(rows_label, columns_label)] if one_line_footer <= inner else [(rows_label, ""), ("", columns_label)]
    footer_width = min(one_line_footer, max(display_width(rows_label), display_width(columns_label)))
    if footer_width > inner:  # wider than the columns: the last column shown takes the difference
        last = max(k for k, i in enumerate(layout) if i is not None)
        shown_widths[last] += footer_width - inner
        inner = footer_width

    table = Table(box=box.SQUARE, header_style="", show_edge=True, pad_edge=True)
    for i, w in zip(layout, shown_widths, strict=True):
        header = Text(ELLIPSIS + "\n" if i is None else f"{names[i]}\n{types[i]}", justify="center")
        table.add_column(header, justify="left" if i is None else align[i], width=w, no_wrap=True,
                         overflow="ellipsis")
    for index, row in enumerate(cells):
        if index == gap:
            table.add_row(*[Text(ELLIPSIS)] * len(layout))
        table.add_row(*[Text(ELLIPSIS if i is None else row[i]) for i in layout])
    drawn = io.StringIO()
    Console(file=drawn, width=inner + 4, color_system=None, force_terminal=False, force_jupyter=False,
            highlight=False, markup=False, emoji=False, soft_wrap=False).print(table)
    lines = drawn.getvalue().splitlines()
    if not cells:  # rich draws the line under the header all the same: that line closes the columns
        lines.pop()
    lines[-1] = "├" + lines[-1][1:-1].replace("┼", "┴") + "┤"  # the footer hangs below the columns, as DuckDB's
    out.write("\n".join(lines) + "\n")
    for left, right in footer:
        if left or right:
            out.write(f"│ {left}{' ' * (inner - display_width(left) - display_width(right))}{right} │\n")
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
