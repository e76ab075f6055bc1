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

# Tasks of the renderer's main thread come from Chromium's own trace (the devtools timeline),
# not from a script in the page: a page observer misses the task it is installed in, which
# is the page's first and often its longest.
TRACE_CATEGORIES = "toplevel,devtools.timeline,disabled-by-default-devtools.timeline"
LONG_TASK_MS = 50.0  # the Long Tasks API's threshold
MAIN_THREAD = "CrRendererMain"


class PerformanceLog:
    """chromedriver's performance log, read once and kept: network requests and the
    renderer main thread's tasks since the last ``forget``."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.tasks: list[dict[str, float]] = []
        self.thread_names: dict[tuple[int, int], str] = {}
        self._pending: list[dict[str, Any]] = []

    def read(self, driver: Any) -> None:
        import json

        for entry in driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            method = message.get("method")
            params = message.get("params", {})
            if method == "Network.requestWillBeSent":
                self.requests.append(params["request"]["url"])
            elif method == "Tracing.dataCollected":
                if params.get("name") == "thread_name":
                    self.thread_names[(params["pid"], params["tid"])] = params["args"]["name"]
                elif params.get("name") == "RunTask" and params.get("ph") == "X":
                    self._pending.append(params)
        # A thread's name may arrive after its first tasks: sort them out once it is known.
        still_pending = []
        for event in self._pending:
            name = self.thread_names.get((event["pid"], event["tid"]))
            if name is None:
                still_pending.append(event)
            elif name == MAIN_THREAD and event.get("dur", 0) / 1000.0 > LONG_TASK_MS:
                # "tdur" is the thread's own time in the task: the work the page made the
                # main thread do, which a loaded machine does not stretch as it does "dur".
                self.tasks.append(
                    {
                        "start": event["ts"] / 1000.0,
                        "duration": event["dur"] / 1000.0,
                        "thread_ms": event.get("tdur", event["dur"]) / 1000.0,
                    }
                )
        self._pending = still_pending

    def forget(self, driver: Any) -> None:
        self.read(driver)
        self.requests.clear()
        self.tasks.clear()
        self._pending.clear()


_LOGS: dict[str, PerformanceLog] = {}


def _log(driver: Any) -> PerformanceLog:
    return _LOGS.setdefault(driver.session_id, PerformanceLog())


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
    options.add_experimental_option(
        "perfLoggingPrefs",
        {"enableNetwork": True, "enablePage": False, "traceCategories": TRACE_CATEGORIES},
    )
    service = Service(executable_path=str(CHROMEDRIVER))  # Selenium Manager is never asked
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        _LOGS.pop(driver.session_id, None)
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def forget(driver: Any) -> None:
    """Start counting requests and long tasks afresh (e.g. before opening a page)."""
    _log(driver).forget(driver)


def long_tasks(driver: Any) -> list[dict[str, float]]:
    """Every task over 50 ms on the renderer's main thread since the last ``forget``, from
    the browser's trace: ``start``, ``duration`` (wall) and ``thread_ms`` (the main thread's
    own time in it), in ms."""
    log = _log(driver)
    log.read(driver)
    return list(log.tasks)


def wait_for_long_task(
    driver: Any, at_least_ms: float, *, frames: int = 120
) -> list[dict[str, float]]:
    """The long tasks so far, once one of at least ``at_least_ms`` has been traced.

    The trace reaches chromedriver in batches: keep rendering frames (at most ``frames``
    pairs) until the task shows up rather than reading once.
    """
    for _ in range(frames):
        tasks = long_tasks(driver)
        if any(task["duration"] >= at_least_ms for task in tasks):
            return tasks
        driver.execute_async_script(
            "requestAnimationFrame(() => requestAnimationFrame(arguments[0]))"
        )
    raise AssertionError(f"no long task of {at_least_ms:g} ms traced: {long_tasks(driver)}")


def network_requests(driver: Any) -> list[str]:
    """URLs of every request the pages made since the last ``forget`` (CDP Network events)."""
    log = _log(driver)
    log.read(driver)
    return list(log.requests)


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
