"""What a replay's container sees besides the tree, as values. Pure.

- The environment: the replay's own variables (``REPLAY_SEED``, ``REPLAY_FIXTURE``), what
  real suites expect of an ordinary machine (``HOME`` and ``TMPDIR`` in the container's
  private tmpfs, shared by the replays of one container as a machine's are by its test
  runs; ``PYTHONDONTWRITEBYTECODE=1``;
  Hypothesis's example database in the tmpfs instead of the tree) and ``--env KEY=VALUE``.
  ``TZ`` is unset unless ``--env TZ=...`` sets it. These variables are pins: the run log
  and the evidence record them, since a test may behave differently under another ``TZ``.
- The interpreter that runs the probe driver: a project image's label names its venv's
  python, any other image gets ``python3``.
- Each side's ``PYTHONPATH``: the package importable from the side's own tree, before the
  probe: ``--pythonpath`` folders, pytest's ``pythonpath`` ini option, and a ``src/``
  layout (from ``pyproject.toml``'s or ``setup.cfg``'s package discovery, or a ``src/``
  holding Python modules and no ``__init__.py`` of its own).
"""

from __future__ import annotations

import configparser
import posixpath
import re
import shlex
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import InputError

TMP = "/tmp"
HOME = "/tmp/home"
HYPOTHESIS_DIR = "/tmp/hypothesis"
# Made by the driver when missing (the tmpfs at TMP starts empty).
MADE_DIRS = (HOME,)
# Emptied by the driver before each replay: no replay starts from another's examples.
FRESH_DIRS = (HYPOTHESIS_DIR,)

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RESERVED = {
    "PYTHONPATH": "use --pythonpath",
    "PYTHONHASHSEED": "the driver pins it to the seed",
    "REPLAY_SEED": "use --seed",
    "REPLAY_FIXTURE": "use --fixture",
    "REPLAY_RESULT": "the driver sets it",
}

# A project image's label naming the interpreter that runs the probe driver (its venv's).
LABEL_PYTHON = "orchestrator.python"

# The files whose contents decide a side's PYTHONPATH (read at the side's revision).
INI_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
SRC = "src"


# ---------------------------------------------------------------- interpreter


def interpreter_from_labels(labels: Mapping[str, str] | None) -> str:
    """The interpreter that runs the probe driver: a project image's venv python, else
    the image's ``python3``."""
    value = (labels or {}).get(LABEL_PYTHON, "").strip()
    return value if value.startswith("/") else "python3"


# ---------------------------------------------------------------- variables


def parse_env(items: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``--env KEY=VALUE`` items as pairs, in order; a malformed, reserved or repeated key
    is refused (one line, before anything runs)."""
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not _KEY.match(key):
            raise InputError(f"--env {item!r}: expected KEY=VALUE with KEY a variable name")
        if key in _RESERVED:
            raise InputError(f"--env {key}: set by the replay itself ({_RESERVED[key]})")
        if key in seen:
            raise InputError(f"--env {key}: given twice")
        seen.add(key)
        pairs.append((key, value))
    return tuple(pairs)


def replay_variables(
    *, seed: int, fixture: str | None, extra: Sequence[tuple[str, str]] = ()
) -> dict[str, str]:
    """Every variable a replay's container gets, except PYTHONPATH (per side)."""
    env = {
        "REPLAY_SEED": str(seed),
        "PYTHONDONTWRITEBYTECODE": "1",
        "HOME": HOME,
        "TMPDIR": TMP,
        "HYPOTHESIS_STORAGE_DIRECTORY": HYPOTHESIS_DIR,
    }
    if fixture is not None:
        env["REPLAY_FIXTURE"] = fixture
    env.update(extra)
    return env


# ---------------------------------------------------------------- PYTHONPATH


@dataclass(frozen=True, kw_only=True)
class SidePath:
    """A side's import roots (relative to its tree, or absolute), and why each is there."""

    entries: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()

    def container_paths(self, tree_root: str) -> tuple[str, ...]:
        return tuple(
            entry if entry.startswith("/") else posixpath.normpath(f"{tree_root}/{entry}")
            for entry in self.entries
        )


def check_pythonpath(items: Sequence[str]) -> tuple[str, ...]:
    """``--pythonpath DIR`` items: folders of the tree (or absolute in the image)."""
    checked: list[str] = []
    for item in items:
        value = item.strip()
        if not value or ":" in value:
            raise InputError(f"--pythonpath {item!r}: expected one folder (no ':')")
        checked.append(value.rstrip("/") or "/")
    return tuple(checked)


def _text(files: Mapping[str, bytes | None], name: str) -> str | None:
    data = files.get(name)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _ini(text: str) -> configparser.ConfigParser | None:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None  # pytest will say what is wrong with it
    return parser


def _toml(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def split_words(value: str) -> tuple[str, ...]:
    """A shell-like option string as words (``PYTEST_ADDOPTS``), as pytest splits it."""
    return _words(value)


def _words(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError:
            return tuple(value.split())
    if isinstance(value, list):
        return tuple(str(item) for item in value)
    return ()


def pytest_ini_options(files: Mapping[str, bytes | None]) -> tuple[Mapping[str, Any], str | None]:
    """The options of the file pytest would take as its configuration at the tree's root
    (pytest.ini, .pytest.ini, pyproject.toml, tox.ini, setup.cfg, first match) and that
    file's name: an ini file's values are text, a TOML table's as TOML has them."""
    for name in ("pytest.ini", ".pytest.ini"):
        text = _text(files, name)
        if text is not None:  # pytest takes pytest.ini even without a [pytest] section
            parser = _ini(text)
            if parser is None or not parser.has_section("pytest"):
                return {}, name
            return dict(parser.items("pytest")), name
    tool = _toml(_text(files, "pyproject.toml")).get("tool", {})
    pytest_table = tool.get("pytest") if isinstance(tool, dict) else None
    if isinstance(pytest_table, dict):
        ini_options = pytest_table.get("ini_options")
        if isinstance(ini_options, dict):
            return ini_options, "pyproject.toml"
        if pytest_table:  # pytest 9's native [tool.pytest] table
            return pytest_table, "pyproject.toml"
    for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        text = _text(files, name)
        parser = _ini(text) if text is not None else None
        if parser is not None and parser.has_section(section):
            return dict(parser.items(section)), name
    return {}, None


def option_words(value: Any) -> tuple[str, ...]:
    """An ini option's value as pytest splits it (``args``/``linelist``: words, or a TOML
    list's items)."""
    return _words(value)


def pytest_pythonpath(files: Mapping[str, bytes | None]) -> tuple[tuple[str, ...], str | None]:
    """pytest's ``pythonpath`` ini option from the file pytest would take as its
    configuration at the tree's root (:func:`pytest_ini_options`), and that file's name."""
    options, name = pytest_ini_options(files)
    return _words(options.get("pythonpath")), name


def pytest_ini_option(
    files: Mapping[str, bytes | None], key: str
) -> tuple[tuple[str, ...], str | None]:
    """The words of pytest's ini option ``key`` in the file pytest would take as its
    configuration at the tree's root (:func:`pytest_ini_options`), and that file's name
    (None: no configuration file)."""
    options, name = pytest_ini_options(files)
    return _words(options.get(key)), name


def pytest_addopts(files: Mapping[str, bytes | None]) -> tuple[tuple[str, ...], str | None]:
    """pytest's ``addopts`` ini option (:func:`pytest_ini_option`), and its file's name."""
    return pytest_ini_option(files, "addopts")


def _declared_package_dirs(files: Mapping[str, bytes | None]) -> tuple[tuple[str, str], ...]:
    """Package roots that ``pyproject.toml`` or ``setup.cfg`` declare: (folder, where)."""
    found: list[tuple[str, str]] = []
    tool = _toml(_text(files, "pyproject.toml")).get("tool", {})
    if not isinstance(tool, dict):
        tool = {}
    setuptools = tool.get("setuptools", {}) if isinstance(tool.get("setuptools"), dict) else {}
    packages = setuptools.get("packages")
    if isinstance(packages, dict) and isinstance(packages.get("find"), dict):
        for where in _words(packages["find"].get("where")):
            found.append((where, "pyproject.toml [tool.setuptools.packages.find]"))
    package_dir = setuptools.get("package-dir")
    if isinstance(package_dir, dict) and isinstance(package_dir.get(""), str):
        found.append((package_dir[""], "pyproject.toml [tool.setuptools] package-dir"))
    hatch = tool.get("hatch", {})
    wheel = (
        hatch.get("build", {}).get("targets", {}).get("wheel", {})
        if isinstance(hatch, dict)
        else {}
    )
    if isinstance(wheel, dict):
        for package in _words(wheel.get("packages")):
            parent = posixpath.dirname(package.rstrip("/"))
            if parent:
                found.append((parent, "pyproject.toml [tool.hatch.build.targets.wheel]"))
    poetry = tool.get("poetry", {})
    if isinstance(poetry, dict) and isinstance(poetry.get("packages"), list):
        for package in poetry["packages"]:
            if isinstance(package, dict) and isinstance(package.get("from"), str):
                found.append((package["from"], "pyproject.toml [tool.poetry] packages"))
    pdm = tool.get("pdm", {})
    pdm_build = pdm.get("build", {}) if isinstance(pdm, dict) else {}
    if isinstance(pdm_build, dict) and isinstance(pdm_build.get("package-dir"), str):
        found.append((pdm_build["package-dir"], "pyproject.toml [tool.pdm.build] package-dir"))
    text = _text(files, "setup.cfg")
    parser = _ini(text) if text is not None else None
    if parser is not None:
        if parser.has_option("options", "package_dir"):
            for line in parser.get("options", "package_dir").splitlines():
                key, sep, value = line.partition("=")
                if sep and not key.strip() and value.strip():
                    found.append((value.strip(), "setup.cfg [options] package_dir"))
        if parser.has_option("options.packages.find", "where"):
            for where in _words(parser.get("options.packages.find", "where")):
                found.append((where, "setup.cfg [options.packages.find]"))
    return tuple(
        (posixpath.normpath(folder), where)
        for folder, where in found
        if posixpath.normpath(folder) not in (".", "")
    )


def src_layout(src_paths: Sequence[str]) -> str | None:
    """The file that shows a ``src/`` layout among the tree's paths under ``src/``
    (``src/<package>/__init__.py`` or ``src/<module>.py``), or None. A ``src`` that is
    a package itself (``src/__init__.py``) is imported from the tree's root instead."""
    if f"{SRC}/__init__.py" in src_paths:
        return None
    for path in sorted(src_paths):
        parts = path.split("/")
        if parts[0] != SRC:
            continue
        if len(parts) == 3 and parts[2] == "__init__.py":
            return path
        if len(parts) == 2 and parts[1].endswith(".py"):
            return path
    return None


def side_pythonpath(
    files: Mapping[str, bytes | None],
    src_paths: Sequence[str],
    extra: Sequence[str] = (),
) -> SidePath:
    """A side's import roots, in order: ``--pythonpath``, pytest's ``pythonpath``, declared
    package folders, a detected ``src/`` layout. ``files`` holds :data:`INI_FILES` at the
    side's revision (None when absent); ``src_paths`` the tree's paths under ``src/``."""
    entries: list[str] = []
    reasons: list[str] = []

    def add(entry: str, reason: str) -> None:
        if entry not in entries:
            entries.append(entry)
            reasons.append(f"{entry}: {reason}")

    for entry in extra:
        add(entry, "--pythonpath")
    ini_entries, ini_file = pytest_pythonpath(files)
    for entry in ini_entries:
        normalized = entry if entry.startswith("/") else posixpath.normpath(entry)
        add(normalized, f"pytest pythonpath ({ini_file})")
    for folder, where in _declared_package_dirs(files):
        add(folder, f"package folder ({where})")
    shown = src_layout(src_paths)
    if shown is not None:
        add(SRC, f"src layout ({shown})")
    return SidePath(entries=tuple(entries), reasons=tuple(reasons))
