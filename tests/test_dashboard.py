"""The failure dashboard end to end: a real build (Dagster, DuckDB, Parquet) of the sample corpus plus
a Who&When record full of markup, then the page in headless Chromium (selenium), with no network.

The malicious record puts ``<script>`` and ``<img onerror>`` payloads into an agent name, the query,
node values, the reason and even the file name (hence graph and annotation ids); after the page and a
drill-down picture load, ``window.__pwned`` must still be undefined.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlparse

import pytest
from browser import inked_rows, load, needs_chromium, open_view, screenshot
from conftest import REPO, build_warehouse, query

ARTIFACTS = REPO / "tests" / "artifacts"
PICTURE_LIMIT = 30

SCRIPT = "<script>window.__pwned=1</script>"
IMG = '<img src=x onerror="window.__pwned=1">'
EVIL_AGENT = '<img src=x onerror="window.__pwned=1">_Expert'
EVIL_FILE = "<img src=x onerror=window.__pwned=1>.json"


CHINESE = "我们先计算二加二，答案是四。"  # a step in Chinese: the failure view must render it with glyphs
DECISIVE_STEP = 24  # far down a 32-step trajectory: the view shows it in its header, on the first screen
HOSTILE_REASON = f"The agent added wrongly {SCRIPT} {IMG} </td></table>"


def trajectory() -> list[dict[str, str]]:
    """32 steps: markup in the first, Chinese in the second, the evil agent's wrong answer at
    DECISIVE_STEP, and a verification full of markup last."""
    steps = [{"content": f"Let us compute 2+2. {SCRIPT}", "role": "user", "name": "Planner_Expert"},
             {"content": CHINESE, "role": "assistant", "name": "Planner_Expert"}]
    while len(steps) < 31:
        if len(steps) == DECISIVE_STEP:
            steps.append({"content": f"The answer is 5 {IMG}", "role": "assistant", "name": EVIL_AGENT})
        else:
            steps.append({"content": f"Step {len(steps)}: checking the arithmetic once more. " * 3,
                          "role": "assistant", "name": "Computer_terminal"})
    steps.append({"content": f"Verified: 5 {SCRIPT}", "role": "assistant", "name": "Verification_Expert"})
    return steps


def write_evil_whowhen(root: Path) -> str:
    """One Who&When (Algorithm-Generated, i.e. CaptainAgent) record whose every text field is markup."""
    record = {
        "is_correct": "False",
        "question": f"What is 2+2? {SCRIPT} {IMG} </script><!-- \u2028 end",
        "question_ID": "00000000-0000-4000-8000-000000000000",
        "level": "1",
        "ground_truth": f"4 {IMG}",
        "history": trajectory(),
        "mistake_agent": EVIL_AGENT,
        "mistake_step": str(DECISIVE_STEP),
        "mistake_reason": f"It added wrongly {SCRIPT}",
        "system_prompt": {EVIL_AGENT: f"You are an expert {SCRIPT}", "Planner_Expert": "You plan."},
    }
    path = root / "Algorithm-Generated" / EVIL_FILE
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record))
    return f"evil:Algorithm-Generated/{EVIL_FILE.removesuffix('.json')}#a0"


@pytest.fixture(scope="module")
def built(sample_corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    """The sample corpus (memory systems) and the malicious record (multi-agent), built once."""
    root = tmp_path_factory.mktemp("dashboard")
    evil_id = write_evil_whowhen(root / "evil")
    # an attribution method whose reason is markup (predictions are trace-like text too)
    (root / "preds").mkdir()
    (root / "preds" / "hostile.jsonl").write_text(json.dumps(
        {"annotation_id": evil_id, "agent": EVIL_AGENT, "step": DECISIVE_STEP, "reason": HOSTILE_REASON}) + "\n")
    warehouse = root / "warehouse"
    before = os.environ.get("TRACEHOUSE_DRILLDOWN_LIMIT")
    os.environ["TRACEHOUSE_DRILLDOWN_LIMIT"] = str(PICTURE_LIMIT)
    try:
        started = time.monotonic()
        summary = build_warehouse(warehouse, [f"memtracebench={sample_corpus}", f"evil:whowhen={root / 'evil'}",
                                              f"hostile:attribution_jsonl={root / 'preds'}"],
                                  pictures="png")  # every picture, PNGs too: what `--pictures png` asks
        seconds = time.monotonic() - started
    finally:
        if before is None:
            os.environ.pop("TRACEHOUSE_DRILLDOWN_LIMIT", None)
        else:
            os.environ["TRACEHOUSE_DRILLDOWN_LIMIT"] = before
    assert summary.ok, summary.failed_steps + summary.failed_checks
    return {"warehouse": warehouse, "evil_id": evil_id, "seconds": seconds}


def page_of(built) -> Path:
    return built["warehouse"] / "dashboards" / "index.html"


def record_of(built):
    from pipelines.storage.warehouse import Warehouse

    return Warehouse(built["warehouse"]).committed()


def manifest_of(built) -> dict:
    return record_of(built).outputs["drilldown"]


# -- files and HTML (no browser) ------------------------------------------------------------------


def test_every_chart_is_published_with_svg_and_png_when_asked(built) -> None:
    """Every chart with rows has its spec and SVG, and its PNG since the build asked (--pictures png);
    a chart with nothing to show has no files and says why."""
    from dashboards import CHARTS

    outputs = record_of(built).outputs
    shown = [name for name in CHARTS if not outputs[f"chart.{name}"]["empty"]]
    assert len(shown) >= 5
    for name in shown:
        files = {Path(f).name.split(".", 1)[1]: built["warehouse"] / f for f in outputs[f"chart.{name}"]["files"]}
        assert files["png"].read_bytes().startswith(b"\x89PNG\r\n\x1a\n"), name
        ET.fromstring(files["svg"].read_text())  # well-formed
        assert json.loads(files["vl.json"].read_text())["$schema"].endswith(".json")
    for name in set(CHARTS) - set(shown):  # hidden, saying why (computed from its rows where it has some)
        assert outputs[f"chart.{name}"]["files"] == [] and outputs[f"chart.{name}"]["empty"].strip()
    leftovers = [p for p in (built["warehouse"] / "dashboards").rglob("*.tmp")]
    assert leftovers == []


def test_a_chart_whose_rows_did_not_change_is_not_built_again(built) -> None:
    import dataclasses

    from dashboards import CHARTS, page
    from pipelines.storage.warehouse import Warehouse

    calls: list[int] = []
    original = next(iter(CHARTS.values()))

    def counted(rows):
        calls.append(len(rows))
        return original.build(rows)

    from pipelines.analytics import db

    chart = dataclasses.replace(original, build=counted)
    warehouse = Warehouse(built["warehouse"])
    con = db.connect(warehouse)
    try:
        out = page.build_chart(warehouse, chart, con, "png")
        assert calls == []  # the build made this chart from the same rows and code: its files are there
        assert warehouse.rel(out.png) in record_of(built).outputs[f"chart.{chart.name}"]["files"]
        out.png.unlink()  # a missing picture alone is drawn from the spec, without the chart's code
        again = page.build_chart(warehouse, chart, con, "png")
        assert calls == [] and again.png.read_bytes().startswith(b"\x89PNG")
        out.png.unlink()
        out.spec.unlink()
        again = page.build_chart(warehouse, chart, con, "png")
        without_png = page.build_chart(warehouse, chart, con, "svg")  # --pictures svg: no PNG
        spec_only = page.build_chart(warehouse, chart, con)  # the default: the spec alone
    finally:
        con.close()
    assert len(calls) == 1 and again.png.read_bytes().startswith(b"\x89PNG") and again.rows == calls[0]
    assert without_png.png is None and without_png.svg == again.svg
    assert spec_only.svg is None and spec_only.png is None and spec_only.spec == again.spec


def test_a_default_build_writes_chart_specs_only(sample_warehouse) -> None:
    """Without --pictures the page draws the charts from their specs: no SVG or PNG is rendered, and
    the page links only the spec (each chart's menu saves it as SVG or PNG)."""
    from dashboards import CHARTS
    from pipelines.storage.warehouse import Warehouse

    sample_warehouse, summary = sample_warehouse
    assert summary.ok
    outputs = Warehouse(sample_warehouse).committed().outputs
    shown = [name for name in CHARTS if not outputs[f"chart.{name}"]["empty"]]
    assert len(shown) >= 5
    for name in shown:
        assert [Path(f).suffixes[-2:] for f in outputs[f"chart.{name}"]["files"]] == [[".vl", ".json"]], name
    charts = sample_warehouse / "dashboards" / "charts"
    assert sorted({p.suffix for p in charts.iterdir()}) == [".json"]
    html = (sample_warehouse / "dashboards" / "index.html").read_text()
    assert html.count("Vega-Lite spec</a> (the chart's menu saves it as SVG or PNG)") == len(shown)
    assert ".svg\">SVG</a>" not in html


@pytest.mark.parametrize(("warehouse_fixture", "charts_expected"), [
    ("sample_warehouse", {"error_mix", "propagation", "operation_types", "attribution_leaderboard"}),
    ("multi_agent_warehouse", {"responsible_agents", "decisive_position"}),
])
def test_chart_rows_are_put_back_where_altair_had_them_inline(request, warehouse_fixture: str,
                                                              charts_expected: set[str]) -> None:
    """A build makes each chart on a placeholder for its rows (dashboards.charts.data) and puts the
    rows back after Altair, then adds the page-wide system parameters and filter to the spec dict
    (dashboards.charts.linked): the spec is the one Altair makes with the rows inline and the
    parameters and filter added by Altair (Altair names its views by a digest of the chart, which the
    rows no longer enter), and it validates. Made as a build makes it, with Altair's debug mode off
    and no validation, it is the same spec."""
    import altair as alt

    from dashboards import CHARTS
    from dashboards.charts import FILTER_PARAM, FOCUS_PARAM, SYSTEM_FILTER
    from dashboards.page import chart_spec, query_rows
    from dashboards.registry import informative
    from pipelines.analytics import db
    from pipelines.storage.warehouse import Warehouse

    con = db.connect(Warehouse(request.getfixturevalue(warehouse_fixture)[0]))
    try:
        made = set()
        for chart in CHARTS.values():
            rows = query_rows(con, chart.sql)
            if not informative(rows):
                continue
            placed = chart_spec(chart, rows, validate=True)
            inline = chart.build(rows).add_params(
                alt.param(name=FILTER_PARAM, value=None), alt.param(name=FOCUS_PARAM, value=None)
            ).transform_filter(SYSTEM_FILTER).to_dict(validate=True)
            assert "tracehouse-rows-" not in json.dumps(placed), chart.name

            def unnamed(spec: dict) -> str:
                return re.sub(r"view_[0-9a-f]+_", "view_", json.dumps(spec, sort_keys=True, default=str))

            assert unnamed(placed) == unnamed(inline), chart.name
            # as a build makes it: Altair's debug mode off, nothing validated
            assert unnamed(chart_spec(chart, rows, validate=False)) == unnamed(inline), chart.name
            made.add(chart.name)
    finally:
        con.close()
    assert made >= charts_expected


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []
        self.scripts: list[dict] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in {"src", "href", "action", "srcset", "poster", "data"} and value is not None:
                self.refs.append((tag, name, value))
        if tag == "script":
            self.scripts.append(dict(attrs))


def test_page_references_no_outside_host(built) -> None:
    html = page_of(built).read_text()
    refs = _Refs()
    refs.feed(html)
    for tag, name, value in refs.refs:
        parsed = urlparse(value)
        assert parsed.scheme in {"", "data"} and not parsed.netloc, (tag, name, value)
        assert not value.startswith("//"), value
    assert all("src" not in script for script in refs.scripts), "every script is inline"
    assert len(refs.scripts) == 5  # three JSON data blocks, the Vega bundle, the page's own script
    assert not re.search(r"@import|url\(\s*['\"]?(https?:)?//", html), "no stylesheet or font from a host"
    assert "Content-Security-Policy" in html and "connect-src 'none'" in html


def test_untrusted_text_is_escaped_in_the_html(built) -> None:
    html = page_of(built).read_text()
    lowered = html.lower()
    assert "<script>window.__pwned" not in lowered
    assert "<img src=x" not in lowered
    assert lowered.count("<script") == 5
    assert '<td class="who">agent &lt;img src=x onerror=&#34;window.__pwne' in lowered  # the table's agent cell
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in lowered  # the table's query cell
    specs = re.search(r'<script type="application/json" id="chart-specs">(.*?)</script>', html, re.S).group(1)
    assert "<" not in specs and ">" not in specs and "&" not in specs
    agents = {row["agent"] for row in json.loads(specs)["responsible_agents"]["data"]["values"]}
    assert EVIL_AGENT in agents  # the data itself is intact, only encoded


def test_every_row_opens_its_failure_view_and_pictures_link_when_drawn(built) -> None:
    html = page_of(built).read_text()
    manifest = manifest_of(built)
    total = query(built["warehouse"], "select count(*) from annotations")[0][0]
    assert manifest["total"] == manifest["views"] == total and manifest["drawn"] == PICTURE_LIMIT < total
    assert html.count('<tr data-system="') == total
    views = re.findall(r'<a class="view" href="(failures/failure-[0-9a-f]{24}-[0-9a-f]{12}\.html)">', html)
    assert sorted(views) == sorted(e["view"].removeprefix("dashboards/") for e in manifest["pictures"].values())
    assert all((built["warehouse"] / "dashboards" / v).is_file() for v in views)
    links = set(re.findall(r'href="drilldown/(annotation-[0-9a-f]{24}-[0-9a-f]{12})\.svg"', html))
    assert links == {e["stem"] for e in manifest["pictures"].values() if e["svg"]} and len(links) == PICTURE_LIMIT
    for stem in links:  # --pictures png: SVG and PNG
        assert (built["warehouse"] / "dashboards" / "drilldown" / f"{stem}.svg").is_file()
        assert (built["warehouse"] / "dashboards" / "drilldown" / f"{stem}.png").read_bytes().startswith(b"\x89PNG")
    assert html.count('<td class="pic"><div class="cmd-scroll"><code class="cmd">tracehouse show ') == \
        total - PICTURE_LIMIT
    # drawing order is round-robin over systems: the one CaptainAgent record is among the first drawn
    assert manifest["pictures"][built["evil_id"]]["svg"]


def test_every_chart_has_one_sql_file_one_declaration_and_one_function() -> None:
    import yaml

    from dashboards import CHARTS, registry
    from pipelines.analytics.db import SQL_DIR

    files = sorted(p.stem for p in (SQL_DIR / "charts").glob("*.sql"))
    declared = [entry["name"] for entry in yaml.safe_load((SQL_DIR / "charts" / "_charts.yml").read_text())["charts"]]
    assert sorted(declared) == files and len(set(declared)) == len(declared)
    assert sorted(registry.BUILDERS) == files
    assert list(CHARTS) == declared  # the page shows them in the declarations' order
    for name, chart in CHARTS.items():
        assert chart.build is registry.BUILDERS[name] and chart.title and chart.description


def test_a_chart_missing_a_piece_is_refused(tmp_path: Path, monkeypatch) -> None:
    from dashboards import charts, registry

    assert set(registry.load_charts(dict(registry.BUILDERS))) == set(registry.BUILDERS) == set(charts.CHARTS)
    with pytest.raises(LookupError, match="error_mix have no function"):
        registry.load_charts({k: v for k, v in registry.BUILDERS.items() if k != "error_mix"})
    with pytest.raises(LookupError, match="extra have no SQL file"):
        registry.load_charts({**registry.BUILDERS, "extra": registry.BUILDERS["error_mix"]})
    with pytest.raises(ValueError, match="registered twice"):
        registry.chart("error_mix")(lambda rows: None)
    bad = tmp_path / "_charts.yml"
    bad.write_text("version: 2\ncharts:\n  - {name: a, title: A, description: d, colour: red}\n")
    with pytest.raises(ValueError, match="exactly name, title, description and empty"):
        registry.declarations(bad)
    bad.write_text("version: 2\ncharts:\n  - {name: a, title: A, description: d, empty: e, reads: [graphs]}\n")
    with pytest.raises(ValueError, match="exactly name, title, description and empty"):  # derived from the SQL
        registry.declarations(bad)


def test_dashboard_assets_follow_the_marts() -> None:
    from dashboards import CHARTS
    from pipelines.defs import build_definitions
    from pipelines.defs.resources import TracehouseResource

    graph = build_definitions(TracehouseResource(warehouse="/nonexistent")).resolve_asset_graph()
    import dagster as dg

    parents = {key.to_user_string(): {p.to_user_string() for p in graph.get(key).parent_keys}
               for key in graph.get_all_asset_keys() if graph.get(key).group_name == "dashboard"}
    assert set(parents) == {"dashboard"}  # one asset: its charts, failure views and page drawn by one step
    for chart in CHARTS.values():  # what every chart reads is upstream of the page
        assert set(chart.reads) <= parents["dashboard"], chart.name
    assert {"failure_modes_by_system", "failure_rates", "failure_modes_by_operation"} <= parents["dashboard"]
    assert {"failure_propagation", "edges", "nodes"} <= parents["dashboard"]  # the failure views'
    from pipelines.defs.warehouse import build_job

    assert dg.AssetKey("dashboard") in build_job.selection.resolve(graph)  # drawn by every build's run


def test_cli_dashboard_prints_the_page_and_opens_it(built, tmp_path: Path, capsys) -> None:
    from pipelines.interfaces.cli import main

    assert main(["dashboard", "--warehouse", str(built["warehouse"])]) == 0
    assert capsys.readouterr().out.strip() == str(page_of(built).resolve())
    assert main(["dashboard", "--warehouse", str(tmp_path / "none")]) == 1
    assert "run `tracehouse build` first" in capsys.readouterr().err
    # --open goes through the webbrowser module; $BROWSER=echo makes the "browser" print the URL
    env = dict(os.environ, BROWSER="echo")
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.interfaces.cli",
         "dashboard", "--open", "--warehouse", str(built["warehouse"])],
        capture_output=True, text=True, env=env, timeout=60, cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    assert page_of(built).resolve().as_uri() in done.stdout


# -- in the browser -------------------------------------------------------------------------------

def requested_urls(driver) -> list[str]:
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


RENDERED_RATES = """
const items = [];
(function walk(node) {
  if (!node) return;
  if (node.marktype === "rect" && node.items) {
    for (const item of node.items) {
      if (item.datum && item.datum.failure_rate != null && item.fill && item.fill !== "#eeeeee") {
        items.push([item.datum.system, item.datum.dataset, item.datum.failure_rate]);
      }
    }
  }
  for (const child of node.items || []) walk(child);
})(window.tracehouse.views.failure_rate_heatmap.scenegraph().root);
return items;
"""

RENDERED_MIX = """
const items = [];
(function walk(node) {
  if (!node) return;
  if (node.marktype === "rect" && node.items) {
    for (const item of node.items) {
      if (item.datum && item.datum.error_type !== undefined) {
        items.push([item.datum.system, item.datum.error_type, item.datum.n, item.opacity]);
      }
    }
  }
  for (const child of node.items || []) walk(child);
})(window.tracehouse.views.error_mix.scenegraph().root);
return items;
"""


@needs_chromium
def test_page_renders_every_chart_offline_without_errors(built, browser) -> None:
    from dashboards import CHARTS

    browser.get_log("browser")  # start from a clean log
    browser.get_log("performance")
    load(browser, page_of(built))
    assert browser.execute_script("return document.body.dataset.rendered") == "true"
    assert browser.execute_script("return window.tracehouse.errors") == []
    containers = browser.execute_script(
        "return Array.from(document.querySelectorAll('.chart')).map(c => "
        "[c.dataset.chart, c.querySelectorAll('svg.marks, canvas').length])"
    )
    assert sorted(name for name, _ in containers) == sorted(CHARTS)  # every chart has data in this warehouse
    assert all(count >= 1 for _, count in containers), containers
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []
    urls = requested_urls(browser)
    page_urls = [u for u in urls if not u.startswith("chrome://")]  # Chromium's own UI resources
    assert page_urls and all(urlparse(u).scheme in {"file", "data", "blob", "about"} for u in page_urls), urls
    assert browser.execute_script("return typeof window.__pwned") == "undefined"

    # for people to look at: the whole page
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1400, min(height + 40, 8000))
    time.sleep(0.3)
    browser.save_screenshot(str(ARTIFACTS / "dashboard.png"))
    browser.set_window_size(1400, 1000)


@needs_chromium
def test_rendered_values_match_the_marts(built, browser) -> None:
    load(browser, page_of(built))
    rendered = sorted((s, d, round(r, 9)) for s, d, r in browser.execute_script(RENDERED_RATES))
    mart = sorted(
        (s, d, round(r, 9))
        for s, d, r in query(built["warehouse"],
                             "select system, dataset, failure_rate from failure_rates where failure_rate is not null")
    )
    assert rendered == mart and len(mart) == 12
    # multi-agent cells are drawn, grey, and say why there is no rate
    labels = browser.execute_script(
        "return Array.from(document.querySelectorAll('#chart-failure_rate_heatmap text')).map(t => t.textContent)"
    )
    assert any(label.startswith("no denominator") for label in labels)

    bars = sorted((s, e, n) for s, e, n, _ in browser.execute_script(RENDERED_MIX))
    expected = sorted(
        (s, e, n) for s, e, n in query(
            built["warehouse"], "select system, coalesce(error_type, 'unlabelled'), n from failure_modes_by_system"
        )
    )
    assert bars == expected


@needs_chromium
def test_clicking_a_system_filters_the_other_charts_and_the_table(built, browser) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    load(browser, page_of(built))
    bar = browser.find_elements(By.CSS_SELECTOR, "#chart-error_mix path[aria-label*='system: rag;']")[0]
    ActionChains(browser).move_to_element(bar).click().perform()
    deadline = time.monotonic() + 10
    while browser.execute_script("return window.tracehouse.focus") != "rag" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert browser.execute_script("return window.tracehouse.focus") == "rag"
    time.sleep(0.3)
    rates = browser.execute_script(RENDERED_RATES)
    assert rates and {s for s, _, _ in rates} == {"rag"}
    # the clicked chart keeps every system, dimming the others
    mix = browser.execute_script(RENDERED_MIX)
    assert {s for s, *_ in mix} == {s for (s,) in query(built["warehouse"], "select distinct system from graphs")}
    assert all((opacity == 1) == (system == "rag") for system, _, _, opacity in mix)
    visible = browser.execute_script(
        "return document.querySelectorAll('#annotation-table tbody tr:not([hidden])').length"
    )
    assert visible == query(built["warehouse"], "select count(*) from annotations where system = 'rag'")[0][0]
    browser.find_element(By.ID, "clear-focus").click()
    time.sleep(0.3)
    assert len(browser.execute_script(RENDERED_RATES)) == 12


@needs_chromium
def test_markup_in_traces_never_runs_in_page_tooltip_or_picture(built, browser) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    load(browser, page_of(built))
    assert browser.execute_script("return typeof window.__pwned") == "undefined"
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0
    # the agent name is drawn as text in the chart ...
    agent_labels = browser.execute_script(
        "return Array.from(document.querySelectorAll('#chart-responsible_agents text')).map(t => t.textContent)"
    )
    assert any(label.startswith('<img src=x onerror="window.__pwned=1"') for label in agent_labels), agent_labels
    # ... and its tooltip shows it as text (vega-embed's tooltip handler escapes HTML)
    bar = browser.find_elements(By.CSS_SELECTOR, "#chart-responsible_agents path[aria-label*='pwned']")[0]
    ActionChains(browser).move_to_element(bar).perform()
    deadline = time.monotonic() + 5
    tooltip = None
    while time.monotonic() < deadline and not tooltip:
        tooltip = browser.execute_script(
            "const t = document.getElementById('vg-tooltip-element');"
            "return t && t.classList.contains('visible') ? t.innerHTML : null"
        )
        time.sleep(0.1)
    assert tooltip and "&lt;img src=x" in tooltip
    assert browser.execute_script("return document.querySelectorAll('#vg-tooltip-element img').length") == 0
    assert browser.execute_script("return typeof window.__pwned") == "undefined"

    # the drill-down picture of the malicious annotation, opened directly as an SVG document
    stem = manifest_of(built)["pictures"][built["evil_id"]]["stem"]
    svg_path = built["warehouse"] / "dashboards" / "drilldown" / f"{stem}.svg"
    browser.get(svg_path.as_uri())
    time.sleep(0.5)
    assert browser.execute_script("return typeof window.__pwned") == "undefined"
    texts = browser.execute_script("return Array.from(document.querySelectorAll('text')).map(t => t.textContent)")
    assert any(SCRIPT in text for text in texts), "the payload is shown, as text"
    assert browser.execute_script("return document.getElementsByTagName('script').length") == 0


# -- failure views and the annotation table, in the browser -------------------------------------


def view_of(built, annotation_id: str) -> Path:
    return built["warehouse"] / manifest_of(built)["pictures"][annotation_id]["view"]


@needs_chromium
def test_memory_failure_view_shows_answers_operation_path_and_evidence(built, browser) -> None:
    from selenium.webdriver.common.by import By

    [(annotation_id, golden, prediction, evidence)] = query(built["warehouse"], """
        select annotation_id, golden_answers[1], prediction, len(list_distinct(source_evidence_ids))
        from annotations
        where decisive_step is null and len(source_evidence_ids) > 0 and len(golden_answers) > 0
          and prediction is not null and faulty_op_id is not null
        order by annotation_id limit 1""")
    open_view(browser, view_of(built, annotation_id))
    assert golden in browser.find_element(By.ID, "golden").text
    assert prediction in browser.find_element(By.ID, "prediction").text
    assert len(browser.find_elements(By.CSS_SELECTOR, "#evidence article.node")) == evidence
    assert browser.find_elements(By.CSS_SELECTOR, "#outputs article.node")  # the faulty operation's outputs
    assert browser.find_element(By.ID, "faulty-op").text.strip()
    assert browser.execute_script("return typeof window.__pwned") == "undefined"


@needs_chromium
def test_multi_agent_view_highlights_the_decisive_step_renders_chinese_and_runs_no_markup(built, browser) -> None:
    from selenium.webdriver.common.by import By

    open_view(browser, view_of(built, built["evil_id"]))
    steps = browser.find_elements(By.CSS_SELECTOR, "ol.timeline > li.step")
    assert len(steps) == 32
    [decisive] = browser.find_elements(By.CSS_SELECTOR, "li.step.decisive")
    assert decisive.get_attribute("id") == f"step-{DECISIVE_STEP}"
    assert "The answer is 5 <img" in decisive.text and "decisive step" in decisive.text
    # highlighted: a background of its own
    colours = browser.execute_script(
        "return [getComputedStyle(arguments[0]).backgroundColor, getComputedStyle(arguments[1]).backgroundColor]",
        decisive, steps[3])
    assert colours[0] != colours[1]
    # nothing scrolls on load: the header shows the decisive step on the first screen, and its link
    # brings the step of the trajectory into view
    inside = ("const r = arguments[0].getBoundingClientRect();"
              "return [window.scrollY, r.top >= 0 && r.bottom <= window.innerHeight]")
    card = browser.find_element(By.ID, "decisive")
    assert browser.execute_script(inside, card) == [0, True]
    assert "The answer is 5 <img" in card.text and EVIL_AGENT in card.text
    assert browser.execute_script(inside, decisive)[1] is False
    card.find_element(By.CSS_SELECTOR, "a.goto").click()
    scrolled, shown = browser.execute_script(inside, decisive)
    assert scrolled > 0 and shown
    # the speaker of every step is shown
    assert [s.find_element(By.CSS_SELECTOR, ".actor").text for s in steps[:2]] == ["Planner_Expert"] * 2
    # Chinese with glyphs: drawn in the step's own font, it differs from a code point no font has
    chinese = steps[1].find_element(By.CSS_SELECTOR, ".text")
    assert CHINESE in chinese.text
    same_as_missing = browser.execute_script("""
        const style = getComputedStyle(arguments[0]);
        const draw = (text) => {
          const canvas = document.createElement('canvas'); canvas.width = 64; canvas.height = 40;
          const ctx = canvas.getContext('2d'); ctx.font = style.fontSize + ' ' + style.fontFamily;
          ctx.fillText(text, 4, 30); return canvas.toDataURL(); };
        return Array.from(arguments[1]).map((ch) => draw(ch) === draw('\\u{10FFFD}'));""", chinese, "我计算答案")
    assert same_as_missing == [False] * 5, "tofu: install a CJK font (`make browser` installs fonts-wqy-zenhei)"
    assert browser.execute_script("return typeof window.__pwned") == "undefined"
    assert browser.execute_script("return document.querySelectorAll('main img, header img').length") == 0
    csp = browser.find_element(By.CSS_SELECTOR, "meta[http-equiv='Content-Security-Policy']").get_attribute("content")
    assert "default-src 'none'" in csp and "unsafe-inline" not in csp


@needs_chromium
def test_table_sorts_filters_and_searches(built, browser) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    load(browser, page_of(built))
    visible = "return Array.from(document.querySelectorAll('#annotation-table tbody tr')).filter(r => !r.hidden)"
    total = query(built["warehouse"], "select count(*) from annotations")[0][0]
    assert len(browser.execute_script(visible)) == total
    per_system = dict(query(built["warehouse"], "select system, count(*) from annotations group by all"))
    system = max(per_system, key=per_system.get)
    Select(browser.find_element(By.ID, "filter-system")).select_by_value(system)
    rows = browser.execute_script(visible + ".map(r => r.dataset.system)")
    assert rows == [system] * per_system[system]
    per_error = dict(query(built["warehouse"], "select error_type, count(*) from annotations where system = $s "
                           "group by all", {"s": system}))
    error = min(per_error)
    Select(browser.find_element(By.ID, "filter-error")).select_by_value(error)
    assert len(browser.execute_script(visible)) == per_error[error]
    assert browser.find_element(By.ID, "table-count").text == f"{per_error[error]} of {total} annotations"
    Select(browser.find_element(By.ID, "filter-system")).select_by_value("")
    Select(browser.find_element(By.ID, "filter-error")).select_by_value("")
    # search: the words of the malicious query find its one row
    search = browser.find_element(By.ID, "table-search")
    search.send_keys("what is 2+2")
    assert browser.execute_script(visible + ".map(r => r.dataset.annotation)") == [built["evil_id"]]
    search.clear()
    search.send_keys(" ")  # an input event with no words: every row again
    assert len(browser.execute_script(visible)) == total
    # sort by error type, then the other way
    header = browser.find_elements(By.CSS_SELECTOR, "#annotation-table thead th button")[3]
    assert header.text == "error type"
    header.click()
    column = visible + ".map(r => r.dataset.error)"
    ascending = browser.execute_script(column)
    assert ascending == sorted(ascending, key=str.lower)
    header.click()
    assert browser.execute_script(column) == ascending[::-1] or browser.execute_script(column) == sorted(
        ascending, key=str.lower, reverse=True)


@needs_chromium
def test_leaderboard_shows_every_method_and_a_hostile_reason_stays_text(built, browser) -> None:
    from selenium.webdriver.common.by import By

    load(browser, page_of(built))
    labels = browser.execute_script(
        "return Array.from(document.querySelectorAll('#chart-attribution_leaderboard text')).map(t => t.textContent)")
    assert {"hostile", "baseline:response", "baseline:last_step"} <= set(labels)
    [(right,)] = query(built["warehouse"], "select agent_correct from attribution_accuracy where method = 'hostile'")
    assert right == 1  # the hostile method names the evil agent, as annotated
    open_view(browser, view_of(built, built["evil_id"]))
    [row] = browser.find_elements(By.CSS_SELECTOR, "#predictions tr[data-method='hostile']")
    assert HOSTILE_REASON in row.find_element(By.CSS_SELECTOR, "td.reason").text
    assert "right" in row.find_elements(By.CSS_SELECTOR, "td")[1].get_attribute("class")
    assert browser.execute_script("return typeof window.__pwned") == "undefined"
    hostile = "return document.querySelectorAll('#predictions img, #predictions script').length"
    assert browser.execute_script(hostile) == 0


PAGE_FIT = """
const root = document.documentElement;
const cards = Array.from(document.querySelectorAll('section.card')).map(card => {
  const inner = card.getBoundingClientRect();
  const svg = card.querySelector('.chart svg.marks');
  return [card.id, card.scrollWidth, card.clientWidth, svg ? svg.getBoundingClientRect().right - inner.right : null];
});
const wrap = document.querySelector('.table-wrap');
const lastHeader = Array.from(document.querySelectorAll('#annotation-table th')).pop().getBoundingClientRect();
return {page: [root.scrollWidth, root.clientWidth], cards: cards,
        table: [wrap.scrollWidth, wrap.clientWidth, lastHeader.right - wrap.getBoundingClientRect().right]};
"""


@needs_chromium
def test_the_page_has_no_horizontal_overflow_and_every_card_holds_its_chart(built, browser) -> None:
    """At the 1400-pixel window: no horizontal scroll on the page, no chart wider than its card, and the
    annotation table's last column (the pictures) inside its frame, not clipped or scrolled to."""
    browser.set_window_size(1400, 1000)
    load(browser, page_of(built))
    fit = browser.execute_script(PAGE_FIT)
    scroll_width, client_width = fit["page"]
    assert scroll_width == client_width, fit["page"]
    assert len(fit["cards"]) == len(browser.execute_script("return Object.keys(window.tracehouse.views)"))
    for card, scroll, client, svg_past_edge in fit["cards"]:
        assert scroll <= client, (card, scroll, client)
        assert svg_past_edge is not None and svg_past_edge <= 0, (card, svg_past_edge)
    table_scroll, table_client, last_column_past_edge = fit["table"]
    assert table_scroll <= table_client and last_column_past_edge <= 0, fit["table"]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1400, min(height + 40, 8000))
    time.sleep(0.3)
    assert browser.execute_script("return document.documentElement.scrollWidth === "
                                  "document.documentElement.clientWidth")
    browser.save_screenshot(str(ARTIFACTS / "dashboard-fit-1400.png"))
    browser.set_window_size(1400, 1000)


@needs_chromium
def test_the_table_shows_the_reason_where_a_source_records_no_prediction(built, browser) -> None:
    from selenium.webdriver.common.by import By

    load(browser, page_of(built))
    headers = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#annotation-table th")]
    assert "prediction / reason" in headers and "reason" not in headers and "prediction" not in headers
    outcomes = {row.get_attribute("data-annotation"): row.find_element(By.CSS_SELECTOR, "td.outcome").text
                for row in browser.find_elements(By.CSS_SELECTOR, "#annotation-table tbody tr")}
    # the Who&When record has a reason and no prediction: its cell is the reason, as text
    assert outcomes[built["evil_id"]] == "reason: It added wrongly " + SCRIPT
    predictions = dict(query(built["warehouse"], "select annotation_id, prediction from annotations "
                                                 "where prediction is not null and reason is null"))
    assert predictions and all(outcomes[a] == p for a, p in predictions.items() if len(p) < 120)


@needs_chromium
def test_the_leaderboard_has_a_row_per_scored_system_and_metric_and_no_empty_row(built, browser) -> None:
    load(browser, page_of(built))
    metrics = {"memory": ("faulty operation", "error type"), "multi_agent": ("responsible agent", "decisive step")}
    scored = query(built["warehouse"], "select distinct system, graph_kind from attribution_accuracy where n_cases > 0")
    expected = {f"{system} · {metric}" for system, kind in scored for metric in metrics[kind]}
    assert any(kind == "memory" for _, kind in scored) and any(kind == "multi_agent" for _, kind in scored)
    labels = set(browser.execute_script(
        "return Array.from(document.querySelectorAll('#chart-attribution_leaderboard text')).map(t => t.textContent)"))
    assert expected <= labels
    rows = browser.execute_script(
        "const out = {}; (function walk(n) { if (!n) return;"
        " if (n.marktype === 'symbol') for (const i of n.items || []) if (i.datum && i.datum.row_label)"
        "   out[i.datum.row_label] = (out[i.datum.row_label] || 0) + 1;"
        " for (const c of n.items || []) walk(c);"
        " })(window.tracehouse.views.attribution_leaderboard.scenegraph().root); return out;")
    assert set(rows) == expected and all(n >= 1 for n in rows.values()), rows


def test_the_propagation_axis_is_cut_and_the_far_failures_counted(tmp_path: Path) -> None:
    """sql/charts/propagation.sql on failure_propagation rows where almost every failure lies within 4
    edges and one lies 200 away: the axis ends at 5, the one far failure is a 'more than 5' bar."""
    import duckdb

    from pipelines.analytics import db

    con = duckdb.connect()
    try:
        hops = [0] * 30 + [1] * 30 + [2] * 20 + [3] * 10 + [4] * 5 + [200]
        con.execute("create table failure_propagation as select 'rag' as system, 'memory' as graph_kind, "
                    "'search' as phase, 'op' as faulty_op_id, 'pred' as prediction_node_id, "
                    "unnest(?::bigint[]) as hops_to_prediction, 0 as session_distance, 0 as sessions_between",
                    [hops])
        cursor = con.execute((db.SQL_DIR / "charts" / "propagation.sql").read_text())
        columns = [d[0] for d in cursor.description]
        rows = [dict(zip(columns, r, strict=True)) for r in cursor.fetchall()]
    finally:
        con.close()
    edges = [r for r in rows if r["measure"] == "edges to the prediction"]
    assert {r["axis_max"] for r in edges} == {5}
    assert {r["distance"]: r["n"] for r in edges if r["panel"] == "distance"} == {0: 30, 1: 30, 2: 20, 3: 10, 4: 5}
    assert [(r["bucket"], r["n"]) for r in edges if r["panel"] == "no distance"] == [("more than 5", 1)]
    assert sum(r["n"] for r in edges) == len(hops)
    sessions = [r for r in rows if r["measure"] == "sessions between fault and query"]
    assert {r["axis_max"] for r in sessions} == {0}  # short axes are not cut


def test_failure_modes_across_taxonomies_draws_each_taxonomy_over_the_common_categories(tmp_path: Path) -> None:
    """A real build of TRAIL-form labels (one category the crosswalk lacks) and AgentRx labels: the
    chart's spec, as the build wrote it, holds per taxonomy the counts and shares worked out here, and
    its colours are the seed's (colors.csv, dimension common_category), 'unmapped' among them."""
    from benchmark_inputs import error, trace_graph, write_agentrx

    from dashboards.palette import COMMON_CATEGORY_COLORS
    from pipelines.storage.warehouse import Warehouse

    traces, labels = tmp_path / "traces" / "agents", tmp_path / "labels"
    traces.mkdir(parents=True)
    labels.mkdir()
    spans = ["00f067aa0ba902b7", "b7ad6b7169203331", "53995c3f42cd8ad8", "1111111111111111"]
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    trace_graph(traces, trace, spans)
    (labels / "labels.json").write_text(json.dumps({"trace_id": trace, "errors": [
        error("Formatting Errors", spans[0]), error("Formatting Errors", spans[1]),
        error("Goal Deviation", spans[2]), error("Made-up Category", spans[3])]}))
    agentrx = write_agentrx(tmp_path / "agentrx")
    warehouse = tmp_path / "warehouse"
    summary = build_warehouse(warehouse, [f"smartcomment={tmp_path / 'traces'}", f"trail:trail_labels={labels}",
                                          f"agentrx={agentrx}"])
    assert not summary.failed_steps
    output = Warehouse(warehouse).committed().outputs["chart.failure_modes_across_taxonomies"]
    assert not output["empty"]
    spec = json.loads((warehouse / output["files"][0]).read_text())
    values = spec["data"]["values"]
    got = sorted((v["taxonomy"], v["common_category"], v["n"], round(v["share"], 6)) for v in values)
    assert got == sorted([
        ("trail", "output_format", 2, 0.5), ("trail", "instruction_adherence", 1, 0.25),
        ("trail", "unmapped", 1, 0.25),
        ("agentrx", "tool_invocation", 1, round(1 / 3, 6)), ("agentrx", "hallucination", 1, round(1 / 3, 6)),
        ("agentrx", "instruction_adherence", 1, round(1 / 3, 6))])
    scale = spec["encoding"]["color"]["scale"]
    assert dict(zip(scale["domain"], scale["range"], strict=True)) == {
        c: COMMON_CATEGORY_COLORS[c] for c in ("instruction_adherence", "hallucination", "tool_invocation",
                                               "output_format", "unmapped")}
    assert scale["domain"] == [c for c in COMMON_CATEGORY_COLORS if c in scale["domain"]]  # the seed's order
    assert spec["encoding"]["x"]["stack"] == "normalize"


@needs_chromium
def test_benchmark_scores_and_taxonomies_render_on_the_page(tmp_path: Path, browser) -> None:
    """A warehouse of TRAIL-labelled traces (one label the crosswalk lacks) and AgentRx trajectories with a
    method's predictions: the page renders without errors, the leaderboard has the benchmarks' own rows
    (TRAIL's without an interval), and the taxonomies chart has its 'unmapped' block."""
    from benchmark_inputs import error, trace_graph, write_agentrx, write_jsonl

    traces, labels = tmp_path / "traces" / "agents", tmp_path / "labels"
    traces.mkdir(parents=True)
    labels.mkdir()
    spans = ["00f067aa0ba902b7", "b7ad6b7169203331"]
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    trace_graph(traces, trace, spans)
    (labels / "labels.json").write_text(json.dumps({"trace_id": trace, "errors": [
        error("Formatting Errors", spans[0]), error("Made-up Category", spans[1])]}))
    sources = [f"smartcomment={tmp_path / 'traces'}", f"trail:trail_labels={labels}",
               f"agentrx={write_agentrx(tmp_path / 'agentrx')}"]
    warehouse = tmp_path / "warehouse"
    build_warehouse(warehouse, sources)
    trail_id = query(warehouse, "select annotation_id from annotations where taxonomy = 'trail' order by all")[0][0]
    root_id = query(warehouse, "select annotation_id from annotations where is_root_cause order by all")[0][0]
    preds = write_jsonl(tmp_path / "mine.jsonl", [
        {"annotation_id": trail_id, "op_id": spans[0], "error_type": "Formatting Errors"},
        {"annotation_id": root_id, "step": 3, "error_type": "Invention of New Information", "agent": "Coder"}])
    summary = build_warehouse(warehouse, [*sources, f"mine:attribution_jsonl={preds}"])
    assert summary.ok, summary.failed_steps + summary.failed_checks
    load(browser, warehouse / "dashboards" / "index.html")
    assert browser.execute_script("return window.tracehouse.errors") == []
    texts = set(browser.execute_script(
        "return Array.from(document.querySelectorAll('#chart-attribution_leaderboard text')).map(t => t.textContent)"))
    assert {"agents · TRAIL location", "agents · TRAIL category F1", "agents · TRAIL joint",
            "magentic-one · AgentRx root-cause step", "magentic-one · AgentRx failure case",
            "magentic-one · AgentRx agent", "mine"} <= texts, texts
    legend = set(browser.execute_script(
        "return Array.from(document.querySelectorAll('#chart-failure_modes_across_taxonomies text'))"
        ".map(t => t.textContent)"))
    assert {"trail", "agentrx", "unmapped", "output_format", "hallucination"} <= legend, legend
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


# -- first screens, contrast, commands ----------------------------------------------------------


@needs_chromium
def test_a_plain_screenshot_of_a_who_and_when_view_shows_its_header_and_decisive_step(built, browser,
                                                                                     tmp_path: Path) -> None:
    """`chromium --headless --screenshot` of the view, as a paper figure is made: not blank, and the
    decisive step (24 of 32, far below the header's facts) is on that first screen."""
    from selenium.webdriver.common.by import By

    view = view_of(built, built["evil_id"])
    png = screenshot(view, tmp_path / "whowhen.png", tmp_path / "profile")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "failure-view-whowhen.png").write_bytes(png.read_bytes())
    width, height, inked = inked_rows(browser, png)
    assert (width, height) == (1400, 1000) and inked > 0.3, inked
    browser.set_window_size(1400, 1000)
    open_view(browser, view)
    on_screen = browser.execute_script(
        "const h = document.documentElement.clientHeight;"
        "return [window.scrollY, ...[arguments[0], arguments[1]].map(e => e.getBoundingClientRect())"
        ".map(r => r.top >= 0 && r.bottom <= h)]",
        browser.find_element(By.CSS_SELECTOR, "header.failure h1"), browser.find_element(By.ID, "decisive"))
    assert on_screen == [0, True, True]


CONFUSION_CELLS = """
const view = window.tracehouse.views.attribution_confusion, shade = view.scale('color'), texts = [];
(function walk(node) {
  if (!node) return;
  for (const item of node.items || []) {
    const d = item.datum;
    if (node.marktype === "text" && d && d.sum_n !== undefined) texts.push([shade(d.sum_n), item.fill || "#000000"]);
    walk(item);
  }
})(view.scenegraph().root);
return texts;
"""


def luminance(colour: str) -> float:
    """WCAG relative luminance of '#rrggbb', 'rgb(r, g, b)' or a name Vega writes (white, black)."""
    colour = {"white": "#ffffff", "black": "#000000"}.get(colour.strip().lower(), colour.strip())
    if colour.startswith("rgb"):
        channels = [int(float(c)) for c in re.findall(r"[\d.]+", colour)[:3]]
    else:
        channels = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    linear = [(c / 255) / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


@needs_chromium
def test_counts_on_the_confusion_matrix_contrast_with_their_cells(built, browser) -> None:
    """Every count printed on a cell of the error-type confusion matrix reads against the cell's
    colour (WCAG contrast ratio at least 3, the bar for bold or large text): white on the dark cells."""
    load(browser, page_of(built))
    cells = browser.execute_script(CONFUSION_CELLS)
    assert cells and all(cell is not None for cell, _ in cells)
    ratios = []
    for cell, text in cells:
        lighter, darker = sorted((luminance(cell), luminance(text)), reverse=True)
        ratios.append((lighter + 0.05) / (darker + 0.05))
    assert min(ratios) >= 3, sorted(zip(ratios, cells, strict=True))[:3]
    assert any(luminance(text) > 0.9 for _, text in cells)  # some dark cells, written in white


SHOW_TOKENS = """
const cut = [];
for (const code of document.querySelectorAll('#annotation-table td.pic code')) {
  const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
  for (let text = walker.nextNode(); text; text = walker.nextNode()) {
    let start = 0;
    for (const token of text.textContent.split(' ')) {
      const range = document.createRange();
      range.setStart(text, start); range.setEnd(text, start + token.length);
      const lines = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));
      if (lines.size > 1) cut.push(token);
      start += token.length + 1;
    }
  }
}
return cut;
"""


@needs_chromium
def test_tracehouse_show_commands_break_only_at_spaces(built, browser) -> None:
    """A `tracehouse show` command in the table wraps between its words, never inside one (the
    annotation id stays whole, to be copied), and the table still fits its frame."""
    browser.set_window_size(1400, 1000)
    load(browser, page_of(built))
    assert browser.execute_script("return document.querySelectorAll('#annotation-table td.pic code').length") > 0
    assert browser.execute_script(SHOW_TOKENS) == []
    fit = browser.execute_script(PAGE_FIT)
    assert fit["table"][0] <= fit["table"][1] and fit["table"][2] <= 0, fit["table"]
