"""The cross-system failure dashboard: what a chart is and the registry of charts (``registry``), the
colours (``palette``), one drawing per chart (``charts``), the offline page that shows them (``page``,
templates in ``templates/``) and the drill-down pictures (``drilldown``). Dagster assets in
``pipelines/defs/dashboards.py`` build them all.

``CHARTS``, ``ChartDef`` and ``chart`` are imported on first use, so a process that only needs the
pictures (a PNG worker) does not load Altair.
"""

from typing import Any

__all__ = ["CHARTS", "ChartDef", "chart"]


def __getattr__(name: str) -> Any:
    if name == "CHARTS":
        from dashboards import charts

        return charts.CHARTS
    if name in __all__:
        from dashboards import registry

        return getattr(registry, name)
    raise AttributeError(f"module 'dashboards' has no attribute {name!r}")
