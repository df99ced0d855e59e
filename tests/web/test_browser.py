"""The console in a real browser: Debian's headless Chromium, driven by Selenium.

Against ``loopctl-memory serve`` in a process of its own: search, open a
memory, edit it and see the change in its history, delete it, preview a
consolidation and run it. A screenshot and the page's HTML are kept under
``$BROWSER_ARTIFACTS`` (default ``.artifacts/browser``) when a step fails.
``.ci/run`` installs Chromium and its driver; elsewhere the test is skipped
when they are missing (under ``CI=true`` it fails instead).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as shown
from selenium.webdriver.support.ui import WebDriverWait

from loopctl_memory import MemoryCategory, MemoryEntry, open_store

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
ARTIFACTS = Path(os.environ.get("BROWSER_ARTIFACTS", ".artifacts/browser"))

if not (CHROMIUM and DRIVER):
    if os.environ.get("CI") == "true":
        raise RuntimeError(
            "CI runs the browser test: .ci/run installs chromium and chromium-driver"
        )
    pytest.skip(
        "no chromium and chromedriver here (.ci/run installs them)", allow_module_level=True
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def _fill(database: Path) -> None:
    async with open_store(database) as store:
        await store.store_many(
            [
                MemoryEntry(MemoryCategory.FACT, "the cache lives in redis", tags=["ops"]),
                MemoryEntry(MemoryCategory.FACT, "an old note nobody reads", relevance=0.01),
                MemoryEntry(MemoryCategory.INSIGHT, "tests run in ci before a merge"),
            ]
        )


@pytest.fixture
def console(tmp_path: Path) -> Iterator[str]:
    """The URL of a served store holding three memories."""
    database = tmp_path / "memory.db"
    asyncio.run(_fill(database))
    port = _free_port()
    serve = ["serve", "--port", str(port)]
    server = subprocess.Popen(
        [sys.executable, "-m", "loopctl_memory", "--db", str(database), *serve],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        assert "Serving" in server.stderr.readline()
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.terminate()
        server.communicate(timeout=30)


@pytest.fixture
def browser(request: pytest.FixtureRequest) -> Iterator[webdriver.Chrome]:
    options = Options()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(argument)
    options.add_argument("--window-size=1280,900")
    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium fetch a driver
    driver = webdriver.Chrome(service=Service(executable_path=str(DRIVER)), options=options)
    try:
        yield driver
    finally:
        report = getattr(request.node, "failed_call", None)
        if report is None or report:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            name = request.node.name
            driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))
            (ARTIFACTS / f"{name}.html").write_text(driver.page_source, encoding="utf-8")
        driver.quit()


def _rows(driver: webdriver.Chrome) -> list[str]:
    return [row.text for row in driver.find_elements(By.CSS_SELECTOR, "#results tbody tr")]


def test_a_person_searches_edits_deletes_and_consolidates(console, browser):
    # A table is drawn again after each answer: a row read meanwhile is read again.
    wait = WebDriverWait(browser, 15, ignored_exceptions=(StaleElementReferenceException,))
    browser.get(console)
    wait.until(lambda driver: len(_rows(driver)) == 3)
    assert "(root) · 3" in browser.find_element(By.ID, "scopes").text

    query = browser.find_element(By.ID, "query")
    query.send_keys("cache")
    browser.find_element(By.CSS_SELECTOR, "#search button[type=submit]").click()
    wait.until(lambda driver: len(_rows(driver)) == 1)
    assert "the cache lives in redis" in _rows(browser)[0]

    browser.find_element(By.CSS_SELECTOR, "#results tbody tr").click()
    wait.until(shown.visibility_of_element_located((By.ID, "detail")))
    text = browser.find_element(By.ID, "edit-memory")
    text.clear()
    text.send_keys("the cache lives in valkey")
    browser.find_element(By.ID, "save").click()
    wait.until(shown.text_to_be_present_in_element((By.ID, "history"), "updated"))
    history = browser.find_element(By.ID, "history").text
    assert "valkey" in history
    assert "redis" in history

    browser.find_element(By.ID, "delete").click()
    browser.switch_to.alert.accept()
    wait.until(shown.text_to_be_present_in_element((By.ID, "history"), "deleted"))
    assert "This memory is gone" in browser.find_element(By.ID, "status").text

    browser.find_element(By.ID, "back").click()
    wait.until(lambda driver: len(_rows(driver)) == 0 or "Nothing" in driver.page_source)
    browser.find_element(By.ID, "query").clear()
    browser.find_element(By.CSS_SELECTOR, "#search button[type=submit]").click()
    wait.until(lambda driver: len(_rows(driver)) == 2)

    browser.find_element(By.ID, "preview-consolidation").click()
    wait.until(shown.visibility_of_element_located((By.ID, "consolidation")))
    preview = browser.find_element(By.ID, "consolidation").text
    assert "1 pruned" in preview
    assert "an old note nobody reads" in preview
    assert "below the floor" in preview
    browser.find_element(By.ID, "run-consolidation").click()
    try:
        wait.until(lambda driver: len(_rows(driver)) == 1)
    except TimeoutException:
        pytest.fail(f"after the consolidation the list shows {_rows(browser)}")
    assert "tests run in ci" in _rows(browser)[0]
