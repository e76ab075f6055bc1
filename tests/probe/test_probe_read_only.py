"""The probe's fact about writes the read-only file system refused (EROFS), with pytester:
in the body, chained, in a fixture, at collection, inside and outside the tested tree."""

from __future__ import annotations

import textwrap

WRITES = """
    import errno
    import os

    import pytest


    def refuse(path):
        raise OSError(errno.EROFS, "Read-only file system", path)


    def test_in_the_tree():
        refuse("data/cache.bin")


    def test_outside_the_tree():
        refuse("/usr/lib/somewhere")


    def test_without_a_path():
        raise OSError(errno.EROFS, "Read-only file system")


    def test_chained():
        try:
            refuse("x.txt")
        except OSError as error:
            raise RuntimeError("could not save") from error


    def test_other_os_error():
        raise OSError(errno.EACCES, "Permission denied", "x")


    def test_plain_failure():
        assert 1 == 2


    @pytest.fixture
    def prepared():
        refuse("fixture.db")


    def test_in_set_up(prepared):
        pass
"""


def by_name(document):
    return {entry["nodeid"].split("::")[-1]: entry for entry in document["tests"]}


def test_the_probe_reports_refused_writes_and_where(pytester, probe_run):
    pytester.makepyfile(test_writes=textwrap.dedent(WRITES))
    root = str(pytester.path)
    entries = by_name(probe_run())
    assert entries["test_in_the_tree"]["label"] == "assert_fail"  # labels.py decides
    assert entries["test_in_the_tree"]["read_only"] == {
        "path": f"{root}/data/cache.bin",
        "in_rootdir": True,
    }
    assert entries["test_outside_the_tree"]["read_only"] == {
        "path": "/usr/lib/somewhere",
        "in_rootdir": False,
    }
    assert entries["test_without_a_path"]["read_only"] == {"path": None, "in_rootdir": True}
    assert entries["test_chained"]["read_only"]["path"] == f"{root}/x.txt"
    assert entries["test_in_set_up"]["label"] == "harness_error"
    assert entries["test_in_set_up"]["read_only"]["path"] == f"{root}/fixture.db"
    assert "read_only" not in entries["test_other_os_error"]
    assert "read_only" not in entries["test_plain_failure"]


def test_a_refused_write_at_collection_is_reported_on_the_module(pytester, probe_run):
    pytester.makepyfile(
        test_at_import=(
            "import errno\nraise OSError(errno.EROFS, 'Read-only file system', 'generated.py')\n"
        )
    )
    (entry,) = [e for e in probe_run()["tests"] if e["nodeid"] == "test_at_import.py"]
    assert (entry["label"], entry["reason"]) == ("harness_error", "collection_error")
    assert entry["read_only"] == {"path": f"{pytester.path}/generated.py", "in_rootdir": True}
