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
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostile_image import (
    CACHE,
    CONFIG_ATTACKS,
    EVIL_PYPROJECT,
    HOST_FILE_CANARY,
    PYPROJECT,
    REQUIREMENT_ATTACKS,
    config_attack_repo,
    evil_pull_request,
    evil_sdist,
    host_secret_file,
    image_build_args,
    image_build_env,
    linked_requirements_repo,
    new_repo,
    requirements_attack_repo,
)
from hostile_repo import CANARY, CANARY_NAME, git

CLI = Path(sys.executable).parent / "orchestrator"


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
    return host_secret_file(tmp_path)


def image_build(repo: Path, rev: str, *args: str, cwd: Path, wheels: Path | None = None) -> Done:
    """The CLI with the canary in its environment and the host's own pip variables gone:
    wheels come from the test's folders only (``PIP_FIND_LINKS``, read by the tool)."""
    done = subprocess.run(
        [str(CLI), *image_build_args(repo, rev, *args)],
        env=image_build_env(wheels), cwd=cwd, capture_output=True, text=True, timeout=900,
        check=False,
    )  # fmt: skip
    return Done(code=done.returncode, stdout=done.stdout, stderr=done.stderr)


def assert_nothing_of_the_host(done: Done) -> None:
    for text in (done.stdout, done.stderr):
        assert CANARY not in text
        assert HOST_FILE_CANARY not in text


# ---------------------------------------------------------------- files out of the tree


@pytest.mark.parametrize(("attack", "message"), REQUIREMENT_ATTACKS)
def test_a_requirement_file_naming_a_host_file_is_refused_in_one_line(
    tmp_path, host_secret, attack, message
):
    values = {"secret": str(host_secret), "secret_folder": str(host_secret.parent)}
    repo, sha = requirements_attack_repo(tmp_path / "a", attack, host_secret)
    done = image_build(repo, sha, cwd=tmp_path)
    assert done.code == 2, done.stderr
    (line,) = done.error_lines()
    assert message.format(**values) in line
    assert done.stdout == ""
    assert_nothing_of_the_host(done)


@pytest.mark.parametrize(("files", "message"), CONFIG_ATTACKS)
def test_the_tree_s_configuration_naming_a_host_file_is_refused(
    tmp_path, host_secret, files, message
):
    repo, sha = config_attack_repo(tmp_path, files, host_secret)
    done = image_build(repo, sha, cwd=tmp_path)
    assert done.code == 2, done.stderr
    (line,) = done.error_lines()
    assert message.format(secret=host_secret) in line
    assert_nothing_of_the_host(done)


@pytest.mark.parametrize("how", ["table", "command line", "command line, absolute"])
def test_a_requirements_file_that_is_a_symbolic_link_to_a_host_file_is_refused(
    tmp_path, host_secret, how
):
    repo, sha = linked_requirements_repo(tmp_path, host_secret)
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
    secret = host_secret_file(root)
    # /tmp exists on both sides: in the container it is a tmpfs of its own.
    tmp_marker = Path("/tmp") / f"orchestrator-test-marker-{uuid.uuid4().hex}"
    host_marker = root / "host" / "marker"
    wheels = evil_sdist(
        root / "wheels", canary_name=CANARY_NAME, secret=str(secret),
        tmp_marker=str(tmp_marker), host_marker=str(host_marker),
    )  # fmt: skip
    repo, main, pull_request = evil_pull_request(root)
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
