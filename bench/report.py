"""Figures for `orchestrator report`: rendering time, page size, and the browser's main thread.

For generated run folders of 1,000, 5,000 and 10,000 properties (tests/report's
generator: every lane among them, mostly no_freeze), prints the time to read the folder
and render each output, the page's size, and, in headless Chromium (Debian's, as the
tests drive it), the long tasks (main thread busy over 50 ms) while the page opens and
while it is scrolled top to bottom in 40 steps: how many, the longest, their sum.

    .venv/bin/python bench/report.py [SIZES...]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "report")]

import browser  # noqa: E402
from report_factories import make_run_folder  # noqa: E402

from orchestrator.core.reports.html import render_html  # noqa: E402
from orchestrator.core.reports.junit import render_junit  # noqa: E402
from orchestrator.core.reports.markdown import render_markdown  # noqa: E402
from orchestrator.services.run_folders import read_folders, views  # noqa: E402


def timed(action):  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    result = action()
    return result, (time.perf_counter() - started) * 1000


def main(sizes: list[int]) -> int:
    print(
        "| properties | read ms | html ms | markdown ms | junit ms | page MB "
        "| open: long tasks | open: longest ms | open: sum ms "
        "| scroll: long tasks | scroll: longest ms | scroll: sum ms |"
    )
    print("|" + "---:|" * 12)
    with tempfile.TemporaryDirectory(prefix="orchestrator-bench-report-") as scratch:
        for size in sizes:
            folder = make_run_folder(Path(scratch) / f"run-{size}", properties=size)
            documents, read_ms = timed(lambda f=folder: read_folders([f]))
            runs = views(documents, report_dir=folder)
            page, html_ms = timed(lambda r=runs: render_html(r))
            _, markdown_ms = timed(lambda r=runs: render_markdown(r))
            _, junit_ms = timed(lambda r=runs: render_junit(r))
            path = folder / "report.html"
            path.write_text(page, encoding="utf-8")
            with browser.chromium(width=1280, height=900) as driver:
                browser.forget(driver)
                driver.get(path.as_uri())
                opened = browser.long_tasks(driver)
                browser.scroll_through(driver, steps=40)
                scrolled = browser.long_tasks(driver)[len(opened) :]
            figures = [
                f"{size:,}",
                f"{read_ms:.0f}",
                f"{html_ms:.0f}",
                f"{markdown_ms:.0f}",
                f"{junit_ms:.0f}",
                f"{len(page.encode()) / 1e6:.1f}",
            ]
            for tasks in (opened, scrolled):
                durations = [task["duration"] for task in tasks]
                figures += [str(len(durations)), f"{max(durations, default=0):.0f}",
                            f"{sum(durations):.0f}"]  # fmt: skip
            print("| " + " | ".join(figures) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main([int(arg) for arg in sys.argv[1:]] or [1000, 5000, 10000]))
