"""The failure view of an OpenTelemetry trace: a waterfall of its spans, on real builds (otlp and
otel_spans sources, TRAIL labels), read as HTML and in headless Chromium.

The hand-written trace puts markup, ``</details>``, every control character, CJK and right-to-left
text into span names, attribute values, a status message and a model name; everything expected
(tree order, depths, durations) is computed here from the spans as written, not by the view's code."""

from __future__ import annotations

import base64
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from browser import chromium, open_page
from conftest import SHARED_DATA, build_warehouse, query

TRACE = "5b8efff798038103d269b633813fc60c"
ROOT, LLM, TOOL, PLAN, ANSWER = "eee19b7ec3c1b174", "a1b2c3d4e5f60718", "0f0e0d0c0b0a0908", "1111222233334444", \
    "9999aaaabbbbcccc"
FILLERS = 40  # spans between the root's first child and the labelled one: far below the first screen
SCRIPT = "<script>window.__pwned=1</script>"
CONTROL = "".join(chr(c) for c in range(0x20))
HOSTILE_NAME = f"agent {SCRIPT} <b>bold</b> </details> 日本語 עברית \u202eevil\u202c"
HOSTILE_TEXT = f"question {SCRIPT} </details></li></ol> 中文问题 مرحبا {CONTROL} <img src=x onerror=window.__pwned=1>"
LONG_OUTPUT = "The answer is 42. " * 200  # 3,600 characters: shown collapsed, whole on request
T0 = 1_700_000_000_000_000_000  # ns



def attr(key: str, value) -> dict:
    return {"key": key, "value": {"intValue": str(value)} if isinstance(value, int) else {"stringValue": value}}


def span(span_id: str, parent: str, name: str, start_ms: float, end_ms: float, attributes: dict,
         status: dict | None = None, kind: int = 1) -> dict:
    return {"traceId": TRACE, "spanId": span_id, "parentSpanId": parent, "name": name, "kind": kind,
            "startTimeUnixNano": str(T0 + int(start_ms * 1_000_000)),
            "endTimeUnixNano": str(T0 + int(end_ms * 1_000_000)),
            "attributes": [attr(k, v) for k, v in attributes.items()], "status": status or {"code": 1}}


def hostile_spans() -> list[dict]:
    """The root agent span; an LLM call with a failing tool under it and FILLERS short steps; a plan
    step; the labelled answer span last in time. The file lists them out of order."""
    spans = [
        span(ANSWER, ROOT, "final answer 答案", 600, 950.5,
             {"openinference.span.kind": "LLM", "llm.model_name": f"model {SCRIPT}",
              "llm.token_count.prompt": 1234, "llm.token_count.completion": 56,
              "input.value": HOSTILE_TEXT, "output.value": LONG_OUTPUT}),
        span(ROOT, "", HOSTILE_NAME, 0, 1000, {"openinference.span.kind": "AGENT", "input.value": "what is 6*7?",
                                               "output.value": "42"}, kind=2),
        span(LLM, ROOT, "llm call", 10, 310, {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o",
                                              "llm.token_count.prompt": 100, "llm.token_count.completion": 20,
                                              "input.value": "plan it", "output.value": "call the tool"}),
        span(TOOL, LLM, f"tool {SCRIPT} </details>", 50, 57.25,
             {"openinference.span.kind": "TOOL", "tool.parameters": f'{{"q": "{SCRIPT}"}}'},
             {"code": 2, "message": f"tool failed {SCRIPT} \x07 </details>"}),
        span(PLAN, ROOT, "plan", 320, 390, {"openinference.span.kind": "CHAIN", "output.value": "the plan"}),
    ]
    spans += [span(f"{k + 1:016x}", LLM, f"step {k}", 70 + k, 70.5 + k, {}) for k in range(FILLERS)]
    return spans


def expected_order(spans: list[dict]) -> list[tuple[str, int]]:
    """(span id, depth) in tree order: children after their parent, by start time."""
    by_parent: dict[str, list[dict]] = {}
    for s in spans:
        by_parent.setdefault(s["parentSpanId"], []).append(s)
    out: list[tuple[str, int]] = []

    def walk(parent: str, depth: int) -> None:
        for s in sorted(by_parent.get(parent, []), key=lambda s: (int(s["startTimeUnixNano"]), s["spanId"])):
            out.append((s["spanId"], depth))
            walk(s["spanId"], depth + 1)

    walk("", 0)
    return out


class Waterfall(HTMLParser):
    """The waterfall's rows (their attributes and text) and every tag of the page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[dict] = []
        self.tags: list[str] = []
        self.depth_in_row = 0
        self.row_tag_depth: int | None = None
        self.stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)
        a = dict(attrs)
        self.stack.append(tag)
        if tag == "li" and "span" in (a.get("class") or "").split():
            self.rows.append({**a, "text": ""})
            self.row_tag_depth = len(self.stack)

    def handle_endtag(self, tag: str) -> None:
        if self.stack and self.stack[-1] == tag:
            if self.row_tag_depth == len(self.stack):
                self.row_tag_depth = None
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        if self.row_tag_depth is not None and self.rows:
            self.rows[-1]["text"] += data


def parse(html: str) -> Waterfall:
    parser = Waterfall()
    parser.feed(html)
    return parser


def ends_of(html: str, span_id: str) -> tuple[set[str], set[str]]:
    """The node ids of a span's inputs and outputs, as its row lists them."""
    row = html.split(f'data-span-id="{span_id}"', 1)[1].split('<li class="span', 1)[0]
    inputs, outputs = row.split('class="col outputs"', 1)
    ids = re.compile(r'<code class="nid">([^<]*)</code>')
    return set(ids.findall(inputs)), set(ids.findall(outputs))


def views(warehouse: Path) -> dict[str, Path]:
    """annotation id -> its failure view, from the committed build's manifest."""
    from dashboards.failure_view import failure_view_path
    from pipelines.storage.warehouse import Warehouse

    home = Warehouse(warehouse)
    record = home.committed()
    ids = [r[0] for r in query(warehouse, "select annotation_id from annotations order by all")]
    return {i: failure_view_path(home, record, i) for i in ids}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("trace-view")
    source, labels = root / "otlp", root / "labels"
    source.mkdir()
    labels.mkdir()
    spans = hostile_spans()
    request = {"resourceSpans": [{"resource": {"attributes": [attr("service.name", "agent-svc")]},
                                  "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]}
    (source / "traces.jsonl").write_text(json.dumps(request) + "\n")
    errors = [{"category": "Formatting Errors", "location": ANSWER, "evidence": SCRIPT,
               "description": f"wrong format {SCRIPT}", "impact": "HIGH"},
              {"category": "Tool Selection Errors", "location": TOOL, "evidence": "e", "description": "d",
               "impact": "LOW"}]
    (labels / "labels.jsonl").write_text(json.dumps({"trace_id": TRACE, "errors": errors}) + "\n")
    warehouse = root / "warehouse"
    summary = build_warehouse(warehouse, [f"otlp={source}", f"trail:trail_labels={labels}"])
    assert summary.failed_checks == []
    found = views(warehouse)
    [answer_id] = [a for (a,) in query(warehouse, "select annotation_id from annotations where faulty_op_id = ?",
                                       [ANSWER])]
    return {"warehouse": warehouse, "spans": spans, "views": found, "answer_id": answer_id}


def test_the_waterfall_lists_every_span_in_tree_order_with_its_duration_and_marks_the_label(built) -> None:
    html = built["views"][built["answer_id"]].read_text()
    page = parse(html)
    spans = {s["spanId"]: s for s in built["spans"]}
    order = expected_order(built["spans"])
    assert [(r["data-span-id"], int(r["data-depth"])) for r in page.rows] == order
    assert order[:3] == [(ROOT, 0), (LLM, 1), (TOOL, 2)] and order[-2:] == [(PLAN, 1), (ANSWER, 1)]
    for row in page.rows:
        s = spans[row["data-span-id"]]
        ms = (int(s["endTimeUnixNano"]) - int(s["startTimeUnixNano"])) / 1e6
        assert float(row["data-duration-ms"]) == pytest.approx(ms, abs=1e-3)
    rows = {r["data-span-id"]: r for r in page.rows}
    assert "350.5 ms" in rows[ANSWER]["text"] and "7.25 ms" in rows[TOOL]["text"]
    assert "300.0 ms" in rows[LLM]["text"] and "0.50 ms" in rows[f"{1:016x}"]["text"]
    assert "1,000 ms" in rows[ROOT]["text"]
    # the labelled span: highlighted (class), current, badge with its error type; the trace's other
    # label marked too; the error span marked with its status message
    labelled = [r["data-span-id"] for r in page.rows if "labelled" in r["class"].split()]
    assert labelled == [ANSWER] and rows[ANSWER].get("aria-current") == "true"
    assert "labelled: Formatting Errors" in rows[ANSWER]["text"]
    assert "labelled-other" in rows[TOOL]["class"].split()
    assert "also labelled: Tool Selection Errors" in rows[TOOL]["text"]
    assert [r["data-span-id"] for r in page.rows if "error" in r["class"].split()] == [TOOL]
    assert f"tool failed {SCRIPT}" in rows[TOOL]["text"]
    # columns: kind, tokens and model
    assert "LLM" in rows[ANSWER]["text"] and "1,234 / 56" in rows[ANSWER]["text"]
    assert f"model {SCRIPT}" in rows[ANSWER]["text"]
    # inputs and outputs of the span, the long output collapsed with its whole text behind a click
    assert HOSTILE_TEXT.split(" ")[0] in rows[ANSWER]["text"] and "show all" in rows[ANSWER]["text"]
    assert rows[ANSWER]["text"].count("The answer is 42.") >= 200
    # inputs and outputs: the span's own recorded input is an input, what it wrote an output, with
    # the nodes handed to it (a parent's input, the previous sibling's output)
    assert ends_of(html, ANSWER) == ({f"input:{ANSWER}@1", f"output:{PLAN}@1"}, {f"output:{ANSWER}@1"})
    assert ends_of(html, TOOL) == ({f"input:{LLM}@1", f"tool_parameters:{TOOL}@1"}, set())
    assert ends_of(html, ROOT) == ({f"input:{ROOT}@1", f"output:{ANSWER}@1"}, {f"output:{ROOT}@1"})
    # the header links the labelled span
    assert f'<a href="#span-{len(order) - 1}">' in html


def test_span_text_is_escaped(built) -> None:
    html = built["views"][built["answer_id"]].read_text()
    page = parse(html)
    assert SCRIPT not in html and "<img" not in html and "<b>bold</b>" not in html
    assert page.tags.count("script") == 1  # the page's own
    assert page.tags.count("img") == 0 and page.tags.count("b") == 0
    assert html.count("<details") == html.count("</details>")
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html
    assert "&lt;/details&gt;" in html
    # control characters: none but tab, newline and carriage return reach the page
    assert not any(chr(c) in html for c in range(0x20) if chr(c) not in "\t\n\r")
    assert "\ufffd" in html
    # CJK and right-to-left text as written
    for text in ("日本語", "עברית", "中文问题", "مرحبا", "答案"):
        assert text in html
    assert "style=" not in html  # bars and indents are the page's own rules (its policy allows no other)


def test_every_label_has_a_view_the_dashboard_table_links(built) -> None:
    """The labels are a source of their own, on the traces' graphs: each gets its view, and the
    dashboard's annotation table has its row linking it."""
    assert all(path is not None and path.is_file() for path in built["views"].values())
    assert len(built["views"]) == 2
    page = (built["warehouse"] / "dashboards" / "index.html").read_text()
    linked = set(re.findall(r'<a class="view" href="(failures/failure-[0-9a-f]{24}-[0-9a-f]{12}\.html)">', page))
    assert linked == {f"failures/{p.name}" for p in built["views"].values()}
    assert SCRIPT not in page
    tool_view = [p for a, p in built["views"].items() if a != built["answer_id"]][0]
    rows = parse(tool_view.read_text()).rows
    assert [r["data-span-id"] for r in rows if "labelled" in r["class"].split()] == [TOOL]


def provenance_line(html: str) -> str:
    """The text of the view's provenance line (graph, provenance, who labelled), tags removed."""
    [line] = re.findall(r'<dd id="provenance">(.*?)</dd>', html, re.S)
    return " ".join(re.sub(r"<[^>]+>", "", line).split())


def test_the_header_says_who_labelled_beside_the_provenance(built) -> None:
    """Each view says who labelled (annotations.annotator_kind) beside where the label comes from:
    TRAIL's labels are a benchmark's."""
    rows = query(built["warehouse"], "select annotation_id, graph_id, provenance, annotator_kind from annotations")
    assert {kind for *_, kind in rows} == {"benchmark"}
    for annotation_id, graph_id, provenance, kind in rows:
        html = built["views"][annotation_id].read_text()
        assert provenance_line(html) == f"{graph_id} · {provenance} · labelled by {kind}"


def test_a_trace_graph_without_span_times_gets_a_waterfall_without_bars(tmp_path: Path) -> None:
    """An ``otel:`` graph another source wrote (smartcomment: no span times, no parents) still gets
    its waterfall, the labelled span marked, with no bars to draw."""
    from smartcomment import comment_graph, comment_op, comment_session
    from smartcomment_graphs import var

    traces, labels = tmp_path / "g" / "agents", tmp_path / "labels"
    traces.mkdir(parents=True)
    labels.mkdir()
    with comment_graph(graph_id=f"otel:{TRACE}", user_id="u", project_id="agents") as graph:
        with comment_session(session_id="s1", category="trace"):
            question = var("question", "input", category="message")
            answer = var("answer", "output", category="message")
            op = comment_op(inputs=[question], outputs=[answer], op_name="llm", category="llm")
        text = json.dumps(graph.export_graph())
    (traces / "t.json").write_text(text.replace(op.op_id, ROOT))
    (labels / "l.json").write_text(json.dumps({"trace_id": TRACE, "errors": [
        {"category": "Goal Deviation", "location": ROOT, "evidence": "", "description": "", "impact": "LOW"}]}))
    warehouse = tmp_path / "w"
    build_warehouse(warehouse, [f"smartcomment={tmp_path / 'g'}", f"trail:trail_labels={labels}"])
    [html] = [p.read_text() for p in views(warehouse).values()]
    rows = parse(html).rows
    assert [r["data-span-id"] for r in rows] == [ROOT] and "labelled" in rows[0]["class"].split()
    assert 'class="bar"' not in html


def test_tracehouse_show_writes_the_same_waterfall(built, tmp_path: Path, capsys) -> None:
    from pipelines.interfaces.cli import main

    assert main(["show", built["answer_id"], "--warehouse", str(built["warehouse"]), "--out", str(tmp_path)]) == 0
    view, svg, _ = (Path(p) for p in capsys.readouterr().out.split())
    assert SCRIPT not in svg.read_text() and "<script" not in svg.read_text()  # the picture: text too
    shown, written = parse(view.read_text()).rows, parse(built["views"][built["answer_id"]].read_text()).rows
    assert [(r["data-span-id"], r["class"]) for r in shown] == [(r["data-span-id"], r["class"]) for r in written]


# -- the shared traces ----------------------------------------------------------------------------

OTEL = SHARED_DATA / "otel"
OTLP_SAMPLE, OTLP_LABELS, ANYAGENT = OTEL / "otlp-sample" / "otlp", OTEL / "otlp-sample" / "labels", OTEL / "anyagent"


def _hex(value: str, nbytes: int) -> str:
    return value.lower() if len(value) == 2 * nbytes else base64.b64decode(value).hex()


def shared_traces() -> dict[str, list[str]]:
    """trace id -> its span ids, as the files write them (OTLP/JSON lines, any-agent's span JSON)."""
    traces: dict[str, list[str]] = {}
    for path in sorted(OTLP_SAMPLE.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                for rs in json.loads(line)["resourceSpans"]:
                    for ss in rs["scopeSpans"]:
                        for s in ss["spans"]:
                            traces.setdefault(_hex(s["traceId"], 16), []).append(_hex(s["spanId"], 8))
    for path in sorted(ANYAGENT.glob("*.json")):
        for s in json.loads(path.read_text())["spans"]:
            traces.setdefault(f"{s['context']['trace_id']:032x}", []).append(f"{s['context']['span_id']:016x}")
    return traces


@pytest.mark.skipif(not (OTLP_SAMPLE.is_dir() and OTLP_LABELS.is_dir() and ANYAGENT.is_dir()),
                    reason="../shared/data/otel (any-agent and OTLP/JSON sample traces, TRAIL labels) is not present")
def test_every_span_of_the_shared_traces_is_in_its_waterfall_once(tmp_path: Path) -> None:
    traces = shared_traces()
    labels = tmp_path / "labels"
    shutil.copytree(OTLP_LABELS, labels)
    labelled = {json.loads(line)["trace_id"] for line in (OTLP_LABELS / "trail_labels.jsonl").read_text().splitlines()
                if line.strip()}
    # any-agent's traces carry no labels: one on each one's last span, so each gets a view
    extra = [{"trace_id": t, "errors": [{"category": "Goal Deviation", "location": spans[-1], "evidence": "",
                                         "description": "", "impact": "LOW"}]}
             for t, spans in traces.items() if t not in labelled]
    (labels / "anyagent.jsonl").write_text("".join(json.dumps(x) + "\n" for x in extra))
    warehouse = tmp_path / "w"
    summary = build_warehouse(warehouse, [f"otlp={OTLP_SAMPLE}", f"anyagent:otel_spans={ANYAGENT}",
                                          f"trail:trail_labels={labels}"])
    assert summary.failed_checks == []
    graph_of = dict(query(warehouse, "select annotation_id, graph_id from annotations"))
    seen = set()
    for annotation_id, path in views(warehouse).items():
        trace = graph_of[annotation_id].removeprefix("otel:")
        ids = [r["data-span-id"] for r in parse(path.read_text()).rows]
        assert sorted(ids) == sorted(traces[trace]), annotation_id
        assert len(ids) == len(set(ids))
        seen.add(trace)
    assert seen == set(traces)


# -- in the browser -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    with chromium(tmp_path_factory.mktemp("chromium-profile"), window="1400,900", logs={"browser": "ALL"}) as driver:
        yield driver


def open_view(driver, path: Path, timeout: float = 30) -> None:
    open_page(driver, path, "ready", f"the failure view {path.name} did not load", timeout)


def test_the_labelled_span_is_named_on_the_first_screen_highlighted_and_no_span_text_runs(built, browser) -> None:
    from selenium.webdriver.common.by import By

    browser.get_log("browser")
    open_view(browser, built["views"][built["answer_id"]])
    rows = browser.find_elements(By.CSS_SELECTOR, "ol.waterfall > li.span")
    assert len(rows) == len(built["spans"])
    [labelled] = browser.find_elements(By.CSS_SELECTOR, "li.span.labelled")
    assert labelled.get_attribute("data-span-id") == ANSWER
    colours = browser.execute_script(
        "return [getComputedStyle(arguments[0]).backgroundColor, getComputedStyle(arguments[1]).backgroundColor]",
        labelled, rows[5])
    assert colours[0] != colours[1]
    # nothing scrolls on load (a static screenshot is the view's top), and the header's first fact,
    # on the first screen, names the labelled span; its link brings the row into view
    inside = ("const r = arguments[0].getBoundingClientRect();"
              "return [window.scrollY, r.top >= 0 && r.bottom <= window.innerHeight]")
    header = browser.find_element(By.ID, "labelled-span")
    assert browser.execute_script(inside, header) == [0, True]
    row = labelled.find_element(By.CSS_SELECTOR, ".wf-row")
    assert browser.execute_script(inside, row)[1] is False
    header.find_element(By.CSS_SELECTOR, "a").click()
    scrolled, shown = browser.execute_script(inside, row)
    assert scrolled > 0 and shown
    # the kind column is never cut: kind, operation type and SpanKind wrap within it
    cut = browser.execute_script(
        "return Array.from(document.querySelectorAll('ol.waterfall .wf-row > span.kind'))"
        ".filter(k => k.scrollWidth > k.clientWidth || k.scrollHeight > k.clientHeight).map(k => k.textContent)")
    assert cut == []
    # bars: placed by start and scaled by duration on the trace's scale (1,000 ms wide)
    track = browser.find_element(By.CSS_SELECTOR, f"li.span[data-span-id='{ANSWER}'] .track")
    bar = track.find_element(By.CSS_SELECTOR, ".bar")
    left, width, track_width = browser.execute_script(
        "const t = arguments[0].getBoundingClientRect(), b = arguments[1].getBoundingClientRect();"
        "return [b.left - t.left, b.width, t.width]", track, bar)
    assert left / track_width == pytest.approx(0.600, abs=0.01)
    assert width / track_width == pytest.approx(0.3505, abs=0.01)
    # the labelled span's inputs and outputs are open; the others closed until clicked
    assert labelled.find_element(By.CSS_SELECTOR, "details.io").get_attribute("open") is not None
    assert rows[0].find_element(By.CSS_SELECTOR, "details.io").get_attribute("open") is None
    # the hostile text is text: shown as written, never run
    assert SCRIPT in rows[0].find_element(By.CSS_SELECTOR, ".span-name").get_attribute("textContent")
    assert browser.execute_script("return typeof window.__pwned") == "undefined"
    assert browser.execute_script("return document.querySelectorAll('main img, main b, main script').length") == 0
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []
