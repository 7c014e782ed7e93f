"""Failure views: one self-contained, offline HTML page per failure annotation (like a trace view in
Langfuse or Arize Phoenix), opened from the dashboard's annotation table or by
``tracehouse show ID --open``.

* The header: system, dataset, query, golden answer, prediction, error type, reason, and the decisive
  step (multi-agent) or the faulty operation (memory systems).
* Memory failures: the faulty operation with its input and output nodes, the path from it to the
  failed query's prediction node, and the source-evidence nodes, each node's text wrapped and
  expandable in full.
* Multi-agent failures: the decisive step in the header (who acted, what they wrote, a preview of a
  long text), then a vertical timeline of the steps, the decisive step highlighted. Nothing scrolls on
  load: the first screen (a static screenshot too) shows the header and the decisive step.
* OpenTelemetry traces (graph ``otel:<trace id>``): a waterfall of the spans as Jaeger or Phoenix
  draw one (tree order, indented by depth, a bar placed by start and scaled by duration, kind,
  status, tokens, model), the labelled span named in the header and highlighted in the waterfall,
  each span's inputs and outputs expandable.

Everything comes from a few set-based queries over all annotations at once (``sql/drilldown/failure*.sql``:
the annotations, the faulty operations' ends, the shortest paths, the trajectories, the node values),
not from queries per annotation. The same data makes the drill-down pictures (SVG, PNG on request)
when a build is asked for them (``pictures``: none | svg | png); ``tracehouse show`` still draws one
picture on demand (``dashboards.drilldown.draw``).

Trace text is untrusted: the page is a Jinja2 template with autoescape on, every value is cut to
:data:`VALUE_CHARS` characters (the page says how to get the rest with ``tracehouse sql``) with the
characters HTML/XML cannot hold replaced, and a Content-Security-Policy allows only the page's own
style and script (by nonce) and nothing from any host. File names never come from the data:
``failures/failure-<sha256 of the annotation id>-<digest of what the view is made from>.html``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
from markupsafe import Markup

from dashboards.drilldown.files import (
    LIMIT_ENV,
    STEM_PREFIX,
    convert_pngs,
    drilldown_limit,
    picture_stem,
    show_dir,
)
from dashboards.drilldown.files import (
    code_fingerprint as drawing_fingerprint,
)
from dashboards.drilldown.layout import render_svg
from dashboards.drilldown.query import VALUE_CHARS, Failures, drilldown, failures_sql, load_failures
from dashboards.drilldown.values import Vector, split
from pipelines.analytics import catalog, db
from pipelines.config import PICTURES, PICTURES_ENV, pictures_option
from pipelines.progress import event
from pipelines.storage.warehouse import Warehouse, write_atomic

SQL_DIR = db.SQL_DIR / "drilldown"
VIEW_FOLDER = "failures"
PICTURE_FOLDER = "drilldown"
VIEW_PREFIX = "failure-"
PAGE_CHARS = 512 * 1024  # characters of trace text one view embeds in full; beyond, previews only
PREVIEW_CHARS = 400  # a collapsed text shows this much; a text up to 1.5 times as long is shown whole
PROGRESS_SECONDS = 0.5

_NOT_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")
_COLOUR = re.compile(r"#[0-9a-fA-F]{6}")


def reads() -> tuple[str, ...]:
    """What sql/drilldown/*.sql read: the failure views' upstream tables and marts, from their SQL."""
    return catalog.files_read(sorted(SQL_DIR.glob("*.sql")))


def view_dir(warehouse: Warehouse) -> Path:
    return warehouse.dashboards_dir / VIEW_FOLDER


def picture_dir(warehouse: Warehouse) -> Path:
    return warehouse.dashboards_dir / PICTURE_FOLDER


def view_name(annotation_id: str, digest: str) -> str:
    """``failure-<first 24 hex of sha256(annotation id)>-<digest>.html``: never the id itself."""
    return f"{VIEW_PREFIX}{picture_stem(annotation_id).removeprefix(STEM_PREFIX)}-{digest[:12]}.html"


def failure_view_path(warehouse: Warehouse, record: Any, annotation_id: str) -> Path | None:
    """The failure view the committed build ``record`` wrote for ``annotation_id`` (None when it
    wrote none, e.g. the id is unknown, or the file is gone)."""
    entry = ((record.outputs if record is not None else {}).get("drilldown") or {}).get("pictures", {})
    rel = (entry.get(annotation_id) or {}).get("view")
    if not rel:
        return None
    path = warehouse.path(rel)
    return path if path.is_file() else None


def code_fingerprint() -> str:
    """Everything a view is made by: the drawing code and SQL (pictures), this module, its template,
    styles and script, the text rules and the seeds (roles, types)."""
    here = Path(__file__).resolve()
    templates = here.parent / "templates"
    extra = [here, here.parent / "charts.py", here.parent / "palette.py", here.parent / "page.py",
             *(templates / f"failure.{ext}" for ext in ("html.j2", "css", "js")),
             *sorted((db.SQL_DIR / "seeds").glob("*.csv"))]
    digest = db.files_digest(extra)
    digest.update(drawing_fingerprint().encode())
    return digest.hexdigest()


# -- the view of one annotation ------------------------------------------------------------------


def clean(value: Any) -> str:
    """Trace text as page text: characters HTML and XML cannot hold become U+FFFD (the template
    escapes the rest)."""
    return _NOT_TEXT.sub("\ufffd", value if isinstance(value, str) else str(value))


def sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def sql_command(query: str) -> str:
    """The shell command that prints a whole value (the page shows it as text)."""
    return f"tracehouse sql --format csv {shlex.quote(query)}"


@dataclass
class Text:
    """A piece of trace text as a view embeds it: at most ``VALUE_CHARS`` characters (and previews
    only once the page's budget is spent), with how to get the rest."""

    text: str
    chars: int  # the whole value's length in characters
    value_bytes: int | None = None
    sql: str | None = None
    open: bool = False  # shown expanded
    budget_cut: bool = False  # cut to its preview because the page embeds enough text already
    _split: tuple[str, list[str | Vector]] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def parts(self) -> list[str | Vector]:
        """The text as shown: plain pieces, and each long list of numbers (an embedding) as a
        ``Vector`` the page folds to its dimension and first values, its whole text on request."""
        if self._split is None or self._split[0] is not self.text:  # split once per text it holds
            self._split = (self.text, split(self.text))
        return self._split[1]

    @property
    def shown(self) -> str:
        """The text with every vector folded to its summary (what the preview and length rules see)."""
        return "".join(p if isinstance(p, str) else p.summary for p in self.parts)

    @property
    def preview(self) -> str:
        flat = " ".join(self.shown[: PREVIEW_CHARS * 2].split())
        return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"

    @property
    def long(self) -> bool:
        shown = self.shown
        return len(shown) > PREVIEW_CHARS * 3 // 2 or shown.count("\n") > 8

    @property
    def cut(self) -> bool:
        return len(self.text) < self.chars


def make_text(value: Any, sql: str | None = None, chars: int | None = None,
              value_bytes: int | None = None) -> Text | None:
    if value is None:
        return None
    full = value if isinstance(value, str) else str(value)
    return Text(clean(full[:VALUE_CHARS]), chars if chars is not None else len(full), value_bytes, sql)


def node_view(data: Failures, graph_id: str, full_node_id: str, role: str = "") -> dict[str, Any]:
    found = data.node(graph_id, full_node_id)
    query = ("select value from nodes where graph_id = " + sql_literal(graph_id)
             + " and full_node_id = " + sql_literal(full_node_id))
    if found is None:
        return {"id": clean(full_node_id), "missing": True, "role": role, "text": None, "target": False, "via": None}
    return {
        "id": clean(full_node_id),
        "missing": False,
        "role": role,
        "target": False,
        "via": None,
        "class_name": clean(found["class_name"] or "node"),
        "version": found["version"],
        "session_id": clean(found["session_id"] or ""),
        "value_bytes": found["value_bytes"],
        "text": make_text(found["value"], sql_command(query), found["value_chars"], found["value_bytes"]),
    }


def same_agent(actor: str | None, agent: str | None) -> bool:
    """One agent named twice: names compared without their case and surrounding spaces, as the marts
    compare them (AgentRx labels 'Assistant' for the role 'assistant'); shown as the source wrote them."""
    return actor is not None and agent is not None and actor.strip().lower() == agent.strip().lower()


def _annotation_text(row: dict[str, Any], column: str) -> Text | None:
    query = f"select {column} from annotations where annotation_id = {sql_literal(row['annotation_id'])}"
    return make_text(row[column], sql_command(query))


def view_context(data: Failures, row: dict[str, Any], links: dict[str, str | None]) -> dict[str, Any]:
    """Everything the template shows for one annotation (texts not yet escaped: autoescape does it)."""
    from dashboards.palette import SPARE_SYSTEM_COLORS, SYSTEM_COLORS, fixed_colors

    graph_id = row["graph_id"]
    kind = row["graph_kind"]
    golden_sql = sql_command("select unnest(golden_answers) from annotations where annotation_id = "
                             + sql_literal(row["annotation_id"]))
    golden = [make_text(g, golden_sql) for g in (row["golden_answers"] or [])]
    header = {
        "query": _annotation_text(row, "query"),
        "prediction": _annotation_text(row, "prediction"),
        "reason": _annotation_text(row, "reason"),
        "golden": [g for g in golden if g is not None],
    }
    for text in header.values():
        for t in text if isinstance(text, list) else [text]:
            if t is not None:
                t.open = True
    ctx: dict[str, Any] = {
        "a": {k: clean(v) if isinstance(v, str) else v for k, v in row.items()
              if k not in ("query", "prediction", "reason", "golden_answers", "source_evidence_ids")},
        "kind": kind,
        "header": header,
        "links": links,
        "system_color": fixed_colors([row["system"]], SYSTEM_COLORS, SPARE_SYSTEM_COLORS)[row["system"]],
        "notes": [],
        "inputs": [], "outputs": [], "path": [], "evidence": [], "timeline": [],
        "prediction_node": None, "op": None, "hops": None, "predictions": [], "decisive": None,
        "other_speaker": False,
        "trace": None, "waterfall_css": Markup(""),
        "page_chars": PAGE_CHARS, "value_chars": VALUE_CHARS,
    }
    texts: list[tuple[int, Text]] = [(0, t) for t in header["golden"]]
    texts += [(0, t) for t in (header["query"], header["prediction"], header["reason"]) if t is not None]

    if row.get("is_trace"):
        ctx["trace"], ranked_texts, ctx["waterfall_css"] = trace_view(data, row)
        texts += ranked_texts
    elif kind == "multi_agent":
        steps = data.timelines.get(graph_id, [])
        decisive = row["decisive_step"]
        for step in steps:
            messages = [node_view(data, graph_id, n, "message") for n in step["outputs"]]
            is_decisive = decisive is not None and step["step"] == decisive
            ctx["timeline"].append({
                "step": step["step"], "op_id": clean(step["op_id"]), "op_name": clean(step["op_name"] or ""),
                "operation_type": step["operation_type"], "actor": clean(step["actor"] or "(unknown)"),
                "agent_role": step["agent_role"], "decisive": is_decisive,
                "responsible": same_agent(step["actor"], row["responsible_agent"]),
                "messages": messages,
            })
            if is_decisive:
                ctx["decisive"] = ctx["timeline"][-1]
            for message in messages:
                if message["text"] is not None:
                    message["text"].open = is_decisive
                    distance = abs(step["step"] - decisive) if decisive is not None else step["step"]
                    texts.append((1 + distance, message["text"]))
        # flagged only where the mart says another agent spoke and the names differ beyond their case
        ctx["other_speaker"] = (row.get("agent_spoke_step") is False and row.get("step_actor") is not None
                                and not same_agent(row["step_actor"], row["responsible_agent"]))
        if decisive is None:
            ctx["notes"].append("the annotation names no decisive step")
        elif not any(s["decisive"] for s in ctx["timeline"]):
            ctx["notes"].append(f"the trajectory has no step {decisive}")
    else:
        d = drilldown(data, row)
        ctx["notes"] = [n for n in d.notes if "faulty operation has no edges" in n]  # the rest: the sections
        if d.op is not None:
            ctx["op"] = {k: clean(v) if isinstance(v, str) else v for k, v in d.op.items()}
            ctx["inputs"] = [node_view(data, graph_id, n.full_node_id, "input") for n in d.inputs]
            ctx["outputs"] = [node_view(data, graph_id, n.full_node_id, "output") for n in d.outputs]
        via = {dst: (op_id, op_name) for _, dst, op_id, op_name in d.path_edges}
        for k, node in enumerate(d.path):
            view = node_view(data, graph_id, node.full_node_id, "path")
            op_id, op_name = via.get(node.full_node_id, (None, None)) if k else (None, None)
            view["via"] = clean(f"{op_name or op_id}" + (f" ({op_id})" if op_name and op_id else "")) if k else None
            view["target"] = d.target is not None and node.full_node_id == d.target.full_node_id
            ctx["path"].append(view)
        if d.target is not None and not d.path and row["prediction_node_id"]:
            ctx["prediction_node"] = node_view(data, graph_id, row["prediction_node_id"], "target")
        ctx["hops"] = len(d.path_edges) if d.path else None
        for ev in row["source_evidence_ids"] or []:
            ctx["evidence"].append(node_view(data, graph_id, ev, "evidence"))
        ranked = [(1, v) for v in ctx["path"]] + [(2, v) for v in ctx["outputs"]] + \
                 [(3, v) for v in ctx["evidence"]] + [(4, v) for v in ctx["inputs"]]
        if ctx["prediction_node"]:
            ranked.append((1, ctx["prediction_node"]))
        texts += [(rank, v["text"]) for rank, v in ranked if v["text"] is not None]
        for v in ctx["path"] + ctx["outputs"]:
            if v["text"] is not None and not v["text"].long:
                v["text"].open = True

    for prediction in data.predictions.get((graph_id, row["annotation_id"]), []):
        reason = make_text(prediction["reason"]) if prediction["reason"] else None
        ctx["predictions"].append({
            **{k: clean(v) if isinstance(v, str) else v for k, v in prediction.items() if k != "reason"},
            "reason": reason,
        })
        if reason is not None:
            texts.append((5, reason))

    budget = PAGE_CHARS  # the most important text first; the rest keeps its preview
    for _, text in sorted(texts, key=lambda x: x[0]):
        if len(text.text) <= budget:
            budget -= len(text.text)
        else:
            text.text, text.budget_cut, text.open = text.preview, True, False
            budget -= len(text.text)
    colour = ctx["system_color"]
    ctx["system_color"] = colour if _COLOUR.fullmatch(colour) else "#888888"
    return ctx


def span_tree(spans: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
    """The spans in tree order with their depth: each after its parent, siblings by start time
    (then step and id); a span whose parent the trace does not hold is a root. Every span comes
    once, also from a cycle of parents (which a source could hold): its first span met becomes a root."""
    def order(s: dict[str, Any]) -> tuple:
        return (s["start_us"] is None, s["start_us"] or 0, s["step"] is None, s["step"] or 0, s["op_id"])

    ids = {s["op_id"] for s in spans}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for span in spans:
        parent = span["parent_op_id"] if span["parent_op_id"] in ids and span["parent_op_id"] != span["op_id"] else None
        children.setdefault(parent, []).append(span)
    for kids in children.values():
        kids.sort(key=order)
    out: list[tuple[dict[str, Any], int]] = []
    seen: set[str] = set()

    def walk(roots: list[dict[str, Any]]) -> None:
        stack = [(s, 0) for s in reversed(roots)]
        while stack:
            span, depth = stack.pop()
            if span["op_id"] in seen:
                continue
            seen.add(span["op_id"])
            out.append((span, depth))
            stack.extend((kid, depth + 1) for kid in reversed(children.get(span["op_id"], [])))

    walk(children.get(None, []))
    for span in sorted(spans, key=order):  # spans on a cycle of parents: no root leads to them
        if span["op_id"] not in seen:
            walk([span])
    return out


def duration_text(ms: float | None) -> str:
    """A span's duration as a trace viewer prints it: ``0.35 ms``, ``12.4 ms``, ``1,234 ms``."""
    if ms is None:
        return "–"
    if ms < 10:
        return f"{ms:.2f} ms"
    return f"{ms:,.1f} ms" if ms < 1000 else f"{ms:,.0f} ms"


def trace_view(data: Failures, row: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[int, Text]], Markup]:
    """The waterfall of an OpenTelemetry trace: its spans in tree order (each with its depth, its
    bar's place and length in percent of the trace, its labels, its inputs and outputs), the texts
    ranked by their distance from the labelled span, and the style rules that indent the names and
    place the bars (numbers only: the page's policy allows no inline style attribute)."""
    graph_id = row["graph_id"]
    tree = span_tree(data.spans.get(graph_id, []))
    starts = [s["start_us"] for s, _ in tree if s["start_us"] is not None]
    ends = [s["end_us"] for s, _ in tree if s["end_us"] is not None]
    t0 = min(starts) if starts else None
    t1 = max(ends + starts) if starts else None
    total = (t1 - t0) if t0 is not None and t1 is not None else None
    labels: dict[str, list[dict[str, Any]]] = {}
    for label in data.span_labels.get(graph_id, []):
        labels.setdefault(label["op_id"], []).append(label)
    rows: list[dict[str, Any]] = []
    rules: list[str] = []
    first_labelled: int | None = None
    for k, (span, depth) in enumerate(tree):
        labelled = row["faulty_op_id"] is not None and span["op_id"] == row["faulty_op_id"]
        if labelled and first_labelled is None:
            first_labelled = k
        bar = None
        if total is not None and span["start_us"] is not None:
            end = span["end_us"] if span["end_us"] is not None else span["start_us"]
            left = 100.0 * (span["start_us"] - t0) / total if total > 0 else 0.0
            width = 100.0 * max(end - span["start_us"], 0) / total if total > 0 else 100.0
            left = min(max(left, 0.0), 100.0)
            width = min(max(width, 0.0), 100.0 - left)
            bar = {"left": left, "width": width, "offset_ms": (span["start_us"] - t0) / 1000.0}
            shown = max(width, 0.3)  # a span of no length still shows a mark
            rules.append(f"#span-{k} .bar{{left:{min(left, 100.0 - shown):.4f}%;width:{shown:.4f}%}}")
        rules.append(f"#span-{k} .name{{padding-left:{8 + 16 * min(depth, 40)}px}}")
        ends_of = data.span_ends.get((graph_id, span["op_id"]), [])
        inputs, outputs = [], []
        for end_row in ends_of:
            view = node_view(data, graph_id, end_row["full_node_id"], end_row["role"])
            view["via"] = clean(", ".join(end_row["via"] or []))
            (inputs if end_row["role"] == "input" else outputs).append(view)
        other = [{"annotation_id": clean(x["annotation_id"]), "error_type": clean(x["error_type"] or "unlabelled")}
                 for x in labels.get(span["op_id"], []) if x["annotation_id"] != row["annotation_id"]]
        rows.append({
            "index": k, "depth": depth, "labelled": labelled, "other_labels": other,
            **{key: clean(span[key]) if isinstance(span[key], str) else span[key]
               for key in ("op_id", "parent_op_id", "op_name", "category", "span_kind", "operation_type", "status",
                           "status_message", "model", "input_tokens", "output_tokens", "actor", "duration_ms")},
            "duration": duration_text(span["duration_ms"]),
            "error": span["status"] == "error",
            "bar": bar, "inputs": inputs, "outputs": outputs,
        })
    texts: list[tuple[int, Text]] = []
    for k, r in enumerate(rows):
        distance = abs(k - first_labelled) if first_labelled is not None else k
        for view in r["inputs"] + r["outputs"]:
            if view["text"] is not None:
                view["text"].open = r["labelled"] and not view["text"].long
                texts.append((1 + distance, view["text"]))
    trace = {
        "spans": rows,
        "n_errors": sum(1 for r in rows if r["error"]),
        "duration": duration_text(total / 1000.0) if total is not None else None,
        "labelled": first_labelled,
        "labelled_span": rows[first_labelled] if first_labelled is not None else None,
        "n_labels": len(data.span_labels.get(graph_id, [])),
    }
    return trace, texts, Markup("\n".join(rules))


def render_view(ctx: dict[str, Any]) -> str:
    from dashboards.page import _inline, templates

    nonce = secrets.token_urlsafe(18)
    return templates().get_template("failure.html.j2").render(
        **ctx,
        csp=view_csp(nonce),
        nonce=nonce,
        css=_inline("failure.css", "</style"),
        script=_inline("failure.js", "</script"),
    )


def view_csp(nonce: str) -> Markup:
    """Only our own style and script (by nonce); nothing is fetched, framed or connected to."""
    return Markup(
        "default-src 'none'; "
        f"script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; img-src data:; font-src 'none'; "
        "connect-src 'none'; base-uri 'none'; form-action 'none'; frame-src 'none'; object-src 'none'"
    )


# -- a build's views and pictures ---------------------------------------------------------------


def row_digest(code: str, data: Failures, row: dict[str, Any]) -> str:
    """What an annotation's view and picture are made from: the code, its graph's content and its row
    (not its place in the drawing order)."""
    payload = [code, data.graph_contents.get(row["graph_id"]), {k: v for k, v in row.items() if k != "draw_order"},
               data.predictions.get((row["graph_id"], row["annotation_id"]), []),
               data.span_labels.get(row["graph_id"], [])]  # a trace's view marks its other labels too
    return hashlib.sha256(json.dumps(payload, default=str, sort_keys=True).encode()).hexdigest()


def write_all(
    warehouse: Warehouse,
    con: duckdb.DuckDBPyConnection,
    pictures: str | None = None,
    limit: int | None = None,
    workers: int | None = None,
    say: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Write the failure view of every annotation of the build whose views ``con`` has (and, with
    ``pictures`` 'svg' or 'png', the drill-down pictures of the first ``limit`` in round-robin order
    over the systems); returns the manifest the page links from and the build records.

    A file is named by the digest of what it is made from and is not written again when it is there.
    ``files`` lists exactly the files the manifest names (the files the build keeps alive)."""
    started = time.monotonic()
    say = say or (lambda message: None)
    pictures = pictures_option(pictures)
    limit = drilldown_limit(limit)
    drawn_ids: set[str] = set()
    if pictures != "none":
        drawn_ids = {r[0] for r in con.execute(
            "select annotation_id from (" + failures_sql("failures") + ") where draw_order < $limit",
            {"annotation_ids": None, "limit": limit}).fetchall()}
    # Phase 1: what every view is named by (cheap); phase 2: the node values and paths of the views
    # (and pictures) not written yet (after a one-file change: that file's failures only).
    code = code_fingerprint()
    views, pics = view_dir(warehouse), picture_dir(warehouse)
    index = load_failures(con, light=True)
    missing = []
    for row in index.rows:
        digest = row_digest(code, index, row)
        stem = f"{picture_stem(row['annotation_id'])}-{digest[:12]}"
        draw = row["annotation_id"] in drawn_ids
        flags = {"svg": draw, "png": draw and pictures == "png"}
        name = view_name(row["annotation_id"], hashlib.sha256(f"{digest} {flags}".encode()).hexdigest())
        if not ((views / name).is_file() and (not flags["svg"] or (pics / f"{stem}.svg").is_file())
                and (not flags["png"] or (pics / f"{stem}.png").is_file())):
            missing.append(row["annotation_id"])
    data = index
    if missing:
        say(event("pictures_loading", missing=len(missing), views=len(index.rows)))
        full = load_failures(con, sorted(set(missing)), paths_for=drawn_ids & set(missing))
        full.rows = index.rows  # every row, in drawing order; the values of the missing ones
        full.predictions, full.graph_contents = index.predictions, index.graph_contents
        full.span_labels = index.span_labels
        full.seconds += index.seconds
        data = full
    total = len(data.rows)
    what = (f" and {min(limit, total)} {'SVG + PNG' if pictures == 'png' else 'SVG'} pictures" if pictures != "none"
            else " (no drill-down pictures: `--pictures svg` draws them, `tracehouse show ID` one)")
    say(event("pictures_started", views=total, what=f"{what}; {total - len(missing)} already written; data loaded "
              f"in {data.seconds:.1f} s", written_before=total - len(missing), pictures=pictures))
    views.mkdir(parents=True, exist_ok=True)
    if pictures != "none":
        pics.mkdir(parents=True, exist_ok=True)
    entries: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}
    written = rendered = 0
    to_convert: list[tuple[Path, Path]] = []
    last_report = time.monotonic()
    for k, row in enumerate(data.rows):
        annotation_id = row["annotation_id"]
        try:
            digest = row_digest(code, data, row)
            stem = f"{picture_stem(annotation_id)}-{digest[:12]}"
            draw = annotation_id in drawn_ids
            svg_path, png_path = pics / f"{stem}.svg", pics / f"{stem}.png"
            if draw and not svg_path.is_file():
                write_atomic(svg_path, render_svg(drilldown(data, row)).encode("utf-8"))
                rendered += 1
            if draw and pictures == "png" and not png_path.is_file():
                to_convert.append((svg_path, png_path))
            flags = {"svg": draw, "png": draw and pictures == "png"}
            name = view_name(annotation_id, hashlib.sha256(f"{digest} {flags}".encode()).hexdigest())
            path = views / name
            if not path.is_file():
                links = {
                    "dashboard": "../index.html",
                    "svg": f"../{PICTURE_FOLDER}/{stem}.svg" if flags["svg"] else None,
                    "png": f"../{PICTURE_FOLDER}/{stem}.png" if flags["png"] else None,
                }
                write_atomic(path, render_view(view_context(data, row, links)))
                written += 1
        except (LookupError, ValueError, duckdb.Error) as exc:
            failed[annotation_id] = str(exc)[:300]
            continue
        entries[annotation_id] = {"stem": stem, "view": f"dashboards/{VIEW_FOLDER}/{name}", **flags}
        now = time.monotonic()
        if now - last_report >= PROGRESS_SECONDS and k + 1 < total:
            say(event("pictures_progress", done=k + 1, views=total, written=written, rendered=rendered,
                      seconds=now - started))
            last_report = now
    if to_convert:
        say(event("pictures_converting", pictures=len(to_convert)))
        convert_pngs(to_convert, workers or min(4, os.cpu_count() or 1))
    files = []
    for entry in entries.values():
        files.append(entry["view"])
        if entry["svg"]:
            files.append(f"dashboards/{PICTURE_FOLDER}/{entry['stem']}.svg")
        if entry["png"]:
            files.append(f"dashboards/{PICTURE_FOLDER}/{entry['stem']}.png")
    return {
        "pictures_option": pictures,
        "limit": limit,
        "total": total,
        "views": len(entries),
        "written": written,
        "drawn": sum(1 for e in entries.values() if e["svg"]),
        "rendered": rendered,
        "png": pictures == "png",
        "converted": len(to_convert),
        "pictures": entries,
        "failed": failed,
        "files": files,
        "seconds": round(time.monotonic() - started, 3),
    }


def write_one(con: duckdb.DuckDBPyConnection, annotation_id: str, out_dir: Path,
              graph_id: str | None = None, dashboard: Path | None = None) -> Path:
    """Write one annotation's failure view into ``out_dir`` (``tracehouse show ID --open`` when the
    committed build has none): ``failure-<hash>.html``, linking the pictures ``tracehouse show``
    draws beside it (``annotation-<hash>.svg`` / ``.png``) and ``dashboard`` (default: one folder up)."""
    from dashboards.drilldown.query import AmbiguousAnnotation, AnnotationNotFound

    data = load_failures(con, [annotation_id])
    rows = [r for r in data.rows if graph_id is None or r["graph_id"] == graph_id]
    if not rows:
        where = f" in graph {graph_id!r}" if graph_id is not None else ""
        raise AnnotationNotFound(f"no annotation {annotation_id!r}{where} in the warehouse")
    if len(rows) > 1:
        raise AmbiguousAnnotation(annotation_id, [r["graph_id"] for r in rows])
    stem = picture_stem(annotation_id)
    home = os.path.relpath(dashboard, out_dir.absolute()) if dashboard is not None else "../index.html"
    links = {"dashboard": Path(home).as_posix(),
             "svg": f"{stem}.svg" if (out_dir / f"{stem}.svg").is_file() else None,
             "png": f"{stem}.png" if (out_dir / f"{stem}.png").is_file() else None}
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{VIEW_PREFIX}{stem.removeprefix(STEM_PREFIX)}.html"
    write_atomic(path, render_view(view_context(data, rows[0], links)))
    return path



def draw_all(warehouse: Warehouse, con: duckdb.DuckDBPyConnection, limit: int | None = None,
             png: bool = False, workers: int | None = None) -> dict[str, Any]:
    """Draw the pictures of the first ``limit`` annotations (round-robin over systems) of the build whose
    views ``con`` has, SVG (and PNG with ``png``), with every failure view: what a build asked for
    pictures does (:func:`write_all`, whose manifest this returns)."""
    return write_all(warehouse, con, "png" if png else "svg", limit, workers)

__all__ = [
    "LIMIT_ENV",
    "PICTURES",
    "PICTURES_ENV",
    "failure_view_path",
    "pictures_option",
    "render_view",
    "show_dir",
    "view_context",
    "view_dir",
    "draw_all",
    "write_all",
    "write_one",
]
