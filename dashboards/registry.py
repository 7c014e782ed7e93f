"""What a chart is and the registry of charts: :class:`ChartDef`, the ``@chart`` registration and
the declarations of ``sql/charts/_charts.yml``.

A chart is three things under one name:

* ``sql/charts/<name>.sql``: a small SELECT over the marts or the tables (all aggregation happens in
  SQL), whose rows the chart draws; an optional boolean column ``informative`` says which rows carry
  information (a chart whose rows are all uninformative, e.g. every failure 'unlabelled', is hidden);
* one entry in ``sql/charts/_charts.yml``: its title, description and ``empty`` (the one line the page
  shows instead of the card when the chart has nothing to show); the order of the entries is the
  order of the cards;
* one function in ``dashboards/charts.py``, registered under that name with ``@chart``, turning the
  rows into an Altair chart.

:func:`load_charts` joins the three (in the YAML's order) and refuses a name that lacks one of them;
``dashboards.charts.CHARTS`` is its result once every drawing is registered.

What a chart reads (its asset's upstream) is derived from its SQL (``pipelines.analytics.catalog.sql_reads``).

Imports: the standard library, and ``pipelines.analytics.catalog`` when the declarations or the SQL are read. Never
``dashboards.charts``, whose drawings register themselves here (``BUILDERS``), nor Altair.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only for annotations: the module never imports Altair itself
    import altair as alt

SQL_DIR = Path(__file__).resolve().parent.parent / "sql" / "charts"  # pipelines.analytics.db.SQL_DIR / "charts"
# (computed here: importing this module needs neither DuckDB nor pipelines.analytics.db)
DECLARATIONS = SQL_DIR / "_charts.yml"
DECLARED_FIELDS = {"name", "title", "description", "empty"}

ChartBuilder = Callable[[list[dict]], "alt.TopLevelMixin"]
# From a chart's rows, a sentence about the data loaded (None: nothing to say): the card's note, or
# why the card is hidden when its rows carry no information.
Explain = Callable[[list[dict]], "str | None"]


@dataclass(frozen=True)
class ChartDef:
    name: str
    title: str
    description: str
    empty: str  # why the card is hidden when the chart has nothing to show (one line)
    build: ChartBuilder
    wide: bool = False  # a full-width card
    note: Explain | None = None  # a sentence about the loaded data, after the description
    why_hidden: Explain | None = None  # why the card is hidden, from rows that carry no information

    def hidden_reason(self, rows: list[dict]) -> str:
        """Why the card is hidden: computed from its rows where it has some, else its declaration's line."""
        reason = self.why_hidden(rows) if rows and self.why_hidden is not None else None
        return reason or self.empty

    def note_for(self, rows: list[dict]) -> str | None:
        return self.note(rows) if self.note is not None else None

    @property
    def sql_path(self) -> Path:
        return SQL_DIR / f"{self.name}.sql"

    @property
    def sql(self) -> str:
        return self.sql_path.read_text()

    @property
    def reads(self) -> tuple[str, ...]:
        """The marts and tables its SQL reads, directly or through macros."""
        from pipelines.analytics.catalog import sql_reads

        return sql_reads(self.sql)


BUILDERS: dict[str, ChartBuilder] = {}
WIDE: set[str] = set()
NOTES: dict[str, Explain] = {}
WHY_HIDDEN: dict[str, Explain] = {}


def chart(name: str, *, wide: bool = False, note: Explain | None = None,
          why_hidden: Explain | None = None) -> Callable[[ChartBuilder], ChartBuilder]:
    """Register the function that draws the rows of ``sql/charts/<name>.sql`` (``wide``: its card
    spans the page's width; ``note``: a sentence about the loaded data computed from the rows;
    ``why_hidden``: why the card is hidden, computed from rows that carry no information)."""
    if not name.isidentifier() or not name.islower():
        raise ValueError(f"chart name {name!r} must be a lower-case identifier")

    def register(build: ChartBuilder) -> ChartBuilder:
        if name in BUILDERS:
            raise ValueError(f"chart {name!r} is registered twice")
        BUILDERS[name] = build
        if wide:
            WIDE.add(name)
        if note is not None:
            NOTES[name] = note
        if why_hidden is not None:
            WHY_HIDDEN[name] = why_hidden
        return build

    return register


def declarations(path: Path = DECLARATIONS) -> list[dict[str, str]]:
    """The entries of ``sql/charts/_charts.yml``, checked: name, title, description and empty."""
    from pipelines.analytics.catalog import read_yaml

    doc = read_yaml(path)
    if not isinstance(doc, dict) or doc.get("version") != 2 or not isinstance(doc.get("charts"), list):
        raise ValueError(f"{path}: expected 'version: 2' and a list 'charts'")
    entries = doc["charts"]
    for entry in entries:
        if not isinstance(entry, dict) or set(entry) != DECLARED_FIELDS:
            raise ValueError(f"{path}: each chart has exactly name, title, description and empty, got {entry!r}")
        if not all(isinstance(v, str) and v.strip() for v in entry.values()):
            raise ValueError(f"{path}: chart {entry.get('name')!r} has an empty or non-text field")
    names = [e["name"] for e in entries]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: a chart is declared twice: {sorted(n for n in names if names.count(n) > 1)}")
    return entries


def load_charts(builders: dict[str, ChartBuilder]) -> dict[str, ChartDef]:
    """Every chart, in the declarations' order: one SQL file, one declaration and one function each."""
    declared = {e["name"]: e for e in declarations()}
    found = {
        "SQL file sql/charts/<name>.sql": {p.stem for p in SQL_DIR.glob("*.sql")},
        "declaration in sql/charts/_charts.yml": set(declared),
        "function in dashboards/charts.py": set(builders),
    }
    every = set().union(*found.values())
    for what, names in found.items():
        if missing := every - names:
            raise LookupError(f"chart(s) {', '.join(sorted(missing))} have no {what}")
    return {
        name: ChartDef(name, e["title"], " ".join(e["description"].split()), " ".join(e["empty"].split()),
                       builders[name], name in WIDE, NOTES.get(name), WHY_HIDDEN.get(name))
        for name, e in declared.items()
    }


def informative(rows: list[dict]) -> int:
    """How many rows carry information: all of them, unless the SQL says otherwise in ``informative``."""
    return sum(1 for row in rows if row.get("informative", True))
