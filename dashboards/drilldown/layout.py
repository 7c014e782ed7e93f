"""The drill-down picture's layout, written as SVG text (no Graphviz): the inputs of the faulty
operation, the operation and its outputs side by side, then the path on to the target node in rows
below, wrapped like text, so a picture is never wider than :data:`MAX_WIDTH` (a page's width at
print size; the PNG, at 2x, is at most 2,000 px) however long the path or the trajectory.

Trace text is untrusted: every value goes through :func:`pipelines.text.shorten` (one line, characters
XML cannot hold replaced, cut short) and ``html.escape`` before it goes into the SVG, which holds only
drawing elements: no script, no link. Long lists of numbers (embeddings) are folded to their
dimension and first values first (``dashboards.drilldown.values``), and text is cut and wrapped by
its estimated width (a Chinese character is about twice as wide as a Latin one), so it stays inside
its box.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass, field

from dashboards.drilldown.query import Drilldown, Node
from dashboards.drilldown.values import fold
from pipelines.text import ELLIPSIS, shorten

MAX_SIDE = 24  # input / output boxes drawn per side; the rest are summarised in one box
MAX_PATH = 6  # path boxes drawn after the output; longer paths keep their first and last few

MAX_WIDTH = 1000  # the picture's width (SVG user units = CSS px)
NODE_W, NODE_H = 250, 74
OP_W, OP_H = 280, 86
COL_GAP, PATH_GAP, ROW_GAP = 64, 105, 12
WRAP_GAP = 46  # between rows of the path: the arrow that carries it on to the next row, and its label
LANE = 18  # the first path arrow runs down this far right of the outputs
MARGIN = 20
LINE = 17
PAD = 9  # text's inset in a box
VALUE_LINES = 2  # a node's value: at most two wrapped lines
PER_ROW = max(1, (MAX_WIDTH - 2 * MARGIN + PATH_GAP) // (NODE_W + PATH_GAP))  # path boxes per row

# Estimated advance of one character, in ems (DejaVu Sans and its mono; wide East Asian characters
# take a full em): enough to keep text inside its box without measuring fonts.
EM_REGULAR, EM_BOLD, EM_MONO = 0.6, 0.66, 0.61

ROLE_STYLE = {
    "input": ("#e8f0fa", "#4e79a7"),
    "output": ("#fdf0e2", "#f28e2b"),
    "path": ("#f2f2f2", "#8c8c8c"),
    "target": ("#fde8e8", "#d62728"),
    "op": ("#33363b", "#111111"),
    "more": ("#ffffff", "#bbbbbb"),
}

STYLE = (
    "text{font-family:'DejaVu Sans','Liberation Sans','WenQuanYi Zen Hei','Noto Sans CJK SC',Arial,sans-serif;"
    "font-size:11px;fill:#222222}"
    ".t{font-weight:bold;font-size:12px}.id{font-family:'DejaVu Sans Mono','Liberation Mono',monospace;"
    "font-size:10px;fill:#555555}.v{fill:#333333}.m{fill:#666666;font-style:italic}"
    ".op text{fill:#ffffff}.op .id{fill:#d0d0d0}.h{font-size:12px}.h1{font-size:15px;font-weight:bold}"
    ".el{font-size:10px;fill:#666666}.lg{font-size:11px}"
)

_WIDE = ("W", "F")
_WORD = re.compile(r"\S+\s*")
_NAME_PART = re.compile(r"[^\s_.\-]+[\s_.\-]*|[\s_.\-]+")  # an operation's name breaks after _ . - too


def char_units(ch: str) -> int:
    """Ems of one character, in halves: 2 for a wide (CJK) character, else 1."""
    return 2 if unicodedata.east_asian_width(ch) in _WIDE else 1


def units(line: str) -> int:
    return sum(char_units(ch) for ch in line)


def room(width: float, size: float, em: float = EM_REGULAR) -> int:
    """How many half-em units of text fit in ``width`` px at ``size`` px."""
    return max(4, int(width / (size * em)))


def fit(value: object, limit: int) -> str:
    """One line of trace text (vectors folded, whitespace collapsed, characters XML cannot hold
    replaced) cut to ``limit`` units with "…", not yet escaped."""
    line = shorten(fold(str(value)) if value is not None else "", 4 * limit)
    if units(line) <= limit:
        return line
    out, used = [], 1  # room for the ellipsis
    for ch in line:
        used += char_units(ch)
        if used > limit:
            break
        out.append(ch)
    return "".join(out).rstrip() + ELLIPSIS


def text(value: object, limit: int) -> str:
    """Trace text as SVG text: folded, shortened to ``limit`` units, then escaped."""
    return html.escape(fit(value, limit))


def wrap(value: object, limit: int, max_lines: int, words: re.Pattern[str] = _WORD) -> list[str]:
    """Trace text as at most ``max_lines`` lines of ``limit`` units (not escaped); ``words`` are kept
    whole where they fit, a longer word (or text without spaces: Chinese) is broken anywhere, and
    the last line ends with "…" when text is left over."""
    flat = fit(value, limit * (max_lines + 1))
    lines: list[str] = []
    current, used = "", 0
    for word in words.findall(flat):
        width = units(word.rstrip())
        if used + width <= limit:
            current, used = current + word, used + units(word)
            continue
        if width <= limit:  # the word fits on a line of its own
            lines.append(current.rstrip())
            current, used = word, units(word)
            continue
        for ch in word:  # longer than a line (or text without spaces): broken where each line ends
            if used + char_units(ch) > limit and not ch.isspace():
                lines.append(current.rstrip())
                current, used = "", 0
            current, used = current + ch, used + char_units(ch)
    if current.strip():
        lines.append(current.rstrip())
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        last = lines[-1]
        while last and units(last) + 2 > limit:
            last = last[:-1]
        lines[-1] = last.rstrip() + " " + ELLIPSIS
    return lines


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

    @property
    def top(self) -> tuple[float, float]:
        return self.x + self.w / 2, self.y

    @property
    def bottom(self) -> tuple[float, float]:
        return self.x + self.w / 2, self.y + self.h


def _node_box(node: Node, kind: str) -> Box:
    inner = NODE_W - 2 * PAD
    version = f" · v{node.version}" if node.version is not None else ""
    title = room(inner, 12, EM_BOLD) - units(version)
    value = wrap(node.value, room(inner, 11), VALUE_LINES) if node.value else []
    lines = [
        ("t", text(node.class_name or "node", title) + html.escape(version)),
        ("id", text(node.full_node_id, room(inner, 10, EM_MONO))),
        *[("v", html.escape(line)) for line in value or ["(no value)"]],
    ]
    tip = f"{node.full_node_id}\n{fold((node.value or '')[:20000])}"
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


EDGE_STROKE = 'fill="none" stroke="#888888" stroke-width="1.3"'


def edge_label(name: str, limit: int, max_lines: int) -> list[str]:
    """An arrow's label (not escaped): the operation's name without its dotted prefix
    (``memory_system.extract_facts`` -> ``extract_facts``; the arrow's tooltip has it whole), broken
    after ``_`` ``.`` ``-`` or spaces into at most ``max_lines`` lines of ``limit`` units."""
    short = name.rsplit(".", 1)[-1] or name
    return wrap(short, limit, max_lines, _NAME_PART)


def _edge(path: str, attrs: str, label_at: tuple[float, float], label: list[str], dashed: bool, tip: str) -> str:
    dash = ' stroke-dasharray="5 4"' if dashed else ""
    css = "edge elided" if dashed else "edge"
    out = [f'<g class="{css}"{attrs}>']
    if tip:
        out.append(f"<title>{text(tip, 300)}</title>")
    out.append(f'<path d="{path}" {EDGE_STROKE}{dash} marker-end="url(#arrow)"/>')
    for k, line in enumerate(reversed(label)):  # the last line just above the arrow
        out.append(f'<text class="el" x="{label_at[0]:.1f}" y="{label_at[1] - 12 * k:.1f}" '
                   f'text-anchor="middle">{html.escape(line)}</text>')
    out.append("</g>")
    return "".join(out)


def _arrow(a: tuple[float, float], b: tuple[float, float], attrs: str, label: str = "", dashed: bool = False,
           tip: str = "") -> str:
    """A left-to-right arrow between neighbours (a curve when they are on different heights), its
    label in at most two lines above it, as wide as the gap."""
    (x1, y1), (x2, y2) = a, b
    mid = (x1 + x2) / 2
    path = f"M{x1:.1f},{y1:.1f} C{mid:.1f},{y1:.1f} {mid:.1f},{y2:.1f} {x2 - 2:.1f},{y2:.1f}"
    lines = edge_label(label, room(x2 - x1 - 14, 10), 2) if label else []
    return _edge(path, attrs, (mid, min(y1, y2) - 5), lines, dashed, tip)


def _wrap_arrow(src: Box, dst: Box, lane: float | None, attrs: str, label: str = "", dashed: bool = False,
                tip: str = "") -> str:
    """The path carried on to the next row: down from ``src`` (or out of its right side and down the
    ``lane`` right of it), left along the gap above ``dst``'s row, and down into ``dst``'s top; the
    label sits on the stretch along the gap, on one line."""
    gap_y = dst.y - WRAP_GAP / 2
    tx, ty = dst.top
    if lane is None:
        sx, sy = src.bottom
        path = f"M{sx:.1f},{sy:.1f} V{gap_y:.1f} H{tx:.1f} V{ty - 2:.1f}"
        label_x = (sx + tx) / 2
    else:
        sx, sy = src.right
        path = f"M{sx:.1f},{sy:.1f} H{lane:.1f} V{gap_y:.1f} H{tx:.1f} V{ty - 2:.1f}"
        label_x = (lane + tx) / 2
    lines = edge_label(label, room(NODE_W, 10), 1) if label else []
    return _edge(path, attrs, (label_x, gap_y - 5), lines, dashed, tip)


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
        parts.append(f'<text class="{css}" x="{box.x + PAD:.1f}" y="{y:.1f}">{line}</text>')
        y += 15
    parts.append("</g>")
    return "".join(parts)


def render_svg(d: Drilldown) -> str:
    """The picture as SVG text, :data:`MAX_WIDTH` wide: every piece of trace text escaped, no script,
    no link."""
    a = d.annotation
    columns: list[list[Box]] = []
    op_box: Box | None = None
    if d.op is not None:
        columns.append(_column(d.inputs, "input", "inputs") or [Box("more", h=36, lines=[("m", "no inputs")])])
        actor = f" · {d.op['actor']}" if d.op.get("actor") else ""
        inner = OP_W - 2 * PAD
        op_box = Box(
            "op", w=OP_W, h=OP_H,
            lines=[
                ("m", "faulty operation"),
                *[("t", html.escape(line)) for line in  # a long name on two lines, broken after . _ -
                  wrap(d.op.get("op_name") or "(unnamed)", room(inner, 12, EM_BOLD), 2, _NAME_PART)],
                ("v", text(f"{d.op.get('op_category') or ''}{actor}".strip(" ·"), room(inner, 11))),
                ("id", text(d.op["op_id"], room(inner, 10, EM_MONO))),
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

    # the header: each piece of text wrapped to the picture's width
    line_units = room(MAX_WIDTH - 2 * MARGIN, 12)
    header = [("h1", html.escape(line)) for line in wrap("Drill-down " + fit(a["annotation_id"], 400),
                                                           room(MAX_WIDTH - 2 * MARGIN, 15, EM_BOLD), 2)]
    facts = [" · ".join(str(x) for x in (
        a["system"], a["dataset"], a["error_type"] or "unlabelled", f"faulty operation {a['op_name'] or '(none)'}"))]
    if a["graph_kind"] == "multi_agent":
        step = f"step {a['decisive_step']} of {a['n_steps']}" if a["decisive_step"] is not None else "no step"
        facts.append(f"responsible agent: {a['responsible_agent'] or '(none)'} · decisive {step}")
    wrapped: list[tuple[object, int]] = [(fact, 2) for fact in facts]
    if a.get("query"):
        wrapped.append(("query: " + fit(a["query"], 4 * line_units), 3))
    if a.get("reason"):
        wrapped.append(("reason: " + fit(a["reason"], 4 * line_units), 2))
    wrapped += [(note, 2) for note in d.notes]
    for value, max_lines in wrapped:
        header += [("h", html.escape(line)) for line in wrap(value, line_units, max_lines)]
    top = MARGIN + LINE * len(header) + 16

    # the first row: inputs, the operation, outputs (or the target alone), centred on each other
    heights = [sum(b.h for b in col) + ROW_GAP * (len(col) - 1) for col in columns] or [0]
    body_h = max(heights)
    x = MARGIN
    for col in columns:
        _stack(col, x, top, body_h)
        x += max(b.w for b in col) + COL_GAP
    lane = x - COL_GAP + LANE
    # the path: rows of PER_ROW boxes below, left to right, each row carried on to the next
    bottom = top + body_h
    real = [b for b in path_boxes if b is not None]
    for k, box in enumerate(real):
        row, slot = divmod(k, PER_ROW)
        box.x = MARGIN + slot * (NODE_W + PATH_GAP)
        box.y = top + body_h + WRAP_GAP + row * (NODE_H + WRAP_GAP)
        bottom = box.y + box.h
    width = MAX_WIDTH
    legend_y = bottom + 30
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
                edge_attrs, dashed, tip = "", True, ""
                label = f"{elided} more node{'s' if elided != 1 else ''}"
                pending_gap = False
            else:
                src, dst, op_id, op_name = next(edge_iter)
                edge_attrs, dashed = attrs(src, dst, op_id), False
                label, tip = op_name or op_id or "", f"{op_name or ''} ({op_id})" if op_name else op_id or ""
            if previous is start_box:
                out.append(_wrap_arrow(previous, box, lane, edge_attrs, label, dashed, tip))
            elif box.y == previous.y:
                out.append(_arrow(previous.right, box.left, edge_attrs, label, dashed, tip))
            else:
                out.append(_wrap_arrow(previous, box, None, edge_attrs, label, dashed, tip))
            previous = box
    for box in [*(b for col in columns for b in col), *real]:
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
