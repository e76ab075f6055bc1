"""`orchestrator image build` at a hostile revision: nothing of it runs on the host, and
no host file outside the tree is read because the tree says so.

Each attack is a real repository whose pinned revision names a host file (the process's
environment, a canary file, a path out of the repository, a symbolic link to the canary),
asks for an index of its own, or depends on an sdist whose build backend goes looking
for the host's secrets. The CLI runs as a subprocess with a canary variable in its
environment and a canary file on the host: neither appears in any output, the refusals
are one line naming the file and line, before any container; the sdist is built only in
the build container (its marker never appears on the host, and it saw neither canary).
An image built at a pull request's revision is never a replay's default for main.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostile_repo import CANARY, CANARY_NAME, git, write_and_commit

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "wheelhouse"
CLI = Path(sys.executable).parent / "orchestrator"
HOST_FILE_CANARY = "host-file-canary-7d41e0-never-read"
PROJECT = "hostileproj"
PYPROJECT = f'[project]\nname = "{PROJECT}"\nversion = "0"\n'


@dataclass(frozen=True)
class Done:
    code: int
    stdout: str
    stderr: str

    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if "error:" in line]


@pytest.fixture
def host_secret(tmp_path: Path) -> Path:
    """A file on the host that no tree may have read."""
    secret = tmp_path / "host" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text(f"{HOST_FILE_CANARY}\n")
    return secret


def image_build(repo: Path, rev: str, *args: str, cwd: Path, wheels: Path | None = None) -> Done:
    """The CLI with the canary in its environment and the host's own pip variables gone:
    wheels come from the test's folders only (``PIP_FIND_LINKS``, read by the tool)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    links = " ".join(str(folder) for folder in (wheels, CACHE) if folder is not None)
    env.update({CANARY_NAME: CANARY, "PIP_FIND_LINKS": links, "PIP_NO_INDEX": "1", "CI": "1"})
    env.pop("ORCHESTRATOR_IMAGE_NETWORK", None)
    done = subprocess.run(
        [str(CLI), "-v", "--log-format", "console", "image", "build", "--repo", str(repo),
         "--rev", rev, "--json", *args],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    return Done(code=done.returncode, stdout=done.stdout, stderr=done.stderr)


def assert_nothing_of_the_host(done: Done) -> None:
    for text in (done.stdout, done.stderr):
        assert CANARY not in text
        assert HOST_FILE_CANARY not in text


def new_repo(root: Path, files: dict[str, str]) -> tuple[Path, str]:
    repo = root / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    return repo, write_and_commit(repo, {"pyproject.toml": PYPROJECT, **files}, "base")


def table(requirements: str) -> str:
    return f"{PYPROJECT}\n[tool.orchestrator.image-build]\nrequirements = {requirements}\n"


# ---------------------------------------------------------------- files out of the tree


@pytest.mark.parametrize(
    ("attack", "message"),
    [
        ("-r /proc/self/environ", "requirements.txt:2: '/proc/self/environ' is an absolute path"),
        ("-r {secret}", "requirements.txt:2: '{secret}' is an absolute path"),
        ("-c {secret}", "requirements.txt:2: '{secret}' is an absolute path"),
        ("--requirement=../../host/secret.txt", "'../../host/secret.txt' leaves the repository"),
        ("-e {secret_folder}", "is an editable requirement"),
        ("{secret_folder}", "is a local path requirement"),
    ],
)
def test_a_requirement_file_naming_a_host_file_is_refused_in_one_line(
    tmp_path, host_secret, attack, message
):
    values = {"secret": str(host_secret), "secret_folder": str(host_secret.parent)}
    repo, sha = new_repo(
        tmp_path / "a",
        {
            "pyproject.toml": table('["requirements.txt"]'),
            "requirements.txt": f"pluggy\n{attack.format(**values)}\n",
        },
    )
    done = image_build(repo, sha, cwd=tmp_path)
    assert done.code == 2, done.stderr
    (line,) = done.error_lines()
    assert message.format(**values) in line
    assert done.stdout == ""
    assert_nothing_of_the_host(done)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"pyproject.toml": table('["{secret}"]')},
         "[tool.orchestrator.image-build].requirements: '{secret}' is an absolute path"),
        ({"pyproject.toml": table('["../host/secret.txt"]')},
         "'../host/secret.txt' leaves the repository"),
        ({"pyproject.toml": PYPROJECT.replace('version = "0"\n', 'version = "0"\n'
          'dynamic = ["dependencies"]\n') + '[tool.setuptools.dynamic]\n'
          'dependencies = {{file = ["{secret}"]}}\n'},
         "[tool.setuptools.dynamic].dependencies.file: '{secret}' is an absolute path"),
    ],
)  # fmt: skip
def test_the_tree_s_configuration_naming_a_host_file_is_refused(
    tmp_path, host_secret, files, message
):
    repo, sha = new_repo(
        tmp_path, {name: text.format(secret=host_secret) for name, text in files.items()}
    )
    done = image_build(repo, sha, cwd=tmp_path)
    assert done.code == 2, done.stderr
    (line,) = done.error_lines()
    assert message.format(secret=host_secret) in line
    assert_nothing_of_the_host(done)


@pytest.mark.parametrize("how", ["table", "command line", "command line, absolute"])
def test_a_requirements_file_that_is_a_symbolic_link_to_a_host_file_is_refused(
    tmp_path, host_secret, how
):
    repo, _ = new_repo(tmp_path, {"pyproject.toml": table('["requirements.txt"]')})
    (repo / "requirements.txt").symlink_to(host_secret)  # in the checkout and in git
    sha = write_and_commit(repo, {}, "a link to the host's secret")
    assert git(repo, "ls-tree", sha, "requirements.txt").startswith("120000")
    args = {
        "table": (),
        "command line": ("--requirements", "requirements.txt"),
        "command line, absolute": ("--requirements", str(repo / "requirements.txt")),
    }[how]
    done = image_build(repo, sha, *args, cwd=repo)
    assert done.code == 2, done.stderr
    (line,) = done.error_lines()
    assert f"requirements.txt is a symbolic link at {sha[:12]}" in line
    assert_nothing_of_the_host(done)


def test_the_tree_cannot_set_index_options_in_its_table(tmp_path):
    repo, sha = new_repo(
        tmp_path,
        {"pyproject.toml": f"{PYPROJECT}\n[tool.orchestrator.image-build]\n"
                           'index-url = "https://evil.example/simple"\n'},
    )  # fmt: skip
    done = image_build(repo, sha, cwd=tmp_path)
    assert done.code == 2
    (line,) = done.error_lines()
    assert "unknown key 'index-url'" in line


def test_no_network_and_no_local_wheels_is_exit_2_before_any_container(tmp_path):
    repo, sha = new_repo(tmp_path, {})
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    env.pop("ORCHESTRATOR_IMAGE_NETWORK", None)
    done = subprocess.run(
        [str(CLI), "image", "build", "--repo", str(repo), "--rev", sha],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1
    assert "--find-links DIR" in errors[0]
    assert "--network host" in errors[0]


# ---------------------------------------------------------------- builds (real engine)

# An sdist whose build backend runs setup.py: it looks for the host's secrets and tries
# to leave a marker where the host would see it, then ships what it saw in its wheel.
EVIL_SETUP = """\
import os
from setuptools import setup

seen = {{"env": os.environ.get({canary_name!r}), "uid": os.getuid()}}
try:
    seen["file"] = open({secret!r}).read()
except OSError as error:
    seen["file"] = None
for marker in ({tmp_marker!r}, {host_marker!r}):
    try:
        with open(marker, "w") as handle:
            handle.write("written by a build backend")
    except OSError:
        pass
with open("evilsdist_seen.py", "w") as module:
    module.write("SEEN = %r\\n" % (seen,))
setup(name="evilsdist", version="1.0", py_modules=["evilsdist_seen"])
"""
EVIL_PYPROJECT = """\
[build-system]
requires = ["setuptools>=70.1"]
build-backend = "setuptools.build_meta"
"""


def evil_sdist(folder: Path, **values: str) -> Path:
    folder.mkdir(parents=True)
    files = {
        "setup.py": EVIL_SETUP.format(**values),
        "pyproject.toml": EVIL_PYPROJECT,
        "PKG-INFO": "Metadata-Version: 2.1\nName: evilsdist\nVersion: 1.0\n",
    }
    sdist = folder / "evilsdist-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"evilsdist-1.0/{name}")
            info.size = len(data)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(data))
    return folder


@dataclass(frozen=True)
class HostileBuild:
    repo: Path
    main: str
    pull_request: str
    done: Done
    report: dict[str, Any]
    tmp_marker: Path
    host_marker: Path


@pytest.fixture(scope="module")
def hostile_build(
    tmp_path_factory: pytest.TempPathFactory, docker_client: Any
) -> Iterator[HostileBuild]:
    """A pull request that depends on the evil sdist and names an index of its own,
    built with `image build` at its revision."""
    if not any(CACHE.glob("setuptools-*.whl")):
        pytest.fail(f"{CACHE} lacks setuptools: run `make wheelhouse` (make test does)")
    root = tmp_path_factory.mktemp("hostile-build")
    secret = root / "host" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text(f"{HOST_FILE_CANARY}\n")
    # /tmp exists on both sides: in the container it is a tmpfs of its own.
    tmp_marker = Path("/tmp") / f"orchestrator-test-marker-{uuid.uuid4().hex}"
    host_marker = root / "host" / "marker"
    wheels = evil_sdist(
        root / "wheels", canary_name=CANARY_NAME, secret=str(secret),
        tmp_marker=str(tmp_marker), host_marker=str(host_marker),
    )  # fmt: skip
    repo, main = new_repo(root, {"tests/test_ok.py": "def test_ok():\n    assert True\n"})
    git(repo, "checkout", "-q", "-b", "pr")
    pull_request = write_and_commit(
        repo,
        {
            "pyproject.toml": PYPROJECT.replace('version = "0"\n', 'version = "0"\n'
                                                'dependencies = ["evilsdist"]\n')
            + '\n[tool.orchestrator.image-build]\nrequirements = ["requirements.txt"]\n',
            "requirements.txt": textwrap.dedent("""\
                --index-url http://canary-index.invalid/simple
                --trusted-host canary-index.invalid
                --extra-index-url=http://canary-index.invalid/extra
                -f http://canary-index.invalid/links
                pytest
                """),
        },
        "a pull request with a build backend of its own",
    )  # fmt: skip
    git(repo, "checkout", "-q", "main")
    done = image_build(repo, pull_request, cwd=root, wheels=wheels)
    report = json.loads(done.stdout) if done.code == 0 else {}
    try:
        yield HostileBuild(
            repo=repo, main=main, pull_request=pull_request, done=done, report=report,
            tmp_marker=tmp_marker, host_marker=host_marker,
        )  # fmt: skip
    finally:
        if report.get("image_id"):
            docker_client.images.remove(report["image_id"], force=True)
        tmp_marker.unlink(missing_ok=True)


@pytest.mark.docker
@pytest.mark.slow
def test_the_sdists_build_backend_runs_only_in_the_build_container(hostile_build, docker_client):
    done = hostile_build.done
    assert done.code == 0, done.stderr[-3000:]
    assert_nothing_of_the_host(done)
    assert not hostile_build.tmp_marker.exists()  # written in the container's own /tmp
    assert not hostile_build.host_marker.exists()
    assert not hostile_build.host_marker.parent.joinpath("marker").exists()
    pins = {item["name"]: item["version"] for item in hostile_build.report["packages"]}
    assert pins["evilsdist"] == "1.0"
    # What the backend saw, shipped in its own wheel: no canary, a non-root uid.
    seen = docker_client.containers.run(
        hostile_build.report["image_id"],
        ["/opt/orchestrator-venv/bin/python", "-c", "import evilsdist_seen; "
         "print(repr(evilsdist_seen.SEEN))"],
        network_mode="none", user="1000:1000", remove=True,
    ).decode()  # fmt: skip
    assert "'env': None" in seen
    assert "'file': None" in seen
    assert "'uid': 0" not in seen


@pytest.mark.docker
@pytest.mark.slow
def test_index_lines_of_the_tree_are_left_out_with_a_note(hostile_build):
    done = hostile_build.done
    assert done.code == 0, done.stderr[-3000:]
    notes = hostile_build.report["notes"]
    for number, option in (
        (1, "--index-url"),
        (2, "--trusted-host"),
        (3, "--extra-index-url"),
        (4, "--find-links"),
    ):
        assert any(
            f"requirements.txt:{number}" in note and f"pass {option} " in note for note in notes
        ), notes
    # pip was never told of the tree's index: not in its output, not in the document.
    assert "canary-index" not in done.stderr
    assert "canary-index" not in done.stdout
    assert hostile_build.report["build"]["network"] == "none"
    assert hostile_build.report["build"]["no_index"] is True


@pytest.mark.docker
@pytest.mark.slow
def test_an_image_built_at_a_pull_requests_revision_is_not_mains_default(
    hostile_build, docker_client, tmp_path
):
    assert hostile_build.done.code == 0, hostile_build.done.stderr[-3000:]
    image_id = hostile_build.report["image_id"]
    labels = docker_client.images.get(image_id).attrs["Config"]["Labels"]
    assert labels["orchestrator.revision"] == hostile_build.pull_request
    out = tmp_path / "run"
    done = subprocess.run(
        [str(CLI), "replay", "--repo", str(hostile_build.repo), "--base", "main",
         "--patch", "main", "--replays", "1", "--no-record", "--out", str(out),
         "--timeout", "60"],
        env={**os.environ, "CI": "1", CANARY_NAME: CANARY}, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    log = json.loads((out / "run-log.json").read_text())
    assert log["image_digest"] != image_id, done.stderr[-3000:]
    assert log["image_ref"] == "orchestrator-runner:latest"
    assert "project_image_skipped" in done.stderr
    assert hostile_build.pull_request[:12] in done.stderr


# A build backend that never ends: the build is stopped with Ctrl-C while it runs.
SLOW_SETUP = """\
import time
time.sleep(3600)
"""


@pytest.mark.docker
@pytest.mark.slow
def test_ctrl_c_during_an_sdist_build_removes_the_build_container(tmp_path, docker_client):
    folder = tmp_path / "wheels"
    folder.mkdir()
    sdist = folder / "slowsdist-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        for name, text in {
            "setup.py": SLOW_SETUP,
            "pyproject.toml": EVIL_PYPROJECT,
            "PKG-INFO": "Metadata-Version: 2.1\nName: slowsdist\nVersion: 1.0\n",
        }.items():
            info = tarfile.TarInfo(f"slowsdist-1.0/{name}")
            info.size = len(text.encode())
            archive.addfile(info, io.BytesIO(text.encode()))
    repo, sha = new_repo(tmp_path, {"requirements.txt": "slowsdist\n"})
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    env.update({"PIP_FIND_LINKS": f"{folder} {CACHE}", "CI": "1"})
    process = subprocess.Popen(
        [str(CLI), "image", "build", "--repo", str(repo), "--rev", sha,
         "--requirements", "requirements.txt"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    owned = {"label": [f"orchestrator.pid={process.pid}", "orchestrator.side=image-wheels"]}
    try:
        # Wait (bounded, on the process) until the build container runs the backend.
        for _ in range(1200):
            found = docker_client.containers.list(filters=owned)
            if found and "_in_process" in repr(found[0].top().get("Processes")):
                break
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=0.5)
            assert process.returncode is None, process.communicate()
        else:
            raise AssertionError("the build backend never started")
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr.decode()[-2000:]
    assert docker_client.containers.list(all=True, filters=owned) == []
