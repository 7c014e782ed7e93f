"""The dashboard: one asset per chart of ``dashboards.charts`` (group "dashboard", downstream of the
marts and tables its SQL reads), one for the drill-down pictures, and one for the page that shows
them all, so every rebuild of the marts refreshes the page.

Files land in ``<warehouse>/dashboards/`` (see ``dashboards/page.py``), each written under a
temporary name and renamed into place: a reader with the page open during a rebuild never sees a
half-written file. A new chart is a SQL file and a decorated function in ``dashboards/charts.py``;
its asset appears here by itself.
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
        out = page.build_chart(tracehouse.wh, chart)
        context.log.info(f"chart {chart.name}: {out.rows} rows in {out.seconds:.2f} s -> {out.svg.parent}")
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
    "limit, with the path on to the prediction node; dashboards/drilldown/index.json lists them.",
)
def drilldown_pictures(
    context: dg.AssetExecutionContext, config: DrilldownConfig, tracehouse: TracehouseResource
) -> dg.MaterializeResult:
    manifest = drilldown.draw_all(tracehouse.wh, config.limit)
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
    description="dashboards/index.html: every chart and the annotation table on one page that works offline "
    "(all scripts inlined, no request to any host).",
)
def dashboard(context: dg.AssetExecutionContext, tracehouse: TracehouseResource) -> dg.MaterializeResult:
    path, numbers = page.build_page(tracehouse.wh)
    context.log.info(f"published {path} ({numbers['bytes'] / 1e6:.1f} MB) in {numbers['seconds']:.2f} s")
    return dg.MaterializeResult(metadata={"path": str(path), **numbers})


defs = dg.Definitions(assets=[*CHART_ASSETS, drilldown_pictures, dashboard])
