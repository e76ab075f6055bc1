"""`orchestrator image runner`: the runner image from the recipe inside the package, and
the package installed from its wheel, outside the checkout, replaying the example."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from orchestrator.adapters.recipe import RECIPE_DIR
from orchestrator.services.runner_image import RunnerImageOptions, build_runner_image

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fixtures.build_example import (  # noqa: E402
    SCENARIOS,
    build_example,
)

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
    "PATH": "/usr/bin:/bin",
}
CONFIGURED_PYPROJECT = """\
[project]
name = "configured-example"
version = "0"

[tool.orchestrator]
test-paths = ["checks"]
replays = 3
"""


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 600):
    return subprocess.run(
        command,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_image_runner_reuses_the_runner_image_from_any_folder(runner_image_id, tmp_path):
    orchestrator = Path(sys.executable).with_name("orchestrator")
    done = run([str(orchestrator), "image", "runner", "--json"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["schema"] == "runner-image/1"
    assert report["image_id"] == runner_image_id
    assert report["reused"] is True
    assert report["tag"].startswith("orchestrator-runner:ctx-")
    assert report["base_image"]["ref"].startswith("orchestrator-base:ctx-")
    assert "building" not in done.stderr


def test_a_changed_runner_recipe_is_built_once_then_reused(
    docker_client, runner_image_id, tmp_path
):
    # A copy of the recipe whose runner context differs by one label, built under another
    # repository name so the shared orchestrator-runner:latest is left alone.
    recipe = tmp_path / "images"
    shutil.copytree(RECIPE_DIR, recipe)
    dockerfile = recipe / "runner" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + f"LABEL orchestrator.test={tmp_path.name}\n")
    repository = f"orchestrator-runner-ctxtest-{os.getpid()}"
    options = RunnerImageOptions(recipe=recipe, repository=repository)
    try:
        first = build_runner_image(docker_client, options, env=os.environ)
        assert first["reused"] is False
        assert first["base_image"]["reused"] is True  # the base recipe is unchanged
        assert first["image_id"] != runner_image_id
        assert first["tag"].startswith(f"{repository}:ctx-")
        built = docker_client.images.get(first["image_id"])
        assert built.labels.get("orchestrator.test") == tmp_path.name
        assert f"{repository}:latest" in built.tags

        second = build_runner_image(docker_client, options, env=os.environ)
        assert second["reused"] is True
        assert second["image_id"] == first["image_id"]
    finally:
        for image in docker_client.images.list(name=repository):
            for tag in image.tags:
                if tag.startswith(f"{repository}:"):
                    docker_client.images.remove(tag)


def build_wheel(dest: Path) -> Path:
    done = run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(ROOT),
            "--no-deps",
            "--no-build-isolation",  # hatchling comes with the dev extra: no index needed
            "--quiet",
            "--wheel-dir",
            str(dest),
        ],
        cwd=dest,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = dest.glob("orchestrator-*.whl")
    return wheel


def fresh_venv(folder: Path, wheel: Path) -> Path:
    """A new virtual environment holding the wheel; its dependencies are the test
    environment's (by a .pth line: the tests have no network), the package is not."""
    done = run([sys.executable, "-m", "venv", "--without-pip", str(folder)], cwd=folder.parent)
    assert done.returncode == 0, done.stderr
    python = folder / "bin" / "python"
    done = run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "--quiet",
            str(wheel),
        ],
        cwd=folder.parent,
    )
    assert done.returncode == 0, done.stderr
    site = run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        cwd=folder.parent,
    ).stdout.strip()
    # Appended after the venv's own site-packages, and its .pth files (the checkout's
    # editable install among them) are not read: `orchestrator` is the wheel's.
    Path(site, "test-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return folder / "bin" / "orchestrator"


def test_the_wheel_installed_outside_the_checkout_builds_the_image_and_replays(
    runner_image_id, tmp_path
):
    dist = tmp_path / "dist"
    dist.mkdir()
    wheel = build_wheel(dist)
    orchestrator = fresh_venv(tmp_path / "venv", wheel)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}

    where = run(
        [
            str(orchestrator.with_name("python")),
            "-c",
            "import orchestrator, pathlib; print(pathlib.Path(orchestrator.__file__).parent)",
        ],
        cwd=elsewhere,
        env=env,
    )
    package = Path(where.stdout.strip())
    assert package.is_relative_to(tmp_path / "venv"), where
    assert (package / "images" / "base" / "build").is_file()
    assert (package / "images" / "runner" / "Dockerfile").is_file()

    # The recipe in the wheel is the checkout's: same digest, so the image is reused.
    built = run([str(orchestrator), "image", "runner"], cwd=elsewhere, env=env)
    assert built.returncode == 0, built.stderr
    assert built.stdout.strip() == runner_image_id

    scenario = next(s for s in SCENARIOS if s.patch == "fix-trim-id")
    repo = build_example(tmp_path / "example")
    command = [
        str(orchestrator),
        "replay",
        "--repo",
        str(repo.path),
        "--base",
        repo.base,
        "--patch",
        repo.rev(scenario.patch),
        "--image",
        "orchestrator-runner:latest",
        "--replays",
        "2",
        "--out",
        str(tmp_path / "run"),
        "--no-record",
        "--json",
    ]
    for node_id in scenario.properties:
        command += ["--property", node_id]
    replayed = run(command, cwd=elsewhere, env=env)
    assert replayed.returncode in (0, 1), replayed.stderr
    report = json.loads(replayed.stdout)
    lanes = {item["decision"]["lane"] for item in report["decisions"]}
    assert lanes == {scenario.lane}

    # A repository that configures itself: base and patch are the whole command line.
    configured = tmp_path / "configured"
    configured.mkdir()
    assert run(["git", "init", "-q", "-b", "main"], cwd=configured, env=GIT_ENV).returncode == 0
    (configured / "pyproject.toml").write_text(CONFIGURED_PYPROJECT)
    (configured / "checks").mkdir()
    (configured / "checks" / "test_one.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    for args in (("add", "-A"), ("commit", "-q", "-m", "base"), ("checkout", "-q", "-b", "f")):
        assert run(["git", *args], cwd=configured, env=GIT_ENV).returncode == 0
    (configured / "README").write_text("a change beside the tests\n")
    for args in (("add", "-A"), ("commit", "-q", "-m", "patch")):
        assert run(["git", *args], cwd=configured, env=GIT_ENV).returncode == 0
    simple = run(
        [str(orchestrator), "replay", "--base", "main", "--patch", "HEAD", "--no-record"],
        cwd=configured,
        env={**env, "CI": "1"},
    )
    assert simple.returncode == 0, simple.stderr
    assert "1 property in no_freeze" in simple.stdout  # the table lists what needs a look
    (run_dir,) = (configured / ".replay" / "runs").iterdir()
    log = json.loads((run_dir / "run-log.json").read_text())
    assert log["command"] == "pytest -q checks"
    assert log["replays"] == 3
    assert log["image_digest"] == runner_image_id
