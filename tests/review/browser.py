"""Headless Chromium from Debian's packages (``chromium``, ``chromium-driver``), driven by Selenium; no browser
download. ``.ci/run`` installs both."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from monitor.runtime.broker import free_port

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def chromium() -> object:
    if not (Path(CHROMIUM).exists() and Path(DRIVER).exists()):
        pytest.fail("Debian's chromium and chromium-driver are needed (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,900"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(DRIVER), options=options)


def wait_for(browser: object, element_id: str, timeout: float = 20.0) -> object:
    """The element once the page that has it is loaded (a form POST returns before the next page renders)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(browser, timeout).until(  # type: ignore[arg-type]
            expected_conditions.presence_of_element_located((By.ID, element_id)))
    except Exception as exc:
        raise AssertionError(f"no #{element_id} on {browser.current_url}:\n"  # type: ignore[attr-defined]
                             f"{browser.page_source[:3000]}") from exc  # type: ignore[attr-defined]


@contextmanager
def review_page(env: dict[str, str]) -> Iterator[str]:
    """`convmon ui` as a process on a free port; yields its base URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    full = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")}
    full.update(env, CONVMON_UI_PORT=str(port), CONVMON_UI_URL=base)
    process = subprocess.Popen([sys.executable, "-m", "monitor.cli", "ui"], env=full, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/flagged", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"convmon ui did not start: {process.stdout.read() if process.stdout else ''}")
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)
