"""The web console in a real browser: Debian's chromium driven by selenium, headless. It logs
in, runs and pages a query, explains, shows an error, opens an array slice and checks the
rendered image's pixels against the array, reads a cell under the cursor, plots a stream
and browses documents. Screenshots go to build/test-artefacts/console/ (issue 22)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from .conftest import Served

ARTEFACTS = Path(__file__).resolve().parents[2] / "build" / "test-artefacts" / "console"


def _browser_missing() -> str | None:
    for program in ("chromium", "chromedriver"):
        if shutil.which(program) is None:
            return f"{program} is not installed (scripts/install-servers.sh installs it)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (the dev extra has it)"
    return None


missing = _browser_missing()
if missing and os.environ.get("TESSERA_REQUIRE_SERVERS"):
    raise RuntimeError(missing)
pytestmark = pytest.mark.skipif(missing is not None, reason=missing or "")


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path / 'chromium'}",
    ):
        options.add_argument(argument)
    options.binary_location = str(shutil.which("chromium"))
    driver = webdriver.Chrome(service=Service(str(shutil.which("chromedriver"))), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def _shot(driver: Any, name: str) -> None:
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTEFACTS / f"{name}.png"))


def _wait(driver: Any, condition: Any, seconds: float = 20) -> Any:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # (an element read while the page redraws it is stale: read it again)
    return WebDriverWait(
        driver, seconds, ignored_exceptions=[StaleElementReferenceException]
    ).until(condition)


IMAGE_STATS = """
const img = arguments[0];
const canvas = document.createElement('canvas');
canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
const ctx = canvas.getContext('2d');
ctx.drawImage(img, 0, 0);
const data = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
let sum = 0, opaque = 0;
for (let i = 0; i < data.length; i += 4) { sum += data[i]; opaque += data[i + 3] === 255; }
return [canvas.width, canvas.height, sum / (data.length / 4), opaque];
"""


def test_the_console_logs_in_queries_pages_and_shows_an_array(
    served: Served, tokens: dict[str, str], browser: Any
) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    driver = browser
    find = driver.find_element
    driver.get(served.url + "/")
    _shot(driver, "01-login")
    find(By.ID, "token").send_keys("tdb_wrong")
    find(By.ID, "sign-in").click()
    _wait(driver, lambda d: d.find_element(By.ID, "login-error").is_displayed())
    assert "not known" in find(By.ID, "login-error").text
    find(By.ID, "token").clear()
    find(By.ID, "token").send_keys(tokens["reader"])
    find(By.ID, "sign-in").click()
    _wait(driver, lambda d: d.find_element(By.ID, "app").is_displayed())
    _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#catalog a[data-name='img']"))
    assert find(By.ID, "whoami").text == "reader"

    # a query, paged
    editor = find(By.ID, "sql-editor")
    editor.clear()
    editor.send_keys("SELECT i, f FROM plain ORDER BY i")
    page_size = find(By.ID, "page-size")
    page_size.clear()
    page_size.send_keys("25")
    find(By.ID, "run").click()
    _wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#result-grid tr")) == 26)
    first = lambda d: d.find_element(By.CSS_SELECTOR, "#result-grid tr:nth-child(2) td").text  # noqa: E731
    assert first(driver) == "0"
    find(By.ID, "next-page").click()
    _wait(driver, lambda d: first(d) == "25")
    assert "rows 26-50" in find(By.ID, "page-info").text
    _shot(driver, "02-sql")
    find(By.ID, "explain").click()
    _wait(driver, lambda d: d.find_element(By.ID, "plan").is_displayed())
    assert "relation plain" in find(By.ID, "plan").text or "plain" in find(By.ID, "plan").text

    # an error is shown, and the console stays usable
    editor.clear()
    editor.send_keys("SELECT * FROM nosuch")
    find(By.ID, "run").click()
    _wait(driver, lambda d: d.find_element(By.ID, "error").is_displayed())
    assert "nosuch" in find(By.ID, "error").text

    # the array viewer: the rendered slice's pixels are the array's values
    find(By.CSS_SELECTOR, "#catalog a[data-name='img']").click()
    _wait(driver, lambda d: "img (array)" in d.find_element(By.ID, "object-detail").text)
    _shot(driver, "03-object")
    find(By.XPATH, "//button[text()='Open in the array viewer']").click()
    image = find(By.ID, "array-image")
    _wait(driver, lambda d: d.execute_script("return arguments[0].naturalWidth", image) > 0)
    width, height, mean_red, opaque = driver.execute_script(IMAGE_STATS, image)
    values = served.db.array("img")[0:64, 0:48]["v"].astype(float)
    expected = (values - values.min()) / (values.max() - values.min()) * 255
    assert (width, height) == (48, 64)
    assert opaque == 48 * 64
    assert abs(mean_red - np.rint(expected).mean()) < 1.0
    ActionChains(driver).move_to_element_with_offset(image, 10, 10).perform()
    _wait(driver, lambda d: "v=" in d.find_element(By.ID, "cell-value").text)
    _shot(driver, "04-array")

    # a stream plot and the documents
    find(By.CSS_SELECTOR, "#catalog a[data-name='readings']").click()
    _wait(driver, lambda d: "readings (stream)" in d.find_element(By.ID, "object-detail").text)
    find(By.XPATH, "//button[text()='Plot']").click()
    plot = find(By.ID, "stream-image")
    _wait(driver, lambda d: d.execute_script("return arguments[0].naturalWidth", plot) == 800)
    _shot(driver, "05-stream")
    find(By.CSS_SELECTOR, "#catalog a[data-name='docs']").click()
    _wait(driver, lambda d: "docs (collection)" in d.find_element(By.ID, "object-detail").text)
    find(By.XPATH, "//button[text()='Browse documents']").click()
    _wait(driver, lambda d: "doc 0" in d.find_element(By.ID, "documents").text)
    find(By.ID, "argo-run").click()
    _wait(driver, lambda d: "rows" in d.find_element(By.ID, "argo-result").text)
    _shot(driver, "06-documents")
