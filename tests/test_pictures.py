"""Pictures that fit a page (issue 34): a drill-down wraps its path into rows, at most 1,000 px wide
(2,000 px as a PNG at 2x) however long the trajectory, and long lists of numbers (embeddings) are
shown as their dimension and first values, whole on request, in the failure views and the pictures.

Real builds: the real Who&When records (skipped when ../shared/data is absent), the embedded default
corpus (its mem0 graphs hold 256-dimension embeddings), and one Who&When record of our own full of
markup, Chinese and a vector; then the pictures and the views in headless Chromium (the ``browser``
fixture of tests/conftest.py).
"""

from __future__ import annotations

import json
import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from browser import load, needs_chromium, open_view
from conftest import build_warehouse, query

from dashboards import drilldown
from dashboards.drilldown.values import Vector, fold, split
from pipelines.analytics import db
from pipelines.storage.warehouse import Warehouse

SVG = "{http://www.w3.org/2000/svg}"
PAGE_PX = 2000  # a picture for a paper: at most this many pixels wide as a PNG
SVG_PX = 1000  # ... so at most this wide as SVG (its PNG is drawn at 2x)

SCRIPT = "<script>window.__pwned=1</script>"
IMG = '<img src=x onerror="window.__pwned=1">'
CHINESE = "智能体在第五步把二加二算成了五，随后的每一步都沿用了这个错误的结果而没有重新检查。"
VECTOR = [0.125, -0.5, 3e-05] + [0.0] * 60 + [2.5]  # 64 numbers, 4 of them not zero
HOSTILE_STEPS = 40
HOSTILE_DECISIVE = 5


# -- the rule itself ----------------------------------------------------------------------------


def test_a_long_list_of_numbers_is_found_by_its_shape_anywhere_in_the_text() -> None:
    numbers = ", ".join(str(v) for v in VECTOR)
    value = f'{{"memory_id": "m-1", "dims": 64, "vector": [{numbers}]}}'
    [head, vector, tail] = split(value)
    assert head == '{"memory_id": "m-1", "dims": 64, "vector": ' and tail == "}"
    assert isinstance(vector, Vector) and vector.length == 64 and vector.nonzero == 4 and not vector.cut
    assert vector.summary == "vector[64]: 0.125, -0.5, 3e-05, … (4 non-zero)"
    assert vector.source == f"[{numbers}]"  # the whole list as written, for the view's "on request"
    # no key needed: a Python repr in a message, a matrix (each row folded), a value cut inside a list
    assert fold(f"scores = [{numbers}] {CHINESE}") == f"scores = {vector.summary} {CHINESE}"
    rows = ",".join("[" + ",".join(["1"] * 20) + "]" for _ in range(2))
    assert fold(f"[{rows}]") == "[vector[20]: 1, 1, 1, …,vector[20]: 1, 1, 1, …]"
    assert fold("cut: [" + ", ".join(["0.5"] * 30) + ", 0.") == "cut: vector[31+]: 0.5, 0.5, 0.5, … (30 non-zero)"
    # short lists, and lists that are not all numbers, stay as they are
    for kept in ("[1, 2, 3]", "steps [" + ", ".join(map(str, range(20))) + ', "end"]', "[" + "x, " * 30 + "]"):
        assert fold(kept) == kept


# -- builds -------------------------------------------------------------------------------------


def hostile_record() -> dict:
    """A Who&When record with a long trajectory: markup everywhere, Chinese, and an embedding
    quoted in the decisive step's message."""
    steps = [{"content": f"Plan: compute 2+2 {SCRIPT}", "role": "user", "name": "Planner_Expert"}]
    while len(steps) < HOSTILE_STEPS:
        k = len(steps)
        if k == HOSTILE_DECISIVE:
            content = f'{{"vector": {json.dumps(VECTOR)}}} The answer is 5 {IMG} {CHINESE}'
            steps.append({"content": content, "role": "assistant", "name": f"{IMG}_计算专家"})
        else:
            steps.append({"content": f"Step {k}: {CHINESE * 2} {SCRIPT}", "role": "assistant",
                          "name": "Verification_Expert" if k % 2 else "计算专家_Expert"})
    return {
        "is_correct": "False",
        "question": f"What is 2+2? {SCRIPT} {CHINESE}",
        "question_ID": "00000000-0000-4000-8000-000000000034",
        "level": "1",
        "ground_truth": "4",
        "history": steps,
        "mistake_agent": f"{IMG}_计算专家",
        "mistake_step": str(HOSTILE_DECISIVE),
        "mistake_reason": f"It added wrongly {SCRIPT}",
        "system_prompt": {f"{IMG}_计算专家": "You add.", "Planner_Expert": "You plan."},
    }


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One hostile Who&When record, built with drill-down pictures (--pictures svg)."""
    root = tmp_path_factory.mktemp("pictures")
    folder = root / "ww" / "Hand-Crafted"
    folder.mkdir(parents=True)
    (folder / "34.json").write_text(json.dumps(hostile_record(), ensure_ascii=False))
    summary = build_warehouse(root / "warehouse", [f"ww:whowhen={root / 'ww'}"], pictures="svg")
    assert summary.ok, summary.failed_steps + summary.failed_checks
    warehouse = Warehouse(root / "warehouse")
    [(annotation_id,)] = query(warehouse.root, "select annotation_id from annotations")
    entry = warehouse.committed().outputs["drilldown"]["pictures"][annotation_id]
    assert entry["svg"]
    return {"warehouse": warehouse, "id": annotation_id, "view": warehouse.path(entry["view"]),
            "svg": warehouse.dashboards_dir / "drilldown" / f"{entry['stem']}.svg"}


def longest_whowhen(warehouse: Path) -> tuple[str, int, int]:
    """The real Who&When annotation whose path from the decisive step to the end is longest."""
    [row] = query(warehouse, "select annotation_id, n_steps, steps_after_decisive from failure_propagation "
                             "where annotation_id like 'whowhen:%' order by steps_after_decisive desc, "
                             "annotation_id limit 1")
    return row


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head.startswith(b"\x89PNG\r\n\x1a\n") and head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def svg_size(path: Path) -> tuple[float, float, list[float]]:
    root = ET.fromstring(path.read_text())
    return float(root.get("width")), float(root.get("height")), [float(v) for v in root.get("viewBox").split()]


def drawn_node_ids(path: Path) -> list[str]:
    root = ET.fromstring(path.read_text())
    return [g.get("data-node-id") for g in root.iter(f"{SVG}g") if g.get("data-node-id") is not None]


# -- pictures -----------------------------------------------------------------------------------


def test_a_long_real_whowhen_trajectory_is_drawn_in_rows_that_fit_a_page(multi_agent_warehouse, tmp_path) -> None:
    warehouse, summary = multi_agent_warehouse
    assert summary.ok
    annotation_id, n_steps, after = longest_whowhen(warehouse)
    assert n_steps >= 100 and after >= 50, (annotation_id, n_steps, after)  # the kind of strip issue 34 saw
    with db.connect(Warehouse(warehouse)) as con:
        svg, png = drilldown.draw(con, annotation_id, tmp_path)
    width, height, box = svg_size(svg)
    assert width <= SVG_PX and box == [0, 0, width, height]
    assert png_size(png)[0] <= PAGE_PX
    # wrapped, not dropped: the path's boxes sit on several rows below the operation, the last one
    # (the final step's output) among them
    root = ET.fromstring(svg.read_text())
    rows = {float(g.find(f"{SVG}rect").get("y")) for g in root.iter(f"{SVG}g")
            if {"path", "target"} & set(g.get("class", "").split())}
    assert len(rows) >= 2
    last = query(warehouse, "select e.target_full_node_id from failure_propagation f join edges e using (graph_id) "
                            "join operations o using (graph_id, op_id) where f.annotation_id = ? "
                            "order by o.step desc limit 1", [annotation_id])[0][0]
    assert last in drawn_node_ids(svg)


def test_pictures_fold_embeddings_to_their_dimension(sample_warehouse, tmp_path) -> None:
    warehouse, _ = sample_warehouse
    annotation_id, node_id, value = embedding_input(warehouse)
    with db.connect(Warehouse(warehouse)) as con:
        svg, png = drilldown.draw(con, annotation_id, tmp_path)
    texts = ["".join(t.itertext()) for t in ET.fromstring(svg.read_text()).iter(f"{SVG}text")]
    vector = json.loads(value)["vector"]
    assert any(f"vector[{len(vector)}]: {vector[0]}, {vector[1]}" in t for t in texts), texts
    assert not any("0.0, 0.0, 0.0, 0.0" in t for t in texts)  # no raw run of the vector anywhere
    assert any(t.startswith("query: ") for t in texts)  # the query is in sight
    assert svg_size(svg)[0] <= SVG_PX and png_size(png)[0] <= PAGE_PX


def embedding_input(warehouse: Path) -> tuple[str, str, str]:
    """A memory failure whose faulty operation reads an embedding node: (annotation, node, value)."""
    rows = query(warehouse, """
        select f.annotation_id, n.full_node_id, n.value
        from failure_propagation f
        join edges e on e.graph_id = f.graph_id and e.op_id = f.faulty_op_id
        join nodes n on n.graph_id = e.graph_id and n.full_node_id = e.source_full_node_id
        where n.class_name = 'embedding' and n.value like '%"vector": [%'
        order by f.annotation_id, n.full_node_id limit 1""")
    assert rows, "the default corpus has mem0 retrievals over embeddings"
    return rows[0]


# -- in the browser -----------------------------------------------------------------------------

OVERFLOW = "const e = document.scrollingElement || document.documentElement; return [e.scrollWidth, e.clientWidth]"

# every text of a node box inside its box, and every text inside the picture (by the browser's fonts)
TEXT_OUTSIDE = """
const svg = document.documentElement, width = svg.viewBox.baseVal.width, out = [];
for (const t of svg.querySelectorAll('text')) {
  const b = t.getBBox(), g = t.closest('g.node');
  const right = g ? (() => { const r = g.querySelector('rect').getBBox(); return r.x + r.width; })() : width;
  if (b.x + b.width > right + 0.5) out.push([t.textContent, b.x + b.width, right]);
}
return out;
"""


def no_overflow(driver) -> None:
    scroll_width, client_width = driver.execute_script(OVERFLOW)
    assert scroll_width == client_width, f"{driver.current_url}: {scroll_width} px wide in a {client_width} px window"


@needs_chromium
def test_a_real_whowhen_picture_and_its_view_have_no_horizontal_overflow(multi_agent_warehouse, browser,
                                                                         tmp_path) -> None:
    warehouse, _ = multi_agent_warehouse
    annotation_id, _, _ = longest_whowhen(warehouse)
    with db.connect(Warehouse(warehouse)) as con:
        svg, _ = drilldown.draw(con, annotation_id, tmp_path)
    browser.get(svg.as_uri())
    no_overflow(browser)
    assert browser.execute_script(TEXT_OUTSIDE) == []
    record = Warehouse(warehouse).committed()
    open_view(browser, Warehouse(warehouse).path(record.outputs["drilldown"]["pictures"][annotation_id]["view"]))
    no_overflow(browser)


@needs_chromium
def test_the_annotation_tables_picture_column_is_not_clipped(multi_agent_warehouse, browser) -> None:
    """No pictures drawn: every row's picture cell is a `tracehouse show '<id>'` command."""
    warehouse, _ = multi_agent_warehouse
    load(browser, warehouse / "dashboards" / "index.html")
    commands, (scroll_width, client_width), (header_right, wrap_right) = browser.execute_script("""
        const wrap = document.querySelector('.table-wrap'), th = [...wrap.querySelectorAll('thead th')].pop();
        return [document.querySelectorAll('td.pic code').length, [wrap.scrollWidth, wrap.clientWidth],
                [th.getBoundingClientRect().right, wrap.getBoundingClientRect().right]];""")
    assert commands == query(warehouse, "select count(*) from failure_propagation")[0][0] > 0
    assert scroll_width == client_width and header_right <= wrap_right
    no_overflow(browser)


@needs_chromium
def test_a_memory_failure_view_shows_an_embedding_as_its_dimension_and_first_values(sample_warehouse,
                                                                                    browser) -> None:
    from selenium.webdriver.common.by import By

    warehouse, _ = sample_warehouse
    annotation_id, node_id, value = embedding_input(warehouse)
    vector = json.loads(value)["vector"]
    nonzero = sum(1 for v in vector if v != 0)
    expected = f"vector[{len(vector)}]: {vector[0]}, {vector[1]}, {vector[2]}, … ({nonzero} non-zero)"
    record = Warehouse(warehouse).committed()
    open_view(browser, Warehouse(warehouse).path(record.outputs["drilldown"]["pictures"][annotation_id]["view"]))
    [card] = [c for c in browser.find_elements(By.CSS_SELECTOR, "#inputs article.node")
              if c.find_element(By.CSS_SELECTOR, ".nid").text == node_id]
    [details] = card.find_elements(By.CSS_SELECTOR, "details.vector")
    summary = details.find_element(By.TAG_NAME, "summary")
    values = details.find_element(By.CSS_SELECTOR, ".values")
    assert summary.text == expected and details.get_attribute("open") is None
    assert not values.is_displayed() and "0.0, 0.0, 0.0, 0.0" not in card.text  # the query stays in sight
    assert browser.execute_script("return document.getElementById('query').getBoundingClientRect().bottom") \
        <= browser.execute_script("return window.innerHeight")
    summary.click()  # the whole vector on request
    assert values.is_displayed() and json.loads(values.text) == vector
    no_overflow(browser)


@needs_chromium
def test_hostile_text_stays_text_and_inside_its_boxes(hostile, browser) -> None:
    from selenium.webdriver.common.by import By

    expected = "vector[64]: 0.125, -0.5, 3e-05, … (4 non-zero)"
    width, height, _ = svg_size(hostile["svg"])
    assert width <= SVG_PX
    browser.get(hostile["svg"].as_uri())
    no_overflow(browser)
    assert browser.execute_script("return typeof window.__pwned") == "undefined"
    assert browser.execute_script("return document.getElementsByTagName('script').length") == 0
    texts = browser.execute_script("return [...document.querySelectorAll('text')].map(t => t.textContent)")
    tips = browser.execute_script("return [...document.querySelectorAll('title')].map(t => t.textContent)")
    assert any(SCRIPT in t for t in texts) and any("计算专家" in t for t in texts)
    assert any(t.startswith('{"vector": vector[64]: 0.125') for t in texts)  # the box's first line
    assert any(expected in t for t in tips) and not any("0.0, 0.0, 0.0" in t for t in texts + tips)
    assert browser.execute_script(TEXT_OUTSIDE) == []  # Chinese included: cut by its width, not its length

    open_view(browser, hostile["view"])
    no_overflow(browser)
    assert browser.execute_script("return typeof window.__pwned") == "undefined"
    assert browser.execute_script("return document.querySelectorAll('main img, header img').length") == 0
    decisive = browser.find_element(By.CSS_SELECTOR, "li.step.decisive")
    [details] = decisive.find_elements(By.CSS_SELECTOR, "details.vector")
    assert details.find_element(By.TAG_NAME, "summary").text == expected
    assert "The answer is 5 <img" in decisive.text and CHINESE in decisive.text
    details.find_element(By.TAG_NAME, "summary").click()
    assert json.loads(details.find_element(By.CSS_SELECTOR, ".values").text) == VECTOR
