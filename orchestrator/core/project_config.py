"""``[tool.orchestrator]`` in the project's ``pyproject.toml``, as values: text in, a
checked configuration out, and the command line laid over it.

The table is read at the pinned base revision (``services/project_config.py``), never
from the patch: a pull request cannot change how it is judged (its command, its image, its
environment, its timeout). Every option given on the command line replaces that key's
value whole (a list or a table included).

    [tool.orchestrator]
    command = "pytest -q"                # --command
    test-paths = ["tests"]               # appended to command (the paths it runs)
    image = "orchestrator-project/x:..." # --image (else the project's image, else runner)
    replays = 5                          # --replays
    false-block-rate = 0.01              # --false-block-rate, per run (lanes.md 3b)
    evidence-cap = 20                    # --evidence-cap, replays per side at most
    timeout = 60                         # --timeout, seconds
    pythonpath = ["src"]                 # --pythonpath
    env = { TZ = "UTC" }                 # --env KEY=VALUE

    [tool.orchestrator.image-build]      # `orchestrator image build` inputs
    requirements = ["requirements/tests.txt"]
    extras = ["test"]
    groups = ["dev"]
    pip = ["hypothesis"]
    apt = ["libxml2"]
    python-image = "python:3.12-slim"

An unknown key or a value of the wrong type is an :class:`InputError` naming the key.
"""

from __future__ import annotations

import math
import shlex
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.core.bounds import (
    MAX_EVIDENCE_CAP,
    MAX_REPLAYS,
    MAX_TIMEOUT_S,
    false_block_rate_problem,
)
from orchestrator.core.image_reference import reference_problem
from orchestrator.core.replay_env import check_pythonpath, parse_env
from orchestrator.core.significance import DEFAULT_ALPHA, DEFAULT_CAP
from orchestrator.errors import InputError

TABLE = "[tool.orchestrator]"
MIN_TIMEOUT_S = 0.1  # as --timeout
KEYS = (
    "command",
    "test-paths",
    "image",
    "replays",
    "false-block-rate",
    "evidence-cap",
    "timeout",
    "pythonpath",
    "env",
    "image-build",
)
IMAGE_BUILD_KEYS = ("requirements", "extras", "groups", "pip", "apt", "python-image")


@dataclass(frozen=True, kw_only=True)
class ImageBuildInputs:
    """``[tool.orchestrator.image-build]``: defaults for ``orchestrator image build``."""

    requirements: tuple[str, ...] | None = None
    extras: tuple[str, ...] | None = None
    groups: tuple[str, ...] | None = None
    pip: tuple[str, ...] | None = None
    apt: tuple[str, ...] | None = None
    python_image: str | None = None


@dataclass(frozen=True, kw_only=True)
class ProjectConfig:
    """What the project's table says; ``None`` where it says nothing."""

    command: str | None = None
    test_paths: tuple[str, ...] | None = None
    image: str | None = None
    replays: int | None = None
    false_block_rate: float | None = None
    evidence_cap: int | None = None
    timeout_s: float | None = None
    pythonpath: tuple[str, ...] | None = None
    env: tuple[tuple[str, str], ...] | None = None
    image_build: ImageBuildInputs = field(default_factory=ImageBuildInputs)

    def keys(self) -> tuple[str, ...]:
        """The keys the table set, in ``KEYS`` order (for the log)."""
        values = {
            "command": self.command,
            "test-paths": self.test_paths,
            "image": self.image,
            "replays": self.replays,
            "false-block-rate": self.false_block_rate,
            "evidence-cap": self.evidence_cap,
            "timeout": self.timeout_s,
            "pythonpath": self.pythonpath,
            "env": self.env,
            "image-build": self.image_build if self.image_build != ImageBuildInputs() else None,
        }
        return tuple(key for key in KEYS if values[key] is not None)


def _where(key: str, table: str = TABLE) -> str:
    return f"pyproject.toml {table}.{key}"


def _string(value: Any, key: str, table: str = TABLE) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{_where(key, table)}: expected a non-empty string, got {value!r}")
    return value


def _strings(value: Any, key: str, table: str = TABLE) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InputError(f"{_where(key, table)}: expected a list of strings, got {value!r}")
    return tuple(value)


def _unknown(table: Mapping[str, Any], known: Sequence[str], name: str) -> None:
    for key in table:
        if key not in known:
            raise InputError(
                f"pyproject.toml {name}: unknown key {key!r} (known: {', '.join(known)})"
            )


def _image(value: Any, key: str, table: str = TABLE) -> str:
    text = _string(value, key, table)
    problem = reference_problem(text)
    if problem is not None:
        raise InputError(f"{_where(key, table)}: {problem}")
    return text


def _replays(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_REPLAYS:
        raise InputError(
            f"{_where('replays')}: expected a whole number from 1 to {MAX_REPLAYS}, got {value!r}"
        )
    return value


def _false_block_rate(value: Any) -> float:
    problem = false_block_rate_problem(_where("false-block-rate"), value)
    if problem is not None:
        raise InputError(problem)
    return float(value)


def _evidence_cap(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_EVIDENCE_CAP:
        raise InputError(
            f"{_where('evidence-cap')}: expected a whole number from 1 to {MAX_EVIDENCE_CAP},"
            f" got {value!r}"
        )
    return value


def _timeout(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{_where('timeout')}: expected a number of seconds, got {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or not MIN_TIMEOUT_S <= seconds <= MAX_TIMEOUT_S:
        raise InputError(
            f"{_where('timeout')}: expected seconds (from {MIN_TIMEOUT_S:g} to "
            f"{MAX_TIMEOUT_S:g}), got {value!r}"
        )
    return seconds


def _env(value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not all(isinstance(item, str) for item in value.values()):
        raise InputError(f"{_where('env')}: expected a table of strings, got {value!r}")
    try:
        return parse_env([f"{key}={item}" for key, item in value.items()])
    except InputError as error:
        raise InputError(f"{_where('env')}: {str(error).removeprefix('--env ')}") from None


def _pythonpath(value: Any) -> tuple[str, ...]:
    items = _strings(value, "pythonpath")
    try:
        return check_pythonpath(items)
    except InputError as error:
        detail = str(error).removeprefix("--pythonpath ")
        raise InputError(f"{_where('pythonpath')}: {detail}") from None


def _image_build(value: Any) -> ImageBuildInputs:
    name = f"{TABLE[:-1]}.image-build]"
    if not isinstance(value, dict):
        raise InputError(f"pyproject.toml {name}: expected a table, got {value!r}")
    _unknown(value, IMAGE_BUILD_KEYS, name)
    lists = {
        key: _strings(value[key], key, name)
        for key in ("requirements", "extras", "groups", "pip", "apt")
        if key in value
    }
    python_image = value.get("python-image")
    return ImageBuildInputs(
        **lists,
        python_image=_image(python_image, "python-image", name)
        if python_image is not None
        else None,
    )


def parse_config(pyproject: str | None) -> ProjectConfig:
    """The project's ``[tool.orchestrator]`` table (empty when the file or table is absent)."""
    if pyproject is None:
        return ProjectConfig()
    try:
        doc = tomllib.loads(pyproject)
    except tomllib.TOMLDecodeError as error:
        raise InputError(f"pyproject.toml: not valid TOML ({error})") from None
    tool = doc.get("tool")
    if not isinstance(tool, dict) or "orchestrator" not in tool:
        return ProjectConfig()
    table = tool["orchestrator"]
    if not isinstance(table, dict):
        raise InputError(f"pyproject.toml {TABLE}: expected a table, got {table!r}")
    _unknown(table, KEYS, TABLE)

    def get(key: str, check: Any) -> Any:
        return check(table[key]) if key in table else None

    return ProjectConfig(
        command=get("command", lambda value: _string(value, "command")),
        test_paths=get("test-paths", lambda value: _strings(value, "test-paths")),
        image=get("image", lambda value: _image(value, "image")),
        replays=get("replays", _replays),
        false_block_rate=get("false-block-rate", _false_block_rate),
        evidence_cap=get("evidence-cap", _evidence_cap),
        timeout_s=get("timeout", _timeout),
        pythonpath=get("pythonpath", _pythonpath),
        env=get("env", _env),
        image_build=get("image-build", _image_build) or ImageBuildInputs(),
    )


# ---------------------------------------------------------------- the command line over it

DEFAULT_COMMAND = "pytest -q"
DEFAULT_REPLAYS = 5
DEFAULT_TIMEOUT_S = 60.0


@dataclass(frozen=True, kw_only=True)
class ReplaySettings:
    """The replay options the table may set, once the command line is laid over it.
    ``image`` stays ``None`` when neither says: the caller finds the default."""

    command: str
    image: str | None
    replays: int
    timeout_s: float
    pythonpath: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    false_block_rate: float = DEFAULT_ALPHA
    evidence_cap: int = DEFAULT_CAP
    # Who set timeout_s: "--timeout", the table, or None (the default: a replay of a
    # whole suite derives its own, core.replay_deadline).
    timeout_source: str | None = None


@dataclass(frozen=True, kw_only=True)
class EvidenceGiven:
    """``--false-block-rate`` and ``--evidence-cap`` as given (None: not given)."""

    false_block_rate: float | None = None
    cap: int | None = None


def replay_settings(
    config: ProjectConfig,
    *,
    command: str | None,
    image: str | None,
    replays: int | None,
    timeout_s: float | None,
    pythonpath: tuple[str, ...] | None,
    env: tuple[tuple[str, str], ...] | None,
    evidence: EvidenceGiven | None = None,
) -> ReplaySettings:
    """The command line (``None``: not given) wins over the table, the table over the
    defaults. ``test-paths`` go after the table's (or the default) command, never after
    a command given on the command line."""
    if command is None:
        command = config.command or DEFAULT_COMMAND
        if config.test_paths:
            command = " ".join([command, *(shlex.quote(path) for path in config.test_paths)])
    return ReplaySettings(
        command=command,
        image=image if image is not None else config.image,
        replays=replays if replays is not None else (config.replays or DEFAULT_REPLAYS),
        timeout_s=timeout_s if timeout_s is not None else (config.timeout_s or DEFAULT_TIMEOUT_S),
        pythonpath=pythonpath if pythonpath is not None else (config.pythonpath or ()),
        env=env if env is not None else (config.env or ()),
        false_block_rate=_given(
            evidence and evidence.false_block_rate, config.false_block_rate, DEFAULT_ALPHA
        ),
        evidence_cap=_given(evidence and evidence.cap, config.evidence_cap, DEFAULT_CAP),
        timeout_source="--timeout"
        if timeout_s is not None
        else (f"pyproject.toml {TABLE} timeout" if config.timeout_s else None),
    )


def _given(option: Any, table: Any, default: Any) -> Any:
    """The command line's value, else the table's, else the default."""
    if option is not None:
        return option
    return table if table is not None else default


def image_build_inputs(config: ProjectConfig, given: ImageBuildInputs) -> ImageBuildInputs:
    """``image build``'s options (``None``: not given) over the table's ``image-build``."""
    table = config.image_build

    def pick(mine: Any, theirs: Any) -> Any:
        return mine if mine is not None else theirs

    return ImageBuildInputs(
        requirements=pick(given.requirements, table.requirements),
        extras=pick(given.extras, table.extras),
        groups=pick(given.groups, table.groups),
        pip=pick(given.pip, table.pip),
        apt=pick(given.apt, table.apt),
        python_image=pick(given.python_image, table.python_image),
    )
