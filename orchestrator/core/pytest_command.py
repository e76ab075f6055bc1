"""The pytest command line and pytest node ids, parsed once.

``--command`` becomes the arguments the probe's driver hands to pytest
(:func:`pytest_args`); a node id splits into its file, its classes and its function
(:func:`split_node_id`); a property's own files are its test file and the
``conftest.py`` files above it (:func:`property_files`). Replay, thaw, budget and
accept all read commands and node ids through these functions.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePosixPath

from orchestrator.errors import InputError

PYTEST_LAUNCHERS = (
    ("pytest",),
    ("py.test",),
    ("python", "-m", "pytest"),
    ("python3", "-m", "pytest"),
)
# pytest options whose value is the next argument (so it is not taken for a path).
PYTEST_VALUE_OPTIONS = frozenset(
    {
        "-k", "-m", "-p", "-c", "-o", "-W", "-n", "--rootdir", "--confcutdir", "--basetemp",
        "--deselect", "--ignore", "--ignore-glob", "--maxfail", "--tb", "--durations",
        "--import-mode", "--override-ini", "--log-level", "--junitxml", "--timeout",
        "--capture", "--color", "--doctest-glob",
    }
)  # fmt: skip


def pytest_args(command: str, property_ids: Sequence[str]) -> tuple[str, ...]:
    """The pytest arguments of ``--command``; with properties, its paths give way to them.

    ``pytest -q tests/`` -> ``("-q", "tests/")``. When properties are selected, the
    command's positional paths are dropped (the node ids select the tests) and its
    options are kept. A command that does not start with pytest is an ``InputError``.
    """
    args = _command_words(command)
    if not property_ids:
        return tuple(args)
    return _split(args)[0]


def pytest_options(command: str) -> tuple[str, ...]:
    """The options ``--command`` gives pytest, with their values (``pytest -q tests/
    --doctest-glob '*.rst'`` -> ``-q --doctest-glob *.rst``)."""
    return _split(_command_words(command))[0]


# A node id longer than any a suite writes (pytest's own are paths plus parameters).
NODE_ID_CHARS = 4096


def node_id_problem(node_id: str) -> str | None:
    """Why ``node_id`` (a test's id as a collection or a result named it) must not be
    handed to pytest, or None. An id starting with ``-`` would be read as an option
    (``--deselect x``, ``-p evil``: pytest's early scan for ``-p`` reads past ``--``);
    an empty or over-long id, or one with a NUL, is no id pytest writes. Pure."""
    if not node_id.strip():
        return "an empty node id"
    if node_id.startswith("-"):
        return f"{node_id[:80]!r} starts with '-': pytest would take it for an option"
    if len(node_id) > NODE_ID_CHARS:
        return f"a node id of {len(node_id)} characters (at most {NODE_ID_CHARS})"
    if "\0" in node_id:
        return f"{node_id[:80]!r} holds a NUL, which no command line can"
    return None


def pytest_paths(command: str) -> tuple[str, ...]:
    """The paths and node ids ``--command`` names (``pytest -q tests/ -k x`` -> ``tests/``)."""
    return _split(_command_words(command))[1]


def _command_words(command: str) -> list[str]:
    """The words after the pytest launcher; a command that is not pytest is an InputError."""
    try:
        words = shlex.split(command)
    except ValueError as error:
        raise InputError(f"--command: {error}") from None
    for launcher in PYTEST_LAUNCHERS:
        if tuple(words[: len(launcher)]) == launcher:
            return words[len(launcher) :]
    raise InputError(f"--command must start with pytest (got {command!r})")


def split_arguments(args: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Options (with their values) and positional arguments (paths, node ids), each in
    order; everything after a ``--`` is positional. Pure."""
    return _split(args)


def _split(args: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Options (with their values) and positional arguments, each in order."""
    options: list[str] = []
    positional: list[str] = []
    takes_value = False
    for index, word in enumerate(args):
        if word == "--" and not takes_value:
            positional.extend(args[index + 1 :])
            break
        if takes_value:
            options.append(word)
            takes_value = False
        elif word.startswith("-"):
            options.append(word)
            takes_value = word in PYTEST_VALUE_OPTIONS
        else:
            positional.append(word)
    return tuple(options), tuple(positional)


@dataclass(frozen=True, kw_only=True)
class NodeId:
    """A pytest node id in parts: ``path::Class::function[params]``.

    ``names`` are the parts after the path with the parameters removed (a
    parametrized id's parameters may themselves contain ``::``); empty when the id
    names only a file, a directory or nothing.
    """

    node_id: str
    path: str
    names: tuple[str, ...]
    params: str = ""

    @property
    def classes(self) -> tuple[str, ...]:
        return self.names[:-1]

    @property
    def function(self) -> str:
        return self.names[-1] if self.names else ""

    @property
    def qualname(self) -> str:
        return ".".join(self.names)

    @property
    def names_a_test(self) -> bool:
        """A file and something in it (``path::name``), not a file or a folder alone."""
        return bool(self.path) and bool(self.names) and all(self.names)


def split_node_id(node_id: str) -> NodeId:
    """``tests/t.py::TestA::test_b[x]`` -> path ``tests/t.py``, names ``(TestA, test_b)``,
    params ``[x]``. Total: any text splits, checking what the parts must be is the caller's."""
    text = node_id.strip()
    path, _, rest = text.partition("::")
    bracket = rest.find("[")
    params = rest[bracket:] if bracket >= 0 else ""
    rest = rest[:bracket] if bracket >= 0 else rest
    names = tuple(rest.split("::")) if rest else ()
    return NodeId(node_id=text, path=path.strip(), names=names, params=params)


def property_files(node_id: str) -> tuple[str, ...]:
    """The files that define a property: its test file and the conftest.py files above it.

    ``tests/unit/test_x.py::test_y[a]`` -> ``conftest.py``, ``tests/conftest.py``,
    ``tests/unit/conftest.py``, ``tests/unit/test_x.py``.
    """
    test_file = split_node_id(node_id).path
    if not test_file:
        return ()
    return (*conftest_paths(test_file), str(PurePosixPath(test_file)))


@lru_cache(maxsize=4096)  # a whole suite asks once per test, for a few modules
def conftest_paths(module_path: str) -> tuple[str, ...]:
    """Every ``conftest.py`` that applies to ``module_path``, outermost first."""
    parents = reversed(PurePosixPath(module_path).parents)  # "." first, then deeper
    return tuple(
        "conftest.py" if str(parent) == "." else f"{parent}/conftest.py" for parent in parents
    )


def without_params(node_id: str) -> str:
    """``tests/t.py::test_x[1-2]`` -> ``tests/t.py::test_x`` (the function's own id)."""
    node = split_node_id(node_id)
    return "::".join((node.path, *node.names)) if node.names else node.node_id


def expand_parametrized(selected: Sequence[str], seen: Sequence[str]) -> tuple[str, ...]:
    """The properties a run reports for the ids it selected: an id pytest reported is
    itself; a function's id that pytest reported only as parametrizations
    (``test_x[1]``, ``test_x[2]``) is those, in the order seen; an id reported in no form
    stays (it is labelled ``not_found``)."""
    reported = set(seen)
    expanded: dict[str, None] = {}
    for property_id in selected:
        if property_id in reported or split_node_id(property_id).params:
            expanded.setdefault(property_id, None)
            continue
        forms = [
            nodeid
            for nodeid in seen
            if split_node_id(nodeid).params and without_params(nodeid) == property_id
        ]
        for nodeid in forms or [property_id]:
            expanded.setdefault(nodeid, None)
    return tuple(expanded)
