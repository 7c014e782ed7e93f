"""Drill-down pictures: the faulty operation of one failure annotation, drawn as SVG and PNG.

The picture shows the operation's input nodes, the operation, its output nodes, and one shortest path
of edges on from an output to the failed query's prediction node (multi-agent traces have no
prediction node: the path runs on to the output of the trajectory's last step). Everything comes
from SQL over the warehouse, through the lineage macros (``op_subgraph``, ``downstream``,
``upstream``; queries in ``dashboards/sql/drilldown/``); the layout is a small layered one computed
here and written as SVG text, converted to PNG by vl-convert (no Graphviz).

Trace text is untrusted: every value is stripped of characters XML cannot hold, shortened and
``html.escape``d before it goes into the SVG, which holds no script and no link. File names never
come from the data: they are ``annotation-<sha256 of the annotation id>``, written only inside the
chosen folder, each by a temporary file and a rename.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from pipelines import db
from pipelines.changes import FORMAT_VERSION
from pipelines.storage import Warehouse, write_atomic

SQL_DIR = db.REPO / "dashboards" / "sql" / "drilldown"
LIMIT_ENV = "TRACEHOUSE_DRILLDOWN_LIMIT"
DEFAULT_LIMIT = 200
STEM_PREFIX = "annotation-"

MAX_SIDE = 24  # input / output boxes drawn per side; the rest are summarised in one box
MAX_PATH = 6  # path boxes drawn after the output; longer paths keep their first and last few
PNG_SCALE = 2.0

NODE_W, NODE_H = 250, 74
OP_W, OP_H = 280, 86
COL_GAP, PATH_GAP, ROW_GAP = 64, 130, 12
MARGIN = 20
LINE = 17

ROLE_STYLE = {
    "input": ("#e8f0fa", "#4e79a7"),
    "output": ("#fdf0e2", "#f28e2b"),
    "path": ("#f2f2f2", "#8c8c8c"),
    "target": ("#fde8e8", "#d62728"),
    "op": ("#33363b", "#111111"),
    "more": ("#ffffff", "#bbbbbb"),
}


class AnnotationNotFound(LookupError):
    pass


class AmbiguousAnnotation(LookupError):
    def __init__(self, annotation_id: str, graphs: list[str]) -> None:
        super().__init__(
            f"annotation id {annotation_id!r} exists in {len(graphs)} graphs ({', '.join(graphs[:5])}); "
            "name one with --graph"
        )
        self.graphs = graphs


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


def sql(name: str) -> str:
    return (SQL_DIR / f"{name}.sql").read_text()


# -- the subgraph ---------------------------------------------------------------------------------


@dataclass
class Node:
    full_node_id: str
    class_name: str | None = None
    version: int | None = None
    value: str | None = None
    session_id: str | None = None


@dataclass
class Drilldown:
    annotation: dict[str, Any]
    op: dict[str, Any] | None = None
    inputs: list[Node] = field(default_factory=list)
    outputs: list[Node] = field(default_factory=list)
    path: list[Node] = field(default_factory=list)  # from an output to the target, both included
    path_edges: list[tuple[str, str, str | None, str | None]] = field(default_factory=list)  # src, dst, op, name
    target: Node | None = None
    target_kind: str = ""  # 'prediction' | 'final step output' | ''
    notes: list[str] = field(default_factory=list)

    @property
    def graph_id(self) -> str:
        return self.annotation["graph_id"]

    @property
    def annotation_id(self) -> str:
        return self.annotation["annotation_id"]


def _rows(con: duckdb.DuckDBPyConnection, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    cursor = con.execute(query, params)
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def _node(row: dict[str, Any]) -> Node:
    return Node(row["full_node_id"], row.get("class_name"), row.get("version"), row.get("value"), row.get("session_id"))


def _nodes(con: duckdb.DuckDBPyConnection, graph_id: str, ids: list[str]) -> dict[str, Node]:
    found = {r["full_node_id"]: _node(r) for r in _rows(con, sql("nodes"), {"graph_id": graph_id, "ids": ids})}
    return {i: found.get(i, Node(i)) for i in ids}


def shortest_path(
    con: duckdb.DuckDBPyConnection, graph_id: str, start: str, target: str
) -> list[tuple[str, str, str | None, str | None]] | None:
    """One shortest path of edges from ``start`` to ``target`` (``[]`` when they are the same node,
    None when ``target`` is not downstream): at each hop the smallest next node id, then op id."""
    if start == target:
        return []
    rows = _rows(con, sql("path"), {"graph_id": graph_id, "start": start, "target": target})
    if not rows:
        return None
    by_source: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_source.setdefault(row["source_full_node_id"], []).append(row)
    path, current = [], start
    for _ in range(rows[0]["total_hops"]):
        step = min(by_source[current], key=lambda r: (r["target_full_node_id"], r["op_id"] or ""))
        path.append((step["source_full_node_id"], step["target_full_node_id"], step["op_id"], step["op_name"]))
        current = step["target_full_node_id"]
    assert current == target, "the shortest-path edges do not reach the target"
    return path


def load(con: duckdb.DuckDBPyConnection, annotation_id: str, graph_id: str | None = None) -> Drilldown:
    """Everything one picture shows, from the marts and the lineage macros."""
    found = _rows(con, sql("annotation"), {"annotation_id": annotation_id})
    if graph_id is not None:
        found = [r for r in found if r["graph_id"] == graph_id]
    if not found:
        where = f" in graph {graph_id!r}" if graph_id is not None else ""
        raise AnnotationNotFound(f"no annotation {annotation_id!r}{where} in the warehouse")
    if len(found) > 1:
        raise AmbiguousAnnotation(annotation_id, [r["graph_id"] for r in found])
    d = Drilldown(found[0])
    a = d.annotation

    if a["faulty_op_id"] is None:
        d.notes.append("the label names no faulty operation (e.g. a wrong reference or a wrong judge)")
    else:
        ends = _rows(con, sql("op_subgraph"), {"graph_id": d.graph_id, "op_id": a["faulty_op_id"]})
        if not ends:
            d.notes.append("the faulty operation has no edges in this graph")
            d.op = {"op_id": a["faulty_op_id"], "op_name": a["op_name"], "op_category": None, "actor": None}
        else:
            first = ends[0]
            d.op = {k: first[k] for k in ("op_id", "op_name", "op_category", "op_session_id", "actor")}
            seen: set[tuple[str, str]] = set()
            for row in sorted(ends, key=lambda r: (r["role"], r["class_name"] or "", r["full_node_id"])):
                if (row["role"], row["full_node_id"]) in seen:
                    continue
                seen.add((row["role"], row["full_node_id"]))
                (d.inputs if row["role"] == "input" else d.outputs).append(_node(row))

    target_id = a["prediction_node_id"] or a["final_node_id"]
    if target_id is None:
        if a["graph_kind"] == "memory":
            d.notes.append("no prediction node was resolved for the failed query")
        return d
    d.target_kind = "prediction" if a["prediction_node_id"] else "final step output"
    d.target = _nodes(con, d.graph_id, [target_id])[target_id]
    if not d.outputs:
        return d
    best: tuple[int, str, list] | None = None
    for output in d.outputs:
        edges = shortest_path(con, d.graph_id, output.full_node_id, target_id)
        if edges is not None and (best is None or (len(edges), output.full_node_id) < best[:2]):
            best = (len(edges), output.full_node_id, edges)
    if best is None:
        d.notes.append(f"the {d.target_kind} is not downstream of the operation's outputs")
        return d
    _, start, edges = best
    ids = [start] + [dst for _, dst, _, _ in edges]
    nodes = _nodes(con, d.graph_id, ids)
    d.path = [nodes[i] for i in ids]
    d.path_edges = edges
    hops = len(edges)
    d.notes.append(
        f"{d.target_kind}: {hops} edge{'s' if hops != 1 else ''} from the operation's output"
        + (" (the operation produced it)" if hops == 0 else "")
    )
    return d


# -- drawing --------------------------------------------------------------------------------------

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")


def clean(value: object, limit: int) -> str:
    """Untrusted text made safe for SVG: XML-legal characters, one line, at most ``limit`` characters,
    escaped."""
    text = "" if value is None else str(value)
    text = " ".join(_NOT_XML.sub("\ufffd", text).split())
    if len(text) > limit:
        text = text[: max(1, limit - 1)] + "…"
    return html.escape(text, quote=True)


@dataclass
class Box:
    kind: str  # input | output | path | target | op | more
    x: float = 0.0
    y: float = 0.0
    w: float = NODE_W
    h: float = NODE_H
    node: Node | None = None
    lines: list[tuple[str, str]] = field(default_factory=list)  # (css class, escaped text)
    tip: str = ""

    @property
    def right(self) -> tuple[float, float]:
        return self.x + self.w, self.y + self.h / 2

    @property
    def left(self) -> tuple[float, float]:
        return self.x, self.y + self.h / 2


def _node_box(node: Node, kind: str) -> Box:
    version = f" · v{node.version}" if node.version is not None else ""
    value = " ".join(_NOT_XML.sub("\ufffd", node.value or "").split())
    wrapped = textwrap.wrap(value, 38, break_long_words=True, max_lines=2, placeholder=" …")
    lines = [
        ("t", clean(node.class_name or "node", 30) + html.escape(version)),
        ("id", clean(node.full_node_id, 40)),
        *[("v", clean(line, 40)) for line in wrapped or ["(no value)"]],
    ]
    tip = f"{node.full_node_id}\n{(node.value or '')[:600]}"
    return Box(kind, node=node, lines=lines, tip=clean(tip, 640))


def _more_box(count: int, what: str) -> Box:
    return Box("more", h=36, lines=[("m", html.escape(f"+ {count} more {what}"))])


def _column(nodes: list[Node], kind: str, what: str) -> list[Box]:
    boxes = [_node_box(n, kind) for n in nodes[:MAX_SIDE]]
    if len(nodes) > MAX_SIDE:
        boxes.append(_more_box(len(nodes) - MAX_SIDE, what))
    return boxes


def _stack(boxes: list[Box], x: float, top: float, height: float) -> None:
    total = sum(b.h for b in boxes) + ROW_GAP * max(0, len(boxes) - 1)
    y = top + (height - total) / 2
    for box in boxes:
        box.x, box.y = x, y
        y += box.h + ROW_GAP


def _arrow(a: tuple[float, float], b: tuple[float, float], attrs: str, label: str = "", dashed: bool = False) -> str:
    (x1, y1), (x2, y2) = a, b
    mid = (x1 + x2) / 2
    dash = ' stroke-dasharray="5 4"' if dashed else ""
    css = "edge elided" if dashed else "edge"
    out = [
        f'<g class="{css}"{attrs}><path d="M{x1:.1f},{y1:.1f} C{mid:.1f},{y1:.1f} {mid:.1f},{y2:.1f} {x2 - 2:.1f},'
        f'{y2:.1f}" fill="none" stroke="#888888" stroke-width="1.3"{dash} marker-end="url(#arrow)"/>'
    ]
    if label:
        out.append(f'<text class="el" x="{mid:.1f}" y="{min(y1, y2) - 5:.1f}" text-anchor="middle">{label}</text>')
    out.append("</g>")
    return "".join(out)


def _box_svg(box: Box) -> str:
    fill, stroke = ROLE_STYLE[box.kind]
    attrs = f' class="node {box.kind}"'
    if box.node is not None:
        attrs += f' data-node-id="{html.escape(box.node.full_node_id, quote=True)}"'
    width = 2.5 if box.kind == "target" else 1.2
    parts = [f"<g{attrs}>"]
    if box.tip:
        parts.append(f"<title>{box.tip}</title>")
    parts.append(
        f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" rx="6" '
        f'fill="{fill}" stroke="{stroke}" stroke-width="{width}"/>'
    )
    y = box.y + 18
    for css, text in box.lines:
        parts.append(f'<text class="{css}" x="{box.x + 9:.1f}" y="{y:.1f}">{text}</text>')
        y += 15
    parts.append("</g>")
    return "".join(parts)


STYLE = (
    "text{font-family:'DejaVu Sans','Liberation Sans',Arial,sans-serif;font-size:11px;fill:#222222}"
    ".t{font-weight:bold;font-size:12px}.id{font-family:'DejaVu Sans Mono','Liberation Mono',monospace;"
    "font-size:10px;fill:#555555}.v{fill:#333333}.m{fill:#666666;font-style:italic}"
    ".op text{fill:#ffffff}.op .id{fill:#d0d0d0}.h{font-size:12px}.h1{font-size:15px;font-weight:bold}"
    ".el{font-size:10px;fill:#666666}.lg{font-size:11px}"
)


def render_svg(d: Drilldown) -> str:
    """The picture as SVG text: every piece of trace text escaped, no script, no link."""
    a = d.annotation
    columns: list[list[Box]] = []
    op_box: Box | None = None
    if d.op is not None:
        columns.append(_column(d.inputs, "input", "inputs") or [Box("more", h=36, lines=[("m", "no inputs")])])
        actor = f" · {d.op['actor']}" if d.op.get("actor") else ""
        op_box = Box(
            "op", w=OP_W, h=OP_H,
            lines=[
                ("m", "faulty operation"),
                ("t", clean(d.op.get("op_name") or "(unnamed)", 33)),
                ("v", clean(f"{d.op.get('op_category') or ''}{actor}".strip(" ·"), 38)),
                ("id", clean(d.op["op_id"], 40)),
            ],
            tip=clean(f"{d.op['op_id']}: {d.op.get('op_name')}{actor}", 300),
        )
        columns.append([op_box])
        shown_outputs = list(d.outputs)
        if d.path:  # the output the path starts from is always drawn, even past MAX_SIDE
            start = next(i for i, n in enumerate(shown_outputs) if n.full_node_id == d.path[0].full_node_id)
            if start >= MAX_SIDE:
                shown_outputs.insert(0, shown_outputs.pop(start))
        outputs = _column(shown_outputs, "output", "outputs")
        columns.append(outputs or [Box("more", h=36, lines=[("m", "no outputs")])])

    path_boxes: list[Box | None] = []  # after the start output; None marks the elided stretch
    elided = 0
    start_box: Box | None = None
    if d.path:
        start_id = d.path[0].full_node_id
        start_box = next((b for b in columns[-1] if b.node and b.node.full_node_id == start_id), None)
        rest = d.path[1:]
        if len(rest) > MAX_PATH:
            keep = MAX_PATH // 2
            elided = len(rest) - 2 * keep
            shown: list[Node | None] = [*rest[:keep], None, *rest[-keep:]]
        else:
            shown = list(rest)
        for node in shown:
            if node is None:
                path_boxes.append(None)
            else:
                kind = "target" if node.full_node_id == d.target.full_node_id else "path"
                path_boxes.append(_node_box(node, kind))
        if start_box is not None and d.target and start_id == d.target.full_node_id:
            start_box.kind = "target"
    elif d.target is not None and d.op is None:
        columns.append([_node_box(d.target, "target")])

    header = [
        ("h1", "Drill-down " + clean(a["annotation_id"], 110)),
        ("h", clean(" · ".join(str(x) for x in (
            a["system"], a["dataset"], a["error_type"] or "unlabelled",
            f"faulty operation {a['op_name'] or '(none)'}",
        )), 140)),
    ]
    if a["graph_kind"] == "multi_agent":
        step = f"step {a['decisive_step']} of {a['n_steps']}" if a["decisive_step"] is not None else "no step"
        header.append(("h", clean(f"responsible agent: {a['responsible_agent'] or '(none)'} · decisive {step}", 140)))
    if a.get("query"):
        header.append(("h", "query: " + clean(a["query"], 130)))
    if a.get("reason"):
        header.append(("h", "reason: " + clean(a["reason"], 130)))
    for note in d.notes:
        header.append(("h", clean(note, 140)))
    top = MARGIN + LINE * len(header) + 16

    all_columns = columns + [[b] for b in path_boxes if b is not None]
    heights = [sum(b.h for b in col) + ROW_GAP * (len(col) - 1) for col in all_columns] or [0]
    body_h = max(heights)
    x = MARGIN
    for i, col in enumerate(columns):
        _stack(col, x, top, body_h)
        x += max(b.w for b in col) + (PATH_GAP if i == len(columns) - 1 and path_boxes else COL_GAP)
    # the path continues on the row of the output it starts from
    row_y = start_box.y if start_box else top + (body_h - NODE_H) / 2
    for box in path_boxes:
        if box is None:
            x += 60  # room for the elided stretch's longer arrow
            continue
        box.x, box.y = x, row_y
        x += box.w + PATH_GAP
    width = max(x - (PATH_GAP if path_boxes else COL_GAP) + MARGIN, 1000)
    legend_y = top + body_h + 30
    height = legend_y + 20

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}">',
        f"<style>{STYLE}</style>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#888888"/></marker></defs>',
        f'<rect width="{width:.0f}" height="{height:.0f}" fill="#ffffff"/>',
    ]
    y = MARGIN + 12
    for css, text in header:
        out.append(f'<text class="{css}" x="{MARGIN}" y="{y}">{text}</text>')
        y += LINE

    def attrs(src: str, dst: str, op_id: str | None) -> str:
        esc = [html.escape(v or "", quote=True) for v in (src, dst, op_id)]
        return f' data-source="{esc[0]}" data-target="{esc[1]}" data-op="{esc[2]}"'

    if op_box is not None:
        op_id = d.op["op_id"]
        for box in columns[0]:
            if box.node:
                out.append(_arrow(box.right, op_box.left, attrs(box.node.full_node_id, "", op_id)))
        for box in columns[2]:
            if box.node:
                out.append(_arrow(op_box.right, box.left, attrs("", box.node.full_node_id, op_id)))
    if d.path and start_box is not None:
        previous: Box = start_box
        edge_iter = iter(d.path_edges)
        pending_gap = False
        for box in path_boxes:
            if box is None:
                pending_gap = True
                for _ in range(elided + 1):
                    next(edge_iter)
                continue
            if pending_gap:
                label = html.escape(f"{elided} more node{'s' if elided != 1 else ''}")
                out.append(_arrow(previous.right, box.left, "", label=label, dashed=True))
                pending_gap = False
            else:
                src, dst, op_id, op_name = next(edge_iter)
                out.append(_arrow(previous.right, box.left, attrs(src, dst, op_id), label=clean(op_name or op_id, 19)))
            previous = box
    for col in all_columns:
        for box in col:
            out.append(_box_svg(box))

    legend = [("input", "input node"), ("op", "faulty operation"), ("output", "output node"),
              ("path", "on the path"), ("target", d.target_kind or "prediction")]
    lx = MARGIN
    for kind, label in legend:
        fill, stroke = ROLE_STYLE[kind]
        out.append(f'<rect x="{lx}" y="{legend_y - 10}" width="12" height="12" rx="2" fill="{fill}" '
                   f'stroke="{stroke}"/>')
        out.append(f'<text class="lg" x="{lx + 17}" y="{legend_y}">{html.escape(label)}</text>')
        lx += 40 + 7 * len(label)
    out.append("</svg>")
    return "\n".join(out)


# -- files ----------------------------------------------------------------------------------------


def svg_to_png(svg: str) -> bytes:
    import vl_convert

    return vl_convert.svg_to_png(svg, scale=PNG_SCALE)


def write_png(svg: str, path: Path) -> None:
    write_atomic(path, svg_to_png(svg))


def convert_pngs(jobs: list[tuple[Path, Path]], workers: int) -> None:
    """Rasterise SVG files to PNG files. Rasterising text is the slow part of a picture (about 0.1 s)
    and vl-convert holds the GIL, so many pictures are spread over ``workers`` child processes
    (``python -m pipelines.drilldown``, fed job lines on stdin: no fork, no re-import of __main__)."""
    if workers <= 1 or len(jobs) < 8:
        for svg_path, png_path in jobs:
            write_png(svg_path.read_text(), png_path)
        return
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(db.REPO), os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryFile() as errors:
        procs = [
            subprocess.Popen([sys.executable, "-m", "pipelines.drilldown"], stdin=subprocess.PIPE, stderr=errors,
                             env=env, text=True)
            for _ in range(min(workers, len(jobs)))
        ]
        try:
            for i, (svg_path, png_path) in enumerate(jobs):
                stdin = procs[i % len(procs)].stdin
                assert stdin is not None
                stdin.write(json.dumps([str(svg_path), str(png_path)]) + "\n")
        finally:
            for proc in procs:
                if proc.stdin:
                    proc.stdin.close()
            codes = [proc.wait() for proc in procs]
        if any(codes):
            errors.seek(0)
            raise RuntimeError(f"PNG conversion failed: {errors.read().decode(errors='replace')[-2000:]}")


def _png_worker() -> None:
    """Child process of ``convert_pngs``: one JSON [svg_path, png_path] per stdin line."""
    for line in sys.stdin:
        svg_path, png_path = json.loads(line)
        write_png(Path(svg_path).read_text(), Path(png_path))


def picture(con: duckdb.DuckDBPyConnection, annotation_id: str, graph_id: str | None = None) -> str:
    """The SVG text of one annotation's picture."""
    return render_svg(load(con, annotation_id, graph_id))


def draw(
    con: duckdb.DuckDBPyConnection, annotation_id: str, out_dir: Path, graph_id: str | None = None
) -> tuple[Path, Path]:
    """Draw one annotation into ``out_dir``; returns the SVG and PNG paths."""
    svg = picture(con, annotation_id, graph_id)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = picture_stem(annotation_id)
    svg_path, png_path = out_dir / f"{stem}.svg", out_dir / f"{stem}.png"
    write_atomic(svg_path, svg.encode("utf-8"))
    write_png(svg, png_path)
    return svg_path, png_path


def show_dir(warehouse: Warehouse) -> Path:
    """Where ``tracehouse show`` draws by default (not a build's folder: builds never delete it)."""
    return warehouse.dashboards_dir / "show"


VALUE_CHARS = 2000  # a picture shows at most a few hundred characters of a node's value


def local_copies(con: duckdb.DuckDBPyConnection, graph_ids: list[str]) -> None:
    """Speed up many drawings on a private connection (about 2x): shadow the views the drill-down
    queries read with in-memory temp tables holding only the graphs being drawn (a temp table wins
    over a view of the same name, also inside the lineage macros), node values cut short."""
    for name in ("edges", "operations", "annotations", "failure_propagation"):
        con.execute(
            f'create or replace temp table "{name}" as select * from main."{name}" '
            "where list_contains($graphs, graph_id)",
            {"graphs": graph_ids},
        )
    con.execute(
        "create or replace temp table nodes as select * replace (left(value, $chars) as value) from main.nodes "
        "where list_contains($graphs, graph_id)",
        {"graphs": graph_ids, "chars": VALUE_CHARS},
    )


def code_fingerprint() -> str:
    """This module and the drill-down SQL: a change to either redraws every picture."""
    return db.files_digest(
        [Path(__file__), *sorted(SQL_DIR.glob("*.sql")), SQL_DIR.parent / "page" / "annotation_table.sql"]
    ).hexdigest()


def graph_contents(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """graph_id -> what its rows are made from: its source file's sha256 and the readers' format
    version. A picture keyed on this is redrawn when its own graph changed, not its whole split."""
    return {
        graph_id: f"{FORMAT_VERSION}:{sha256}"
        for graph_id, sha256 in con.execute("select graph_id, file_sha256 from graphs").fetchall()
    }


def draw_all(warehouse: Warehouse, con: duckdb.DuckDBPyConnection, limit: int | None = None,
             workers: int | None = None) -> dict[str, Any]:
    """Draw the first ``limit`` annotations (round-robin over systems) of the build whose views
    ``con`` has, into <warehouse>/dashboards/drilldown; returns the manifest the page links from.

    A picture's files are named by its annotation and the digest of what it is drawn from (its
    graph's content, its row of the annotation table, this code): a picture whose files are there
    already is not drawn again. PNGs are converted by ``workers`` processes (default: one per core,
    at most 4)."""
    started = time.monotonic()
    limit = drilldown_limit(limit)
    out_dir = warehouse.dashboards_dir / "drilldown"
    out_dir.mkdir(parents=True, exist_ok=True)
    pictures: dict[str, dict[str, str]] = {}
    failed: dict[str, str] = {}
    to_convert: list[tuple[Path, Path]] = []
    code = code_fingerprint()
    cursor = con.execute((db.REPO / "dashboards" / "sql" / "page" / "annotation_table.sql").read_text())
    columns = [c[0] for c in cursor.description]
    table = [dict(zip(columns, r, strict=True)) for r in cursor.fetchall()]
    contents = graph_contents(con)
    todo = []
    for row in table[:limit]:
        inputs = hashlib.sha256(
            json.dumps([code, contents.get(row["graph_id"]), row], default=str, sort_keys=True).encode()
        ).hexdigest()
        stem = f"{picture_stem(row['annotation_id'])}-{inputs[:12]}"
        pictures[row["annotation_id"]] = {"stem": stem}
        if not all((out_dir / f"{stem}{suffix}").is_file() for suffix in (".svg", ".png")):
            todo.append((row["graph_id"], row["annotation_id"], stem))
    if todo:
        local = con.cursor()  # temp tables on a cursor of its own: the build's views stay as they are
        local.execute("set file_search_path = ?", [str(warehouse.root)])  # a per-cursor setting
        try:
            local_copies(local, sorted({graph_id for graph_id, _, _ in todo}))
            for graph_id, annotation_id, stem in todo:
                try:
                    svg = picture(local, annotation_id, graph_id)
                except (LookupError, duckdb.Error) as exc:
                    failed[annotation_id] = str(exc)[:300]
                    del pictures[annotation_id]
                    continue
                svg_path = out_dir / f"{stem}.svg"
                write_atomic(svg_path, svg.encode("utf-8"))
                to_convert.append((svg_path, out_dir / f"{stem}.png"))
        finally:
            local.close()
    convert_pngs(to_convert, workers or min(4, os.cpu_count() or 1))
    return {
        "limit": limit,
        "total": len(table),
        "drawn": len(pictures),
        "converted": len(to_convert),
        "pictures": pictures,
        "failed": failed,
        "files": [f"dashboards/drilldown/{p['stem']}{ext}" for p in pictures.values() for ext in (".svg", ".png")],
        "seconds": round(time.monotonic() - started, 3),
    }


if __name__ == "__main__":
    _png_worker()
