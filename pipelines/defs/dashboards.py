"""The dashboard: one asset per chart of ``dashboards.charts`` (group "dashboard", downstream of the
marts and tables its SQL reads), one for the drill-down pictures, and one for the page that shows
them all, so every rebuild of the marts refreshes the page.

Files land in ``<warehouse>/dashboards/`` (see ``dashboards/page.py``) under names of their own
(a digest of what they are made from, or the build attempt's id), and each step records what it
wrote in the build attempt; the commit makes the build's page the dashboard. A new chart is a SQL
file and a decorated function in ``dashboards/charts.py``; its asset appears here by itself.
"""

import re

import dagster as dg
from pydantic import Field

from dashboards import page
from dashboards.charts import CHARTS, ChartDef
from pipelines import db, drilldown
from pipelines.defs.analytics import tables_read
from pipelines.defs.resources import TracehouseResource

GROUP = "dashboard"
PAGE_KEY = dg.AssetKey("dashboard")
DRILLDOWN_KEY = dg.AssetKey("drilldown_pictures")
_COMMENT = re.compile(r"--[^\n]*")
_STRING = re.compile(r"'(?:[^']|'')*'")


def chart_key(name: str) -> dg.AssetKey:
    return dg.AssetKey(f"chart_{name}")


def upstream_of(sql: str) -> list[dg.AssetKey]:
    """The marts and canonical tables a query reads (directly or through the macros it calls)."""
    # words inside labels such as 'edges to the prediction' are no reads
    code = _STRING.sub("''", _COMMENT.sub("", sql))
    marts = {name for name in db.mart_names() if re.search(rf"\b{name}\b", code)}
    return [dg.AssetKey(name) for name in sorted(marts | tables_read(code))]


def chart_asset(chart: ChartDef) -> dg.AssetsDefinition:
    @dg.asset(
        key=chart_key(chart.name),
        group_name=GROUP,
        kinds={"duckdb", "vegalite", "svg"},
        deps=upstream_of(chart.sql),
        description=f"{chart.title}: {chart.description}",
        metadata={"sql_file": f"dashboards/sql/charts/{chart.name}.sql"},
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


_DRILLDOWN_SQL = "\n".join(p.read_text() for p in sorted(drilldown.SQL_DIR.glob("*.sql")))


@dg.asset(
    key=DRILLDOWN_KEY,
    group_name=GROUP,
    kinds={"duckdb", "svg"},
    deps=upstream_of(_DRILLDOWN_SQL + (page.PAGE_SQL / "annotation_table.sql").read_text()),
    description="Drill-down pictures (SVG and PNG) of the faulty operation of each failure annotation, up to a "
    "limit, with the path on to the prediction node.",
)
def drilldown_pictures(
    context: dg.AssetExecutionContext, config: DrilldownConfig, tracehouse: TracehouseResource
) -> dg.MaterializeResult:
    warehouse = tracehouse.wh
    attempt = tracehouse.attempt_for(context)
    tracehouse.say("pictures: drawing the failure drill-downs")
    con = db.connection(warehouse, attempt.current_snapshot())
    try:
        manifest = drilldown.draw_all(warehouse, con, config.limit)
    finally:
        con.close()
    attempt.put_output("drilldown", manifest)
    tracehouse.say(f"pictures: {manifest['drawn']} of {manifest['total']} annotations ({manifest['converted']} new) "
                   f"in {manifest['seconds']:.1f} s")
    context.log.info(
        f"drew {manifest['drawn']} of {manifest['total']} annotations ({manifest['converted']} new PNGs) "
        f"in {manifest['seconds']:.1f} s"
    )
    for annotation_id, reason in list(manifest["failed"].items())[:10]:
        context.log.warning(f"could not draw {annotation_id!r}: {reason}")
    return dg.MaterializeResult(
        metadata={
            "drawn": manifest["drawn"],
            "total": manifest["total"],
            "limit": manifest["limit"],
            "converted": manifest["converted"],
            "failed": len(manifest["failed"]),
            "seconds": manifest["seconds"],
        }
    )


@dg.asset(
    key=PAGE_KEY,
    group_name=GROUP,
    kinds={"html"},
    deps=[*(chart_key(name) for name in CHARTS), DRILLDOWN_KEY,
          *upstream_of((page.PAGE_SQL / "annotation_table.sql").read_text()
                       + (page.PAGE_SQL / "summary.sql").read_text())],
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
