"""What a project image build may read and where its pip may download from: the tree's
paths stay inside the repository, index options come from the operator only, and the
host takes only wheels from the build container. Pure."""

from __future__ import annotations

import posixpath
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core import project_image as core
from orchestrator.errors import InputError

# Paths as a hostile tree would write them: dots, slashes, home and drive prefixes.
path_text = st.text(alphabet="ab./~\\:C", max_size=24)


def _inside(path: str, root: str = "/repo") -> bool:
    joined = posixpath.normpath(posixpath.join(root, path))
    return joined.startswith(root + "/")


@given(path_text)
def test_a_tree_path_is_inside_the_repository_or_refused(path):
    try:
        normal = core.inside_path(path, "pyproject.toml:1")
    except InputError as error:
        message = str(error)
    else:
        message = None
    if message is not None:
        assert message.startswith("pyproject.toml:1: ")
        return
    assert not normal.startswith("/")
    assert normal == posixpath.normpath(normal)
    assert _inside(normal)


@given(st.lists(path_text, min_size=1, max_size=4))
def test_includes_of_includes_never_leave_the_repository(chain):
    ref = core.FileRef(path="requirements/dev.txt")
    for number, given_path in enumerate(chain, start=1):
        try:
            ref = ref.include(given_path, f"{ref.shown}:{number}")
        except InputError:
            return
        assert ref.folder is None
        assert _inside(ref.path)


@given(path_text)
def test_includes_of_an_operators_file_stay_in_its_folder(path):
    ref = core.FileRef(path="reqs.txt", folder="/home/op/ci")
    try:
        included = ref.include(path, "reqs.txt:1")
    except InputError:
        return
    assert included.folder == "/home/op/ci"
    assert _inside(included.path, "/home/op/ci")


def _collect(files: dict[str, str], **kwargs) -> core.Requirements:
    return core.collect_requirements(
        metadata=kwargs.pop("meta", core.ProjectMetadata(name="p")),
        read=lambda ref: files.get(ref.shown),
        **kwargs,
    )


@pytest.mark.parametrize(
    ("files", "kwargs", "message"),
    [
        ({"r.txt": "-r /proc/self/environ\n"}, {}, "r.txt:1: '/proc/self/environ' is an absolute"),
        ({"r.txt": "ok\n-c /etc/passwd\n"}, {}, "r.txt:2: '/etc/passwd' is an absolute path"),
        ({"r.txt": "-r ../../escape.txt\n"}, {}, "r.txt:1: '../../escape.txt' leaves the repo"),
        ({"r.txt": "--requirement=sub/../../x\n"}, {}, "r.txt:1: 'sub/../../x' leaves"),
        ({"r.txt": "-r ~/x.txt\n"}, {}, "r.txt:1: '~/x.txt' is an absolute path"),
        ({}, {"tree_requirement_files": ["/abs/reqs.txt"]}, "image-build].requirements: '/abs"),
        ({}, {"tree_requirement_files": ["../up.txt"]}, "image-build].requirements: '../up.txt'"),
        (
            {},
            {"meta": core.ProjectMetadata(name="p", dependency_files=("/etc/hostname",))},
            "[tool.setuptools.dynamic].dependencies.file: '/etc/hostname' is an absolute",
        ),
    ],
)
def test_a_tree_naming_a_file_outside_is_refused_with_file_and_line(files, kwargs, message):
    tree = {"r.txt": "x\n", **files}
    if "tree_requirement_files" not in kwargs and "meta" not in kwargs:
        kwargs["tree_requirement_files"] = ["r.txt"]
    with pytest.raises(InputError, match=re.escape(message)):
        _collect(tree, **kwargs)


def test_the_operators_file_is_read_from_disk_and_its_includes_beside_it():
    ref = core.operator_file("../ci/reqs.txt", repo="/work/repo", cwd="/work/repo")
    assert ref == core.FileRef(path="reqs.txt", folder="/work/ci")
    found = _collect(
        {"/work/ci/reqs.txt": "-r more/extra.txt\n", "/work/ci/more/extra.txt": "attrs\n"},
        requirement_files=[ref],
    )
    assert "attrs" in found.lines
    with pytest.raises(InputError, match="leaves the folder of /work/ci"):
        _collect({"/work/ci/reqs.txt": "-r ../../repo/x.txt\n"}, requirement_files=[ref])


@pytest.mark.parametrize(
    ("given_path", "cwd", "expected"),
    [
        ("req/dev.txt", "/elsewhere", core.FileRef(path="req/dev.txt")),
        ("/work/repo/req/dev.txt", "/", core.FileRef(path="req/dev.txt")),
        ("../dev.txt", "/work/repo/req", core.FileRef(path="dev.txt")),
        ("/tmp/dev.txt", "/work/repo", core.FileRef(path="dev.txt", folder="/tmp")),
        ("/work/repository2/x.txt", "/", core.FileRef(path="x.txt", folder="/work/repository2")),
    ],
)
def test_the_command_lines_file_is_in_the_repository_when_it_names_one(given_path, cwd, expected):
    assert core.operator_file(given_path, repo="/work/repo", cwd=cwd) == expected


# ---------------------------------------------------------------- index options


def _index(env=None, **given) -> core.IndexOptions:
    return core.index_options(core.GivenIndex(**given), env or {}, cwd="/work")


def test_the_command_line_replaces_the_environments_pip_variables():
    env = {
        "PIP_INDEX_URL": "https://env.example/simple",
        "PIP_EXTRA_INDEX_URL": "https://a.example/simple https://b.example/simple",
        "PIP_FIND_LINKS": "/wheels relative",
        "PIP_TRUSTED_HOST": "a.example b.example",
        "ORCHESTRATOR_IMAGE_NETWORK": "host",
    }
    from_env = _index(env)
    assert from_env.index_url == "https://env.example/simple"
    assert from_env.extra_index_urls == ("https://a.example/simple", "https://b.example/simple")
    assert from_env.local_links == ("/wheels", "/work/relative")
    assert from_env.trusted_hosts == ("a.example", "b.example")
    assert from_env.network == "host"
    given_options = _index(
        env, index_url="https://cli.example/simple", extra_index_urls=(), find_links=(),
        trusted_hosts=(), network="mirror-net",
    )  # fmt: skip
    assert given_options.index_url == "https://cli.example/simple"
    assert (given_options.extra_index_urls, given_options.local_links) == ((), ())
    assert given_options.network == "mirror-net"


def test_no_network_takes_local_wheels_only_and_says_so():
    options = _index({"PIP_FIND_LINKS": "/wheels", "PIP_INDEX_URL": "https://i.example/s"})
    assert options.network == "none"
    assert options.no_index
    assert options.index_url is None
    assert options.pip_args() == ("--no-index", "--find-links", "/find-links/0")
    assert options.mounts() == (("/wheels", "/find-links/0"),)
    assert any("--no-index" in note for note in options.notes)


def test_no_network_and_no_local_wheels_is_one_line_naming_what_to_pass():
    with pytest.raises(InputError) as raised:
        _index({"PIP_INDEX_URL": "https://i.example/simple"})
    message = str(raised.value)
    assert "\n" not in message
    assert "--find-links DIR" in message
    assert "--network host" in message


@pytest.mark.parametrize(
    ("given_options", "message"),
    [
        ({"network": "container:abc"}, "not a network's name"),
        ({"network": "host", "index_url": "ftp://x"}, "not an http(s) URL"),
        ({"network": "host", "find_links": ("s3://bucket",)}, "neither a folder nor"),
        ({"network": "host", "trusted_hosts": ("a b;c",)}, "not a host name"),
        ({"network": "host", "no_index": True}, "--no-index without --find-links"),
    ],
)
def test_bad_index_options_are_refused(given_options, message):
    with pytest.raises(InputError, match=re.escape(message)):
        _index(**given_options)


def test_the_operators_ca_bundle_is_mounted_and_named_to_pip():
    options = _index({"PIP_CERT": "certs/ca.pem"}, network="host")
    assert options.cert == "/work/certs/ca.pem"
    assert options.mounts() == (("/work/certs/ca.pem", "/index-cert/ca.pem"),)
    assert options.pip_args()[-2:] == ("--cert", "/index-cert/ca.pem")
    assert _index(network="host", cert="/etc/ca.pem").cert == "/etc/ca.pem"
    offline = _index({"PIP_CERT": "/etc/ca.pem", "PIP_FIND_LINKS": "/wheels"})
    assert offline.cert is None  # no index to reach
    assert offline.mounts() == (("/wheels", "/find-links/0"),)


def test_pip_no_index_is_read_as_pip_reads_a_flag():
    assert _index({"PIP_NO_INDEX": "yes"}, network="host", find_links=("/w",)).no_index
    assert not _index({"PIP_NO_INDEX": "0"}, network="host").no_index
    with pytest.raises(InputError, match="PIP_NO_INDEX"):
        _index({"PIP_NO_INDEX": "maybe"}, network="host")


@given(
    user=st.from_regex(r"[a-z]{1,8}", fullmatch=True),
    password=st.from_regex(r"[A-Za-z0-9]{6,16}", fullmatch=True),
)
def test_the_document_never_carries_an_index_password(user, password):
    url = f"https://{user}:{password}@index.example/simple"
    options = _index(network="host", index_url=url, extra_index_urls=(url,), find_links=(url,))
    assert options.pip_args().count(url) == 3  # pip needs it; the container gets it
    shown = str(options.to_json())
    assert password not in shown
    assert "***@index.example" in shown


# ---------------------------------------------------------------- the container's output


@pytest.mark.parametrize(
    ("name", "kind", "size", "problem"),
    [
        ("a-1.0-py3-none-any.whl", "regular file", 10, None),
        ("a-1.0.tar.gz", "regular file", 10, None),
        ("a-1.0-py3-none-any.whl", "symbolic link", 10, "not a regular file"),
        ("a-1.0-py3-none-any.whl", "FIFO", 0, "not a regular file"),
        ("a-1.0-py3-none-any.whl", "directory", 0, "not a regular file"),
        ("notes.txt", "regular file", 1, "neither a wheel nor an sdist"),
        ("bad.whl", "regular file", 1, "not a wheel's file name"),
        ("a-1.0-py3-none-any.whl", "regular file", core.WHEEL_BYTES + 1, "larger than"),
    ],
)
def test_the_host_takes_only_regular_wheel_files_under_the_caps(name, kind, size, problem):
    found = core.output_problem(name, kind=kind, size=size, taken=0)
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert problem in found
    assert "add up" in (
        core.output_problem("a-1.0-py3-none-any.whl", kind="regular file", size=2,
                            taken=core.OUTPUT_BYTES - 1) or ""
    )  # fmt: skip


def test_the_projects_own_sdist_is_never_built():
    build, notes = core.sdists_to_build(
        ["Demo_Lib-1.0.tar.gz", "six-1.0.tar.gz", "attrs-23-py3-none-any.whl", "x.txt"],
        "demo-lib",
    )
    assert build == ("six-1.0.tar.gz",)
    assert any("Demo_Lib-1.0.tar.gz" in note and "project under test" in note for note in notes)


def test_a_failed_pip_run_is_the_inputs_fault_only_when_pip_says_so():
    lines = ["Collecting nope", "ERROR: No matching distribution found for nope", "tail"]
    assert core.pip_failure("pip download", lines) == (
        True,
        "pip download: ERROR: No matching distribution found for nope",
    )
    assert core.pip_failure("pip wheel", ["building", "killed"]) == (False, "pip wheel: killed")
    unreachable = [
        "WARNING: Retrying ... after connection broken by 'SSLError(...)'",
        "Could not fetch URL https://pypi.org/simple/six/: There was a problem",
        "ERROR: Could not find a version that satisfies the requirement six",
    ]
    by_input, line = core.pip_failure("pip download", unreachable)
    assert not by_input
    assert "the index could not be reached" in line
    assert "--cert" in line
