"""What a replay neutralises, decided from the one table of plugins. Pure.

The table (:data:`orchestrator.probe.neutral.PLUGINS`) lives with the probe, because the
probe reads it inside the container too (it makes a switched-off or blocked plugin's
options inert there); the decisions are here:

- :func:`neutraliser_args`: the arguments every replay gets after the command's own
  options (so they win over ``addopts``, ``PYTEST_ADDOPTS`` and ``--command``), the run's
  seed filled in;
- :func:`options_in`: which plugins a configuration asks for (``addopts`` of a side's ini
  file, ``PYTEST_ADDOPTS``, the command), and with which words;
- :func:`installed_from_packages`: the plugins a project image's package label lists;
- :class:`Neutralisation`: the run log's record (``neutralise``), and
  :func:`neutralised_fields`: the one log line a run says of what its replays had.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.probe.neutral import (
    APPEND,
    BY_KEY,
    OPTIONAL,
    PLUGINS,
    SEED_FIELD,
    VALUE,
    Plugin,
)

__all__ = [
    "PLUGINS",
    "Neutralisation",
    "installed_from_packages",
    "neutralised_fields",
    "neutraliser_args",
    "options_in",
    "plugin_of_module",
    "present_in",
]


def neutraliser_args(seed: int) -> tuple[str, ...]:
    """Every plugin's neutralising arguments, in the table's order, with the run's seed."""
    return tuple(arg.replace(SEED_FIELD, str(seed)) for plugin in PLUGINS for arg in plugin.args)


def plugin_of_module(name: str) -> str | None:
    """The key of the table's plugin that ``-p NAME`` names (``pytest_cov`` -> ``cov``)."""
    for plugin in PLUGINS:
        if name in plugin.modules or name in plugin.entry_points:
            return plugin.key
    return None


_OPTIONS: dict[str, tuple[str, str]] = {
    name: (plugin.key, option.reads)
    for plugin in PLUGINS
    for option in plugin.options
    for name in option.names
}
_SHORT_VALUE = re.compile(r"^(-[a-zA-Z])(.+)$")  # -n2: a short option with its value


def _option(word: str) -> tuple[str, str, bool] | None:
    """(plugin key, how it reads, whether the value is in the word) of one option word."""
    name, equals, _ = word.partition("=")
    known = _OPTIONS.get(name)
    if known is not None:
        return known[0], known[1], bool(equals)
    short = _SHORT_VALUE.match(word)
    if short is not None and not word.startswith("--"):
        known = _OPTIONS.get(short.group(1))
        if known is not None and known[1] in (VALUE, APPEND):
            return known[0], known[1], True
    return None


def options_in(words: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The words of a pytest argument list that ask for a plugin of the table, per plugin
    key, in order: an option with its value (``-n 2``, ``--cov=pkg``) and ``-p NAME`` for
    one of its modules (``-p no:NAME`` too: the project's own switch). Positional words and
    other options are left out; a word that is not an option is never taken for one."""
    found: dict[str, list[str]] = {}
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if word == "--":
            break
        if word == "-p" or (word.startswith("-p") and not word.startswith("--")):
            value = word[2:] if word != "-p" else (words[index] if index < len(words) else "")
            if word == "-p":
                index += 1
            key = plugin_of_module(value.removeprefix("no:"))
            if key is not None:
                found.setdefault(key, []).extend(("-p", value))
            continue
        option = _option(word) if word.startswith("-") else None
        if option is None:
            continue
        key, reads, inline = option
        taken = [word]
        takes_next = reads in (VALUE, APPEND) and not inline
        # argparse gives an optional value the next word unless that is an option
        # (`--cov src tests` measures src).
        if reads == OPTIONAL and not inline and index < len(words):
            takes_next = not words[index].startswith("-")
        if takes_next and index < len(words):
            taken.append(words[index])
            index += 1
        found.setdefault(key, []).extend(taken)
    return {key: tuple(found[key]) for key in (p.key for p in PLUGINS) if key in found}


def installed_from_packages(label: str | None) -> tuple[str, ...] | None:
    """The keys of the table's plugins a project image's ``orchestrator.packages`` label
    lists (``name==version ...``); None when the image has no such label (any other image:
    its replays say what they had)."""
    if label is None:
        return None
    names = {
        re.sub(r"[-_.]+", "-", item.partition("==")[0]).lower() for item in label.split() if item
    }
    return tuple(plugin.key for plugin in PLUGINS if names.intersection(plugin.distributions))


@dataclass(frozen=True, kw_only=True)
class SideConfig:
    """What one side's configuration asks of the table's plugins."""

    ini_file: str | None  # the file pytest reads its addopts from (None: none)
    found: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)
    # where ("addopts", "PYTEST_ADDOPTS", "--command") -> plugin key -> words


def side_config(
    addopts: Sequence[str], ini_file: str | None, env_addopts: Sequence[str], command: Sequence[str]
) -> SideConfig:
    """One side's :class:`SideConfig` from its ini ``addopts``, ``PYTEST_ADDOPTS`` (from
    ``--env``) and the command's own arguments."""
    found = {
        where: options_in(words)
        for where, words in (
            ("addopts", addopts),
            ("PYTEST_ADDOPTS", env_addopts),
            ("--command", command),
        )
    }
    return SideConfig(ini_file=ini_file, found={where: f for where, f in found.items() if f})


@dataclass(frozen=True, kw_only=True)
class Neutralisation:
    """What a run's replays neutralise (the run log's ``neutralise``)."""

    seed: int
    sides: Mapping[str, SideConfig] = field(default_factory=dict)
    installed: tuple[str, ...] | None = None  # from the image's package label

    @property
    def args(self) -> tuple[str, ...]:
        return neutraliser_args(self.seed)

    def asked(self) -> dict[str, list[str]]:
        """Plugin key -> where a side's configuration asks for it (``base: addopts
        (pyproject.toml): --cov=pkg``), in the table's order."""
        asked: dict[str, list[str]] = {}
        for side, config in self.sides.items():
            for where, per_plugin in config.found.items():
                source = f"{where} ({config.ini_file})" if where == "addopts" else where
                for key, words in per_plugin.items():
                    asked.setdefault(key, []).append(f"{side}: {source}: {' '.join(words)}")
        return {p.key: asked[p.key] for p in PLUGINS if p.key in asked}

    def to_json(self) -> dict[str, Any]:
        return {
            "args": list(self.args),
            "plugins": {
                plugin.key: {
                    "title": plugin.title,
                    "how": plugin.how,
                    "does": plugin.does,
                    "args": [arg.replace(SEED_FIELD, str(self.seed)) for arg in plugin.args],
                }
                for plugin in PLUGINS
            },
            "installed": None if self.installed is None else list(self.installed),
            "config": {
                side: {
                    "ini_file": config.ini_file,
                    "found": {
                        where: {key: list(words) for key, words in per_plugin.items()}
                        for where, per_plugin in config.found.items()
                    },
                }
                for side, config in self.sides.items()
            },
        }


def present_in(docs: Iterable[Mapping[str, Any] | None]) -> tuple[str, ...]:
    """The table's plugins that replays had, from their ``replay-run/1`` documents (each
    probe result's ``neutralised``), in the table's order. A document without the field
    (an older probe, a replay without a result) adds nothing."""
    seen: set[str] = set()
    for doc in docs:
        result = doc.get("result") if isinstance(doc, Mapping) else None
        listed = result.get("neutralised") if isinstance(result, Mapping) else None
        if isinstance(listed, list):
            seen.update(key for key in listed if isinstance(key, str))
    return tuple(plugin.key for plugin in PLUGINS if plugin.key in seen)


def neutralised_fields(
    present: Iterable[str], asked: Mapping[str, Sequence[str]] | None = None
) -> dict[str, str] | None:
    """The fields of the one log line a run says of what its replays neutralised: the
    plugins the replays had (installed or loaded: ``present``), and for each what a
    replay does to it and where the configuration asked for it; None when none."""
    asked = asked or {}
    had = set(present)
    # A built-in (the cache provider, always blocked) is said when the configuration asks.
    keys = [
        plugin.key
        for plugin in PLUGINS
        if plugin.key in had or (not plugin.entry_points and asked.get(plugin.key))
    ]
    if not keys:
        return None
    details = []
    for key in keys:
        plugin: Plugin = BY_KEY[key]
        where = f" [{'; '.join(asked[key])}]" if asked.get(key) else ""
        details.append(f"{key}: {plugin.does}{where}")
    return {"plugins": ",".join(keys), "detail": "; ".join(details)}
