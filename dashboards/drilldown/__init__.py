"""Drill-down pictures: the faulty operation of one failure annotation, drawn as SVG (and PNG).

``query`` loads the subgraph from SQL (``sql/drilldown/``, through the lineage macros), ``layout``
places it and writes the SVG text, ``files`` names, writes and rasterises the pictures (one on
demand for ``tracehouse show``, or a build's first few hundred). The dashboard page links them.
"""

from dashboards.drilldown.files import (
    DEFAULT_LIMIT,
    LIMIT_ENV,
    draw,
    drilldown_limit,
    picture,
    picture_stem,
    show_dir,
)
from dashboards.drilldown.layout import render_svg
from dashboards.drilldown.query import AmbiguousAnnotation, AnnotationNotFound, load

__all__ = [
    "DEFAULT_LIMIT",
    "LIMIT_ENV",
    "AmbiguousAnnotation",
    "AnnotationNotFound",
    "draw",
    "drilldown_limit",
    "load",
    "picture",
    "picture_stem",
    "render_svg",
    "show_dir",
]
