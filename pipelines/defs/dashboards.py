"""The dashboard: one asset per chart of ``dashboards.charts`` (group "dashboard", downstream of the
marts and tables its SQL reads), one for the drill-down pictures, and one for the page that shows
them all, so every rebuild of the marts refreshes the page.

Files land in ``<warehouse>/dashboards/`` (see ``dashboards/page.py``) under names of their own
(a digest of what they are made from, or the build attempt's id), and each step records what it
wrote in the build attempt; the commit makes the build's page the dashboard. A new chart is a SQL
file in ``sql/charts/``, its entry in ``sql/charts/_charts.yml`` and a function in
``dashboards/charts.py``; its asset appears here by itself.
"""

import dagster as dg
from pydantic import Field

from dashboards import drilldown, page
from dashboards.charts import CHARTS, ChartDef
from pipelines import catalog, db, schema
from pipelines.defs.resources import TracehouseResource

GROUP = "dashboard"
PAGE_KEY = dg.AssetKey("dashboard")
DRILLDOWN_KEY = dg.AssetKey("drilldown_pictures")


def chart_key(name: str) -> dg.AssetKey:
    return dg.AssetKey(f"chart_{name}")


def upstream_of(*sqls: str) -> list[dg.AssetKey]:
    """The marts and canonical tables the queries read, directly or through the macros they call
    (DuckDB's own parse tree: pipelines.catalog.references)."""
    assets = set(db.mart_names()) | set(schema.TABLES)
    return [dg.AssetKey(name) for name in sorted(set().union(*map(catalog.references, sqls)) & assets)]


def chart_asset(chart: ChartDef) -> dg.AssetsDefinition:
    @dg.asset(
        key=chart_key(chart.name),
        group_name=GROUP,
        kinds={"duckdb", "vegalite", "svg"},
        deps=upstream_of(chart.sql),
        description=f"{chart.title}: {chart.description}",
        metadata={"sql_file": chart.sql_path.relative_to(db.REPO).as_posix()},
    )
    def _chart(context: dg.AssetExecutionContext, tracehouse: TracehouseResource) -> dg.MaterializeResult:
        warehouse = tracehouse.wh
        attempt = tracehouse.attempt_for(context)
        con = db.connection(warehouse, attempt.current_snapshot())
        try:
            out = page.build_chart(warehouse, chart, con)
        finally:
            con.close()
        attempt.put_output(f"chart.{chart.name}", {"rows": out.rows, "files": [warehouse.rel(p) for p in out.files()]})
        context.log.info(f"chart {chart.name}: {out.rows} rows in {out.seconds:.2f} s -> {out.svg.parent}")
        tracehouse.say(f"chart {chart.name}: {out.rows} rows in {out.seconds:.1f} s")
        return dg.MaterializeResult(
            metadata={
                "rows": out.rows,
                "spec": str(out.spec),
                "svg": str(out.svg),
                "png": str(out.png),
                "seconds": round(out.seconds, 3),
            }
        )

    return _chart


CHART_ASSETS = [chart_asset(chart) for chart in CHARTS.values()]


class DrilldownConfig(dg.Config):
    limit: int | None = Field(
        default=None,
        description=f"pictures to draw (default: ${drilldown.LIMIT_ENV}, else {drilldown.DEFAULT_LIMIT})",
    )
    png: bool = Field(default=False, description="also write a PNG of every picture (SVG only by default)")


_PAGE_SQL = {name: (page.PAGE_SQL / f"{name}.sql").read_text() for name in ("annotation_table", "summary")}


@dg.asset(
    key=DRILLDOWN_KEY,
    group_name=GROUP,
    kinds={"duckdb", "svg"},
    deps=upstream_of(*(p.read_text() for p in db.sql_files("drilldown")), _PAGE_SQL["annotation_table"]),
    description="Drill-down pictures (SVG; PNG too with the png config) of the faulty operation of each failure "
    "annotation, up to a limit, with the path on to the prediction node.",
)
def drilldown_pictures(
    context: dg.AssetExecutionContext, config: DrilldownConfig, tracehouse: TracehouseResource
) -> dg.MaterializeResult:
    warehouse = tracehouse.wh
    attempt = tracehouse.attempt_for(context)
    tracehouse.say("pictures: drawing the failure drill-downs")
    con = db.connection(warehouse, attempt.current_snapshot())
    try:
        manifest = drilldown.draw_all(warehouse, con, config.limit, png=config.png)
    finally:
        con.close()
    attempt.put_output("drilldown", manifest)
    tracehouse.say(f"pictures: {manifest['drawn']} of {manifest['total']} annotations ({manifest['rendered']} new) "
                   f"in {manifest['seconds']:.1f} s")
    context.log.info(
        f"drew {manifest['drawn']} of {manifest['total']} annotations ({manifest['rendered']} new SVGs, "
        f"{manifest['converted']} new PNGs) in {manifest['seconds']:.1f} s"
    )
    for annotation_id, reason in list(manifest["failed"].items())[:10]:
        context.log.warning(f"could not draw {annotation_id!r}: {reason}")
    return dg.MaterializeResult(
        metadata={
            "drawn": manifest["drawn"],
            "total": manifest["total"],
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
    deps=[*(chart_key(name) for name in CHARTS), DRILLDOWN_KEY, *upstream_of(*_PAGE_SQL.values())],
    description="The build's dashboard page (dashboards/index.html once committed): every chart and the "
    "annotation table on one page that works offline (all scripts inlined, no request to any host).",
)
def dashboard(context: dg.AssetExecutionContext, tracehouse: TracehouseResource) -> dg.MaterializeResult:
    warehouse = tracehouse.wh
    attempt = tracehouse.attempt_for(context)
    charts = {}
    for name in CHARTS:
        files = [warehouse.path(rel) for rel in (attempt.output(f"chart.{name}") or {}).get("files", [])]
        if len(files) != 3:
            raise RuntimeError(f"chart {name} was not built in this build")
        charts[name] = page.ChartOutput(name, attempt.output(f"chart.{name}")["rows"], *files, 0.0)
    con = db.connection(warehouse, attempt.current_snapshot())
    try:
        path, numbers = page.build_page(warehouse, con, charts, attempt.output("drilldown"), attempt.id, attempt.build)
    finally:
        con.close()
    attempt.put_output("dashboard", {"page": warehouse.rel(path), "files": [warehouse.rel(path)]})
    tracehouse.say(f"dashboard page: {numbers['bytes'] / 1e6:.1f} MB in {numbers['seconds']:.1f} s")
    context.log.info(f"published {path} ({numbers['bytes'] / 1e6:.1f} MB) in {numbers['seconds']:.2f} s")
    return dg.MaterializeResult(metadata={"path": str(path), **numbers})


defs = dg.Definitions(assets=[*CHART_ASSETS, drilldown_pictures, dashboard])
