"""The dashboard: one asset per chart of ``dashboards.charts`` (group "dashboard", downstream of the
marts and tables its SQL reads; all drawn by one step), one for the failure views (a page per
failure annotation, and the drill-down pictures when asked), and one for the page that shows them
all, so every rebuild of the marts refreshes the page.

Files land in ``<warehouse>/dashboards/`` (see ``dashboards/page.py``) under names of their own
(a digest of what they are made from, or the build attempt's id), and each step records what it
wrote in the build attempt; the commit makes the build's page the dashboard. A new chart is a SQL
file in ``sql/charts/``, its entry in ``sql/charts/_charts.yml`` and a function in
``dashboards/charts.py``; its asset appears here by itself.

What a build draws besides the views and the charts' specs (the page draws each chart from its
spec, and its menu saves it as SVG or PNG): ``pictures`` = none (default) | svg (every chart's SVG
and the drill-down pictures) | png (those and their PNGs too). It comes from the assets'
config (the Dagster UI's launchpad), else the ``pictures`` field of the TracehouseResource
(``tracehouse build --pictures``), else $TRACEHOUSE_PICTURES.
"""

import dagster as dg
from pydantic import Field

from dashboards import failure_view, page
from dashboards.charts import CHARTS
from dashboards.drilldown import DEFAULT_LIMIT, LIMIT_ENV
from dashboards.registry import ChartDef
from pipelines import db, schema
from pipelines.config import PICTURES_ENV, pictures_option
from pipelines.defs.resources import TracehouseResource, run_attempt
from pipelines.progress import event

GROUP = "dashboard"
PAGE_KEY = dg.AssetKey("dashboard")
VIEWS_KEY = dg.AssetKey("failure_views")


def chart_key(name: str) -> dg.AssetKey:
    return dg.AssetKey(f"chart_{name}")


def upstream_of(reads: tuple[str, ...] | list[str]) -> list[dg.AssetKey]:
    """The assets of the marts and canonical tables a query reads (``reads``: derived from its SQL, through
    the macros it calls, by pipelines.catalog.sql_reads)."""
    assets = set(db.mart_names()) | set(schema.TABLES)
    unknown = sorted(set(reads) - assets)
    if unknown:
        raise ValueError(f"reads {unknown} are no mart or table")
    return [dg.AssetKey(name) for name in sorted(set(reads))]


class PicturesConfig(dg.Config):
    pictures: str = Field(
        default="",
        description="none | svg | png: what a build draws besides the failure views and the charts' specs "
        "(svg: every chart's SVG and the drill-down pictures; png: those and their PNGs too). Empty: the resource's "
        f"`pictures` (tracehouse build --pictures), else ${PICTURES_ENV}, else none.",
    )


class ViewsConfig(PicturesConfig):
    limit: int | None = Field(
        default=None,
        description=f"drill-down pictures to draw when asked (default: ${LIMIT_ENV}, else {DEFAULT_LIMIT})",
    )


def pictures_of(config: PicturesConfig, tracehouse: TracehouseResource) -> str:
    """The config's choice, else the resource's (``tracehouse build --pictures``), else the environment's."""
    return pictures_option(config.pictures or getattr(tracehouse, "pictures", "") or None)


def chart_spec(chart: ChartDef) -> dg.AssetSpec:
    """The asset of one chart: the marts and tables its SQL reads, its title and SQL file."""
    return dg.AssetSpec(
        chart_key(chart.name),
        group_name=GROUP,
        kinds={"duckdb", "vegalite"},
        deps=upstream_of(chart.reads),
        description=f"{chart.title}: {chart.description}",
        metadata={"sql_file": chart.sql_path.relative_to(db.REPO).as_posix()},
        skippable=True,
    )


def charts_asset(charts: list[ChartDef] | None = None) -> dg.AssetsDefinition:
    """One multi-asset step drawing the charts (default: every chart) over one DuckDB connection: a
    step a chart cost each chart a step's events and questions to the event log (BENCHMARKS.md)."""
    chosen = list(charts if charts is not None else CHARTS.values())

    @dg.multi_asset(name="charts", specs=[chart_spec(chart) for chart in chosen], can_subset=True,
                    description="Every chart of sql/charts: its rows and its Vega-Lite spec (and pictures when asked).")
    def _charts(context: dg.AssetExecutionContext, config: PicturesConfig, tracehouse: TracehouseResource):
        warehouse = tracehouse.wh
        attempt = run_attempt(tracehouse, context)
        pictures = pictures_of(config, tracehouse)
        selected = context.selected_asset_keys
        con = db.connection(warehouse, attempt.current_snapshot())
        try:
            for chart in chosen:
                if chart_key(chart.name) not in selected:
                    continue
                out = page.build_chart(warehouse, chart, con, pictures)
                attempt.put_output(f"chart.{chart.name}", {
                    "rows": out.rows,
                    "empty": out.empty,
                    "spec": warehouse.rel(out.spec) if out.spec else None,
                    "svg": warehouse.rel(out.svg) if out.svg else None,
                    "png": warehouse.rel(out.png) if out.png else None,
                    "files": [warehouse.rel(p) for p in out.files()],
                })
                if out.empty:
                    tracehouse.say(event("chart_hidden", chart=chart.name, rows=out.rows, seconds=out.seconds))
                else:
                    tracehouse.say(event("chart_done", chart=chart.name, rows=out.rows, seconds=out.seconds))
                yield dg.MaterializeResult(
                    asset_key=chart_key(chart.name),
                    metadata={
                        "rows": out.rows,
                        "hidden": out.empty or "",
                        "spec": str(out.spec or ""),
                        "svg": str(out.svg or ""),
                        "png": str(out.png or ""),
                        "seconds": round(out.seconds, 3),
                    },
                )
        finally:
            con.close()

    return _charts


CHART_ASSETS = [charts_asset()]

@dg.asset(
    key=VIEWS_KEY,
    group_name=GROUP,
    kinds={"duckdb", "html"},
    deps=upstream_of(failure_view.reads()),
    description="A failure view per failure annotation (dashboards/failures/failure-*.html: the query, answers, "
    "reason, the faulty operation with its inputs, outputs and path to the prediction, or the trajectory with "
    "the decisive step), from a few set-based queries; drill-down pictures too with pictures = svg | png.",
)
def failure_views(
    context: dg.AssetExecutionContext, config: ViewsConfig, tracehouse: TracehouseResource
) -> dg.MaterializeResult:
    warehouse = tracehouse.wh
    attempt = run_attempt(tracehouse, context)
    con = db.connection(warehouse, attempt.current_snapshot())
    try:
        manifest = failure_view.write_all(warehouse, con, pictures_of(config, tracehouse), config.limit,
                                          say=tracehouse.say)
    finally:
        con.close()
    attempt.put_output("drilldown", manifest)
    pictures = (f"{manifest['drawn']} pictures ({manifest['rendered']} new SVGs, {manifest['converted']} new PNGs)"
                if manifest["pictures_option"] != "none" else "no drill-down pictures")
    tracehouse.say(event("pictures_done", views=manifest["views"], written=manifest["written"], pictures=pictures,
                         seconds=manifest["seconds"]))
    context.log.info(f"wrote {manifest['written']} of {manifest['views']} failure views, {pictures}, "
                     f"in {manifest['seconds']:.1f} s")
    for annotation_id, reason in list(manifest["failed"].items())[:10]:
        context.log.warning(f"no failure view for {annotation_id!r}: {reason}")
    return dg.MaterializeResult(
        metadata={
            "views": manifest["views"],
            "written": manifest["written"],
            "total": manifest["total"],
            "pictures": manifest["pictures_option"],
            "drawn": manifest["drawn"],
            "limit": manifest["limit"],
            "rendered": manifest["rendered"],
            "converted": manifest["converted"],
            "failed": len(manifest["failed"]),
            "seconds": manifest["seconds"],
        }
    )


@dg.asset(
    key=PAGE_KEY,
    group_name=GROUP,
    kinds={"html"},
    deps=[*(chart_key(name) for name in CHARTS), VIEWS_KEY, *upstream_of(page.page_reads())],
    description="The build's dashboard page (dashboards/index.html once committed): every chart with something "
    "to show and the annotation table (each row opens its failure view) on one page that works offline (all "
    "scripts inlined, no request to any host).",
)
def dashboard(context: dg.AssetExecutionContext, tracehouse: TracehouseResource) -> dg.MaterializeResult:
    warehouse = tracehouse.wh
    attempt = run_attempt(tracehouse, context)
    charts = {}
    for name in CHARTS:
        output = attempt.output(f"chart.{name}")
        if not output or "empty" not in output:
            raise RuntimeError(f"chart {name} was not built in this build")
        paths = {key: warehouse.path(output[key]) if output.get(key) else None for key in ("spec", "svg", "png")}
        charts[name] = page.ChartOutput(name, output["rows"], paths["spec"], paths["svg"], paths["png"], 0.0,
                                        output["empty"])
    con = db.connection(warehouse, attempt.current_snapshot())
    try:
        path, numbers = page.build_page(warehouse, con, charts, attempt.output("drilldown"), attempt.id, attempt.build)
    finally:
        con.close()
    attempt.put_output("dashboard", {"page": warehouse.rel(path), "files": [warehouse.rel(path)]})
    tracehouse.say(event("page_done", mb=numbers["bytes"] / 1e6, seconds=numbers["seconds"]))
    context.log.info(f"published {path} ({numbers['bytes'] / 1e6:.1f} MB) in {numbers['seconds']:.2f} s")
    return dg.MaterializeResult(metadata={"path": str(path), **numbers})


defs = dg.Definitions(assets=[*CHART_ASSETS, failure_views, dashboard])
