"""Drill-down pictures as files: one annotation drawn on demand (``tracehouse show``), or the first few
hundred of a build when it is asked for pictures, each under a name of its own.

File names never come from the data: a picture is ``annotation-<sha256 of the annotation id>``
(``tracehouse show``), with the digest of what it is drawn from appended in a build's folder, written
only inside the chosen folder with :func:`pipelines.storage.warehouse.write_atomic`. A build draws no picture
unless asked (``pictures`` svg or png: ``dashboards.failure_view.write_all`` draws them from the data
it loads for the failure views, set-based); ``tracehouse show`` draws one, SVG and PNG.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import duckdb

from dashboards.drilldown.layout import render_svg
from dashboards.drilldown.query import SQL_DIR, load
from pipelines.analytics import db
from pipelines.storage.warehouse import Warehouse, write_atomic

LIMIT_ENV = "TRACEHOUSE_DRILLDOWN_LIMIT"
DEFAULT_LIMIT = 200
STEM_PREFIX = "annotation-"
PNG_SCALE = 2.0


def drilldown_limit(value: int | None = None) -> int:
    """The number of pictures a build draws: ``value``, else $TRACEHOUSE_DRILLDOWN_LIMIT, else 200."""
    if value is not None:
        return max(0, int(value))
    raw = os.environ.get(LIMIT_ENV, "").strip()
    if not raw:
        return DEFAULT_LIMIT
    try:
        return max(0, int(raw))
    except ValueError:
        raise ValueError(f"${LIMIT_ENV} must be a whole number, got {raw!r}") from None


def picture_stem(annotation_id: str) -> str:
    """The file name (without suffix) of an annotation's pictures: a hash, never the id itself."""
    digest = hashlib.sha256(annotation_id.encode("utf-8", "surrogatepass")).hexdigest()
    return STEM_PREFIX + digest[:24]


def show_dir(warehouse: Warehouse) -> Path:
    """Where ``tracehouse show`` draws by default (not a build's folder: builds never delete it)."""
    return warehouse.dashboards_dir / "show"


def picture(con: duckdb.DuckDBPyConnection, annotation_id: str, graph_id: str | None = None) -> str:
    """The SVG text of one annotation's picture."""
    return render_svg(load(con, annotation_id, graph_id))


def _to_png(svg_path: Path, png_path: Path) -> None:
    """Rasterise one SVG file into a PNG file (at 2x, for papers)."""
    import vl_convert

    write_atomic(png_path, vl_convert.svg_to_png(svg_path.read_text(), scale=PNG_SCALE))


def convert_pngs(jobs: list[tuple[Path, Path]], workers: int) -> None:
    """Rasterise SVG files to PNG files. Rasterising text is the slow part of a picture
    and vl-convert holds the GIL, so eight or more are spread over ``workers`` fresh processes (spawned:
    nothing of this process is inherited; each imports this module, a start-up cost that fewer
    pictures do not repay)."""
    if workers <= 1 or len(jobs) < 8:
        for svg_path, png_path in jobs:
            _to_png(svg_path, png_path)
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=context) as pool:
        list(pool.map(_to_png, *zip(*jobs, strict=True)))


def draw(
    con: duckdb.DuckDBPyConnection, annotation_id: str, out_dir: Path, graph_id: str | None = None
) -> tuple[Path, Path]:
    """Draw one annotation into ``out_dir``; returns the SVG and PNG paths."""
    svg = picture(con, annotation_id, graph_id)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = picture_stem(annotation_id)
    svg_path, png_path = out_dir / f"{stem}.svg", out_dir / f"{stem}.png"
    write_atomic(svg_path, svg.encode("utf-8"))
    _to_png(svg_path, png_path)
    return svg_path, png_path


def code_fingerprint() -> str:
    """The drawing code, the text rules and the drill-down SQL: a change to any redraws every picture."""
    package = Path(__file__).parent
    return db.files_digest(
        [*sorted(package.glob("*.py")), db.REPO / "pipelines" / "text.py", *sorted(SQL_DIR.glob("*.sql"))]
    ).hexdigest()
