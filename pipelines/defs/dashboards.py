"""The dashboard: one asset, ``dashboard`` (downstream of every mart and table its charts, failure
views and page read), drawn by one step: every chart of ``dashboards.charts``, a failure view per
failure annotation (and the drill-down pictures when asked), then the page that shows them all.

One asset, not one per chart: what a user follows in Dagster is sources, tables, marts, dashboard, and
every asset costs each build's run its events in the event log. The materialization names what each
chart drew or why it is hidden. A chart whose rows and code did not change keeps its files
(``dashboards.page.build_chart``).

Files land in ``<warehouse>/dashboards/`` (see ``dashboards/page.py``) under names of their own
(a digest of what they are made from, or the build attempt's id), and the step records what it wrote
in the build attempt; the commit makes the build's page the dashboard. A new chart is a SQL file in
``sql/charts/``, its entry in ``sql/charts/_charts.yml`` and a function in ``dashboards/charts.py``;
the asset draws it by itself.

What a build draws besides the views and the charts' specs (the page draws each chart from its
spec, and its menu saves it as SVG or PNG): ``pictures`` = none (default) | svg (every chart's SVG
and the drill-down pictures) | png (those and their PNGs too). It comes from the asset's
config (the Dagster UI's launchpad), else the ``pictures`` field of the TracehouseResource
(``tracehouse build --pictures``), else $TRACEHOUSE_PICTURES.
"""

from collections.abc import Callable

import dagster as dg
import duckdb
from pydantic import Field

from dashboards import failure_view, page
from dashboards.charts import CHARTS
from dashboards.drilldown import DEFAULT_LIMIT, LIMIT_ENV
from pipelines import schema
from pipelines.analytics import db
from pipelines.config import PICTURES_ENV, pictures_option
from pipelines.defs.resources import TracehouseResource, run_attempt
from pipelines.progress import event
from pipelines.storage.state import Attempt
from pipelines.storage.warehouse import Warehouse
from pipelines.text import markdown_table

GROUP = "dashboard"
PAGE_KEY = dg.AssetKey("dashboard")
Say = Callable[[str], None]  # one progress line (TracehouseResource.say)


def upstream_of(reads: tuple[str, ...] | list[str]) -> list[dg.AssetKey]:
    """The assets of the marts and canonical tables a query reads (``reads``: derived from its SQL, through
    the macros it calls, by pipelines.analytics.catalog.sql_reads)."""
    assets = set(db.mart_names()) | set(schema.TABLES)
    unknown = sorted(set(reads) - assets)
    if unknown:
        raise ValueError(f"reads {unknown} are no mart or table")
    return [dg.AssetKey(name) for name in sorted(set(reads))]


class DashboardConfig(dg.Config):
    pictures: str = Field(
        default="",
        description="none | svg | png: what a build draws besides the failure views and the charts' specs "
        "(svg: every chart's SVG and the drill-down pictures; png: those and their PNGs too). Empty: the resource's "
        f"`pictures` (tracehouse build --pictures), else ${PICTURES_ENV}, else none.",
    )
    limit: int | None = Field(
        default=None,
        description=f"drill-down pictures to draw when asked (default: ${LIMIT_ENV}, else {DEFAULT_LIMIT})",
    )


def pictures_of(config: DashboardConfig, tracehouse: TracehouseResource) -> str:
    """The config's choice, else the resource's (``tracehouse build --pictures``), else the environment's."""
    return pictures_option(config.pictures or getattr(tracehouse, "pictures", "") or None)


def dashboard_reads() -> list[dg.AssetKey]:
    """What the charts, the failure views and the page read: the dashboard's upstream assets."""
    reads = {name for chart in CHARTS.values() for name in chart.reads}
    return upstream_of(sorted(reads | set(failure_view.reads()) | set(page.page_reads())))


def draw_charts(warehouse: Warehouse, attempt: Attempt, con: duckdb.DuckDBPyConnection, pictures: str,
                say: Say) -> dict[str, page.ChartOutput]:
    """Every chart over one DuckDB connection, each recorded in the build attempt as it is drawn."""
    charts: dict[str, page.ChartOutput] = {}
    for chart in CHARTS.values():
        out = page.build_chart(warehouse, chart, con, pictures)
        attempt.put_output(f"chart.{chart.name}", {
            "rows": out.rows,
            "empty": out.empty,
            "spec": warehouse.rel(out.spec) if out.spec else None,
            "svg": warehouse.rel(out.svg) if out.svg else None,
            "png": warehouse.rel(out.png) if out.png else None,
            "files": [warehouse.rel(p) for p in out.files()],
        })
        said = "chart_hidden" if out.empty else "chart_done"
        say(event(said, chart=chart.name, rows=out.rows, seconds=out.seconds))
        charts[chart.name] = out
    return charts


def write_views(context: dg.AssetExecutionContext, warehouse: Warehouse, attempt: Attempt,
                con: duckdb.DuckDBPyConnection, pictures: str, limit: int | None, say: Say) -> dict:
    """A failure view per failure annotation (and the drill-down pictures when asked), recorded in the attempt."""
    manifest = failure_view.write_all(warehouse, con, pictures, limit, say=say)
    attempt.put_output("drilldown", manifest)
    drawn = (f"{manifest['drawn']} pictures ({manifest['rendered']} new SVGs, {manifest['converted']} new PNGs)"
             if manifest["pictures_option"] != "none" else "no drill-down pictures")
    say(event("pictures_done", views=manifest["views"], written=manifest["written"], pictures=drawn,
              seconds=manifest["seconds"]))
    context.log.info(f"wrote {manifest['written']} of {manifest['views']} failure views, {drawn}, "
                     f"in {manifest['seconds']:.1f} s")
    for annotation_id, reason in list(manifest["failed"].items())[:10]:
        context.log.warning(f"no failure view for {annotation_id!r}: {reason}")
    return manifest


def chart_table(charts: dict[str, page.ChartOutput]) -> str:
    """The materialization's table of charts: rows, and what each shows or why it is hidden."""
    rows = [(name, out.rows, "hidden: " + out.empty if out.empty else "shown", f"{out.seconds:.2f}")
            for name, out in charts.items()]
    return markdown_table(["chart", "rows", "on the page", "seconds"], rows, len(rows))


@dg.asset(
    key=PAGE_KEY,
    group_name=GROUP,
    kinds={"duckdb", "vegalite", "html"},
    deps=dashboard_reads(),
    description="The build's dashboard (dashboards/index.html once committed): every chart of sql/charts with "
    "something to show, and the annotation table, each row opening its failure view (dashboards/failures/"
    "failure-*.html: the query, answers, reason, the faulty operation with its inputs, outputs and path to the "
    "prediction, or the trajectory with the decisive step), on one page that works offline (all scripts "
    "inlined, no request to any host); drill-down pictures too with pictures = svg | png.",
)
def dashboard(context: dg.AssetExecutionContext, config: DashboardConfig,
              tracehouse: TracehouseResource) -> dg.MaterializeResult:
    warehouse = tracehouse.wh
    attempt = run_attempt(tracehouse, context)
    pictures = pictures_of(config, tracehouse)
    con = db.connection(warehouse, attempt.current_snapshot())
    try:
        charts = draw_charts(warehouse, attempt, con, pictures, tracehouse.say)
        manifest = write_views(context, warehouse, attempt, con, pictures, config.limit, tracehouse.say)
        path, numbers = page.build_page(warehouse, con, charts, manifest, attempt.id, attempt.build)
    finally:
        con.close()
    attempt.put_output("dashboard", {"page": warehouse.rel(path), "files": [warehouse.rel(path)]})
    tracehouse.say(event("page_done", mb=numbers["bytes"] / 1e6, seconds=numbers["seconds"]))
    context.log.info(f"published {path} ({numbers['bytes'] / 1e6:.1f} MB) in {numbers['seconds']:.2f} s")
    return dg.MaterializeResult(metadata={
        "path": str(path),
        **numbers,
        "charts": dg.MetadataValue.md(chart_table(charts)),
        "charts_shown": sum(not out.empty for out in charts.values()),
        "failure_views": manifest["views"],
        "failure_views_written": manifest["written"],
        "failure_views_failed": len(manifest["failed"]),
        "pictures": manifest["pictures_option"],
        "pictures_drawn": manifest["drawn"],
        "pictures_limit": manifest["limit"],
    })


defs = dg.Definitions(assets=[dashboard])
