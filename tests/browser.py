"""Headless Chromium for the tests that look at pages: Debian's chromium and chromium-driver
(`make browser` installs them), one way of starting it and of waiting for a page."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


def have_chromium() -> bool:
    return CHROMIUM.is_file() and CHROMEDRIVER.is_file()


@contextmanager
def chromium(profile: Path, *, offline: bool = True, window: str = "1400,1000",
             logs: dict[str, str] | None = None) -> Iterator[Any]:
    """A headless Chromium with its own profile folder (removed after). ``offline``: every request
    but loopback goes to a dead proxy (a page must need no network); ``logs``: the logging
    preferences (e.g. {"browser": "ALL"}) the test reads back."""
    if not have_chromium():
        pytest.skip("needs /usr/bin/chromium and /usr/bin/chromedriver (`make browser` installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(CHROMIUM)
    network = (["--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>"] if offline
               else ["--no-proxy-server"])
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", f"--user-data-dir={profile}",
                 f"--window-size={window}", *network):
        options.add_argument(flag)
    if logs:
        options.set_capability("goog:loggingPrefs", logs)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def open_page(driver: Any, path: Path, flag: str, what: str, timeout: float) -> None:
    """Open the file at ``path`` and wait until the page sets ``document.body.dataset[flag]``."""
    driver.get(path.as_uri())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if driver.execute_script(f"return document.body && document.body.dataset.{flag}"):
            return
        time.sleep(0.1)
    raise AssertionError(what)


def screenshot(page: Path, out: Path, profile: Path, window: str = "1400,1000") -> Path:
    """A plain ``chromium --headless --screenshot`` of a file, as researchers make paper figures: no
    driver, no script of ours, the page's first screen as it loads."""
    import subprocess

    if not CHROMIUM.is_file():
        pytest.skip("needs /usr/bin/chromium (`make browser` installs it)")
    done = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", f"--user-data-dir={profile}", f"--screenshot={out}",
         f"--window-size={window}", page.as_uri()],
        capture_output=True, text=True, timeout=120)
    shutil.rmtree(profile, ignore_errors=True)
    assert out.is_file(), f"chromium wrote no screenshot (exit {done.returncode}): {done.stderr[-2000:]}"
    return out


INKED_ROWS = """
const [data, tolerance, done] = arguments;
const image = new Image();
image.onload = () => {
  const canvas = document.createElement("canvas");
  canvas.width = image.width; canvas.height = image.height;
  const context = canvas.getContext("2d");
  context.drawImage(image, 0, 0);
  const pixels = context.getImageData(0, 0, image.width, image.height).data;
  const counts = new Map();  // the background: the most common colour
  for (let i = 0; i < pixels.length; i += 4 * 7) {
    const key = (pixels[i] << 16) | (pixels[i + 1] << 8) | pixels[i + 2];
    counts.set(key, (counts.get(key) || 0) + 1);
  }
  const background = [...counts.entries()].sort((a, b) => b[1] - a[1])[0][0];
  const bg = [(background >> 16) & 255, (background >> 8) & 255, background & 255];
  let inked = 0;
  for (let y = 0; y < image.height; y++) {
    for (let x = 0; x < image.width; x++) {
      const i = 4 * (y * image.width + x);
      if (Math.abs(pixels[i] - bg[0]) > tolerance || Math.abs(pixels[i + 1] - bg[1]) > tolerance
          || Math.abs(pixels[i + 2] - bg[2]) > tolerance) { inked += 1; break; }
    }
  }
  done([image.width, image.height, inked / image.height]);
};
image.onerror = () => done(null);
image.src = "data:image/png;base64," + data;
"""


def inked_rows(driver: Any, png: Path, tolerance: int = 24) -> tuple[int, int, float]:
    """The picture's width, height and share of its pixel rows holding anything but the background
    (its most common colour): 0 for a blank screenshot. The browser decodes the PNG (a data: URL, so
    the canvas may read it back)."""
    import base64

    driver.get("about:blank")
    driver.set_script_timeout(60)
    found = driver.execute_async_script(INKED_ROWS, base64.b64encode(png.read_bytes()).decode(), tolerance)
    assert found is not None, f"{png} is no PNG the browser can decode"
    width, height, share = found
    return int(width), int(height), float(share)


needs_chromium = pytest.mark.skipif(
    not have_chromium(),
    reason="needs Debian's chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver); "
    "`make browser` installs them",
)


def load(driver: Any, path: Path, timeout: float = 60) -> None:
    """Open a dashboard page and wait until every chart is embedded (the page sets data-rendered)."""
    open_page(driver, path, "rendered", "the dashboard did not finish rendering", timeout)


def open_view(driver: Any, path: Path, timeout: float = 30) -> None:
    """Open a failure view and wait until it is laid out (the view sets data-ready)."""
    open_page(driver, path, "ready", f"the failure view {path.name} did not load", timeout)
