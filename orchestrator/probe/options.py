"""The driver's command line (`python -m orchestrator.probe.replay --help`).

`orchestrator/probe/driver.py` documents what each option does. Standard library only.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from orchestrator.probe.jobs import FORK, SPAWN_MODES

DRIVER_MODULE: Final = "orchestrator.probe.replay"  # the entry module


@dataclass(frozen=True, kw_only=True)
class DriverOptions:
    replays: int
    timeout_s: float
    out: Path
    seed: int
    pytest_args: tuple[str, ...]
    spawn: str = FORK
    workers: int = 1  # pytest sessions per replay, each running its share (probe/workers.py)
    make_dirs: tuple[Path, ...] = ()
    fresh_dirs: tuple[Path, ...] = ()  # emptied before each replay (Hypothesis's database)
    copy_tree: tuple[Path, Path] | None = None
    serve: bool = False
    jobs: str | None = None
    results: str | None = None
    # Serve mode: each job's result is a file in its own folder of --out, and its
    # --results line only says so, with the file's SHA-256 (the host reads the file).
    result_files: bool = False
    attach: bool = False
    # A rewrite cache the caller owns (kept at the end, used with any --replays); None:
    # DIR/.rewritten when --replays > 1, removed at the end.
    rewrite_cache: Path | None = None


def parse_args(argv: Sequence[str]) -> DriverOptions:
    args = list(argv)
    if "--" in args:
        split = args.index("--")
        own, pytest_args = args[:split], args[split + 1 :]
    else:
        own, pytest_args = args, []
    parser = _parser()
    options = parser.parse_args(own)
    _check(parser, options, pytest_args)
    seed = options.seed
    if seed is None:
        raw = os.environ.get("REPLAY_SEED", "").strip()
        try:
            seed = int(raw) if raw else 0
        except ValueError:
            parser.error(f"REPLAY_SEED must be an integer, got {raw!r}")
    return DriverOptions(
        replays=options.replays or 0,
        timeout_s=options.timeout or 0.0,
        out=options.out,
        seed=seed,
        pytest_args=tuple(pytest_args),
        spawn=options.spawn,
        workers=options.workers,
        make_dirs=tuple(options.make_dir),
        fresh_dirs=tuple(options.fresh_dir),
        copy_tree=options.copy_tree,
        serve=options.serve,
        jobs=options.jobs,
        results=options.results,
        result_files=options.result_files,
        attach=options.attach,
        rewrite_cache=options.rewrite_cache,
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m {DRIVER_MODULE}",
        description="Run N fresh pytest replays under the replay probe, one after another "
        "(or, with --serve, one per job read from --jobs).",
        epilog="Everything after `--` is passed to pytest unchanged.",
    )
    parser.add_argument("--replays", type=_positive_int, help="number of replays")
    parser.add_argument("--timeout", type=_positive_float, help="deadline per replay, seconds")
    parser.add_argument("--out", type=Path, required=True, help="folder for the result files")
    parser.add_argument(
        "--seed", type=int, default=None, help="REPLAY_SEED for every replay (default: env or 0)"
    )
    parser.add_argument(
        "--spawn",
        choices=SPAWN_MODES,
        default=FORK,
        help="fork: a child of a driver that imported pytest once (default); "
        "exec: a new interpreter per replay",
    )
    parser.add_argument(
        "--workers",
        type=_positive_int,
        default=1,
        help="split each replay's tests by module across this many pytest sessions "
        "(default 1; see orchestrator/probe/workers.py)",
    )
    parser.add_argument(
        "--make-dir",
        type=Path,
        action="append",
        default=[],
        help="created before each replay when missing (repeatable)",
    )
    parser.add_argument(
        "--fresh-dir",
        type=Path,
        action="append",
        default=[],
        help="emptied (or made) before each replay (repeatable): no replay sees what "
        "another left there",
    )
    parser.add_argument(
        "--copy-tree",
        type=_copy_pair,
        default=None,
        metavar="FROM:TO",
        help="before each replay, empty TO and copy FROM's contents into it",
    )
    parser.add_argument(
        "--serve", action="store_true", help="run the jobs read from --jobs (see the docstring)"
    )
    parser.add_argument("--jobs", help="serve mode: where job lines come from (- for stdin)")
    parser.add_argument("--results", help="serve mode: where result lines go (- for stdout)")
    parser.add_argument(
        "--result-files",
        action="store_true",
        help="serve mode: write each job's result as DIR/job-<n>/replay-001.json and "
        "only a notice with its SHA-256 to --results",
    )
    parser.add_argument(
        "--attach",
        action="store_true",
        help="each replay keeps the driver's stdin, stdout and stderr (no log file), "
        "and the terminal's foreground when there is one",
    )
    parser.add_argument(
        "--rewrite-cache",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep the rewritten test modules in DIR, and leave it at the end (a later "
        "driver in the same container reuses them); default: a folder .rewritten in "
        "--out when --replays > 1, removed at the end",
    )
    return parser


def _check(
    parser: argparse.ArgumentParser, options: argparse.Namespace, pytest_args: list[str]
) -> None:
    """Reject the combinations of options that do not go together."""
    if options.serve and options.attach:
        parser.error("--attach goes with replays, not --serve")
    if options.attach and options.workers > 1:
        parser.error("--attach runs one pytest session per replay, not --workers")
    if options.serve:
        if options.jobs is None or options.results is None:
            parser.error("--serve needs --jobs and --results")
        if options.replays is not None or pytest_args:
            parser.error("--serve takes its pytest arguments from each job, not --replays/--")
    else:
        if options.jobs is not None or options.results is not None or options.result_files:
            parser.error("--jobs, --results and --result-files go with --serve")
        if options.replays is None or options.timeout is None:
            parser.error("--replays and --timeout are required (or --serve)")


def _copy_pair(text: str) -> tuple[Path, Path]:
    source, sep, dest = text.partition(":")
    if not sep or not source or not dest:
        raise argparse.ArgumentTypeError(f"expected FROM:TO, got {text!r}")
    return Path(source), Path(dest)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
    return value
