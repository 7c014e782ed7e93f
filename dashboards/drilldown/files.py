"""Drill-down pictures as files: one annotation drawn on demand (``tracehouse show``), or the first few
hundred of a build, each under a name of its own.

File names never come from the data: a picture is ``annotation-<sha256 of the annotation id>``
(``tracehouse show``), with the digest of what it is drawn from appended in a build's folder, written
only inside the chosen folder with :func:`pipelines.storage.write_atomic`. A build writes SVG only
unless asked for PNGs (``png=True``); ``tracehouse show`` writes both.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import duckdb

from dashboards.drilldown.layout import render_svg
from dashboards.drilldown.query import SQL_DIR, load, local_copies, rows
from pipelines import db
from pipelines.changes import FORMAT_VERSION
from pipelines.storage import Warehouse, write_atomic

LIMIT_ENV = "TRACEHOUSE_DRILLDOWN_LIMIT"
DEFAULT_LIMIT = 200
STEM_PREFIX = "annotation-"
PNG_SCALE = 2.0
ANNOTATION_TABLE = db.SQL_DIR / "page" / "annotation_table.sql"


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
    """Rasterise SVG files to PNG files. Rasterising text is the slow part of a picture (about 0.13 s)
    and vl-convert holds the GIL, so eight or more are spread over ``workers`` fresh processes (spawned:
    nothing of this process is inherited; each imports this module, about 0.3 s). Measured on 2 cores,
    30 pictures: 4.1 s in this process, 2.6 s over two workers."""
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
        [*sorted(package.glob("*.py")), db.REPO / "pipelines" / "text.py", *sorted(SQL_DIR.glob("*.sql")),
         ANNOTATION_TABLE]
    ).hexdigest()


def graph_contents(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """graph_id -> what its rows are made from: its source file's sha256 and the readers' format
    version. A picture keyed on this is redrawn when its own graph changed, not its whole split."""
    return {
        graph_id: f"{FORMAT_VERSION}:{sha256}"
        for graph_id, sha256 in con.execute("select graph_id, file_sha256 from graphs").fetchall()
    }


def draw_all(warehouse: Warehouse, con: duckdb.DuckDBPyConnection, limit: int | None = None,
             png: bool = False, workers: int | None = None) -> dict[str, Any]:
    """Draw the first ``limit`` annotations (round-robin over systems) of the build whose views
    ``con`` has, into <warehouse>/dashboards/drilldown, as SVG (and PNG with ``png``); returns the
    manifest the page links from.

    A picture's files are named by its annotation and the digest of what it is drawn from (its
    graph's content, its row of the annotation table, this code): a file that is there already is
    not written again. ``files`` lists exactly the files of the pictures in the manifest. PNGs are
    converted by ``workers`` processes (default: one per core, at most 4)."""
    started = time.monotonic()
    limit = drilldown_limit(limit)
    suffixes = (".svg", ".png") if png else (".svg",)
    out_dir = warehouse.dashboards_dir / "drilldown"
    out_dir.mkdir(parents=True, exist_ok=True)
    pictures: dict[str, dict[str, str]] = {}
    failed: dict[str, str] = {}
    code = code_fingerprint()
    table = rows(con, ANNOTATION_TABLE.read_text())
    contents = graph_contents(con)
    to_draw, to_convert = [], []
    for row in table[:limit]:
        inputs = hashlib.sha256(
            json.dumps([code, contents.get(row["graph_id"]), row], default=str, sort_keys=True).encode()
        ).hexdigest()
        stem = f"{picture_stem(row['annotation_id'])}-{inputs[:12]}"
        pictures[row["annotation_id"]] = {"stem": stem}
        svg_path, png_path = out_dir / f"{stem}.svg", out_dir / f"{stem}.png"
        if not svg_path.is_file():
            to_draw.append((row["graph_id"], row["annotation_id"], svg_path))
        if png and not png_path.is_file():
            to_convert.append((svg_path, png_path))
    if to_draw:
        local = con.cursor()  # temp tables on a cursor of its own: the build's views stay as they are
        local.execute("set file_search_path = ?", [str(warehouse.root)])  # a per-cursor setting
        try:
            local_copies(local, sorted({graph_id for graph_id, _, _ in to_draw}))
            for graph_id, annotation_id, svg_path in to_draw:
                try:
                    svg = picture(local, annotation_id, graph_id)
                except (LookupError, duckdb.Error) as exc:
                    failed[annotation_id] = str(exc)[:300]
                    del pictures[annotation_id]
                    continue
                write_atomic(svg_path, svg.encode("utf-8"))
        finally:
            local.close()
    drawn = {f"{p['stem']}.svg" for p in pictures.values()}
    to_convert = [(svg, png_path) for svg, png_path in to_convert if svg.name in drawn]
    convert_pngs(to_convert, workers or min(4, os.cpu_count() or 1))
    return {
        "limit": limit,
        "total": len(table),
        "drawn": len(pictures),
        "rendered": len(to_draw) - len(failed),
        "png": png,
        "converted": len(to_convert),
        "pictures": pictures,
        "failed": failed,
        "files": [f"dashboards/drilldown/{p['stem']}{ext}" for p in pictures.values() for ext in suffixes],
        "seconds": round(time.monotonic() - started, 3),
    }
