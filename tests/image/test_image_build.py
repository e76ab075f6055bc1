"""`orchestrator image build` on a scratch project: a src/ layout, a test dependency from a
local wheelhouse that itself depends on the project, a [dependency-groups] entry that
includes another, a requirements file that names the project twice. Real engine, real
pip (offline), real git."""

from __future__ import annotations

import json

import pytest
from image_project import build_args, orchestrator, pip_env

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_the_image_holds_the_test_tools_and_never_the_project(built, docker_client):
    report = built.first
    assert report["schema"] == "project-image/1"
    assert report["project"] == "scratchproj"
    assert report["rev"] == built.repo.base
    assert report["reused"] is False
    pins = {package["name"]: package["version"] for package in report["packages"]}
    assert pins["tinydep"] == "1.2.0"
    assert pins["pytest"] == "8.3.5"
    assert pins["pluggy"] == "1.5.0"
    assert "scratchproj" not in pins
    assert [item["name"] for item in report["excluded"]] == ["scratchproj"]
    notes = "\n".join(report["notes"])
    assert "left out '-e .'" in notes
    assert "left out 'scratchproj>=0.0.1'" in notes
    assert "scratchproj-0.0.1-py3-none-any.whl" in notes
    assert report["tag"].startswith("orchestrator-project/scratchproj:")
    assert report["interpreter"] == "/opt/orchestrator-venv/bin/python"

    labels = docker_client.images.get(report["image_id"]).attrs["Config"]["Labels"]
    assert labels["orchestrator.project-image"] == "1"
    assert labels["orchestrator.python"] == "/opt/orchestrator-venv/bin/python"
    assert set(labels["orchestrator.packages"].split()) == {
        f"{name}=={version}" for name, version in pins.items()
    }
    assert labels["orchestrator.excluded"] == "scratchproj==0.0.1"
    assert labels["orchestrator.inputs"] == report["inputs_digest"]
    # The install stage (it held the wheels) was pruned; no dangling image names this build.
    stage = report["inputs_digest"].removeprefix("sha256:")
    leftovers = docker_client.images.list(
        filters={"dangling": True, "label": f"orchestrator.project-stage={stage}"}
    )
    assert leftovers == []


def test_a_second_build_with_the_same_inputs_reuses_the_image(built):
    assert built.second["reused"] is True
    assert built.second["image_id"] == built.first["image_id"]
    assert built.second["tag"] == built.first["tag"]
    assert built.second["inputs_digest"] == built.first["inputs_digest"]


def test_the_venv_python_runs_with_the_pinned_packages(built, docker_client):
    output = docker_client.containers.run(
        built.image_id,
        [
            "/opt/orchestrator-venv/bin/python",
            "-c",
            "import importlib.metadata as m, json, sys; "
            "print(json.dumps({'prefix': sys.prefix, 'pytest': m.version('pytest'), "
            "'pluggy': m.version('pluggy'), 'tinydep': m.version('tinydep'), "
            "'own': [d.metadata['Name'] for d in m.distributions() "
            "if d.metadata['Name'] == 'scratchproj']}))",
        ],
        network_mode="none",
        user="1000:1000",
        remove=True,
    )
    facts = json.loads(output)
    assert facts == {
        "prefix": "/opt/orchestrator-venv",
        "pytest": "8.3.5",
        "pluggy": "1.5.0",
        "tinydep": "1.2.0",
        "own": [],
    }


def test_doctor_lists_the_project_image(built):
    done = orchestrator("doctor", "--json")
    found = {image["id"]: image for image in json.loads(done.stdout)["project_images"]}
    assert built.image_id in found
    assert found[built.image_id]["project"] == "scratchproj"
    assert "tinydep==1.2.0" in found[built.image_id]["packages"]
    lines = orchestrator("doctor").stdout
    assert f"project image: {built.first['tag']} {built.image_id} (scratchproj," in lines


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--group", "docs"), "no dependency group 'docs'"),
        (("--extra", "speedups"), "no extra 'speedups'"),
        (("--requirements", "missing.txt"), "no such file missing.txt"),
        (("--apt", "tzdata", "--python-image", "x:y"), "cannot go with --python-image"),
        (("--apt", "Not_A_Package"), "not a Debian package name"),
        (("--pip", "./elsewhere"), "local path requirement"),
    ],
)
def test_bad_input_is_one_line_before_anything_is_built(scratch, local_wheels, extra, message):
    done = orchestrator(*build_args(scratch.path, *extra), env=pip_env(local_wheels))
    assert done.exit_code == 2
    error_lines = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(error_lines) == 1
    assert message in error_lines[0]
    assert done.stdout == ""
