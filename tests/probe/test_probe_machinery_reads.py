"""A test's call counts belong to the test: the same alone, first, or after failing tests.

Reads the interpreter's machinery makes on a test's behalf (linecache reading a source
for a traceback, a warning's line or ``inspect.getsource``; pdb's rc files when doctest
builds its debugger; the import system) are not the code's dependency calls, and the
linecache a failing test filled must not change what its neighbours count. Each inner
session starts with an empty linecache, as a replay's fresh interpreter does.
"""

from __future__ import annotations

import linecache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiers import examples

HELPERS = """
import warnings


def check(x):
    if x < 0:
        raise ValueError("negative")
    return x


def noisy():
    warnings.warn("old api", DeprecationWarning, stacklevel=2)
    return 1


def read(path):
    with open(path) as handle:
        return handle.read()
"""

# A module of doctests whose expected exception is raised in helpers.py: doctest formats
# the traceback, and linecache reads helpers.py unless a failing test already had it read.
LIB = '''
import helpers


def checked(x):
    """
    >>> checked(1)
    1
    >>> checked(-1)
    Traceback (most recent call last):
    ...
    ValueError: negative
    """
    return helpers.check(x)


def shout(text):
    """
    >>> shout("a")
    'A'
    """
    return text.upper()
'''

# Imported lazily by one test: the import, and the data file read at import, are the
# import system's (whichever test imports it first).
# A session-wide fixture two tests ask for in their bodies: whichever asks first sets it up.
CONFTEST = """
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def shared_data():
    return (Path(__file__).parent / "data.txt").read_text()
"""

LAZY = """
from pathlib import Path

DATA = (Path(__file__).parent / "data.txt").read_text()
"""

SUITE = """
import importlib.resources
import inspect
import linecache
import pkgutil
import tokenize
import traceback
import warnings
from pathlib import Path

import pytest

import helpers

DATA = Path(__file__).parent / "data.txt"


def test_fails_in_helper():
    helpers.check(-1)


def test_fails_here():
    assert helpers.check(2) == 3


def test_formats_a_caught_traceback():
    try:
        helpers.check(-1)
    except ValueError:
        text = traceback.format_exc()
    assert "negative" in text


def test_reads_the_source_of_the_code():
    assert "def check" in inspect.getsource(helpers.check)
    assert linecache.getline(helpers.__file__, 5).strip() == "if x < 0:"


def test_warns():
    with pytest.warns(DeprecationWarning):
        helpers.noisy()


def test_formats_a_warning_with_its_line():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        helpers.noisy()
    (shown,) = seen
    text = warnings.formatwarning(shown.message, shown.category, shown.filename, shown.lineno)
    assert "helpers.noisy()" in text


def test_imports_lazily():
    import lazy_module

    assert lazy_module.DATA == "data\\n"


def test_reads_its_data():
    assert helpers.read(DATA) == "data\\n"


def test_tokenize_open_is_the_codes_read():
    with tokenize.open(DATA) as handle:
        assert handle.read() == "data\\n"


def test_package_data_through_the_loader_is_the_codes_read():
    assert pkgutil.get_data("pkgdata", "res.txt") == b"res\\n"


def test_asks_for_the_shared_data(request):
    assert request.getfixturevalue("shared_data") == "data\\n"


def test_asks_for_the_shared_data_too(request):
    assert request.getfixturevalue("shared_data") == "data\\n"


def test_a_package_resource_is_the_codes_read():
    assert importlib.resources.files("pkgdata").joinpath("res.txt").read_text() == "res\\n"
"""

TESTS = (
    "test_suite.py::test_fails_in_helper",
    "test_suite.py::test_fails_here",
    "test_suite.py::test_formats_a_caught_traceback",
    "test_suite.py::test_reads_the_source_of_the_code",
    "test_suite.py::test_warns",
    "test_suite.py::test_formats_a_warning_with_its_line",
    "test_suite.py::test_imports_lazily",
    "test_suite.py::test_reads_its_data",
    "test_suite.py::test_tokenize_open_is_the_codes_read",
    "test_suite.py::test_a_package_resource_is_the_codes_read",
    "test_suite.py::test_package_data_through_the_loader_is_the_codes_read",
    "test_suite.py::test_asks_for_the_shared_data",
    "test_suite.py::test_asks_for_the_shared_data_too",
    "lib.py::lib.checked",
    "lib.py::lib.shout",
)
FAILING = TESTS[:2]
ZERO = dict.fromkeys(("open", "sleep", "socket", "subprocess", "sqlite", "http"), 0)
# The code's own reads; every other test reads nothing of its own.
OWN_OPENS = {
    "test_suite.py::test_reads_its_data": 1,
    "test_suite.py::test_tokenize_open_is_the_codes_read": 1,
    "test_suite.py::test_a_package_resource_is_the_codes_read": 1,
    "test_suite.py::test_package_data_through_the_loader_is_the_codes_read": 1,
}


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(helpers=HELPERS, lib=LIB, lazy_module=LAZY, test_suite=SUITE)
    pytester.makeconftest(CONFTEST)
    (pytester.path / "data.txt").write_text("data\n")
    package = pytester.mkpydir("pkgdata")
    (package / "res.txt").write_text("res\n")
    pytester.syspathinsert()
    return pytester


def calls_by_test(probe_run: Any, *nodeids: str) -> dict[str, dict[str, int]]:
    """Each test's counts from one fresh session running `nodeids` in that order."""
    linecache.clearcache()  # a replay's interpreter starts with nothing cached
    document = probe_run("--doctest-modules", *nodeids)
    assert [entry["nodeid"] for entry in document["tests"]] == list(nodeids)
    for entry in document["tests"]:
        expected = "assert_fail" if entry["nodeid"] in FAILING else "assert_pass"
        assert entry["label"] == expected, entry
    return {entry["nodeid"]: entry["calls"] for entry in document["tests"]}


@pytest.fixture
def alone(suite: pytest.Pytester, probe_run: Any) -> dict[str, dict[str, int]]:
    """Each test's counts when it runs alone in its session."""
    return {nodeid: calls_by_test(probe_run, nodeid)[nodeid] for nodeid in TESTS}


def test_alone_each_test_counts_only_the_codes_own_reads(alone):
    for nodeid, calls in alone.items():
        assert calls == {**ZERO, "open": OWN_OPENS.get(nodeid, 0)}, nodeid


def test_a_doctest_counts_the_same_after_a_failing_test_put_its_source_in_linecache(
    suite, probe_run
):
    doctest = "lib.py::lib.checked"
    first = calls_by_test(probe_run, doctest, "test_suite.py::test_fails_in_helper")
    after = calls_by_test(probe_run, "test_suite.py::test_fails_in_helper", doctest)
    # pdb's rc files, doctest.py and helpers.py (read for the expected exception's
    # traceback, unless the failing test's report had it read already) are not the
    # doctest's: nothing is counted, before or after the failing test.
    assert first[doctest] == after[doctest] == ZERO


@settings(
    max_examples=examples(12),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    order=st.permutations(TESTS).flatmap(
        lambda tests: st.integers(min_value=1, max_value=len(tests)).map(lambda n: tests[:n])
    ),
    failing_first=st.booleans(),
)
def test_each_tests_counts_are_the_same_alone_first_or_after_failing_tests(
    alone, probe_run, order, failing_first
):
    if failing_first:  # the report's case: failing tests' tracebacks were rendered first
        order = [*FAILING, *(nodeid for nodeid in order if nodeid not in FAILING)]
    seen = calls_by_test(probe_run, *order)
    for nodeid in order:
        assert seen[nodeid] == alone[nodeid], (nodeid, order)


def test_linecache_entry_points_are_wrapped_once_and_pdb_reads_its_own_rc_files(
    tmp_path, monkeypatch
):
    import pdb

    from orchestrator.probe import meter

    names = ("getlines", "updatecache")
    originals = [getattr(linecache, name).probe_real for name in names]
    meter.install()  # again: the wrappers are replaced, never stacked
    for name, original in zip(names, originals, strict=True):
        assert getattr(linecache, name).probe_real is original
        assert not hasattr(original, "probe_real")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    source = tmp_path / "module.py"
    source.write_text("x = 1\n")
    (tmp_path / ".pdbrc").write_text("")
    (tmp_path / "not.pdbrc").write_text("")
    meter.METER.start(())
    try:
        with open(".pdbrc"):  # the code's own read: no debugger was made
            pass
        assert linecache.getline(str(source), 1) == "x = 1\n"  # linecache's read
        pdb.Pdb(nosigint=True)  # reads ~/.pdbrc and ./.pdbrc: pdb's
        with open("not.pdbrc"):
            pass
    finally:
        meter.METER.stop()
    assert meter.METER.counts["open"] == 2
    assert meter.METER.reading_source == {}


HYPOTHESIS_SUITE = """
from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=3, database=None)
@given(st.text(max_size=3))
def test_draws_text_first(text):
    assert isinstance(text, str)


@settings(max_examples=3, database=None)
@given(st.text(max_size=3))
def test_draws_text_too(text):
    assert isinstance(text, str)
"""


def test_hypothesiss_table_of_unicode_categories_is_read_by_no_test(
    pytester: pytest.Pytester, probe_run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hypothesis reads (or computes and writes) its charmap once per process, for the
    first test that draws text: not that test's call, whichever it is."""
    pytester.makepyfile(test_text=HYPOTHESIS_SUITE)
    first, second = "test_text.py::test_draws_text_first", "test_text.py::test_draws_text_too"
    for storage in ("fresh", "warm"):  # the table computed and written, then read
        monkeypatch.setenv("HYPOTHESIS_STORAGE_DIRECTORY", str(pytester.path / "hyp"))
        for order in ((first, second), (second, first)):
            import hypothesis.internal.charmap as charmap

            monkeypatch.setattr(charmap, "_charmap", None)  # a fresh interpreter's
            cached = getattr(charmap.intervals_from_codec, "probe_real", None)
            cached = cached or charmap.intervals_from_codec
            if hasattr(cached, "cache_clear"):
                cached.cache_clear()
            document = probe_run(*order)
            calls = {entry["nodeid"]: entry["calls"] for entry in document["tests"]}
            assert calls[first] == calls[second] == ZERO, (storage, order, calls)
