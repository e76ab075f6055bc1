"""What a replay neutralises: the plugins that change what a replay observes, as one table,
and the probe's side of it (stdlib and pytest only: it runs in any image).

A replay must see each test's raw outcome, in one process, in an order and with random
state that do not change from one replay to the next, and must write nothing into its
tree. Some pytest plugins a project installs change exactly that: coverage measures (and
erases and writes ``.coverage`` in the tree), pytest-xdist runs the tests in other
processes, pytest-rerunfailures and flaky run a failing test again until it passes,
pytest-randomly and pytest-random-order shuffle the tests with a new seed each run, the
cache provider reorders by the last run (``--lf``, ``--ff``, ``--nf``, ``--sw``) and
Hypothesis keeps an example database that a later run replays first.

:data:`PLUGINS` says, for each, how it is found (its ``pytest11`` entry point names, its
options and ini keys in a project's configuration) and how a replay neutralises it
(``args``, placed after the command's own options so that they win over the project's
``addopts``, ``PYTEST_ADDOPTS`` and ``--command``). The decisions that use the table (which
arguments, what the configuration shows, the run log's record) are pure, in
``orchestrator.core.neutralise``; the probe here only makes sure pytest still accepts the
project's configuration once a plugin is switched off or blocked:

- :func:`register_stand_ins` gives every option and ini key of the table that no plugin
  registered an inert stand-in (after the initial conftests, so that a project's own
  option of the same name wins): ``--reruns 3`` in ``addopts`` parses and does nothing
  once pytest-rerunfailures is blocked, and ``--cov-reset`` parses where pytest-cov is
  not installed;
- :func:`register_markers` declares the markers of a plugin that is not running (the
  ``flaky`` marker under ``--strict-markers``);
- :func:`present` names the table's plugins a session had installed or loaded, for its
  result (``neutralised``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

# How an option reads its value, as argparse would: a bare flag, one value (``--x V`` or
# ``--x=V``), one value each time it is given, or a value it may go without.
FLAG: Final = "flag"
VALUE: Final = "value"
APPEND: Final = "append"
OPTIONAL: Final = "optional"

# How a replay neutralises a plugin.
SWITCHED_OFF: Final = "switched_off"  # the plugin's own switch, it stays loaded
BLOCKED: Final = "blocked"  # -p no:<name>; its options, ini keys and markers stay inert
PINNED: Final = "pinned"  # its randomness pinned to the run's seed (and ordering off)
ISOLATED: Final = "isolated"  # its files kept apart per replay, in the tmpfs

SEED_FIELD: Final = "{seed}"  # in an argument: the run's seed


@dataclass(frozen=True)
class Option:
    names: tuple[str, ...]
    reads: str = FLAG  # FLAG, VALUE, APPEND or OPTIONAL


@dataclass(frozen=True)
class Plugin:
    """One plugin a replay neutralises, and how."""

    key: str  # short name, as logs and records say it
    title: str  # the project's name for it
    distributions: tuple[str, ...]  # the packages that ship it (pip names)
    entry_points: tuple[str, ...]  # its pytest11 entry point names (() for a built-in)
    modules: tuple[str, ...]  # what `-p` may name it by
    how: str
    args: tuple[str, ...]  # added to every replay's arguments ("{seed}": the run's seed)
    does: str  # what a replay does to it, in words
    options: tuple[Option, ...] = ()
    ini: tuple[str, ...] = ()
    markers: tuple[str, ...] = ()  # "name: description" lines


PLUGINS: Final[tuple[Plugin, ...]] = (
    Plugin(
        key="cov",
        title="pytest-cov",
        distributions=("pytest-cov",),
        entry_points=("pytest_cov",),
        modules=("pytest_cov", "pytest_cov.plugin"),
        how=SWITCHED_OFF,
        # Its own reset of the sources: no measurement starts, nothing is erased or written
        # in the tree, and its `cov` fixture and `no_cover` marker stay (--no-cov would
        # keep a disabled plugin whose `no_cover` wrapper then fails the test).
        args=("--cov-reset",),
        does="no measurement, nothing written (--cov-reset)",
        options=(
            Option(("--cov",), OPTIONAL),
            Option(("--cov-reset",)),
            Option(("--cov-report",), APPEND),
            Option(("--cov-config",), VALUE),
            Option(("--no-cov-on-fail",)),
            Option(("--no-cov",)),
            Option(("--cov-fail-under",), VALUE),
            Option(("--cov-append",)),
            Option(("--cov-branch",)),
            Option(("--cov-precision",), VALUE),
            Option(("--cov-context",), VALUE),
        ),
        markers=("no_cover: disable coverage for this test (inert in a replay)",),
    ),
    Plugin(
        key="xdist",
        title="pytest-xdist",
        distributions=("pytest-xdist",),
        entry_points=("xdist", "xdist.looponfail"),
        modules=("xdist", "xdist.plugin", "xdist.looponfail"),
        how=SWITCHED_OFF,
        # In the replay's own process (its `worker_id` fixture says "master"): the probe
        # counts each test's calls where it runs, and a replay's workers are --jobs.
        args=("--numprocesses=0", "--dist=no"),
        does="tests in the replay's own process (--numprocesses=0 --dist=no)",
        options=(
            Option(("-n", "--numprocesses"), VALUE),
            Option(("--maxprocesses",), VALUE),
            Option(("--max-worker-restart",), VALUE),
            Option(("--dist",), VALUE),
            Option(("--loadscope-reorder",)),
            Option(("--no-loadscope-reorder",)),
            Option(("--tx",), APPEND),
            Option(("--px",), APPEND),
            Option(("-d",)),
            Option(("--rsyncdir",), APPEND),
            Option(("--rsyncignore",), APPEND),
            Option(("--testrunuid",), VALUE),
            Option(("--maxschedchunk",), VALUE),
            Option(("-f", "--looponfail")),
        ),
        ini=("rsyncdirs", "rsyncignore", "looponfailroots"),
        markers=("xdist_group: a group of tests for one xdist worker (inert in a replay)",),
    ),
    Plugin(
        key="rerunfailures",
        title="pytest-rerunfailures",
        distributions=("pytest-rerunfailures",),
        entry_points=("rerunfailures",),
        modules=("rerunfailures", "pytest_rerunfailures"),
        how=BLOCKED,
        # --reruns 0 would leave @pytest.mark.flaky(reruns=...) rerunning.
        args=("-p", "no:rerunfailures"),
        does="no reruns: each test's raw outcome (-p no:rerunfailures)",
        options=(
            Option(("--reruns",), VALUE),
            Option(("--reruns-delay",), VALUE),
            Option(("--reruns-delay-backoff-factor",), VALUE),
            Option(("--only-rerun",), APPEND),
            Option(("--rerun-except",), APPEND),
            Option(("--rerun-exclude-path",), APPEND),
            Option(("--force-reruns",), VALUE),
            Option(("--reruns-mode",), VALUE),
            Option(("--fail-on-flaky",)),
            Option(("--rerun-show-tracebacks",)),
            Option(("--max-suite-reruns",), VALUE),
        ),
        ini=("reruns", "reruns_delay", "reruns_delay_backoff_factor", "only_rerun", "rerun_except"),
        markers=("flaky: rerun a failing test (inert in a replay: its raw outcome counts)",),
    ),
    Plugin(
        key="flaky",
        title="flaky",
        distributions=("flaky",),
        entry_points=("flaky",),
        modules=("flaky", "flaky.flaky_pytest_plugin"),
        how=BLOCKED,
        args=("-p", "no:flaky"),
        does="no reruns: each test's raw outcome (-p no:flaky)",
        options=(
            Option(("--force-flaky",)),
            Option(("--max-runs",), VALUE),
            Option(("--min-passes",), VALUE),
            Option(("--no-flaky-report",)),
            Option(("--no-success-flaky-report",)),
        ),
        markers=("flaky: rerun a failing test (inert in a replay: its raw outcome counts)",),
    ),
    Plugin(
        key="randomly",
        title="pytest-randomly",
        distributions=("pytest-randomly",),
        entry_points=("randomly",),
        modules=("randomly", "pytest_randomly"),
        how=PINNED,
        # The order stays the suite's own (a test meets the same predecessors on both
        # sides and in every replay); the per-test reseeding of random, numpy, Faker and
        # factory_boy the project relies on stays, from the run's seed.
        args=(f"--randomly-seed={SEED_FIELD}", "--randomly-dont-reorganize"),
        does="seed pinned to the run's, order the suite's own",
        options=(
            Option(("--randomly-seed",), VALUE),
            Option(("--randomly-dont-reset-seed",)),
            Option(("--randomly-dont-reorganize",)),
        ),
    ),
    Plugin(
        key="random_order",
        title="pytest-random-order",
        distributions=("pytest-random-order",),
        entry_points=("random_order",),
        modules=("random_order", "random_order.plugin"),
        how=SWITCHED_OFF,
        # Its shuffle depends on the set of tests (a side with one more test shuffles all
        # of them differently): switched off rather than pinned.
        args=("--random-order-bucket=none",),
        does="order the suite's own (--random-order-bucket=none)",
        options=(
            Option(("--random-order",)),
            Option(("--random-order-bucket",), VALUE),
            Option(("--random-order-seed",), VALUE),
        ),
        markers=("random_order: keep these tests in order (inert in a replay)",),
    ),
    Plugin(
        key="cacheprovider",
        title="pytest's cache provider",
        distributions=(),
        entry_points=(),
        modules=("cacheprovider", "stepwise"),
        how=BLOCKED,
        # Always blocked by the replay's own `-p no:cacheprovider` (the tree is read-only).
        args=(),
        does="no last-failed or stepwise order, no .pytest_cache (-p no:cacheprovider)",
        options=(
            Option(("--lf", "--last-failed")),
            Option(("--ff", "--failed-first")),
            Option(("--nf", "--new-first")),
            Option(("--cache-show",), OPTIONAL),
            Option(("--cache-clear",)),
            Option(("--lfnf", "--last-failed-no-failures"), VALUE),
            Option(("--sw", "--stepwise")),
            Option(("--sw-skip", "--stepwise-skip")),
            Option(("--sw-reset", "--stepwise-reset")),
        ),
        ini=("cache_dir",),
    ),
    Plugin(
        key="hypothesis",
        title="Hypothesis",
        distributions=("hypothesis",),
        entry_points=("hypothesispytest",),
        modules=("hypothesispytest", "_hypothesis_pytestplugin"),
        how=ISOLATED,
        # HYPOTHESIS_STORAGE_DIRECTORY in the tmpfs, emptied before each replay: no replay
        # starts from examples another found, nothing is written in the tree. Its own
        # randomness (derandomize, --hypothesis-seed) is the project's choice.
        args=(),
        does="example database per replay, in the tmpfs",
    ),
)

BY_KEY: Final = {plugin.key: plugin for plugin in PLUGINS}
PREFIX: Final = "replay_inert_"  # the dest of a stand-in option


def known_option_names(parser: Any) -> set[str]:
    """Every option string some plugin (or pytest) registered on ``parser``."""
    groups = [getattr(parser, "_anonymous", None), *getattr(parser, "_groups", ())]
    names: set[str] = set()
    for group in groups:
        for option in getattr(group, "options", ()) if group is not None else ():
            names.update(option.names())
    return names


def _stand_in_attrs(option: Option, index: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {"dest": PREFIX + index, "help": "inert in a replay"}
    if option.reads == FLAG:
        attrs.update(action="store_true", default=False)
    elif option.reads == VALUE:
        attrs.update(action="store", default=None)
    elif option.reads == APPEND:
        attrs.update(action="append", default=[])
    else:
        attrs.update(action="append", nargs="?", const=True, default=[])
    return attrs


def register_stand_ins(parser: Any, plugins: Iterable[Plugin] = PLUGINS) -> list[str]:
    """Give each option and ini key of ``plugins`` that nothing registered an inert stand-in
    (their values are stored apart and read by nobody); the option strings stood in for.

    Called once the initial conftests are loaded, before the command line's full parse
    and before pytest checks the ini keys: a plugin, a conftest, or pytest itself that
    registered a name keeps it.
    """
    known = known_option_names(parser)
    group = parser.getgroup("replay-inert", "inert in a replay (orchestrator)")
    added: list[str] = []
    for plugin in plugins:
        for number, option in enumerate(plugin.options):
            names = tuple(name for name in option.names if name not in known)
            if not names:
                continue
            # _addoption: a stand-in for a plugin's short option (-n, -d) is allowed too.
            group._addoption(*names, **_stand_in_attrs(option, f"{plugin.key}_{number}"))
            known.update(names)
            added.extend(names)
        for name in plugin.ini:
            if name not in parser._inidict:
                parser.addini(name, "inert in a replay")
    return added


def register_markers(config: Any, plugins: Iterable[Plugin] = PLUGINS) -> None:
    """Declare the markers of each plugin of ``plugins`` that is not loaded and whose
    markers nothing declared (``--strict-markers`` would refuse them)."""
    declared = {line.split(":", 1)[0].split("(", 1)[0].strip() for line in config.getini("markers")}
    manager = config.pluginmanager
    for plugin in plugins:
        if any(manager.has_plugin(name) for name in plugin.entry_points):
            continue  # it declares its own (a blocked plugin is never loaded)
        for line in plugin.markers:
            name = line.split(":", 1)[0]
            if name not in declared:
                config.addinivalue_line("markers", line)
                declared.add(name)


def installed_entry_points() -> set[str]:
    """The ``pytest11`` entry point names of the installed distributions."""
    from importlib.metadata import entry_points

    with contextlib.suppress(Exception):  # a broken distribution's metadata: none known
        return {point.name for point in entry_points(group="pytest11")}
    return set()


def present(config: Any) -> list[str]:
    """The keys of the table's plugins this session had: installed (an entry point, even
    one the replay blocked) or loaded (also through ``-p``); Hypothesis only when it is
    loaded (PYTEST_DISABLE_PLUGIN_AUTOLOAD aside, the same)."""
    manager = config.pluginmanager
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        installed: set[str] = set()
    else:
        installed = installed_entry_points()
    found = []
    for plugin in PLUGINS:
        loaded = any(manager.has_plugin(name) for name in (*plugin.entry_points, *plugin.modules))
        if plugin.entry_points and (loaded or installed.intersection(plugin.entry_points)):
            found.append(plugin.key)
    return found
