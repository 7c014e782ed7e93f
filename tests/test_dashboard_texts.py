"""The dashboard says what the warehouse holds: what the build rejected, card texts and hidden cards'
reasons computed from the loaded data (not written for one kind of source), legends that fit their
card with neighbouring colours told apart, and a failure view whose plain screenshot shows its
header and decisive step. Real builds (Dagster, DuckDB, Parquet) of AgentRx-form trajectories and of
an unlabelled trace, the page in headless Chromium."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from browser import chromium, have_chromium, inked_rows, open_page, screenshot
from conftest import build_warehouse, query

# AgentRx's ten failure cases, and a spelling variant of one (counted once, by its canonical spelling)
CATEGORIES = ["Instruction/Plan Adherence Failure", "Invention of New Information", "Invalid Invocation",
              "Misinterpretation of Tool Output", "Intent-Plan Misalignment", "Underspecified User Intent",
              "Intent Not Supported", "Guardrails Triggered", "System Failure", "Inconclusive",
              "Intent not supported"]
ROLES = ["human", "Orchestrator (thought)", "WebSurfer", "Orchestrator (-> Coder)", "Coder", "FileSurfer"]
STEPS = 40
DECISIVE = 33  # AgentRx counts from 1: step 32 of the view, far below its header
BROKEN = {"broken-1.json": "{not json", "broken-2.json": "", "broken-3.json": "[1, 2"}

needs_chromium = pytest.mark.skipif(not have_chromium(), reason="needs Debian's chromium and chromium-driver "
                                    "(`make browser` installs them)")


def write_agentrx(root: Path) -> Path:
    """One Magentic-One trajectory of STEPS long messages per category, its failure at step DECISIVE
    (the last category's label is a spelling variant), and BROKEN trajectory files that cannot load."""
    (root / "ground_truth").mkdir(parents=True)
    (root / "magentic_dataset").mkdir()
    labels = []
    for k, category in enumerate(CATEGORIES):
        tid = f"traj-{k:02d}"
        messages = [{"role": ROLES[i % len(ROLES)],
                     "content": f"message {i} of {tid}: " + "the agent works on the task and reports back. " * 8}
                    for i in range(STEPS)]
        (root / "magentic_dataset" / f"{tid}.json").write_text(json.dumps(messages))
        agent = ROLES[(DECISIVE - 1) % len(ROLES)]
        labels.append({"trajectory_id": tid, "failure_summary": f"{tid} failed",
                       "failures": [{"failure_id": 1, "step_number": DECISIVE, "step_reason": "it went wrong",
                                     "failure_category": category, "category_reason": "because",
                                     "failed_agent": agent}],
                       "root_cause": {"failure_id": 1, "reason_for_root_cause": "only one"}})
    (root / "ground_truth" / "magentic_one_ground_truth.json").write_text(json.dumps(labels))
    for name, text in BROKEN.items():
        (root / "magentic_dataset" / name).write_text(text)
    return root


@pytest.fixture(scope="module")
def agentrx_built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("agentrx-page")
    warehouse = root / "warehouse"
    summary = build_warehouse(warehouse, [f"agentrx={write_agentrx(root / 'agentrx')}"])
    assert not summary.failed_steps and not summary.failed_checks, summary.failed_steps + summary.failed_checks
    return warehouse


def page_text(warehouse: Path) -> str:
    """The page's words as a reader sees them (tags and scripts removed, entities decoded)."""
    page = (warehouse / "dashboards" / "index.html").read_text()
    page = re.sub(r"<script\b.*?</script>", " ", page, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_the_page_names_the_files_the_build_rejected(agentrx_built: Path) -> None:
    [(files, rejected)] = query(agentrx_built, "select count(distinct file), count(*) from ingest_errors "
                                               "where rejected")
    assert files == len(BROKEN) and rejected == files  # each broken file is one rejection
    text = page_text(agentrx_built)
    assert f"Rejected at ingest: {files} files did not load" in text
    assert 'List them: tracehouse sql "from ingest_errors" --warehouse ' in text


def test_card_texts_fit_an_agentrx_warehouse(agentrx_built: Path) -> None:
    """AgentRx labels every failure with an error type: no card says a source publishes none, and no
    text names sources the warehouse does not hold."""
    from pipelines.storage.warehouse import Warehouse

    outputs = Warehouse(agentrx_built).committed().outputs
    assert not outputs["chart.error_mix"]["empty"] and not outputs["chart.failure_modes_across_taxonomies"]["empty"]
    text = page_text(agentrx_built)
    for wrong in ("publish no error type", "publishes no error type", "Who&When", "TracerTraj", "(none)"):
        assert wrong not in text, wrong
    # the one chart hidden for its rows says so with the systems loaded
    assert outputs["chart.failure_rate_heatmap"]["empty"].startswith("None of the loaded systems (magentic-one)")


def test_hidden_cards_of_a_warehouse_without_failures_name_no_source_it_lacks(tmp_path: Path) -> None:
    """A trace and no label: every chart about failures is hidden for that one reason, computed from the
    warehouse, and no reason names Who&When, TracerTraj or MemTraceBench."""
    from benchmark_inputs import trace_graph

    from dashboards import CHARTS
    from pipelines.storage.warehouse import Warehouse

    traces = tmp_path / "traces" / "agents"
    traces.mkdir(parents=True)
    trace_graph(traces, "4bf92f3577b34da6a3ce929d0e0e4736", ["00f067aa0ba902b7", "b7ad6b7169203331"])
    warehouse = tmp_path / "warehouse"
    summary = build_warehouse(warehouse, [f"smartcomment={tmp_path / 'traces'}"])
    assert summary.ok, summary.failed_steps + summary.failed_checks
    text = page_text(warehouse)
    outputs = Warehouse(warehouse).committed().outputs
    about_failures = [name for name in CHARTS if name != "corpus_overview"]
    assert all(outputs[f"chart.{name}"]["empty"] for name in about_failures)
    reason = "is hidden: No failure annotation is loaded (the warehouse holds 1 graph and no failure label)."
    assert text.count(reason) == len(about_failures) == text.count(" is hidden: ")
    for source in ("Who&When", "TracerTraj", "MemTraceBench"):
        assert source not in text.split("Failure annotations")[0], source
    assert "Nothing was rejected at ingest." in text


# -- in the browser -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    with chromium(tmp_path_factory.mktemp("chromium-profile"), logs={"browser": "ALL"}) as driver:
        yield driver


LEGEND = """
const card = document.getElementById('chart-error_mix');
const labels = Array.from(card.querySelectorAll('.role-legend-label text')).map(t => t.textContent);
const fills = Array.from(card.querySelectorAll('.role-legend-symbol path')).map(p => p.getAttribute('fill'));
return labels.map((label, k) => [label, fills[k]]);
"""


@needs_chromium
def test_the_error_type_legend_fits_its_card_with_distinct_neighbours(agentrx_built: Path, browser) -> None:
    """Eleven spellings of ten AgentRx categories: one legend entry per canonical category, every label
    whole (Vega cuts a label too long for its limit with '…'), the chart inside its card, and each
    legend colour far from its neighbours' (CIE Lab distance at least 20)."""
    from dashboards.palette import DISTINCT_LAB, colour_distance

    browser.set_window_size(1400, 1000)
    open_page(browser, agentrx_built / "dashboards" / "index.html", "rendered", "the page did not render", 60)
    assert browser.execute_script("return window.tracehouse.errors") == []
    entries = browser.execute_script(LEGEND)
    labels = [label for label, _ in entries]
    canonical = {c for (c,) in query(agentrx_built, "select distinct error_type from failure_modes_by_system")}
    assert set(labels) == canonical and len(labels) == len(set(labels)) >= 10, labels
    cut = browser.execute_script(
        "return Array.from(document.querySelectorAll('.chart text')).map(t => t.textContent)"
        ".filter(t => t.endsWith('…'))")
    assert cut == []
    colours = [fill for _, fill in entries]
    assert len(set(colours)) == len(colours)
    for a, b in zip(colours, colours[1:], strict=False):
        assert colour_distance(a, b) >= DISTINCT_LAB, (a, b)
    overflow = browser.execute_script(
        "const card = document.getElementById('card-error_mix'), svg = card.querySelector('svg.marks');"
        "return [card.scrollWidth - card.clientWidth,"
        " svg.getBoundingClientRect().right - card.getBoundingClientRect().right]")
    assert overflow[0] <= 0 and overflow[1] <= 0, overflow


@needs_chromium
def test_a_plain_screenshot_of_an_agentrx_view_shows_its_header_and_decisive_step(agentrx_built: Path, browser,
                                                                                   tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    from pipelines.storage.warehouse import Warehouse

    [(annotation_id,)] = query(agentrx_built, "select annotation_id from annotations "
                                              "where graph_id = 'agentrx:gaia/traj-00' or graph_id like '%traj-00'")
    entry = Warehouse(agentrx_built).committed().outputs["drilldown"]["pictures"][annotation_id]
    view = agentrx_built / entry["view"]
    png = screenshot(view, tmp_path / "agentrx.png", tmp_path / "profile")
    width, height, inked = inked_rows(browser, png)
    assert (width, height) == (1400, 1000) and inked > 0.3, inked
    browser.set_window_size(1400, 1000)
    open_page(browser, view, "ready", "the failure view did not load", 30)
    card = browser.find_element(By.ID, "decisive")
    assert f"message {DECISIVE - 1} of traj-00" in card.text
    on_screen = browser.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "return [window.scrollY, r.top >= 0 && r.bottom <= document.documentElement.clientHeight]", card)
    assert on_screen == [0, True]
    step = browser.find_element(By.ID, f"step-{DECISIVE - 1}")
    assert browser.execute_script("return arguments[0].getBoundingClientRect().top", step) > 1000
