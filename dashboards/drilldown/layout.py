"""The drill-down picture's layout, written as SVG text (no Graphviz): left to right, the inputs of the
faulty operation, the operation, its outputs, then the path on to the target node.

Trace text is untrusted: every value goes through :func:`pipelines.text.shorten` (one line, characters
XML cannot hold replaced, cut short) and ``html.escape`` before it goes into the SVG, which holds only
drawing elements: no script, no link.
"""

from __future__ import annotations

import html
import textwrap
from dataclasses import dataclass, field

from dashboards.drilldown.query import Drilldown, Node
from pipelines.text import shorten

MAX_SIDE = 24  # input / output boxes drawn per side; the rest are summarised in one box
MAX_PATH = 6  # path boxes drawn after the output; longer paths keep their first and last few

NODE_W, NODE_H = 250, 74
OP_W, OP_H = 280, 86
COL_GAP, PATH_GAP, ROW_GAP = 64, 130, 12
MARGIN = 20
LINE = 17
VALUE_LINES, VALUE_WIDTH = 2, 38  # a node's value: at most two wrapped lines of 38 characters

ROLE_STYLE = {
    "input": ("#e8f0fa", "#4e79a7"),
    "output": ("#fdf0e2", "#f28e2b"),
    "path": ("#f2f2f2", "#8c8c8c"),
    "target": ("#fde8e8", "#d62728"),
    "op": ("#33363b", "#111111"),
    "more": ("#ffffff", "#bbbbbb"),
}

STYLE = (
    "text{font-family:'DejaVu Sans','Liberation Sans',Arial,sans-serif;font-size:11px;fill:#222222}"
    ".t{font-weight:bold;font-size:12px}.id{font-family:'DejaVu Sans Mono','Liberation Mono',monospace;"
    "font-size:10px;fill:#555555}.v{fill:#333333}.m{fill:#666666;font-style:italic}"
    ".op text{fill:#ffffff}.op .id{fill:#d0d0d0}.h{font-size:12px}.h1{font-size:15px;font-weight:bold}"
    ".el{font-size:10px;fill:#666666}.lg{font-size:11px}"
)


def text(value: object, limit: int) -> str:
    """Trace text as SVG text: shortened (pipelines.text.shorten), then escaped."""
    return html.escape(shorten(value, limit))


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
    # the first few lines' worth of the value, wrapped; a longer value ends with " …"
    value = shorten(node.value, 4 * VALUE_LINES * VALUE_WIDTH)
    wrapped = textwrap.wrap(value, VALUE_WIDTH, break_long_words=True, max_lines=VALUE_LINES, placeholder=" …")
    lines = [
        ("t", text(node.class_name or "node", 30) + html.escape(version)),
        ("id", text(node.full_node_id, 40)),
        *[("v", text(line, 40)) for line in wrapped or ["(no value)"]],
    ]
    tip = f"{node.full_node_id}\n{(node.value or '')[:600]}"
    return Box(kind, node=node, lines=lines, tip=text(tip, 640))


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
    for css, line in box.lines:
        parts.append(f'<text class="{css}" x="{box.x + 9:.1f}" y="{y:.1f}">{line}</text>')
        y += 15
    parts.append("</g>")
    return "".join(parts)


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
                ("t", text(d.op.get("op_name") or "(unnamed)", 33)),
                ("v", text(f"{d.op.get('op_category') or ''}{actor}".strip(" ·"), 38)),
                ("id", text(d.op["op_id"], 40)),
            ],
            tip=text(f"{d.op['op_id']}: {d.op.get('op_name')}{actor}", 300),
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
        ("h1", "Drill-down " + text(a["annotation_id"], 110)),
        ("h", text(" · ".join(str(x) for x in (
            a["system"], a["dataset"], a["error_type"] or "unlabelled",
            f"faulty operation {a['op_name'] or '(none)'}",
        )), 140)),
    ]
    if a["graph_kind"] == "multi_agent":
        step = f"step {a['decisive_step']} of {a['n_steps']}" if a["decisive_step"] is not None else "no step"
        header.append(("h", text(f"responsible agent: {a['responsible_agent'] or '(none)'} · decisive {step}", 140)))
    if a.get("query"):
        header.append(("h", "query: " + text(a["query"], 130)))
    if a.get("reason"):
        header.append(("h", "reason: " + text(a["reason"], 130)))
    for note in d.notes:
        header.append(("h", text(note, 140)))
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
    for css, line in header:
        out.append(f'<text class="{css}" x="{MARGIN}" y="{y}">{line}</text>')
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
                out.append(_arrow(previous.right, box.left, attrs(src, dst, op_id), label=text(op_name or op_id, 19)))
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
