"""structlog set-up: readable on a terminal, JSON lines in CI.

Logs go to standard error so that standard output stays the command's result
(a table, or the JSON document asked for with ``--json``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import Literal

import structlog

LogFormat = Literal["auto", "console", "json"]


def resolve_format(requested: LogFormat, env: Mapping[str, str]) -> Literal["console", "json"]:
    """``auto`` means JSON lines when ``CI`` is set to anything but false/0."""
    if requested != "auto":
        return requested
    ci = env.get("CI", "").strip().lower()
    return "json" if ci not in ("", "0", "false", "no") else "console"


class _StderrLogger:
    """Writes each line to whatever ``sys.stderr`` is *now* (it may have been replaced
    since configuration, e.g. by a test harness capturing output)."""

    def msg(self, message: str) -> None:
        stream = sys.stderr
        stream.write(message + "\n")
        stream.flush()

    log = debug = info = warn = warning = error = critical = exception = fatal = msg


def _stderr_logger_factory(*_args: object) -> _StderrLogger:
    return _StderrLogger()


def configure(requested: LogFormat, env: Mapping[str, str], verbose: bool = False) -> None:
    fmt = resolve_format(requested, env)
    renderer: structlog.typing.Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer(sort_keys=True)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.DEBUG if verbose else logging.INFO
        ),
        logger_factory=_stderr_logger_factory,
        cache_logger_on_first_use=False,
    )


def is_json(requested: LogFormat, env: Mapping[str, str]) -> bool:
    return resolve_format(requested, env) == "json"


get_logger = structlog.get_logger
