"""The cross-system failure dashboard: chart definitions over the marts (``charts``) and the offline
page that shows them (``page``). Dagster assets in ``pipelines/defs/dashboards.py`` build both."""

from dashboards.charts import CHARTS, ChartDef, chart

__all__ = ["CHARTS", "ChartDef", "chart"]
