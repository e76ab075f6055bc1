"""Real run folders of the bundled example, for the report tests and the README's picture.

Builds the example repository (fixtures/build_example.py) and runs three real
`orchestrator replay` processes against the runner image, at once, so that the
folders hold six lanes between them: property_regression, block_patch and
flake_queue_eligible (extra-clock-read, every property), infra_queue (hang),
fix_candidate and no_freeze (fix-trim-id).

Run as a script to redraw the README's screenshot:

    .venv/bin/python tests/report/example_runs.py docs/report.png
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fixtures.build_example import (  # noqa: E402
    BUDGET_PROPERTY,
    FLAKY_PROPERTY,
    OUTPUT_PROPERTY,
    TAUTOLOGY_PROPERTY,
    TRIM_PROPERTY,
    ExampleRepo,
    build_example,
)

CLI = ROOT / ".venv" / "bin" / "orchestrator"
IMAGE = os.environ.get("RUNNER_IMAGE", "orchestrator-runner:latest")


@dataclass(frozen=True, kw_only=True)
class ExampleRun:
    name: str
    patch: str
    properties: tuple[str, ...]
    replays: int = 3
    timeout_s: float = 30.0


RUNS = (
    ExampleRun(
        name="every-property",
        patch="extra-clock-read",
        properties=(
            BUDGET_PROPERTY,
            OUTPUT_PROPERTY,
            TRIM_PROPERTY,
            FLAKY_PROPERTY,
            TAUTOLOGY_PROPERTY,
        ),
    ),
    ExampleRun(name="hang", patch="hang", properties=(BUDGET_PROPERTY,), replays=2, timeout_s=4.0),
    ExampleRun(
        name="fix",
        patch="fix-trim-id",
        properties=(TRIM_PROPERTY, BUDGET_PROPERTY, OUTPUT_PROPERTY),
    ),
)


def replay_args(
    repo: ExampleRepo, run: ExampleRun, out: Path, extra: tuple[str, ...] = ()
) -> list[str]:
    args = [
        str(CLI), "replay", "--repo", str(repo.path), "--base", repo.base,
        "--patch", repo.rev(run.patch), "--image", IMAGE, "--replays", str(run.replays),
        "--timeout", str(run.timeout_s), "--fixture", str(repo.fixture), "--out", str(out),
        "--no-record", "--json",
    ]  # fmt: skip
    for node_id in run.properties:
        args += ["--property", node_id]
    return [*args, *extra]


def replay_example(workdir: Path) -> tuple[ExampleRepo, list[Path]]:
    """The example repository and one finished run folder per entry of ``RUNS``."""
    repo = build_example(workdir / "example")
    env = {**os.environ, "CI": "1", "TMPDIR": str(workdir)}
    outs = [workdir / "runs" / run.name for run in RUNS]
    processes = [
        subprocess.Popen(
            replay_args(repo, run, out),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=workdir,
        )
        for run, out in zip(RUNS, outs, strict=True)
    ]
    for run, process in zip(RUNS, processes, strict=True):
        _, stderr = process.communicate(timeout=300)
        if process.returncode not in (0, 1, 3):
            raise AssertionError(f"replay {run.name} exited {process.returncode}: {stderr[-2000:]}")
    return repo, outs


def main(argv: list[str]) -> int:
    """Replay the example, write the page, save a screenshot of it to ``argv[0]``."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import browser

    target = Path(argv[0]) if argv else ROOT / "docs" / "report.png"
    with tempfile.TemporaryDirectory(prefix="orchestrator-report-example-") as scratch:
        workdir = Path(scratch)
        _, outs = replay_example(workdir)
        page = workdir / "report.html"
        folders = [str(out.relative_to(workdir)) for out in outs]  # the page names them so
        subprocess.run([str(CLI), "report", *folders, "--html", str(page)], check=True, cwd=workdir)
        with browser.chromium(width=1280, height=900) as driver:
            driver.get(page.as_uri())
            png = browser.full_page_screenshot(driver)
    target.write_bytes(png)
    print(f"screenshot: {target} ({browser.pixel_variance(png):.0f} grey-level variance)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
