"""Render the charts and write the offline dashboard page (``templates/page.html.j2``, Jinja2).

Layout under ``<warehouse>/dashboards/``::

    page-<attempt>.html        one build's page: every script inlined, no request to any host
    index.html                 the committed build's page, copied there by the commit
    charts/<name>-<digest>.vl.json   a chart's Vega-Lite spec with its data inline
    charts/<name>-<digest>.svg, .png static renderings for papers (vl-convert)
    drilldown/annotation-<hash>-<digest>.svg (.png)  pictures of failure annotations (dashboards.drilldown)

Every file is written once under a name of its own (the build attempt, or a digest of what it is
made from) and never rewritten: a committed build's page and files stay as they are while the next
build writes its own.

Untrusted trace text (queries, agent names, node values) reaches the page two ways, both inert:
text in the page's HTML goes through the template's autoescape (Jinja2; cut short first by
``pipelines.text.shorten`` where a cell has a limit); chart data travels as JSON inside a
``<script type="application/json">`` block with ``<``, ``>``, ``&`` (and U+2028/2029) written as
``\\uXXXX`` escapes (:func:`script_json`), so no string can close the block. Vega draws data as SVG
text, and vega-embed's tooltip handler escapes HTML (its default, kept). A Content-Security-Policy
allows only the page's own scripts (by nonce) and no connection, font or image from anywhere else.
"""

from __future__ import annotations

import json
import math
import secrets
import shlex
import time
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import Any

import duckdb
import jinja2
from markupsafe import Markup

from dashboards.charts import CHARTS, ChartDef, linked
from pipelines import db
from pipelines.storage import Warehouse, write_atomic
from pipelines.text import shorten

PAGE_SQL = db.SQL_DIR / "page"
TEMPLATES = Path(__file__).resolve().parent / "templates"
VEGA_EMBED_OPTIONS = {
    "renderer": "svg",
    "actions": {"export": True, "source": False, "compiled": False, "editor": False},
}
PNG_SCALE = 2.0


def charts_dir(warehouse: Warehouse) -> Path:
    return warehouse.dashboards_dir / "charts"


def page_path(warehouse: Warehouse, attempt: str) -> Path:
    return warehouse.dashboards_dir / f"page-{attempt}.html"


# -- small helpers --------------------------------------------------------------------------------


def json_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        value = float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    return value


def query_rows(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | None = None) -> list[dict]:
    cursor = con.execute(sql, params or {})
    columns = [d[0] for d in cursor.description]
    return [{c: json_value(v) for c, v in zip(columns, row, strict=True)} for row in cursor.fetchall()]


def script_json(value: Any) -> str:
    """JSON that is safe inside a <script> element: no '<', '>' or '&' can appear in it, so neither
    '</script>' nor '<!--' can end or change the element, whatever the strings hold."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                         ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escape)
    return text


# -- Vega ---------------------------------------------------------------------------------------


def vegalite_version() -> str | None:
    """The Vega-Lite version Altair writes specs for, as vl-convert names it (e.g. '6.4')."""
    import altair as alt
    import vl_convert as vlc

    wanted = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    return wanted if wanted in vlc.get_vegalite_versions() else None


@cache
def _bundle(vl_version: str | None) -> str:
    import vl_convert as vlc

    return vlc.javascript_bundle(vl_version=vl_version)


def vega_bundle(cache_dir: Path | None = None) -> str:
    """Vega, Vega-Lite and vega-embed as one script (from vl-convert: no download). Building it takes
    about 3 s, so it is kept in ``cache_dir`` keyed by the vl-convert and Vega-Lite versions."""
    vl_version = vegalite_version()
    key = f"vega-bundle-{version('vl-convert-python')}-vl{vl_version or 'latest'}.js"
    cached = cache_dir / key if cache_dir else None
    if cached and cached.is_file():
        bundle = cached.read_text()
    else:
        bundle = _bundle(vl_version)
        if cached:
            write_atomic(cached, bundle)
    if "</script" in bundle.lower() or "<!--" in bundle:
        raise RuntimeError("the Vega bundle contains '</script' or '<!--' and cannot be inlined safely")
    return bundle


# -- charts -------------------------------------------------------------------------------------


@dataclass
class ChartOutput:
    name: str
    rows: int
    spec: Path
    svg: Path
    png: Path
    seconds: float

    def files(self) -> list[Path]:
        return [self.spec, self.svg, self.png]


def chart_spec(chart: ChartDef, rows: list[dict]) -> dict:
    """The chart's Vega-Lite spec, data inline, with the page-wide system parameters."""
    return linked(chart.build(rows)).to_dict(validate=True)


def chart_inputs(chart: ChartDef, rows: list[dict]) -> str:
    """What a chart's files are made from: its rows, the chart code and the Altair and Vega versions."""
    digest = db.files_digest([Path(__file__), Path(__file__).with_name("charts.py")])
    digest.update(json.dumps([chart.name, rows], default=str, sort_keys=True).encode())
    digest.update(f"{version('altair')} {version('vl-convert-python')} {vegalite_version()}".encode())
    return digest.hexdigest()


def build_chart(warehouse: Warehouse, chart: ChartDef, con: duckdb.DuckDBPyConnection) -> ChartOutput:
    """Query the chart's rows on ``con`` and write its spec, SVG and PNG, named by the digest of
    what they are made from: the same rows and code find their files there already."""
    import vl_convert as vlc

    started = time.monotonic()
    rows = query_rows(con, chart.sql)
    inputs = chart_inputs(chart, rows)
    stem = charts_dir(warehouse) / f"{chart.name}-{inputs[:16]}"
    paths = {suffix: stem.with_name(stem.name + suffix) for suffix in (".vl.json", ".svg", ".png")}
    if not all(p.is_file() for p in paths.values()):
        vl_version = vegalite_version()
        spec = chart_spec(chart, rows) | {"usermeta": {"tracehouse_inputs": inputs}}
        write_atomic(paths[".svg"], vlc.vegalite_to_svg(spec, vl_version=vl_version))
        write_atomic(paths[".png"], vlc.vegalite_to_png(spec, vl_version=vl_version, scale=PNG_SCALE))
        write_atomic(paths[".vl.json"], json.dumps(spec, ensure_ascii=False, indent=1))  # last: a spec has pictures
    return ChartOutput(chart.name, len(rows), paths[".vl.json"], paths[".svg"], paths[".png"],
                       time.monotonic() - started)


# -- the page -----------------------------------------------------------------------------------

def csp(nonce: str) -> Markup:
    """Only our own scripts run (by nonce; Vega compiles its expressions with Function(), hence
    'unsafe-eval'); nothing is fetched or connected to; styles inline (vega-embed injects some).
    Our own text, with no character HTML would need escaped in an attribute ('"', '<', '&')."""
    return Markup(
        "default-src 'none'; "
        f"script-src 'nonce-{nonce}' 'unsafe-eval'; "
        "style-src 'unsafe-inline'; img-src data: blob:; font-src 'none'; connect-src 'none'; "
        "base-uri 'none'; form-action 'none'; frame-src 'none'; object-src 'none'"
    )


def _inline(name: str, end_tag: str) -> Markup:
    """One of our own files of templates/, to inline into the page: it must not end its element."""
    text = (TEMPLATES / name).read_text()
    if end_tag in text.lower() or "<!--" in text:
        raise RuntimeError(f"templates/{name} contains {end_tag!r} or '<!--' and cannot be inlined")
    return Markup(text)


@cache
def templates() -> jinja2.Environment:
    """Autoescape on for everything; None prints as nothing; a name missing from the context fails."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=lambda value: "" if value is None else value,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        shorten=shorten,
        shell_quote=shlex.quote,
        script_json=lambda value: Markup(script_json(value)),  # no '<', '>' or '&' left to escape
    )
    return env


def table_rows(rows: list[dict], manifest: dict | None) -> list[dict]:
    """The annotation table's rows: what each cell shows, before shortening and escaping."""
    pictures = (manifest or {}).get("pictures", {})
    out = []
    for row in rows:
        op = row["op_name"] or "(none)"
        if row["operation_type"]:
            op += f" ({row['operation_type']})"
        who = f"agent {row['responsible_agent']}" if row["responsible_agent"] else row["phase"] or ""
        entry = pictures.get(row["annotation_id"])
        out.append(row | {"op": op, "who": who, "stem": entry["stem"] if entry else None})
    return out


def render_page(
    warehouse: Warehouse,
    specs: dict[str, dict],
    annotations: list[dict],
    summary: dict,
    manifest: dict | None,
    bundle: str,
    empty: set[str] = frozenset(),
    chart_links: dict[str, dict[str, str]] | None = None,
    build: int | None = None,
) -> str:
    nonce = secrets.token_urlsafe(18)
    no_links = {"svg": "", "png": "", "spec": ""}
    charts = [
        {"name": name, "title": chart.title, "description": chart.description, "empty": name in empty,
         "links": no_links | (chart_links or {}).get(name, {})}
        for name, chart in CHARTS.items() if name in specs
    ]
    return templates().get_template("page.html.j2").render(
        csp=csp(nonce),
        nonce=nonce,
        css=_inline("page.css", "</style"),
        script=_inline("page.js", "</script"),
        vega_bundle=Markup(bundle),  # checked by vega_bundle()
        warehouse=warehouse.root,
        build=build,
        built=time.strftime("%Y-%m-%d %H:%M %Z"),
        summary=summary,
        charts=charts,
        annotations=table_rows(annotations, manifest),
        drawn=(manifest or {}).get("drawn", 0),
        limit=(manifest or {}).get("limit"),
        png=bool((manifest or {}).get("png", True)),
        build_summary={"build": build, **summary},
        specs={name: spec for name, spec in specs.items() if name not in empty},
        embed_options=VEGA_EMBED_OPTIONS,
    )


def build_page(
    warehouse: Warehouse,
    con: duckdb.DuckDBPyConnection,
    charts: dict[str, ChartOutput],
    manifest: dict | None,
    attempt: str,
    build: int | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Write one build's page, ``page-<attempt>.html``, from its charts' specs, the annotation table
    (queried on ``con``, the build's views) and the drill-down manifest; returns its path and a few
    numbers for the asset's metadata."""
    started = time.monotonic()
    specs: dict[str, dict] = {}
    empty: set[str] = set()
    links: dict[str, dict[str, str]] = {}
    for name in CHARTS:
        if name not in charts:
            raise FileNotFoundError(f"chart {name} has not been built for this page")
        out = charts[name]
        specs[name] = json.loads(out.spec.read_text())
        links[name] = {k: p.relative_to(warehouse.dashboards_dir).as_posix()
                       for k, p in (("spec", out.spec), ("svg", out.svg), ("png", out.png))}
        if not any(d.get("values") for d in _datasets(specs[name])):
            empty.add(name)
    annotations = query_rows(con, (PAGE_SQL / "annotation_table.sql").read_text())
    summary = query_rows(con, (PAGE_SQL / "summary.sql").read_text())[0]
    cache_dir = warehouse.dashboards_dir / ".cache"
    text = render_page(warehouse, specs, annotations, summary, manifest, vega_bundle(cache_dir), empty, links, build)
    path = write_atomic(page_path(warehouse, attempt), text)
    return path, {
        "charts": len(specs),
        "annotations": len(annotations),
        "pictures": (manifest or {}).get("drawn", 0),
        "bytes": path.stat().st_size,
        "seconds": round(time.monotonic() - started, 3),
    }


def _datasets(spec: Any) -> list[dict]:
    """Every inline data object of a spec (top level, layers, concatenations, facets)."""
    found = []
    if isinstance(spec, dict):
        if isinstance(spec.get("data"), dict) and "values" in spec["data"]:
            found.append(spec["data"])
        for value in spec.values():
            found.extend(_datasets(value))
    elif isinstance(spec, list):
        for item in spec:
            found.extend(_datasets(item))
    return found
