"""Render the charts and write the offline dashboard page (``templates/page.html.j2``, Jinja2).

Layout under ``<warehouse>/dashboards/``::

    page-<attempt>.html        one build's page: every script inlined, no request to any host
    index.html                 the committed build's page, copied there by the commit
    charts/<name>-<digest>.vl.json   a chart's Vega-Lite spec with its data inline
    charts/<name>-<digest>.svg (.png)  its static rendering for papers, when asked (vl-convert)
    failures/failure-<hash>-<digest>.html   one page per failure annotation (dashboards.failure_view)
    drilldown/annotation-<hash>-<digest>.svg (.png)  drill-down pictures, when asked (dashboards.drilldown)

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

import contextlib
import json
import math
import os
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

from dashboards.charts import CHARTS, linked, rows_put_back
from dashboards.registry import ChartDef, informative
from pipelines.analytics import catalog, db
from pipelines.storage.warehouse import Warehouse, write_atomic
from pipelines.text import shorten

PAGE_SQL = db.SQL_DIR / "page"
INGEST_COMMAND = 'tracehouse sql "from ingest_errors"'
# charts that show the warehouse's graphs, not its failures: shown when no failure is loaded
ABOUT_GRAPHS = {"corpus_overview"}
TEMPLATES = Path(__file__).resolve().parent / "templates"
VEGA_EMBED_OPTIONS = {
    "renderer": "svg",
    "actions": {"export": True, "source": False, "compiled": False, "editor": False},
}
PNG_SCALE = 2.0
# Validating a spec against the Vega-Lite schema is a sizeable part of making a chart, so builds
# do not; the tests validate every chart's spec (tests/test_dashboard.py).
VALIDATE = False


def page_reads() -> tuple[str, ...]:
    """What sql/page/*.sql read: the page's upstream tables and marts, from their SQL."""
    return catalog.files_read(sorted(PAGE_SQL.glob("*.sql")))


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

BUNDLE_CACHE_ENV = "TRACEHOUSE_CACHE_DIR"


@cache
def vegalite_version() -> str | None:
    """The Vega-Lite version Altair writes specs for, as vl-convert names it (e.g. '6.4'), from
    Altair's own ``SCHEMA_VERSION``; None when vl-convert has no bundle of that version."""
    import altair as alt
    import vl_convert as vlc

    wanted = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    return wanted if wanted in vlc.get_vegalite_versions() else None


@cache
def _bundle(vl_version: str | None) -> str:
    import vl_convert as vlc

    return vlc.javascript_bundle(vl_version=vl_version)


def bundle_cache_dir() -> Path | None:
    """Where the Vega bundle is kept for every warehouse of this user: $TRACEHOUSE_CACHE_DIR, else
    $XDG_CACHE_HOME/tracehouse, else ~/.cache/tracehouse (None when there is no home)."""
    if os.environ.get(BUNDLE_CACHE_ENV):
        return Path(os.environ[BUNDLE_CACHE_ENV])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "tracehouse"
    try:
        return Path.home() / ".cache" / "tracehouse"
    except RuntimeError:  # no home directory
        return None


def vega_bundle(cache_dir: Path | None = None) -> str:
    """Vega, Vega-Lite and vega-embed as one script (from vl-convert: no download). Building it takes
    seconds, so it is kept per user (``cache_dir``, default :func:`bundle_cache_dir`), keyed by the
    vl-convert and Vega-Lite versions; when that folder cannot be written, it is built each time."""
    vl_version = vegalite_version()
    key = f"vega-bundle-{version('vl-convert-python')}-vl{vl_version or 'latest'}.js"
    folder = cache_dir if cache_dir is not None else bundle_cache_dir()
    cached = folder / key if folder is not None else None
    bundle = None
    if cached is not None:
        try:
            bundle = cached.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            bundle = None
    if not bundle:
        bundle = _bundle(vl_version)
        if cached is not None:
            try:
                cached.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(cached, bundle)
            except OSError:  # a read-only home, a full disk: the page is made all the same
                pass
    if "</script" in bundle.lower() or "<!--" in bundle:
        raise RuntimeError("the Vega bundle contains '</script' or '<!--' and cannot be inlined safely")
    return bundle


# -- charts -------------------------------------------------------------------------------------


@dataclass
class ChartOutput:
    name: str
    rows: int
    spec: Path | None
    svg: Path | None
    png: Path | None
    seconds: float
    empty: str | None = None  # why the card is hidden (no informative rows), else None

    def files(self) -> list[Path]:
        return [p for p in (self.spec, self.svg, self.png) if p is not None]


def chart_spec(chart: ChartDef, rows: list[dict], validate: bool = True) -> dict:
    """The chart's Vega-Lite spec, data inline, with the page-wide system parameters (Altair is
    imported here, on the first chart whose rows changed); validated against Vega-Lite's schema only
    when asked (:data:`VALIDATE`)."""
    with rows_put_back() as put_back:
        return linked(put_back(chart.build(rows).to_dict(validate=validate)))


def chart_inputs(chart: ChartDef, rows: list[dict]) -> str:
    """What a chart's files are made from: its rows, the chart code and the Altair and Vega versions."""
    here = Path(__file__)
    chart_code = [here.with_name(f"{module}.py") for module in ("charts", "palette", "registry")]
    digest = db.files_digest([here, *chart_code])
    digest.update(json.dumps([chart.name, rows], default=str, sort_keys=True).encode())
    digest.update(f"{version('altair')} {version('vl-convert-python')} {vegalite_version()}".encode())
    return digest.hexdigest()


PICTURE_SUFFIXES = {"none": [".vl.json"], "svg": [".vl.json", ".svg"], "png": [".vl.json", ".svg", ".png"]}


def build_chart(warehouse: Warehouse, chart: ChartDef, con: duckdb.DuckDBPyConnection,
                pictures: str = "none") -> ChartOutput:
    """Query the chart's rows on ``con`` and write its spec, plus its SVG with ``pictures`` = svg and
    its PNG too with png (the page draws the chart from the spec, and its menu saves SVG or PNG, so a
    build draws neither unless asked). Files are named by the digest of what they are made from: the
    same rows and code find their files there already. A chart with no informative row writes
    nothing: its card is hidden, saying why (``empty``)."""
    started = time.monotonic()
    rows = query_rows(con, chart.sql)
    if not informative(rows):
        return ChartOutput(chart.name, len(rows), None, None, None, time.monotonic() - started,
                           chart.hidden_reason(rows))
    inputs = chart_inputs(chart, rows)
    stem = charts_dir(warehouse) / f"{chart.name}-{inputs[:16]}"
    paths = {suffix: stem.with_name(stem.name + suffix) for suffix in PICTURE_SUFFIXES[pictures]}
    if not all(path.is_file() for path in paths.values()):
        _make_chart(chart, rows, inputs, paths, chart.note_for(rows))
    return ChartOutput(chart.name, len(rows), paths[".vl.json"], paths.get(".svg"), paths.get(".png"),
                       time.monotonic() - started)


def _make_chart(chart: ChartDef, rows: list[dict], inputs: str, paths: dict[str, Path],
                note: str | None = None) -> None:
    """Make the chart's missing files (``paths``, by suffix); the spec carries ``note``, the card's
    sentence about the loaded data (the page reads it there)."""
    spec = None
    if paths[".vl.json"].is_file():  # only a rendering is missing: the spec is there, no Altair
        with contextlib.suppress(OSError, ValueError):
            spec = json.loads(paths[".vl.json"].read_text())
    if spec is None:
        spec = chart_spec(chart, rows, validate=VALIDATE) | {
            "usermeta": {"tracehouse_inputs": inputs, "tracehouse_note": note}}
    if ".svg" in paths or ".png" in paths:
        import vl_convert as vlc

        vl_version = vegalite_version()
        if ".svg" in paths and not paths[".svg"].is_file():
            write_atomic(paths[".svg"], vlc.vegalite_to_svg(spec, vl_version=vl_version))
        if ".png" in paths and not paths[".png"].is_file():
            write_atomic(paths[".png"], vlc.vegalite_to_png(spec, vl_version=vl_version, scale=PNG_SCALE))
    if not paths[".vl.json"].is_file():  # last: a spec has its pictures
        write_atomic(paths[".vl.json"], json.dumps(spec, ensure_ascii=False, indent=1))


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
        thousands=lambda value: f"{value:,}" if isinstance(value, int) else value,
        script_json=lambda value: Markup(script_json(value)),  # no '<', '>' or '&' left to escape
    )
    return env


TABLE_TEXT = 1000  # characters of a long cell (query, golden answer, prediction, reason) in the table
TITLE_FROM = 120  # a long cell's text is also its tooltip from this length on


def table_rows(rows: list[dict], manifest: dict | None) -> list[dict]:
    """The annotation table's rows: what each cell shows, before escaping (autoescape)."""
    entries = (manifest or {}).get("pictures", {})
    out = []
    for row in rows:
        op = row["op_name"] or "(none)"
        if row["operation_type"]:
            op += f" ({row['operation_type']})"
        if row["graph_kind"] == "multi_agent" and row["decisive_step"] is not None:
            op = f"step {row['decisive_step']} of {row['n_steps']}: {op}"
        who = f"agent {row['responsible_agent']}" if row["responsible_agent"] else row["phase"] or ""
        entry = entries.get(row["annotation_id"]) or {}
        texts = {key: shorten(row[key], TABLE_TEXT) for key in ("query", "golden")}
        # one column for what went wrong: the system's answer where the source records one, else (Who&When,
        # TracerTraj record no answer) the annotated reason; both when a source has both
        answer = shorten(row["prediction"], TABLE_TEXT) if row["prediction"] is not None else ""
        reason = shorten(row["reason"], TABLE_TEXT) if row["reason"] else ""
        texts["outcome"] = f"{answer} · reason: {reason}" if answer and reason else answer or (
            f"reason: {reason}" if reason else "")
        view = entry.get("view")
        out.append(row | texts | {
            "op": shorten(op, 120),
            "who": shorten(who, 60),
            "view": view.removeprefix("dashboards/") if view else None,
            "svg": f"drilldown/{entry['stem']}.svg" if entry.get("svg") else None,
            "png": f"drilldown/{entry['stem']}.png" if entry.get("png") else None,
            "titles": {key: text for key, text in texts.items() if len(text) >= TITLE_FROM},
        })
    return out


def ingest_text(ingest: dict | None) -> str:
    """What the build rejected, in words, from the ingest_errors counts (sql/page/ingest.sql)."""
    if not ingest:
        return "What the build rejected at ingest is not known for this page."
    rejected, files, noted = ingest["rejected"], ingest["rejected_files"], ingest["noted"]

    def plural(n: int, word: str) -> str:
        return f"{n:,} {word}{'' if n == 1 else 's'}"

    noted_text = f"{plural(noted, 'defect')} noted in what loaded" if noted else ""
    if not rejected:
        return "Nothing was rejected at ingest" + (f"; {noted_text}." if noted else ".")
    kinds = ", ".join(f"{k['kind']} {k['n']:,}" for k in ingest["kinds"][:5])
    more = ", ..." if len(ingest["kinds"]) > 5 else ""
    what = (plural(files, "file") if rejected == files
            else f"{plural(rejected, 'file or record')} in {plural(files, 'file')}")
    return (f"Rejected at ingest: {what} did not load ({kinds}{more})"
            + (f"; {noted_text}." if noted else "."))


def render_page(
    warehouse: Warehouse,
    specs: dict[str, dict],
    annotations: list[dict],
    summary: dict,
    manifest: dict | None,
    bundle: str,
    hidden: dict[str, str] | None = None,
    chart_links: dict[str, dict[str, str]] | None = None,
    build: int | None = None,
    ingest: dict | None = None,
) -> str:
    """The page: a card per chart with informative rows, one line per hidden chart saying why, and
    the annotation table (sort, filter, search; each row opens its failure view)."""
    from dashboards.palette import SPARE_SYSTEM_COLORS, SYSTEM_COLORS, fixed_colors

    hidden = hidden or {}
    nonce = secrets.token_urlsafe(18)
    notes = {name: (spec.get("usermeta") or {}).get("tracehouse_note") for name, spec in specs.items()}
    charts = [
        {"name": name, "title": chart.title, "description": chart.description, "wide": chart.wide,
         "note": notes.get(name),
         "links": {"svg": "", "png": "", "spec": ""} | (chart_links or {}).get(name, {})}
        for name, chart in CHARTS.items() if name in specs and name not in hidden
    ]
    hidden_cards = [{"name": name, "title": chart.title, "reason": hidden[name]}
                    for name, chart in CHARTS.items() if name in hidden]
    table = table_rows(annotations, manifest)
    systems = sorted({r["system"] for r in table}, key=lambda s: (
        next(r["graph_kind"] != "memory" for r in table if r["system"] == s), s))
    colours = fixed_colors(systems, SYSTEM_COLORS, SPARE_SYSTEM_COLORS)
    system_index = {system: k for k, system in enumerate(systems)}
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
        ingest=ingest,
        ingest_text=ingest_text(ingest),
        ingest_command=f"{INGEST_COMMAND} --warehouse {shlex.quote(str(warehouse.root))}",
        charts=charts,
        hidden_cards=hidden_cards,
        annotations=table,
        systems=systems,
        system_index=system_index,
        system_colours=[colours[s] for s in systems],  # ours, not data: '#rrggbb'
        datasets=sorted({r["dataset"] for r in table}),
        error_types=sorted({r["error_type"] for r in table}),
        manifest=manifest or {},
        build_summary={"build": build, **summary},
        specs={name: spec for name, spec in specs.items() if name not in hidden},
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
    """Write one build's page, ``page-<attempt>.html``, from its charts' specs (a chart with no
    informative row is hidden, saying why), the annotation table (queried on ``con``, the build's
    views) and the failure views' manifest; returns its path and a few numbers for the asset's
    metadata."""
    started = time.monotonic()
    specs: dict[str, dict] = {}
    hidden: dict[str, str] = {}
    links: dict[str, dict[str, str]] = {}
    for name in CHARTS:
        if name not in charts:
            raise FileNotFoundError(f"chart {name} has not been built for this page")
        out = charts[name]
        if out.empty is not None or out.spec is None:
            hidden[name] = out.empty or CHARTS[name].empty
            continue
        specs[name] = json.loads(out.spec.read_text())
        links[name] = {k: p.relative_to(warehouse.dashboards_dir).as_posix()
                       for k, p in (("spec", out.spec), ("svg", out.svg), ("png", out.png)) if p is not None}
    annotations = query_rows(con, (PAGE_SQL / "annotation_table.sql").read_text())
    summary = query_rows(con, (PAGE_SQL / "summary.sql").read_text())[0]
    ingest = query_rows(con, (PAGE_SQL / "ingest.sql").read_text())[0]
    if not summary["annotations"]:  # every chart about failures is hidden for that one reason
        graphs = summary["graphs"] or 0
        for name in hidden:
            if name not in ABOUT_GRAPHS:
                hidden[name] = (f"No failure annotation is loaded (the warehouse holds {graphs:,} "
                                f"graph{'' if graphs == 1 else 's'} and no failure label).")
    text = render_page(warehouse, specs, annotations, summary, manifest, vega_bundle(), hidden, links, build,
                       ingest)
    path = write_atomic(page_path(warehouse, attempt), text)
    return path, {
        "charts": len(specs),
        "hidden": len(hidden),
        "annotations": len(annotations),
        "views": (manifest or {}).get("views", 0),
        "pictures": (manifest or {}).get("drawn", 0),
        "bytes": path.stat().st_size,
        "seconds": round(time.monotonic() - started, 3),
    }
