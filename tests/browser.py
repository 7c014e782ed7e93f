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
