"""Headless Chromium from Debian's packages, driven by Selenium through chromedriver.

`make test` installs `chromium` and `chromium-driver` when they are missing (like the
PostgreSQL binaries). Nothing is downloaded at run time: the driver's path is given to
Selenium, so Selenium Manager never runs, and the browser starts with its background
networking, component updates and sync turned off, in a fresh profile.
"""

from __future__ import annotations

import base64
import io
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# These work as root on this machine; the profile is fresh for every browser.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
)

# Collects every long task (main thread busy over 50 ms) from the document's first moment.
LONG_TASK_OBSERVER = """
window.__longTasks = [];
window.__longTaskObserver = new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    window.__longTasks.push({start: entry.startTime, duration: entry.duration});
  }
});
window.__longTaskObserver.observe({type: 'longtask', buffered: true});
"""
# Entries the observer holds but has not delivered yet (its callback runs as a later task).
TAKE_LONG_TASKS = """
const observer = window.__longTaskObserver;
if (!observer) return null;
for (const entry of observer.takeRecords()) {
  window.__longTasks.push({start: entry.startTime, duration: entry.duration});
}
return window.__longTasks;
"""


def missing() -> str | None:
    """What is missing for the browser tests, or None."""
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not path.exists():
            return f"{path} is missing: `make test` installs Debian's {package}"
    return None


@contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator[Any]:
    """A headless Chromium WebDriver with browser and performance (network) logs on."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="orchestrator-report-chromium-")
    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={width},{height}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    service = Service(executable_path=str(CHROMEDRIVER))  # Selenium Manager is never asked
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def observe_long_tasks(driver: Any) -> None:
    """Install the long-task observer in every document the driver opens next."""
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": LONG_TASK_OBSERVER})


def long_tasks(driver: Any) -> list[dict[str, float]]:
    """Every long task of the current document so far (the observer must be installed)."""
    tasks = driver.execute_script(TAKE_LONG_TASKS)
    if tasks is None:
        raise AssertionError("no long-task observer in this document (observe_long_tasks)")
    return list(tasks)


def wait_for_long_task(
    driver: Any, at_least_ms: float, *, frames: int = 120
) -> list[dict[str, float]]:
    """The long tasks so far, once one of at least ``at_least_ms`` has been reported.

    A long task is reported after it ends, and its entry reaches the observer in a later
    task: under load that can take a few frames, so keep rendering frames (at most
    ``frames`` pairs) until it arrives rather than reading once.
    """
    for _ in range(frames):
        tasks = long_tasks(driver)
        if any(task["duration"] >= at_least_ms for task in tasks):
            return tasks
        driver.execute_async_script(
            "requestAnimationFrame(() => requestAnimationFrame(arguments[0]))"
        )
    raise AssertionError(f"no long task of {at_least_ms:g} ms reported: {long_tasks(driver)}")


def network_requests(driver: Any) -> list[str]:
    """URLs of every request the pages made since the last call (CDP Network events)."""
    import json

    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def console_errors(driver: Any) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def scroll_through(driver: Any, steps: int = 40) -> None:
    """Scroll from top to bottom in steps, each after two rendered frames."""
    driver.execute_async_script(
        """
        const [steps, done] = arguments;
        const frame = () => new Promise(
          (r) => requestAnimationFrame(() => requestAnimationFrame(r)));
        (async () => {
          for (let i = 1; i <= steps; i++) {
            window.scrollTo(0, document.documentElement.scrollHeight * i / steps);
            await frame();
          }
          await frame();
          done(true);
        })();
        """,
        steps,
    )


def screenshot(driver: Any, path: Path) -> bytes:
    data = base64.b64decode(driver.get_screenshot_as_base64())
    path.write_bytes(data)
    return data


def pixel_variance(png: bytes) -> float:
    """Variance of the greyscale pixels: 0 for a blank (single-colour) picture."""
    from PIL import Image, ImageStat

    with Image.open(io.BytesIO(png)) as image:
        return float(ImageStat.Stat(image.convert("L")).var[0])


def full_page_screenshot(driver: Any) -> bytes:
    """The whole page as one PNG: the viewport is made as tall as the page first, since
    parts drawn only near the viewport (content-visibility) stay blank beyond it."""
    scroll_through(driver, steps=10)  # draw every part once, so the page has its real height
    width = driver.execute_script("return document.documentElement.clientWidth")
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )
    try:
        driver.execute_script("window.scrollTo(0, 0)")
        driver.execute_async_script(
            "requestAnimationFrame(() => requestAnimationFrame(arguments[0]))"
        )
        return base64.b64decode(driver.get_screenshot_as_base64())
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
