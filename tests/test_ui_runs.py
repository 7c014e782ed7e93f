"""The Dagster UI of a warehouse lists its builds' runs: two builds, then `tracehouse ui` and its Runs
page in headless Chromium (the real webserver, reading the warehouse's own instance)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import orjson
import pytest
from browser import chromium as headless_chromium
from conftest import REPO, build_warehouse, wait_for_ui
from smartcomment_graphs import make_graph, write_memtracebench

CLI = [sys.executable, "-m", "pipelines.interfaces.cli"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture()
def chromium(tmp_path: Path):
    """Headless Chromium that may reach 127.0.0.1 (the dashboard tests' browser reaches nothing)."""
    with headless_chromium(tmp_path / "profile", offline=False) as driver:
        yield driver


@pytest.fixture()
def two_builds(tmp_path: Path) -> dict:
    corpus, warehouse = tmp_path / "corpus", tmp_path / "w"
    write_memtracebench(corpus, {"rag": 2, "mem0": 2})
    first = build_warehouse(warehouse, [f"memtracebench={corpus}"])
    (corpus / "rag" / "locomo_locomo-9.json").write_bytes(
        orjson.dumps(make_graph("graph-new-0009", "locomo-9", "NaiveRAG", seed=9, queries=2)))
    second = build_warehouse(warehouse, [f"memtracebench={corpus}"])
    assert first.committed and second.committed and second.partitions_built == ["memtracebench__rag"]
    return {"warehouse": warehouse}


def test_the_runs_page_lists_every_build(two_builds: dict, chromium) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    port = _free_port()
    proc = subprocess.Popen([*CLI, "ui", "--warehouse", str(two_builds["warehouse"]), "--port", str(port)],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_ui(proc, port, 180)
        chromium.get(f"http://127.0.0.1:{port}/runs")

        def listed(driver) -> str | bool:
            text = driver.find_element("tag name", "body").text
            return text if text.count("tracehouse_build") >= 2 else False

        text = WebDriverWait(chromium, 120, poll_frequency=1).until(listed)
        assert text.count("tracehouse_build") == 2  # one run per build
        assert "Success" in text and "Failure" not in text
        # the UI's first start asks nothing of the user: Dagster's community dialog is off (dagster.yaml's nux)
        request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=b'{"query": "{ shouldShowNux }"}',
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            assert json.loads(response.read()) == {"data": {"shouldShowNux": False}}
        assert "Join the Dagster community" not in chromium.find_element("tag name", "body").text
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
