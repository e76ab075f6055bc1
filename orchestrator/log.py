"""structlog set-up: readable on a terminal, JSON lines in CI.

Logs go to standard error so that standard output stays the command's result
(a table, or the JSON document asked for with ``--json``).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any, Literal

LogFormat = Literal["auto", "console", "json"]

# structlog (with rich and asyncio behind it) takes a large part of a start-up: it is
# imported when the first line is logged, not before. `configure` is remembered until then.
TextFilter = Callable[[str], str]
_pending: tuple[Literal["console", "json"], bool, TextFilter | None, TextFilter | None] | None = (
    None
)
_pending_lock = threading.Lock()


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


# Values that hold several lines on purpose: each line is filtered, the breaks are kept.
_MULTI_LINE_KEYS = frozenset({"exception", "traceback"})


def filtering_values(
    text_filter: TextFilter,
) -> Callable[[object, str, MutableMapping[str, Any]], MutableMapping[str, Any]]:
    """A processor that passes every text value of a log line through ``text_filter``
    (the command line gives ``core.text_safety.terminal_safe``: a node id or message from
    the tree under test never writes a control sequence nor starts a line of its own)."""

    def processor(
        _logger: object, _name: str, event: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        for key, value in event.items():
            if isinstance(value, str):
                if key in _MULTI_LINE_KEYS:
                    event[key] = "\n".join(text_filter(line) for line in value.split("\n"))
                else:
                    event[key] = text_filter(value)
            elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
                event[key] = type(value)(text_filter(item) for item in value)
        return event

    return processor


def _filtering_line(text_filter: TextFilter) -> Callable[[object, str, Any], str]:
    """A last processor that passes the rendered line through ``text_filter``."""

    def processor(_logger: object, _name: str, line: Any) -> str:
        return text_filter(str(line))

    return processor


def _apply(
    fmt: Literal["console", "json"],
    verbose: bool,
    console_filter: TextFilter | None,
    json_filter: TextFilter | None = None,
) -> None:
    import logging

    import structlog

    renderers: list[structlog.typing.Processor]
    if fmt == "json":
        renderers = [structlog.processors.JSONRenderer(sort_keys=True)]
        if json_filter is not None:
            renderers.append(_filtering_line(json_filter))
    else:
        renderers = [structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())]
        if console_filter is not None:
            renderers.insert(0, filtering_values(console_filter))
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            *renderers,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.DEBUG if verbose else logging.INFO
        ),
        logger_factory=_stderr_logger_factory,
        cache_logger_on_first_use=False,
    )


def configure(
    requested: LogFormat,
    env: Mapping[str, str],
    verbose: bool = False,
    *,
    console_filter: TextFilter | None = None,
    json_filter: TextFilter | None = None,
) -> None:
    """Set the format and level; applied now when structlog is loaded (a test harness may
    have loaded it to capture lines), else when the first line is logged. Console lines
    pass each text value through ``console_filter`` when given; a JSON line, whole,
    through ``json_filter`` (JSON escapes control characters itself, but not what a CI
    log reads anywhere in a line)."""
    global _pending
    fmt = resolve_format(requested, env)
    with _pending_lock:
        if "structlog" in sys.modules:
            _pending = None
            _apply(fmt, verbose, console_filter, json_filter)
        else:
            _pending = (fmt, verbose, console_filter, json_filter)


def is_json(requested: LogFormat, env: Mapping[str, str]) -> bool:
    return resolve_format(requested, env) == "json"


def _structlog() -> Any:
    global _pending
    import structlog

    if _pending is not None:
        # Sides log from threads: none may log through an unconfigured structlog (whose
        # default prints to stdout) while another applies the configuration.
        with _pending_lock:
            if _pending is not None:
                fmt, verbose, console_filter, json_filter = _pending
                _apply(fmt, verbose, console_filter, json_filter)
                _pending = None
    return structlog


class _Logger:
    """What ``get_logger`` hands out: structlog's logger, loaded at its first use."""

    __slots__ = ("_args", "_bound", "_values")

    def __init__(self, args: tuple[Any, ...], values: dict[str, Any]) -> None:
        self._args = args
        self._values = values
        self._bound: Any = None

    def _logger(self) -> Any:
        if self._bound is None:
            # structlog's own lazy proxy: it follows later configure() calls.
            self._bound = _structlog().get_logger(*self._args, **self._values)
        return self._bound

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logger(), name)


def get_logger(*args: Any, **initial_values: Any) -> Any:
    """A structlog logger (``info``, ``debug``, ``warning``, ``bind``...), imported lazily."""
    return _Logger(args, initial_values)
