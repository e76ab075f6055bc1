"""What pytest collects as tests, as its configuration says: ``testpaths``, ``python_files``
and the doctest options. Pure.

``--tests-from`` lays one revision's test files over both trees (:mod:`.test_files`); the
files pytest collects as tests beyond the default names are found here, from

- the ini file pytest takes at the tree's root
  (:func:`~orchestrator.core.replay_env.pytest_ini_options`):
  ``testpaths`` (folders, files or globs searched when the command names no path),
  ``python_files`` (test module patterns, ``check_*.py``), and ``addopts``;
- ``addopts`` and the command's own options: ``--doctest-glob PATTERN`` (text files run as
  doctests; pytest's default is ``test*.txt``), ``--doctest-modules``, ``-p no:doctest``,
  and ``-o``/``--override-ini`` of ``python_files`` or ``testpaths``.

pytest's rules followed here: a pattern with a ``/`` is matched against the whole path,
else against the file's name (``fnmatch_ex``); a text doctest file is any file but a
``.py`` module matching a doctest glob, or a ``.txt``/``.rst`` file named as a path to
collect; ``--doctest-modules`` makes every module a doctest module (that is no reason to
lay a module over: it is code under test, :mod:`.test_files` says why).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from orchestrator.core.replay_env import option_words, pytest_ini_options

DEFAULT_PYTHON_FILES = ("test_*.py", "*_test.py")
DEFAULT_DOCTEST_GLOB = "test*.txt"
# Initial paths with these suffixes are text doctests whatever the globs (pytest's _is_doctest).
DOCTEST_SUFFIXES = (".txt", ".rst")


@dataclass(frozen=True, kw_only=True)
class CollectionConfig:
    """What pytest collects, as one revision's configuration and the command say.

    ``where`` names what was read (``tox.ini at base``) for the run log and the reasons;
    ``python_files`` and ``doctest_globs`` are as pytest applies them (defaults included);
    ``doctest_text`` is False under ``-p no:doctest``.
    """

    testpaths: tuple[str, ...] = ()
    python_files: tuple[str, ...] = DEFAULT_PYTHON_FILES
    doctest_globs: tuple[str, ...] = (DEFAULT_DOCTEST_GLOB,)
    doctest_modules: bool = False
    doctest_text: bool = True
    where: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "testpaths": list(self.testpaths),
            "python_files": list(self.python_files),
            "doctest_globs": list(self.doctest_globs) if self.doctest_text else [],
            "doctest_modules": self.doctest_modules,
            "read_from": list(self.where),
        }


def _option_values(args: Sequence[str], long: str) -> list[str]:
    """Every value of ``--long VALUE`` / ``--long=VALUE`` in ``args``."""
    values: list[str] = []
    for index, word in enumerate(args):
        if word == long and index + 1 < len(args):
            values.append(args[index + 1])
        elif word.startswith(long + "="):
            values.append(word.split("=", 1)[1])
    return values


def _overrides(args: Sequence[str]) -> dict[str, str]:
    """``-o key=value`` / ``--override-ini key=value`` (and ``--override-ini=key=value``)."""
    found: dict[str, str] = {}
    texts = _option_values(args, "-o") + _option_values(args, "--override-ini")
    texts += [word[2:] for word in args if word.startswith("-o") and len(word) > 2]
    for text in texts:
        key, sep, value = text.partition("=")
        if sep:
            found[key.strip()] = value
    return found


def _disabled_plugins(args: Sequence[str]) -> set[str]:
    names = _option_values(args, "-p") + [w[2:] for w in args if w.startswith("-p") and w[2:]]
    return {name.strip()[3:] for name in names if name.strip().startswith("no:")}


def collection_config(
    files: Mapping[str, bytes | None], command_options: Sequence[str] = (), *, at: str = ""
) -> CollectionConfig:
    """The configuration of one revision (``files``: its root's ini files, None where
    absent) with the command's options (``command_options``: the words before its paths)
    laid over it, as pytest would read them. ``at`` names the revision for ``where``."""
    options, name = pytest_ini_options(files)
    addopts = list(option_words(options.get("addopts")))
    args = [*addopts, *command_options]
    override = _overrides(args)
    testpaths = option_words(override.get("testpaths", options.get("testpaths")))
    python_files = option_words(override.get("python_files", options.get("python_files")))
    globs = tuple(_option_values(args, "--doctest-glob"))
    where = [f"{name}{f' at {at}' if at else ''}"] if name is not None else []
    return CollectionConfig(
        testpaths=tuple(testpaths),
        python_files=tuple(python_files) or DEFAULT_PYTHON_FILES,
        doctest_globs=globs or (DEFAULT_DOCTEST_GLOB,),
        doctest_modules="--doctest-modules" in args,
        doctest_text="doctest" not in _disabled_plugins(args),
        where=tuple(where),
    )


def merge_configs(configs: Iterable[CollectionConfig]) -> CollectionConfig:
    """What any of ``configs`` collects (the union of their paths and patterns)."""
    listed = list(configs)
    if not listed:
        return CollectionConfig()

    def union(values: Iterable[Iterable[str]]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(value for group in values for value in group))

    texts = [config for config in listed if config.doctest_text]
    return CollectionConfig(
        testpaths=union(config.testpaths for config in listed),
        python_files=union(config.python_files for config in listed),
        doctest_globs=union(config.doctest_globs for config in texts) or (DEFAULT_DOCTEST_GLOB,),
        doctest_modules=any(config.doctest_modules for config in listed),
        doctest_text=bool(texts),
        where=union(config.where for config in listed),
    )


def matches_pattern(path: str, pattern: str) -> bool:
    """pytest's ``fnmatch_ex``: a pattern without ``/`` matches the file's name, one with
    ``/`` the path (anywhere below the root)."""
    if "/" not in pattern:
        return fnmatch.fnmatchcase(PurePosixPath(path).name, pattern)
    return fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(path, f"*/{pattern}")


_WILDCARDS = re.compile(r"[*?]|\[[^\]]*\]")


def names_test_modules(pattern: str) -> bool:
    """Does ``pattern`` single out test modules, not every module? ``check_*.py`` and
    ``*_spec.py`` do; ``*.py`` and ``*`` match the library's own modules too, so they are
    no rule for what to lay over."""
    name = pattern.rsplit("/", 1)[-1]
    literal = _WILDCARDS.sub("", name)
    literal = literal.removesuffix(".py") if literal.endswith(".py") else literal
    return any(char.isalnum() for char in literal) and name.endswith(".py")


def is_test_module(path: str, config: CollectionConfig) -> bool:
    """A module pytest collects as a test module by ``python_files`` (a pattern that
    matches any module aside: :func:`names_test_modules`)."""
    return path.endswith(".py") and any(
        names_test_modules(pattern) and matches_pattern(path, pattern)
        for pattern in config.python_files
    )


def doctest_glob_of(path: str, config: CollectionConfig) -> str | None:
    """The doctest glob by which pytest runs the text file ``path`` as a doctest (None:
    it does not; a ``.py`` module never is one)."""
    if not config.doctest_text or path.endswith(".py"):
        return None
    return next((glob for glob in config.doctest_globs if matches_pattern(path, glob)), None)


def search_roots(
    command_paths: Sequence[str], config: CollectionConfig, folders: Iterable[str]
) -> tuple[str, ...]:
    """Where pytest looks for tests: the command's paths; without them ``testpaths``
    (a glob among them matched against ``folders``, the trees' paths and their parent
    folders); without those the whole tree (``"."``)."""
    if command_paths:
        return tuple(dict.fromkeys(command_paths))
    if not config.testpaths:
        return (".",)
    known = list(folders)
    roots: dict[str, None] = {}
    for entry in config.testpaths:
        if any(char in entry for char in "*?["):
            roots.update(dict.fromkeys(p for p in known if fnmatch.fnmatchcase(p, entry)))
        else:
            roots.setdefault(entry, None)
    return tuple(roots)
