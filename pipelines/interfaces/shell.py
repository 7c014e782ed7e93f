"""``tracehouse sql``: a SQL shell over the last committed build, with the DuckDB CLI's habits.

This module is the session: reading statements, dot-commands, running them, the history and the
completion; pipelines/interfaces/shell_output.py shows the results (table, csv, json, markdown).

One :class:`Shell` runs every input the same way: a query given as an argument, a script on
standard input and the interactive prompt all go through :class:`Splitter`, which cuts lines into
statements where DuckDB's own tokenizer (``duckdb.tokenize``) finds a ``;`` outside strings,
quoted names and comments, and into dot-commands (a line starting with ``.`` at the start of a
statement; never sent to DuckDB). Each piece of SQL is then cut into statements by DuckDB's
``duckdb.extract_statements`` (which parses: it cannot tell a statement still being typed from a
wrong one, hence the tokenizer for that), and each statement's result is shown, in order, in the
current mode.

Interactively: GNU readline line editing, a history that survives the session
(``~/.tracehouse_history``, or ``$TRACEHOUSE_HISTORY``; one entry per statement, written on exit),
Tab completion of tables, views, columns, macros, functions, keywords and dot-commands, Ctrl-C
clears the statement being typed (or stops the running one) and Ctrl-D leaves. On a pipe: no
prompt, no banner, and the first error ends the script with exit status 1.

Nothing here imports DuckDB or the catalog at import time: ``pipelines.interfaces.cli`` builds its parser
(and the help text of ``tracehouse sql``) from this module for every command.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pipelines.interfaces.arguments import number
from pipelines.interfaces.shell_output import DEFAULT_MAX_ROWS, MODES, JsonDocument, Result, one_line, write_result

MODE_ALIASES = {"duckbox": "table", "box": "table", "md": "markdown"}
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
  table     a box like DuckDB's, at most --max-rows rows; on a terminal, a result wider than it
            narrows its long text columns (values cut with "…"), then keeps the columns that
            fit, first and last first ("15 columns (4 shown)")
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


# ``--max-rows`` and ``.maxrows``: a whole number, 0 meaning every row.
max_rows_arg = number(int, 0, wanted="0 (every row) or more")


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
    one-line description (from sql/*/_*.yml through pipelines.analytics.catalog)."""
    lines = [EXAMPLES, "", "dot-commands (at the start of a statement; never sent to DuckDB):"]
    lines += [f"  .{name} {args}".rstrip().ljust(20) + f"  {one_line(text, max(20, width - 22))}"
              for name, (args, text) in DOT_COMMANDS.items() if name != "exit"]
    lines.append("")
    try:
        from pipelines import schema
        from pipelines.analytics import catalog

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


# -- statements --------------------------------------------------------------------------------------------

@dataclass
class Unit:
    """A dot-command or SQL text (one or more statements), with the line it starts on."""

    kind: str  # "dot" | "sql"
    text: str
    line: int


def _tokens(text: str) -> list[tuple[int, Any]] | None:
    """DuckDB's tokens of ``text`` as (byte offset in its UTF-8, token type), or None when the
    tokenizer refuses it (the SQL is then run as it is, and DuckDB names what is wrong)."""
    import duckdb

    try:
        return duckdb.tokenize(text)
    except (duckdb.Error, RuntimeError):
        return None


def statements_end(text: str) -> int | None:
    """Where the last complete statement of ``text`` ends: just after its last ``;`` that DuckDB's
    tokenizer reads as a ``;`` (not inside a string, a quoted name or a comment, not after an
    unterminated one); None when no statement is complete yet."""
    import duckdb

    tokens = _tokens(text)
    if tokens is None:
        return len(text) if text.rstrip().endswith(";") else None
    data = text.encode("utf-8", "surrogatepass")
    ends = [at + 1 for at, kind in tokens if kind == duckdb.token_type.operator and data[at:at + 1] == b";"]
    return len(data[: ends[-1]].decode("utf-8", "surrogatepass")) if ends else None


def significant(text: str) -> bool:
    """``text`` holds more than blanks and comments (so a line starting with '.' continues it)."""
    import duckdb

    if not text.strip():
        return False
    tokens = _tokens(text)
    return tokens is None or any(kind != duckdb.token_type.comment for _, kind in tokens)


class Splitter:
    """Lines in, :class:`Unit` out: SQL up to the last ``;`` of a line that ends a statement
    (:func:`statements_end`, by DuckDB's tokenizer: strings, $tag$ strings, quoted names and
    comments are DuckDB's own), and a dot-command for a line starting with '.' at the start of a
    statement."""

    def __init__(self) -> None:
        self.reset()
        self.line = 0  # lines fed so far

    def reset(self) -> None:
        """Forget the statement being typed (Ctrl-C)."""
        self.text = ""
        self.start = 0

    @property
    def pending(self) -> bool:
        """A statement has been started (the prompt shows that it continues)."""
        return bool(self.text.strip())

    def feed(self, line: str) -> list[Unit]:
        self.line += 1
        line = line.rstrip("\n")
        if line.lstrip().startswith(".") and not significant(self.text):
            self.reset()
            return [Unit("dot", line.strip(), self.line)]
        if not self.text:
            self.start = self.line
        self.text += line + "\n"
        if ";" not in line or (end := statements_end(self.text)) is None:
            return []
        done = Unit("sql", self.text[:end], self.start)
        self.text = self.text[end:] if self.text[end:].strip() else ""
        self.start = self.line
        return [done]

    def finish(self) -> list[Unit]:
        """What is left at the end of the input, run as it is (a last statement needs no ';')."""
        left = Unit("sql", self.text, self.start) if significant(self.text) else None
        self.reset()
        return [left] if left else []


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
        from pipelines import schema
        from pipelines.analytics import catalog, db

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
        from pipelines.analytics import catalog

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
        from pipelines.analytics import catalog

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

    from pipelines.analytics import db
    from pipelines.config import warehouse_for_reading
    from pipelines.storage.state import KEEP_BUILDS, CommitLog
    from pipelines.storage.warehouse import Warehouse

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
