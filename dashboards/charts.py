"""The charts of the failure dashboard: one Altair function per chart, registered with ``@chart``
(:mod:`dashboards.registry` says what a chart is), and the pieces they share::

    @chart("my_chart")
    def my_chart(rows: list[dict]) -> alt.TopLevelMixin:
        import altair as alt

        return alt.Chart(data(rows)).mark_bar().encode(...)

:data:`CHARTS` is every chart, in the order of ``sql/charts/_charts.yml``, once the functions here
are registered; a name that lacks a SQL file, a declaration or a function stops the import.

Altair is imported inside the functions that build specs, never when this module is imported: a build
whose charts' rows did not change (their files exist) never pays for loading it.

Encodings are given as Altair's channel objects (``alt.X2("hi:Q")``, ``alt.Text(...)``, a condition
wrapped as ``alt.OpacityValue(**alt.when(...)...)``), never as shorthand strings or dicts: Altair
turns each of those into an object through ``from_dict``, which indexes all its schema classes anew
every time, and a chart has many of them.

Every chart must carry a ``system`` column and attach the click selection ``pick()`` to the mark that
shows it; ``linked`` (applied by the renderer) adds the page-wide system focus: the page sets
``system_filter`` (rows of other systems are filtered out) on every chart except the one clicked,
and ``system_focus`` (other systems are dimmed) on all of them.

Colours come from :mod:`dashboards.palette`. Imports: :mod:`dashboards.registry`,
:mod:`dashboards.palette` and the standard library; Altair only inside the functions.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from dashboards.palette import (
    CATEGORY_LIMIT,
    COMMON_CATEGORY_COLORS,
    ERROR_COLORS,
    PHASE_COLORS,
    SPOKE_COLORS,
    category_scale,
    color_scale,
    method_scale,
    role_scale,
    system_scale,
)
from dashboards.registry import BUILDERS, ChartDef, chart, load_charts

if TYPE_CHECKING:  # only for annotations: the module never imports Altair itself
    import altair as alt

PICK = "pick"  # the click selection's name; the page listens to this signal
FILTER_PARAM = "system_filter"
FOCUS_PARAM = "system_focus"
SYSTEM_FILTER = f"{FILTER_PARAM} == null || datum.system == {FILTER_PARAM}"
FOCUSED = f"{FOCUS_PARAM} == null || datum.system == {FOCUS_PARAM}"

# Plot widths that fill a half-width card (two cards side by side at 1400 px) or a full-width one.
HALF_WIDTH = 470
FULL_WIDTH = 1180

# The cross-system operation types of the seed sql/seeds/operation_types.csv, memory-system work
# first, then the evaluation, then multi-agent work (a test checks the seed has exactly these).
TAXONOMY = (
    "extraction", "update", "deletion", "embedding", "segmentation", "retrieval", "response", "judge",
    "input", "planning", "delegation", "code", "tool_use", "file_read", "verification", "final_answer",
    "communication", "other",
)
NO_OPERATION = "(none named)"


# -- shared pieces --------------------------------------------------------------------------------


def pick() -> alt.Parameter:
    """Click a mark to focus its system on the whole page; click empty space to clear."""
    import altair as alt

    return alt.selection_point(name=PICK, fields=["system"], on="click", clear="dblclick")


def focus_opacity(dimmed: float = 0.2) -> alt.OpacityValue:
    import altair as alt

    return alt.OpacityValue(**alt.when(FOCUSED).then(alt.value(1.0)).otherwise(alt.value(dimmed)))


def linked(spec: dict[str, Any]) -> dict[str, Any]:
    """Add the page-wide system parameters and the filter they drive to a chart's spec dict, at its
    top level, where Altair's ``add_params`` and ``transform_filter`` put them in the end (the test
    compares). Asked of Altair, they copy the whole chart twice, for every chart of a build."""
    return {**spec,
            "params": [*spec.get("params", []), {"name": FILTER_PARAM, "value": None},
                       {"name": FOCUS_PARAM, "value": None}],
            "transform": [*spec.get("transform", []), {"filter": SYSTEM_FILTER}]}


def systems_in_order(rows: list[dict]) -> list[str]:
    """Memory systems first, then multi-agent ones, each alphabetically."""
    kinds = {r["system"]: r.get("graph_kind") or "" for r in rows}
    return sorted(kinds, key=lambda s: (kinds[s] != "memory", s))


def fold_categories(rows: list[dict], field: str, group: tuple[str, ...], sums: tuple[str, ...],
                    noun: str, limit: int = CATEGORY_LIMIT, keep: tuple[str, ...] = ()) -> list[dict]:
    """At most ``limit`` categories of ``field``: the largest (by the sum of ``n`` over all rows, and
    ``keep`` always), the others summed into one 'other (K <noun>)' row per ``group``; each folded
    row names what it holds in ``folded``. A legend of more colours than that cannot be told apart."""
    totals: dict[str, float] = {}
    for row in rows:
        totals[row[field]] = totals.get(row[field], 0) + (row.get("n") or 0)
    if len(totals) <= limit:
        return rows
    ranked = sorted(totals, key=lambda v: (v not in keep, -totals[v], v))
    kept = set(ranked[: limit - 1])
    folded_names = sorted(set(totals) - kept)
    other = f"other ({len(folded_names)} {noun})"
    out = [row for row in rows if row[field] in kept]
    merged: dict[tuple, dict] = {}
    for row in rows:
        if row[field] in kept:
            continue
        key = tuple(row[g] for g in group)
        into = merged.setdefault(key, {**row, field: other, **{f: None for f in sums},
                                       "folded": ", ".join(folded_names)})
        for f in sums:
            if row.get(f) is not None:
                into[f] = (into[f] or 0) + row[f]
    return out + list(merged.values())


def legend(labels: list[str], width: int, title: str | None = None, columns: int | None = None) -> alt.Legend:
    """A legend under the chart that fits ``width`` pixels with its labels whole: as many columns as
    the longest label allows (an 11 px label is about 6.5 px a character), wrapping to more rows."""
    import altair as alt

    longest = max((len(label) for label in labels), default=8)
    label_px = min(int(longest * 6.5) + 8, width - 30)
    fit = max(1, width // (label_px + 30))
    return alt.Legend(orient="bottom", columns=min(columns or fit, fit, max(1, len(labels))),
                      labelLimit=label_px, title=title)


def names(values: list[str] | set[str], limit: int = 4) -> str:
    """'a, b and c' (and 'and N more' past ``limit``): data named in a card's text."""
    values = sorted(values)
    if len(values) > limit:
        return ", ".join(values[:limit]) + f" and {len(values) - limit} more"
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]


# The rows of the chart being made, by placeholder name (see :func:`data`).
_ROWS: ContextVar[dict[str, list[dict]] | None] = ContextVar("tracehouse_chart_rows", default=None)
ROWS_PLACEHOLDER = "tracehouse-rows-"


def data(rows: list[dict]) -> alt.Data:
    """The chart's data: the rows inline, or, while a chart is made inside :func:`rows_put_back`, a
    named placeholder that it replaces with the rows once Altair is done. Altair deep-copies a
    chart's inline rows at every layer, facet and parameter it adds, and never needs to read them."""
    import altair as alt

    placed = _ROWS.get()
    if placed is None:
        return alt.Data(values=rows)
    name = f"{ROWS_PLACEHOLDER}{len(placed)}"
    placed[name] = rows
    return alt.Data(name=name)


@contextmanager
def rows_put_back() -> Iterator[Callable[[Any], Any]]:
    """Charts made inside take placeholders for their rows (:func:`data`); the function it yields puts
    the rows back into a spec dict, where the placeholders are: the same spec as with inline rows."""
    placed: dict[str, list[dict]] = {}
    token = _ROWS.set(placed)

    def put_back(node: Any) -> Any:
        if isinstance(node, dict):
            if node.keys() == {"name"} and node["name"] in placed:
                return {"values": placed[node["name"]]}
            return {key: put_back(value) for key, value in node.items()}
        if isinstance(node, list):
            return [put_back(value) for value in node]
        return node

    try:
        yield put_back
    finally:
        _ROWS.reset(token)


def pct(field: str, title: str) -> alt.Tooltip:
    import altair as alt

    return alt.Tooltip(field, type="quantitative", title=title, format=".1%")


def row_header() -> alt.Header:
    import altair as alt

    return alt.Header(labelAngle=0, labelAlign="left", labelFontWeight="bold")


def by_total(rows: list[dict], field: str) -> list[str]:
    """The values of ``field``, the largest total ``n`` first (then by name)."""
    totals: dict[str, float] = {}
    for row in rows:
        totals[row[field]] = totals.get(row[field], 0) + (row.get("n") or 0)
    return sorted(totals, key=lambda v: (-totals[v], v))


def unlabelled_systems(rows: list[dict], field: str) -> list[str]:
    """The systems whose every row has 'unlabelled' in ``field``."""
    labels: dict[str, set[str]] = {}
    for row in rows:
        labels.setdefault(row["system"], set()).add(row[field])
    return [system for system, found in labels.items() if found == {"unlabelled"}]


def count_of(rows: list[dict]) -> int:
    return int(sum(row.get("n") or 0 for row in rows))


# -- the charts -----------------------------------------------------------------------------------


def _error_mix_note(rows: list[dict]) -> str | None:
    bare = unlabelled_systems(rows, "error_type")
    if not bare:
        return None
    verb = "publishes" if len(bare) == 1 else "publish"
    return f"{names(bare)} {verb} no error type: {'its bar is' if len(bare) == 1 else 'their bars are'} " \
           "one 'unlabelled' block."


def _error_mix_hidden(rows: list[dict]) -> str:
    systems = sorted({r["system"] for r in rows})
    return (f"None of the {count_of(rows):,} loaded failure annotations ({names(systems)}) has an error type: "
            "every one is 'unlabelled'.")


@chart("error_mix", note=_error_mix_note, why_hidden=_error_mix_hidden)
def error_mix(rows: list[dict]) -> alt.TopLevelMixin:
    import altair as alt

    rows = fold_categories(rows, "error_type", ("system",), ("n", "share", "memory_share"), "error types",
                           keep=("unlabelled",))
    types = by_total(rows, "error_type")
    scale = category_scale(types, ERROR_COLORS)
    order = scale.domain
    for row in rows:
        row["error_rank"] = order.index(row["error_type"])
        if row["error_type"].startswith("other ("):
            row["error_class"] = "other"
    systems = systems_in_order(rows)
    return (
        alt.Chart(data(rows))
        .mark_bar()
        .encode(
            y=alt.Y("system:N", sort=systems, title=None),
            x=alt.X("n:Q", stack="normalize", title="share of the system's failure annotations",
                    axis=alt.Axis(format="%")),
            color=alt.Color("error_type:N", scale=scale, title="error type",
                            legend=legend(order, HALF_WIDTH + 100, columns=4)),
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
        .properties(title="Error-type mix per system", width=HALF_WIDTH, height=alt.Step(24))
    )


def _taxonomies_note(rows: list[dict]) -> str | None:
    bare = sorted({r["system"] for r in rows if r["taxonomy"] == "none"})
    if not bare:
        return None
    return f"Failures without a label ({names(bare)}) are the 'none' taxonomy's grey 'unlabelled' bar."


def _taxonomies_hidden(rows: list[dict]) -> str:
    systems = sorted({r["system"] for r in rows})
    return (f"None of the {count_of(rows):,} loaded failure annotations ({names(systems)}) has a label of a "
            "known taxonomy: every one is 'unlabelled'.")


@chart("failure_modes_across_taxonomies", note=_taxonomies_note, why_hidden=_taxonomies_hidden)
def failure_modes_across_taxonomies(rows: list[dict]) -> alt.TopLevelMixin:
    """One bar per taxonomy, split by common category in the seed's order (normalized in the chart, so
    a system picked elsewhere renormalizes its bars); a segment per system of a category, coloured alike."""
    import altair as alt

    rows = fold_categories(rows, "common_category", ("taxonomy", "system"), ("n", "share"), "categories",
                           keep=("unmapped", "unlabelled"))
    scale = category_scale(by_total(rows, "common_category"), COMMON_CATEGORY_COLORS)
    order = scale.domain
    for row in rows:
        row["category_rank"] = order.index(row["common_category"])
    totals: dict[str, int] = {}
    for row in rows:
        totals[row["taxonomy"]] = totals.get(row["taxonomy"], 0) + row["n"]
    taxonomies = sorted(totals, key=lambda t: (t == "none", -totals[t], t))
    return (
        alt.Chart(data(rows))
        .mark_bar()
        .encode(
            y=alt.Y("taxonomy:N", sort=taxonomies, title=None),
            x=alt.X("n:Q", stack="normalize", title="share of the taxonomy's failure annotations",
                    axis=alt.Axis(format="%")),
            color=alt.Color("common_category:N", scale=scale, title="common category",
                            legend=legend(order, HALF_WIDTH + 100, columns=3)),
            order=alt.Order("category_rank:Q"),
            detail=alt.Detail("system:N"),
            opacity=focus_opacity(),
            tooltip=[
                alt.Tooltip("taxonomy:N"),
                alt.Tooltip("common_category:N", title="common category"),
                alt.Tooltip("system:N"),
                alt.Tooltip("n:Q", title="annotations"),
                alt.Tooltip("taxonomy_total:Q", title="of (taxonomy total)"),
                pct("share", "share of taxonomy"),
            ],
        )
        .add_params(pick())
        .properties(title="Failure modes across taxonomies", width=HALF_WIDTH, height=alt.Step(24))
    )


def _rates_note(rows: list[dict]) -> str | None:
    bare = sorted({r["system"] for r in rows if r["failure_rate"] is None})
    if not bare:
        return None
    verb = "records" if len(bare) == 1 else "record"
    return (f"{names(bare)} {verb} failed runs only, no judged queries: there is no denominator, so "
            f"{'its cells are' if len(bare) == 1 else 'their cells are'} grey, marked 'no denominator', "
            "and give the number of failed runs.")


def _rates_hidden(rows: list[dict]) -> str:
    systems = sorted({r["system"] for r in rows})
    return (f"None of the loaded systems ({names(systems)}) records judged queries, only failed runs: "
            "there is no denominator, so no failure rate.")


@chart("failure_rate_heatmap", note=_rates_note, why_hidden=_rates_hidden)
def failure_rate_heatmap(rows: list[dict]) -> alt.TopLevelMixin:
    import altair as alt

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
    step = max(56, min(100, (HALF_WIDTH - 110) // max(1, len(datasets))))  # the legend takes ~110 px
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
        text=alt.Text("cell_text:N"),
        color=alt.ColorValue(**alt.when("datum.failure_rate > 0.6").then(alt.value("white"))
                             .otherwise(alt.value("#222222"))),
        opacity=focus_opacity(0.3),
    )
    return alt.layer(cells.add_params(pick()), rated, text).properties(
        title="Failure rate per system and dataset", width=alt.Step(step), height=alt.Step(40)
    )


@chart("operation_types")
def operation_types(rows: list[dict]) -> alt.TopLevelMixin:
    """The shared taxonomy on one axis (rows), memory and multi-agent systems side by side (columns)."""
    import altair as alt

    present = {r["operation_type"] for r in rows}
    types = [t for t in TAXONOMY if t in present] + sorted(present - set(TAXONOMY) - {NO_OPERATION})
    if NO_OPERATION in present:
        types.append(NO_OPERATION)
    for row in rows:
        row["kind_label"] = "memory systems" if row["graph_kind"] == "memory" else "multi-agent systems"
        row["cell_text"] = str(row["n"]) if row["n"] else ""
    kinds = ["memory systems", "multi-agent systems"]
    n_systems = len({r["system"] for r in rows}) or 1
    base = alt.Chart().encode(
        x=alt.X("system:N", sort=systems_in_order(rows), title=None,
                axis=alt.Axis(labelAngle=-30, orient="top", labelLimit=120)),
        y=alt.Y("operation_type:N", sort=types, title="operation type (shared taxonomy)",
                scale=alt.Scale(domain=types)),
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
        color=alt.Color("share:Q", title="share of system",
                        scale=alt.Scale(scheme="blues", type="sqrt", domain=[0, 1]),
                        legend=alt.Legend(format="%")),
        opacity=focus_opacity(0.3),
    )
    text = base.mark_text(fontSize=11).encode(
        text=alt.Text("cell_text:N"),
        # white on the darker half of the sqrt scale (share 0.3 lies 55% along it), dark on the lighter
        color=alt.ColorValue(**alt.when("datum.share > 0.3").then(alt.value("white")).otherwise(alt.value("#222222"))),
        opacity=focus_opacity(0.3),
    )
    step = max(26, min(64, (HALF_WIDTH - 190) // n_systems))  # the axis title, labels and legend take ~190 px
    return (
        alt.layer(cells.add_params(pick()), text, data=data(rows))
        .properties(width=alt.Step(step), height=alt.Step(22))
        .facet(column=alt.Column("kind_label:N", sort=kinds, title=None,
                                 header=alt.Header(labelFontWeight="bold", labelOrient="bottom")))
        .resolve_scale(x="independent")
        .properties(title="Faulty operation types per system")
    )


@chart("propagation", wide=True)
def propagation(rows: list[dict]) -> alt.TopLevelMixin:
    """Distances on numeric axes (0, 1, 3 and 7 edges are placed as numbers), the reasons why a
    failure has no distance beside them; bars stacked by phase (the stacking is done in SQL)."""
    import altair as alt

    systems = systems_in_order(rows)
    phases = color_scale({r["phase"] for r in rows}, PHASE_COLORS)
    selection = pick()
    measures = [("edges to the prediction", "edges from the faulty operation to the prediction"),
                ("sessions between fault and query", "sessions between fault and query")]
    panels = []
    for m, (measure, title) in enumerate(measures):
        subset = [r for r in rows if r["measure"] == measure]
        numeric = [r for r in subset if r["panel"] == "distance"]
        reasons = [r for r in subset if r["panel"] == "no distance"]
        # the axis ends at the SQL's cut (axis_max): failures beyond it are a 'more than K' bar beside it
        top = max([r["axis_max"] for r in subset if r["axis_max"] is not None] + [1])
        reason_order = [b for b, _ in sorted({(r["bucket"], r["bucket_order"]) for r in reasons}, key=lambda x: x[1])]
        tooltip = [
            alt.Tooltip("system:N"),
            alt.Tooltip("bucket:N", title=measure),
            alt.Tooltip("phase:N"),
            alt.Tooltip("n:Q", title="annotations"),
            alt.Tooltip("system_total:Q", title="of (system total)"),
        ]
        color = alt.Color("phase:N", scale=phases, title="phase of the fault", legend=alt.Legend(orient="bottom"))
        def y(title: str | None) -> alt.Y:
            return alt.Y("y1:Q", title=title, axis=alt.Axis(tickCount=3, tickMinStep=1, format="d"))

        distance = (
            alt.Chart(data(numeric))
            .transform_calculate(lo="datum.distance - 0.38", hi="datum.distance + 0.38")
            .mark_bar()
            .encode(
                x=alt.X("lo:Q", title=title, scale=alt.Scale(domain=[-0.6, top + 0.6], nice=False, zero=False),
                        axis=alt.Axis(tickMinStep=1, format="d", grid=False)),
                x2=alt.X2("hi:Q"), y=y("annotations" if m == 0 else None), y2=alt.Y2("y0:Q"), color=color,
                opacity=focus_opacity(), tooltip=tooltip,
            )
            .add_params(selection)
            .properties(width=max(200, min(420, 40 * (int(top) + 2))), height=55)  # the wide card's width
        )
        missing = (
            alt.Chart(data(reasons))
            .mark_bar()
            .encode(
                x=alt.X("bucket:N", sort=reason_order, title="beyond the axis or no distance",
                        scale=alt.Scale(domain=reason_order), axis=alt.Axis(labelAngle=-35, labelLimit=110)),
                y=y(None), y2=alt.Y2("y0:Q"), color=color, opacity=focus_opacity(), tooltip=tooltip,
            )
            .add_params(selection)
            .properties(width=alt.Step(26), height=55)
        )
        for panel, labels in ((distance, m == 0), (missing, False)):
            panels.append(panel.facet(row=alt.Row("system:N", sort=systems, title=None,
                                                  header=alt.Header(labelAngle=0, labelAlign="left",
                                                                    labelFontWeight="bold", labels=labels))))

    with warnings.catch_warnings():  # one click selection shared by every panel is what we want
        warnings.filterwarnings("ignore", message="Automatically deduplicated selection parameter")
        return alt.hconcat(*panels, spacing=24).properties(title="Propagation distance of memory-system failures")


@chart("responsible_agents")
def responsible_agents(rows: list[dict]) -> alt.TopLevelMixin:
    import altair as alt

    return (
        alt.Chart(data(rows))
        .mark_bar()
        .encode(
            y=alt.Y("agent:N", sort=alt.EncodingSortField("agent_rank", order="ascending"), title=None,
                    axis=alt.Axis(labelLimit=200)),
            x=alt.X("share:Q", title="share of the system's failure annotations", axis=alt.Axis(format="%")),
            color=alt.Color("agent_role:N", title="role", legend=alt.Legend(orient="bottom", columns=4),
                            scale=role_scale({r["agent_role"] for r in rows})),
            row=alt.Row("system:N", sort=systems_in_order(rows), title=None, header=row_header()),
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
        .properties(title="Agents responsible for the decisive mistake", width=HALF_WIDTH - 190,
                    height=alt.Step(15))
    )


@chart("decisive_position")
def decisive_position(rows: list[dict]) -> alt.TopLevelMixin:
    import altair as alt

    return (
        alt.Chart(data(rows))
        .mark_bar(stroke="white", strokeWidth=0.5)
        .encode(
            x=alt.X("bin_start:Q", bin="binned", title="position of the decisive step in the trajectory",
                    scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%", tickCount=5)),
            x2=alt.X2("bin_end:Q"),
            y=alt.Y("n:Q", title="annotations", axis=alt.Axis(tickCount=3)),
            color=alt.Color("spoke:N", scale=color_scale({r["spoke"] for r in rows}, SPOKE_COLORS),
                            title="annotated agent", legend=alt.Legend(orient="bottom")),
            row=alt.Row("system:N", sort=systems_in_order(rows), title=None, header=row_header()),
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
        .properties(title="Position of the decisive mistake", width=HALF_WIDTH, height=60)
    )


@chart("corpus_overview")
def corpus_overview(rows: list[dict]) -> alt.TopLevelMixin:
    import altair as alt

    labels = [r["label"] for r in sorted(rows, key=lambda r: (r["graph_kind"] != "memory", r["system"], r["dataset"]))]
    labels = list(dict.fromkeys(labels))
    measures = ["graphs", "nodes", "edges", "annotations"]
    base = alt.Chart().encode(
        y=alt.Y("label:N", sort=labels, title=None),
        x=alt.X("value:Q", title=None, axis=alt.Axis(format="~s", tickCount=2), scale=alt.Scale(nice=True)),
        tooltip=[
            alt.Tooltip("system:N"),
            alt.Tooltip("dataset:N"),
            alt.Tooltip("measure:N"),
            alt.Tooltip("value:Q", format=","),
        ],
    )
    bars = base.mark_bar().encode(
        color=alt.Color("system:N", scale=system_scale({r["system"] for r in rows}), title="system",
                        legend=alt.Legend(orient="bottom", columns=4)),
        opacity=focus_opacity(),
    )
    text = base.mark_text(align="left", dx=2, fontSize=9).encode(text=alt.Text("value:Q", format="~s"),
                                                                  opacity=focus_opacity())
    return (
        alt.layer(bars.add_params(pick()), text, data=data(rows))
        .properties(width=(HALF_WIDTH - 250) // 4, height=alt.Step(16))
        .facet(column=alt.Column("measure:N", sort=measures, title=None,
                                 header=alt.Header(labelFontWeight="bold")), spacing=22)
        .resolve_scale(x="independent")
        .properties(title="Corpus overview")
    )


LEADERBOARD_METRICS = ["faulty operation", "error type", "responsible agent", "decisive step", "TRAIL location",
                       "TRAIL category F1", "TRAIL joint", "AgentRx root-cause step", "AgentRx failure case",
                       "AgentRx agent"]


@chart("attribution_leaderboard", wide=True)
def attribution_leaderboard(rows: list[dict]) -> alt.TopLevelMixin:
    """One row per (system, metric) a method was scored on: a memory system has its operation and
    error-type rows, a multi-agent one its agent and step rows, so no row is empty (a grid of systems
    by all four metrics left half its cells blank); the methods of each row on its own axis."""
    import altair as alt

    methods = sorted({r["method"] for r in rows}, key=lambda m: (m.startswith("baseline:"), m))
    systems = systems_in_order(rows)
    for row in rows:
        row["row_label"] = f"{row['system']} · {row['metric']}"
    def rank(metric: str) -> int:  # a benchmark's metric of one dataset of several: 'TRAIL joint · gaia'
        base = metric.split(" · ")[0]
        return LEADERBOARD_METRICS.index(base) if base in LEADERBOARD_METRICS else len(LEADERBOARD_METRICS)

    row_order = sorted({(r["row_label"], r["system"], r["metric"]) for r in rows},
                       key=lambda x: (systems.index(x[1]), rank(x[2]), x[2]))
    y = alt.Y("method:N", sort=methods, title=None, axis=alt.Axis(labelLimit=180))
    x = alt.X("accuracy:Q", title="accuracy (95% Wilson interval); TRAIL: its per-trace mean or weighted F1",
              scale=alt.Scale(domain=[0, 1]),
              axis=alt.Axis(format="%", tickCount=5))
    colour = alt.Color("method:N", scale=method_scale(set(methods)), title="method", legend=None)
    tooltip = [alt.Tooltip("method:N"), alt.Tooltip("system:N"), alt.Tooltip("metric:N"),
               alt.Tooltip("correct:Q", title="right"), alt.Tooltip("n_cases:Q", title="of (cases)"),
               pct("accuracy", "score"), pct("ci_low", "95% low"), pct("ci_high", "95% high"),
               alt.Tooltip("reported:N", title="paper reports"), alt.Tooltip("comparability:N")]
    base = alt.Chart().encode(y=y, opacity=focus_opacity())
    interval = base.mark_rule(strokeWidth=2).encode(x=alt.X("ci_low:Q"), x2=alt.X2("ci_high:Q"), color=colour,
                                                    tooltip=tooltip)
    point = base.mark_point(filled=True, size=60).encode(x=x, color=colour, tooltip=tooltip,
                                                        shape=alt.Shape("is_baseline:N", legend=None))
    layers = [interval, point.add_params(pick())]
    if any(r["accuracy"] is None for r in rows):  # no truth to score against: said, never drawn as 0%
        layers.append(base.mark_text(align="left", fontStyle="italic", color="#57606a", dx=4)
                      .encode(x=alt.XDatum(0), text=alt.TextValue("not scored"))
                      .transform_filter("datum.accuracy == null"))
    return (
        alt.layer(*layers, data=data(rows))
        .properties(width=FULL_WIDTH - 480, height=alt.Step(16))
        .facet(row=alt.Row("row_label:N", sort=[label for label, _, _ in row_order], title=None,
                           header=row_header()), spacing=10)
        .resolve_scale(y="independent")
        .properties(title="Failure attribution: methods side by side")
    )


@chart("attribution_op_distance")
def attribution_op_distance(rows: list[dict]) -> alt.TopLevelMixin:
    """Counts summed over systems: a click here focuses no system, and a system picked on another
    chart filters the rows before they are summed."""
    import altair as alt

    relations = alt.Scale(domain=["upstream", "exact", "downstream"], range=["#4e79a7", "#59a14f", "#e15759"])
    lo = min(r["signed_hops"] for r in rows)
    hi = max(r["signed_hops"] for r in rows)
    return (
        alt.Chart(data(rows))
        .transform_calculate(left="datum.signed_hops - 0.45", right="datum.signed_hops + 0.45")
        .mark_bar()
        .encode(
            x=alt.X("left:Q", title="hops from the annotated operation (− upstream, + downstream)",
                    scale=alt.Scale(domain=[lo - 0.5, hi + 0.5], nice=False), axis=alt.Axis(tickMinStep=1)),
            x2=alt.X2("right:Q"),
            y=alt.Y("sum(n):Q", title="guesses"),
            color=alt.Color("relation:N", scale=relations, title="relation", legend=alt.Legend(orient="bottom")),
            tooltip=[alt.Tooltip("method_label:N", title="method"), alt.Tooltip("relation:N"),
                     alt.Tooltip("signed_hops:Q", title="signed hops"), alt.Tooltip("sum(n):Q", title="guesses")],
        )
        .properties(width=HALF_WIDTH - 250, height=60)
        .facet(row=alt.Row("method_label:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left",
                                                                             labelFontWeight="bold", labelLimit=170)),
               spacing=8)
        .resolve_scale(y="independent")
        .properties(title="Where operation guesses land")
    )


@chart("attribution_confusion")
def attribution_confusion(rows: list[dict]) -> alt.TopLevelMixin:
    """Counts summed over systems, like attribution_op_distance."""
    import altair as alt

    labels = [e for e in ERROR_COLORS if any(r["annotated_error_type"] == e or r["predicted_error_type"] == e
                                             for r in rows)]
    labels += sorted({r["annotated_error_type"] for r in rows} | {r["predicted_error_type"] for r in rows}
                     - set(labels) - {"(no prediction)"})
    columns = labels + (["(no prediction)"] if any(r["predicted_error_type"] == "(no prediction)" for r in rows)
                        else [])
    base = alt.Chart(data(rows)).encode(
        x=alt.X("predicted_error_type:N", sort=columns, title="predicted error type",
                axis=alt.Axis(labelAngle=-40, labelLimit=120)),
        y=alt.Y("annotated_error_type:N", sort=labels, title="annotated error type"),
    )
    cells = base.mark_rect(stroke="white").encode(
        color=alt.Color("sum(n):Q", title="cases", scale=alt.Scale(scheme="blues")),
        tooltip=[alt.Tooltip("method:N"), alt.Tooltip("annotated_error_type:N", title="annotated"),
                 alt.Tooltip("predicted_error_type:N", title="predicted"), alt.Tooltip("sum(n):Q", title="cases")],
    )
    # the count in white on a dark cell: the cell's own colour (the shared scale, whatever the page's
    # system filter left) decides, through Vega's luminance(): below 0.2, white text contrasts more than dark
    text = base.mark_text(fontSize=9).encode(
        text=alt.Text("sum(n):Q"),
        color=alt.ColorValue(**alt.when("luminance(scale('color', datum.sum_n)) < 0.2").then(alt.value("white"))
                             .otherwise(alt.value("#1f2328"))),
    )
    return (
        alt.layer(cells, text)
        .properties(width=alt.Step(22), height=alt.Step(18))
        .facet(column=alt.Column("method:N", title=None, header=alt.Header(labelFontWeight="bold")), spacing=10)
        .properties(title="Error-type confusion")
    )


CHARTS: dict[str, ChartDef] = load_charts(BUILDERS)
