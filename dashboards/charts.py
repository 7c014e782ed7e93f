"""The charts of the failure dashboard: one Altair function per chart, registered with ``@chart``.

A chart is three things under one name:

* ``sql/charts/<name>.sql``: a small SELECT over the marts or the tables (all aggregation happens in
  SQL), whose rows the chart draws;
* one entry in ``sql/charts/_charts.yml``: its title and description on the page (and in Dagster);
  the order of the entries is the order of the cards;
* one function here, registered under that name, turning the rows into an Altair chart::

    @chart("my_chart")
    def my_chart(rows: list[dict]) -> alt.TopLevelMixin:
        return alt.Chart(alt.Data(values=rows)).mark_bar().encode(...)

:data:`CHARTS` joins the three (in the YAML's order) and refuses a name that lacks one of them.

Every chart must carry a ``system`` column and attach the click selection ``pick()`` to the mark that
shows it; ``linked`` (applied by the renderer) adds the page-wide system focus: the page sets
``system_filter`` (rows of other systems are filtered out) on every chart except the one clicked,
and ``system_focus`` (other systems are dimmed) on all of them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import altair as alt
import yaml

from pipelines.db import SQL_DIR as SQL_ROOT

SQL_DIR = SQL_ROOT / "charts"
DECLARATIONS = SQL_DIR / "_charts.yml"

PICK = "pick"  # the click selection's name; the page listens to this signal
FILTER_PARAM = "system_filter"
FOCUS_PARAM = "system_focus"
SYSTEM_FILTER = f"{FILTER_PARAM} == null || datum.system == {FILTER_PARAM}"
FOCUSED = f"{FOCUS_PARAM} == null || datum.system == {FOCUS_PARAM}"

ERROR_COLORS = {
    "ExtractionError": "#4e79a7",
    "UpdateError": "#76b7b2",
    "DeletionError": "#59a14f",
    "RetrievalError": "#f28e2b",
    "ResponseError": "#e15759",
    "AnnotationError": "#bab0ac",
    "LLMAsAJudgeError": "#9c755f",
    "unlabelled": "#d9d9d9",
}
EXTRA_COLORS = ["#edc948", "#b07aa1", "#ff9da7", "#af7aa1", "#8cd17d", "#499894", "#d37295", "#a0cbe8"]
PHASE_COLORS = {
    "construction": "#4e79a7",
    "search": "#f28e2b",
    "answer": "#e15759",
    "judge": "#9c755f",
    "unknown": "#bab0ac",
}
SPOKE_COLORS = {"agent acted in the step": "#4e79a7", "another agent acted": "#e15759", "unknown": "#bab0ac"}

ChartBuilder = Callable[[list[dict]], alt.TopLevelMixin]


@dataclass(frozen=True)
class ChartDef:
    name: str
    title: str
    description: str
    build: ChartBuilder

    @property
    def sql_path(self) -> Path:
        return SQL_DIR / f"{self.name}.sql"

    @property
    def sql(self) -> str:
        return self.sql_path.read_text()


BUILDERS: dict[str, ChartBuilder] = {}


def chart(name: str) -> Callable[[ChartBuilder], ChartBuilder]:
    """Register the function that draws the rows of ``sql/charts/<name>.sql``."""
    if not name.isidentifier() or not name.islower():
        raise ValueError(f"chart name {name!r} must be a lower-case identifier")

    def register(build: ChartBuilder) -> ChartBuilder:
        if name in BUILDERS:
            raise ValueError(f"chart {name!r} is registered twice")
        BUILDERS[name] = build
        return build

    return register


def declarations(path: Path = DECLARATIONS) -> list[dict[str, str]]:
    """The entries of ``sql/charts/_charts.yml``, checked: name, title and description, nothing else."""
    doc = yaml.safe_load(path.read_text())
    if not isinstance(doc, dict) or doc.get("version") != 2 or not isinstance(doc.get("charts"), list):
        raise ValueError(f"{path}: expected 'version: 2' and a list 'charts'")
    entries = doc["charts"]
    for entry in entries:
        if not isinstance(entry, dict) or set(entry) != {"name", "title", "description"}:
            raise ValueError(f"{path}: each chart has exactly name, title and description, got {entry!r}")
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
    return {name: ChartDef(name, e["title"], e["description"], builders[name]) for name, e in declared.items()}


# -- shared pieces --------------------------------------------------------------------------------


def pick() -> alt.Parameter:
    """Click a mark to focus its system on the whole page; click empty space to clear."""
    return alt.selection_point(name=PICK, fields=["system"], on="click", clear="dblclick")


def focus_opacity(dimmed: float = 0.2) -> alt.OpacityValue:
    return alt.when(FOCUSED).then(alt.value(1.0)).otherwise(alt.value(dimmed))


def linked(spec: alt.TopLevelMixin) -> alt.TopLevelMixin:
    """Add the page-wide system parameters and the filter they drive."""
    return spec.add_params(
        alt.param(name=FILTER_PARAM, value=None), alt.param(name=FOCUS_PARAM, value=None)
    ).transform_filter(SYSTEM_FILTER)


def systems_in_order(rows: list[dict]) -> list[str]:
    """Memory systems first, then multi-agent ones, each alphabetically."""
    kinds = {r["system"]: r.get("graph_kind") or "" for r in rows}
    return sorted(kinds, key=lambda s: (kinds[s] != "memory", s))


def color_scale(values: set[str], known: dict[str, str]) -> alt.Scale:
    """Fixed colours for known values (in their order), then spare colours for any others."""
    domain = [v for v in known if v in values] + sorted(values - set(known))
    spare = iter(EXTRA_COLORS * (1 + len(domain) // len(EXTRA_COLORS)))
    return alt.Scale(domain=domain, range=[known.get(v) or next(spare) for v in domain])


def data(rows: list[dict]) -> alt.Data:
    return alt.Data(values=rows)


def pct(field: str, title: str) -> alt.Tooltip:
    return alt.Tooltip(field, type="quantitative", title=title, format=".1%")


# -- the charts -----------------------------------------------------------------------------------


@chart("error_mix")
def error_mix(rows: list[dict]) -> alt.TopLevelMixin:
    scale = color_scale({r["error_type"] for r in rows}, ERROR_COLORS)
    order = scale.domain
    for row in rows:
        row["error_rank"] = order.index(row["error_type"])
    systems = systems_in_order(rows)
    return (
        alt.Chart(data(rows))
        .mark_bar()
        .encode(
            y=alt.Y("system:N", sort=systems, title=None),
            x=alt.X("n:Q", stack="normalize", title="share of the system's failure annotations",
                    axis=alt.Axis(format="%")),
            color=alt.Color("error_type:N", scale=scale, title="error type",
                            legend=alt.Legend(orient="bottom", columns=4)),
            order=alt.Order("error_rank:Q"),
            opacity=focus_opacity(),
            tooltip=[
                alt.Tooltip("system:N"),
                alt.Tooltip("error_type:N", title="error type"),
                alt.Tooltip("error_class:N", title="error class"),
                alt.Tooltip("n:Q", title="annotations"),
                alt.Tooltip("system_total:Q", title="of (system total)"),
                pct("share", "share of system"),
                pct("memory_share", "share of memory errors"),
            ],
        )
        .add_params(pick())
        .properties(title="Error-type mix per system", width=440, height=alt.Step(24))
    )


@chart("failure_rate_heatmap")
def failure_rate_heatmap(rows: list[dict]) -> alt.TopLevelMixin:
    for row in rows:
        row["cell_text"] = f"{row['label']}\n{row['detail']}"
    systems = systems_in_order(rows)
    datasets = sorted({r["dataset"] for r in rows}, key=lambda d: (
        next(r["graph_kind"] != "memory" for r in rows if r["dataset"] == d), d))
    tooltip = [
        alt.Tooltip("system:N"),
        alt.Tooltip("dataset:N"),
        pct("failure_rate", "failure rate"),
        pct("ci_low", "95% CI low"),
        pct("ci_high", "95% CI high"),
        alt.Tooltip("detail:N", title="failed / judged"),
        alt.Tooltip("n_graphs:Q", title="graphs"),
        alt.Tooltip("n_annotations:Q", title="attributed failures"),
        alt.Tooltip("denominator_note:N", title="note"),
    ]
    base = alt.Chart(data(rows)).encode(
        x=alt.X("dataset:N", sort=datasets, title=None, axis=alt.Axis(labelAngle=0, orient="top")),
        y=alt.Y("system:N", sort=systems, title=None),
        tooltip=tooltip,
    )
    cells = base.mark_rect(color="#eeeeee", stroke="white", strokeWidth=2).encode(opacity=focus_opacity(0.3))
    rated = (
        base.mark_rect(stroke="white", strokeWidth=2)
        .encode(
            color=alt.Color("failure_rate:Q", title="failure rate",
                            scale=alt.Scale(scheme="orangered", domain=[0, 1]),
                            legend=alt.Legend(format="%", orient="right")),
            opacity=focus_opacity(0.3),
        )
        .transform_filter("datum.failure_rate != null")
    )
    text = base.mark_text(lineBreak="\n", fontSize=11).encode(
        text="cell_text:N",
        color=alt.when("datum.failure_rate > 0.6").then(alt.value("white")).otherwise(alt.value("#222222")),
        opacity=focus_opacity(0.3),
    )
    return alt.layer(cells.add_params(pick()), rated, text).properties(
        title="Failure rate per system and dataset", width=alt.Step(92), height=alt.Step(40)
    )


@chart("operation_types")
def operation_types(rows: list[dict]) -> alt.TopLevelMixin:
    totals: dict[str, int] = {}
    for row in rows:
        totals[row["operation_type"]] = totals.get(row["operation_type"], 0) + row["n"]
    types = sorted(totals, key=lambda t: (t == "(none named)", -totals[t], t))
    base = alt.Chart(data(rows)).encode(
        x=alt.X("operation_type:N", sort=types, title=None, axis=alt.Axis(labelAngle=-30, orient="top")),
        y=alt.Y("system:N", sort=systems_in_order(rows), title=None),
        tooltip=[
            alt.Tooltip("system:N"),
            alt.Tooltip("operation_type:N", title="operation type"),
            alt.Tooltip("n:Q", title="annotations"),
            alt.Tooltip("system_total:Q", title="of (system total)"),
            pct("share", "share of system"),
            alt.Tooltip("top_operations:N", title="operations"),
        ],
    )
    cells = base.mark_rect(stroke="white", strokeWidth=2).encode(
        color=alt.Color("share:Q", title="share of system", scale=alt.Scale(scheme="blues", type="sqrt", domain=[0, 1]),
                        legend=alt.Legend(format="%")),
        opacity=focus_opacity(0.3),
    )
    text = base.mark_text(fontSize=11).encode(
        text="n:Q",
        color=alt.when("datum.share > 0.45").then(alt.value("white")).otherwise(alt.value("#222222")),
        opacity=focus_opacity(0.3),
    )
    return alt.layer(cells.add_params(pick()), text).properties(
        title="Faulty operation types per system", width=alt.Step(62), height=alt.Step(30)
    )


@chart("propagation")
def propagation(rows: list[dict]) -> alt.TopLevelMixin:
    systems = systems_in_order(rows)
    phases = color_scale({r["phase"] for r in rows}, PHASE_COLORS)
    selection = pick()

    def panel(measure: str, title: str, row_labels: bool) -> alt.FacetChart:
        subset = [r for r in rows if r["measure"] == measure]
        buckets = [b for b, _ in sorted({(r["bucket"], r["bucket_order"]) for r in subset}, key=lambda x: x[1])]
        return (
            alt.Chart(data(subset))
            .mark_bar()
            .encode(
                x=alt.X("bucket:N", sort=buckets, title=title, axis=alt.Axis(labelAngle=-35, labelLimit=110)),
                y=alt.Y("n:Q", title="annotations", axis=alt.Axis(tickCount=3)),
                color=alt.Color("phase:N", scale=phases, title="phase of the fault",
                                legend=alt.Legend(orient="bottom")),
                opacity=focus_opacity(),
                tooltip=[
                    alt.Tooltip("system:N"),
                    alt.Tooltip("bucket:N", title=measure),
                    alt.Tooltip("phase:N"),
                    alt.Tooltip("n:Q", title="annotations"),
                    alt.Tooltip("system_total:Q", title="of (system total)"),
                ],
            )
            .add_params(selection)
            .properties(width=alt.Step(30), height=55)
            .facet(row=alt.Row("system:N", sort=systems, title=None,
                               header=alt.Header(labelAngle=0, labelAlign="left", labelFontWeight="bold",
                                                 labels=row_labels)))
        )

    with warnings.catch_warnings():  # one click selection shared by both panels is what we want
        warnings.filterwarnings("ignore", message="Automatically deduplicated selection parameter")
        return alt.hconcat(
            panel("edges to the prediction", "edges from the faulty operation to the prediction", True),
            panel("sessions between fault and query", "sessions between fault and query", False),
            spacing=30,
        ).properties(title="Propagation distance of memory-system failures")


@chart("responsible_agents")
def responsible_agents(rows: list[dict]) -> alt.TopLevelMixin:
    return (
        alt.Chart(data(rows))
        .mark_bar()
        .encode(
            y=alt.Y("agent:N", sort=alt.EncodingSortField("agent_rank", order="ascending"), title=None,
                    axis=alt.Axis(labelLimit=260)),
            x=alt.X("share:Q", title="share of the system's failure annotations", axis=alt.Axis(format="%")),
            color=alt.Color("agent_role:N", title="role", legend=alt.Legend(orient="bottom", columns=4),
                            scale=color_scale({r["agent_role"] for r in rows}, {"other": "#d9d9d9"})),
            row=alt.Row("system:N", sort=systems_in_order(rows), title=None,
                        header=alt.Header(labelAngle=0, labelAlign="left", labelFontWeight="bold")),
            opacity=focus_opacity(),
            tooltip=[
                alt.Tooltip("system:N"),
                alt.Tooltip("agent:N"),
                alt.Tooltip("agent_role:N", title="role"),
                alt.Tooltip("n:Q", title="annotations"),
                alt.Tooltip("system_total:Q", title="of (system total)"),
                pct("share", "share of system"),
            ],
        )
        .add_params(pick())
        .resolve_scale(y="independent")
        .properties(title="Agents responsible for the decisive mistake", width=320, height=alt.Step(15))
    )


@chart("decisive_position")
def decisive_position(rows: list[dict]) -> alt.TopLevelMixin:
    return (
        alt.Chart(data(rows))
        .mark_bar(stroke="white", strokeWidth=0.5)
        .encode(
            x=alt.X("bin_start:Q", bin="binned", title="position of the decisive step in the trajectory",
                    scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%", tickCount=5)),
            x2="bin_end:Q",
            y=alt.Y("n:Q", title="annotations", axis=alt.Axis(tickCount=3)),
            color=alt.Color("spoke:N", scale=color_scale({r["spoke"] for r in rows}, SPOKE_COLORS),
                            title="annotated agent", legend=alt.Legend(orient="bottom")),
            row=alt.Row("system:N", sort=systems_in_order(rows), title=None,
                        header=alt.Header(labelAngle=0, labelAlign="left", labelFontWeight="bold")),
            opacity=focus_opacity(),
            tooltip=[
                alt.Tooltip("system:N"),
                pct("bin_start", "from"),
                pct("bin_end", "to"),
                alt.Tooltip("spoke:N", title="annotated agent"),
                alt.Tooltip("n:Q", title="annotations"),
                alt.Tooltip("system_total:Q", title="of (system total)"),
                alt.Tooltip("mean_steps:Q", title="mean trajectory steps", format=".1f"),
            ],
        )
        .add_params(pick())
        .properties(title="Position of the decisive mistake", width=420, height=60)
    )


@chart("corpus_overview")
def corpus_overview(rows: list[dict]) -> alt.TopLevelMixin:
    labels = [r["label"] for r in sorted(rows, key=lambda r: (r["graph_kind"] != "memory", r["system"], r["dataset"]))]
    labels = list(dict.fromkeys(labels))
    measures = ["graphs", "nodes", "edges", "annotations"]
    base = alt.Chart().encode(
        y=alt.Y("label:N", sort=labels, title=None),
        x=alt.X("value:Q", title=None, axis=alt.Axis(format="~s", tickCount=3)),
        tooltip=[
            alt.Tooltip("system:N"),
            alt.Tooltip("dataset:N"),
            alt.Tooltip("measure:N"),
            alt.Tooltip("value:Q", format=","),
        ],
    )
    bars = base.mark_bar().encode(color=alt.Color("system:N", legend=None), opacity=focus_opacity())
    text = base.mark_text(align="left", dx=3, fontSize=10).encode(text=alt.Text("value:Q", format=","),
                                                                   opacity=focus_opacity())
    return (
        alt.layer(bars.add_params(pick()), text, data=data(rows))
        .properties(width=130, height=alt.Step(16))
        .facet(column=alt.Column("measure:N", sort=measures, title=None,
                                 header=alt.Header(labelFontWeight="bold")))
        .resolve_scale(x="independent")
        .properties(title="Corpus overview")
    )


CHARTS: dict[str, ChartDef] = load_charts(BUILDERS)
