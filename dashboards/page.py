"""Render the charts and write the offline dashboard page.

Layout under ``<warehouse>/dashboards/``::

    page-<attempt>.html        one build's page: every script inlined, no request to any host
    index.html                 the committed build's page, copied there by the commit
    charts/<name>-<digest>.vl.json   a chart's Vega-Lite spec with its data inline
    charts/<name>-<digest>.svg, .png static renderings for papers (vl-convert)
    drilldown/annotation-<hash>-<digest>.svg, .png   pictures of failure annotations (pipelines.drilldown)

Every file is written once under a name of its own (the build attempt, or a digest of what it is
made from) and never rewritten: a committed build's page and files stay as they are while the next
build writes its own.

Untrusted trace text (queries, agent names, node values) reaches the page two ways, both inert:
text we put into HTML ourselves goes through ``html.escape``; chart data travels as JSON inside a
``<script type="application/json">`` block with ``<``, ``>``, ``&`` (and U+2028/2029) written as
``\\uXXXX`` escapes, so no string can close the block. Vega draws data as SVG text, and vega-embed's
tooltip handler escapes HTML (its default, kept). A Content-Security-Policy allows only the page's own
scripts (by nonce) and no connection, font or image from anywhere else.
"""

from __future__ import annotations

import html
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

from dashboards.charts import CHARTS, SQL_DIR, ChartDef, linked
from pipelines import db
from pipelines.storage import Warehouse, write_atomic

PAGE_SQL = SQL_DIR.parent / "page"
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


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def short(value: Any, limit: int) -> str:
    text = " ".join(("" if value is None else str(value)).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


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

CSS = """
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", Arial, sans-serif;
       margin: 0; background: #f5f6f8; color: #1f2328; }
header { background: #ffffff; border-bottom: 1px solid #d8dde3; padding: 16px 28px 12px; }
h1 { font-size: 22px; margin: 0 0 6px; }
h2 { font-size: 16px; margin: 0 0 4px; }
p { margin: 4px 0; line-height: 1.4; }
.meta { color: #57606a; font-size: 13px; }
.focus { font-size: 13px; margin-top: 8px; }
.focus button { font: inherit; padding: 2px 10px; border: 1px solid #8c959f; border-radius: 4px;
                background: #f6f8fa; cursor: pointer; }
#focus-status { font-weight: 600; margin-left: 6px; }
main { display: flex; flex-wrap: wrap; gap: 16px; padding: 16px 24px; align-items: flex-start; }
.card { background: #ffffff; border: 1px solid #d8dde3; border-radius: 8px; padding: 14px 16px;
        width: fit-content; max-width: 100%; box-sizing: border-box; overflow-x: auto; }
.card .desc { color: #424a53; font-size: 13px; max-width: 560px; }
#annotations .desc { color: #424a53; font-size: 13px; }
.card .files { font-size: 12px; color: #57606a; margin-top: 6px; }
.chart { margin-top: 8px; min-height: 40px; }
.empty { color: #9a6700; font-size: 13px; }
#annotations { margin: 0 28px 28px; background: #ffffff; border: 1px solid #d8dde3; border-radius: 8px;
               padding: 14px 16px; }
.table-wrap { max-height: 460px; overflow: auto; margin-top: 8px; border: 1px solid #eaeef2; }
table { border-collapse: collapse; font-size: 12px; width: 100%; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #eaeef2; vertical-align: top; }
th { position: sticky; top: 0; background: #f6f8fa; }
td.q { max-width: 340px; color: #424a53; }
td.q, td.who { overflow-wrap: anywhere; }
code { font-size: 11px; background: #f6f8fa; padding: 1px 4px; border-radius: 3px; }
a { color: #0969da; }
"""

SCRIPT = """
(() => {
  "use strict";
  const specs = JSON.parse(document.getElementById("chart-specs").textContent);
  const options = JSON.parse(document.getElementById("embed-options").textContent);
  const state = { views: {}, errors: [], focus: null, ready: null };
  window.tracehouse = state;
  const status = document.getElementById("focus-status");

  function setFocus(system, source) {
    state.focus = system;
    for (const [name, view] of Object.entries(state.views)) {
      view.signal("system_focus", system);
      view.signal("system_filter", name === source ? null : system);
      view.runAsync();
    }
    for (const row of document.querySelectorAll("#annotation-table tbody tr")) {
      row.hidden = system !== null && row.dataset.system !== system;
    }
    status.textContent = system === null ? "all systems" : system;
  }
  document.getElementById("clear-focus").addEventListener("click", () => setFocus(null, null));

  function picked(value) {
    const systems = value && value.system;
    return Array.isArray(systems) && systems.length ? String(systems[0]) : null;
  }

  state.ready = Promise.all(Object.keys(specs).map((name) => {
    const target = document.getElementById("chart-" + name);
    return vegaEmbed(target, specs[name], options).then((result) => {
      state.views[name] = result.view;
      result.view.addSignalListener("pick", (_, value) => setFocus(picked(value), name));
    }).catch((error) => {
      state.errors.push(name + ": " + error);
      target.textContent = "This chart could not be drawn: " + error;
      console.error(error);
    });
  })).then(() => {
    document.body.dataset.rendered = state.errors.length ? "with-errors" : "true";
  });
})();
"""


def csp(nonce: str) -> str:
    """Only our own scripts run (by nonce; Vega compiles its expressions with Function(), hence
    'unsafe-eval'); nothing is fetched or connected to; styles inline (vega-embed injects some)."""
    return (
        "default-src 'none'; "
        f"script-src 'nonce-{nonce}' 'unsafe-eval'; "
        "style-src 'unsafe-inline'; img-src data: blob:; font-src 'none'; connect-src 'none'; "
        "base-uri 'none'; form-action 'none'; frame-src 'none'; object-src 'none'"
    )


def annotation_table(rows: list[dict], manifest: dict | None) -> str:
    pictures = (manifest or {}).get("pictures", {})
    out = [
        '<div class="table-wrap"><table id="annotation-table"><thead><tr>',
        "<th>#</th><th>system</th><th>dataset</th><th>error type</th><th>faulty operation</th>"
        "<th>phase / agent</th><th>query</th><th>drill-down</th>",
        "</tr></thead><tbody>",
    ]
    for i, row in enumerate(rows, 1):
        entry = pictures.get(row["annotation_id"])
        if entry:
            stem = esc(entry["stem"])
            link = (f'<a href="drilldown/{stem}.svg" target="_blank" rel="noopener">SVG</a> · '
                    f'<a href="drilldown/{stem}.png" target="_blank" rel="noopener">PNG</a>')
        else:
            link = f"<code>tracehouse show {esc(shlex.quote(row['annotation_id']))}</code>"
        op = row["op_name"] or "(none)"
        if row["operation_type"]:
            op += f" ({row['operation_type']})"
        who = row["phase"] or ""
        if row["responsible_agent"]:
            who = f"agent {row['responsible_agent']}"
        out.append(
            f'<tr data-system="{esc(row["system"])}" data-annotation="{esc(row["annotation_id"])}">'
            f'<td title="{esc(row["annotation_id"])}">{i}</td><td>{esc(row["system"])}</td>'
            f"<td>{esc(row['dataset'])}</td>"
            f"<td>{esc(row['error_type'])}</td><td>{esc(short(op, 60))}</td>"
            f'<td class="who">{esc(short(who, 40))}</td>'
            f'<td class="q" title="{esc(short(row["query"], 400))}">{esc(short(row["query"], 90))}</td>'
            f"<td>{link}</td></tr>"
        )
    out.append("</tbody></table></div>")
    return "\n".join(out)


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
    shown = {name: spec for name, spec in specs.items() if name not in empty}
    built = time.strftime("%Y-%m-%d %H:%M %Z")
    cards = []
    for name, chart in CHARTS.items():
        if name not in specs:
            continue
        head = (f'<section class="card" id="card-{name}"><h2>{esc(chart.title)}</h2>'
                f'<p class="desc">{esc(chart.description)}</p>')
        if name in empty:
            cards.append(f'{head}<p class="empty">Nothing to show: the warehouse holds no rows for this chart '
                         "(e.g. no source of this kind).</p></section>")
            continue
        links = (chart_links or {}).get(name, {})
        cards.append(
            f'{head}<div class="chart" id="chart-{name}" data-chart="{name}"></div>'
            f'<p class="files">For papers: <a href="{esc(links.get("svg", ""))}">SVG</a> · '
            f'<a href="{esc(links.get("png", ""))}">PNG</a>'
            f' · <a href="{esc(links.get("spec", ""))}">Vega-Lite spec</a></p></section>'
        )
    drawn = (manifest or {}).get("drawn", 0)
    limit = (manifest or {}).get("limit")
    total = len(annotations)
    if drawn >= total:
        drawn_note = f"All {total} annotations have a drill-down picture."
    else:
        drawn_note = (
            f"The build drew pictures for {drawn} of {total} annotations (limit {limit}, spread over the systems; "
            "raise it with TRACEHOUSE_DRILLDOWN_LIMIT or the drilldown_pictures asset's config). "
            "Draw any other one with <code>tracehouse show ANNOTATION_ID</code> (the command is in its row)."
        )
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{html.escape(csp(nonce), quote=False)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>tracehouse: cross-system failure dashboard</title>
<link rel="icon" href="data:,">
<style>{CSS}</style>
</head>
<body>
<header>
<h1>Cross-system failure dashboard</h1>
<p class="meta">Warehouse <code>{esc(warehouse.root)}</code> · build {esc(build)} of {esc(built)} ·
{esc(summary.get("graphs", 0))} graphs, {esc(summary.get("annotations", 0))} failure annotations,
{esc(summary.get("systems", 0))} systems, {esc(summary.get("datasets", 0))} datasets.
Every chart is computed from the marts (docs/MARTS.md); the page works offline.</p>
<p class="focus">Click a bar or cell to focus its system on every chart and in the table; double-click
a chart to clear. <button id="clear-focus" type="button">Show all systems</button>
Showing: <span id="focus-status">all systems</span></p>
</header>
<main>
{"".join(cards)}
</main>
<section id="annotations">
<h2>Failure annotations</h2>
<p class="desc">One row per annotation (failure_propagation). {drawn_note}</p>
{annotation_table(annotations, manifest)}
</section>
<script type="application/json" id="build-summary">{script_json({"build": build, **summary})}</script>
<script type="application/json" id="chart-specs">{script_json(shown)}</script>
<script type="application/json" id="embed-options">{script_json(VEGA_EMBED_OPTIONS)}</script>
<script nonce="{nonce}">{bundle}</script>
<script nonce="{nonce}">{SCRIPT}</script>
</body>
</html>
"""


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
