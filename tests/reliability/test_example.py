"""The bundled example itself: the builder's repository, and each property's behaviour.

No engine here: the example's tests run on the host with the probe plugin, one fresh
pytest per replay, the way the driver runs them in a container. This pins down what
each patch does before any lane depends on it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fixtures.build_example import (
    BASE_TAG,
    BUDGET_PROPERTY,
    FLAKY_PROPERTY,
    MINIMAL_USER,
    OUTPUT_PROPERTY,
    PATCHES,
    ROLE_PROPERTY,
    SCENARIOS,
    TAUTOLOGY_PROPERTY,
    TRIM_PROPERTY,
    USER_FIXTURE_KEYS,
    ExampleRepo,
    build_example,
    git,
    wide_user,
    write_mutant,
)

ROOT = Path(__file__).resolve().parents[2]


def checkout(repo: ExampleRepo, rev: str, dest: Path) -> Path:
    """An exported tree of ``rev`` (no .git), like the replay engine's."""
    dest.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(repo.path), "archive", "--format=tar", rev],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def probe_run(tree: Path, node_ids: list[str], fixture: Path, tmp: Path, n: int) -> dict[str, Any]:
    """One fresh pytest with the probe; returns {nodeid: test entry}."""
    result = tmp / f"result-{n}.json"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "REPLAY_RESULT": str(result),
        "REPLAY_FIXTURE": str(fixture),
        "TMPDIR": str(tmp),  # the flaky property's shared state lives here
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # the image has no plugins either
    }
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "orchestrator.probe.plugin",
            *node_ids,
        ],
        cwd=tree,
        env=env,
        capture_output=True,
        check=False,
        timeout=60,
    )
    doc = json.loads(result.read_text())
    return {entry["nodeid"]: entry for entry in doc["tests"]}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> ExampleRepo:
    return build_example(tmp_path_factory.mktemp("example") / "repo")


@pytest.fixture(scope="module")
def trees(repo: ExampleRepo, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("trees")
    found = {"base": checkout(repo, repo.base, root / "base")}
    for name in PATCHES:
        found[name] = checkout(repo, repo.rev(name), root / name)
    return found


def test_revisions_are_reproducible(repo: ExampleRepo, tmp_path: Path) -> None:
    again = build_example(tmp_path / "again")
    assert again.base == repo.base
    assert dict(again.patches) == dict(repo.patches)
    assert len(repo.base) == 40
    assert set(repo.patches) == set(PATCHES)


def test_every_patch_is_one_commit_on_base(repo: ExampleRepo) -> None:
    for name, sha in repo.patches.items():
        assert git(repo.path, "rev-parse", f"{sha}^") == repo.base, name
    assert git(repo.path, "rev-parse", BASE_TAG) == repo.base
    assert git(repo.path, "rev-parse", "main") == repo.base


def test_patches_leave_the_oracle_alone(repo: ExampleRepo) -> None:
    # Only source files change: the property files and the fixture are the same on
    # both sides, so no scenario is rejected as oracle_changed.
    for name, sha in repo.patches.items():
        changed = git(repo.path, "diff", "--name-only", repo.base, sha).splitlines()
        assert changed, f"patch {name} changes nothing"
        assert all(path.startswith("eventlib/") for path in changed), (name, changed)


def test_build_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep").write_text("")
    with pytest.raises(FileExistsError):
        build_example(tmp_path / "x")


def test_extra_files_land_on_both_sides(tmp_path: Path) -> None:
    repo = build_example(tmp_path / "r", extra_files={"tests/test_more.py": "def test_x(): pass\n"})
    for sha in [repo.base, *repo.patches.values()]:
        assert git(repo.path, "show", f"{sha}:tests/test_more.py") == "def test_x(): pass"


def test_write_mutant_applies_to_base(repo: ExampleRepo, tmp_path: Path) -> None:
    mutant = write_mutant(repo, "extra-clock-read", tmp_path / "mutant.patch")
    tree = checkout(repo, repo.base, tmp_path / "tree")
    subprocess.run(["git", "apply", str(mutant)], cwd=tree, check=True)
    patched = git(repo.path, "show", f"{repo.rev('extra-clock-read')}:eventlib/normalize.py")
    assert (tree / "eventlib" / "normalize.py").read_text().strip() == patched


def test_budget_property_passes_on_base_and_counts_one_read(
    trees: dict[str, Path], repo: ExampleRepo, tmp_path: Path
) -> None:
    entries = probe_run(
        trees["base"], [BUDGET_PROPERTY, OUTPUT_PROPERTY], repo.fixture, tmp_path, 1
    )
    for node_id in (BUDGET_PROPERTY, OUTPUT_PROPERTY):
        assert entries[node_id]["label"] == "assert_pass"
        assert entries[node_id]["calls"]["clock"] == 1


def test_extra_clock_read_keeps_the_output_but_breaks_the_budget(
    trees: dict[str, Path], repo: ExampleRepo, tmp_path: Path
) -> None:
    entries = probe_run(
        trees["extra-clock-read"], [BUDGET_PROPERTY, OUTPUT_PROPERTY], repo.fixture, tmp_path, 1
    )
    assert entries[OUTPUT_PROPERTY]["label"] == "assert_pass"  # the same dict
    assert entries[OUTPUT_PROPERTY]["calls"]["clock"] == 2  # ... for an extra read
    assert entries[BUDGET_PROPERTY]["label"] == "assert_fail"
    assert entries[BUDGET_PROPERTY]["calls"]["clock"] == 2
    assert entries[BUDGET_PROPERTY]["assertion_id"].endswith(":AssertionError")


def test_trim_fails_on_base_and_passes_on_the_fix(
    trees: dict[str, Path], repo: ExampleRepo, tmp_path: Path
) -> None:
    base = probe_run(trees["base"], [TRIM_PROPERTY], repo.fixture, tmp_path, 1)[TRIM_PROPERTY]
    fixed = probe_run(trees["fix-trim-id"], [TRIM_PROPERTY], repo.fixture, tmp_path, 2)[
        TRIM_PROPERTY
    ]
    assert (base["label"], fixed["label"]) == ("assert_fail", "assert_pass")
    assert base["calls"]["clock"] == fixed["calls"]["clock"] == 1


@pytest.mark.parametrize("side", ["base", "refactor-type"])
def test_flaky_property_alternates_with_one_assertion(
    side: str, trees: dict[str, Path], repo: ExampleRepo, tmp_path: Path
) -> None:
    entries = [
        probe_run(trees[side], [FLAKY_PROPERTY], repo.fixture, tmp_path, n)[FLAKY_PROPERTY]
        for n in range(1, 4)
    ]
    labels = [entry["label"] for entry in entries]
    assert labels == ["assert_pass", "assert_fail", "assert_pass"]
    assert len({entry["assertion_id"] for entry in entries if entry["assertion_id"]}) == 1
    assert {entry["calls"]["clock"] for entry in entries} == {1}


def test_tautology_passes_everywhere(
    trees: dict[str, Path], repo: ExampleRepo, tmp_path: Path
) -> None:
    for n, side in enumerate(("base", "extra-clock-read"), start=1):
        entry = probe_run(trees[side], [TAUTOLOGY_PROPERTY], repo.fixture, tmp_path, n)
        assert entry[TAUTOLOGY_PROPERTY]["label"] == "assert_pass"


def test_hang_patch_never_finishes(
    trees: dict[str, Path], repo: ExampleRepo, tmp_path: Path
) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from eventlib.normalize import normalize_event; "
            "print('calling', flush=True); "
            "normalize_event({'id': 'e'}, now=lambda: 0.0)",
        ],
        cwd=trees["hang"],
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        # Timed from the call on, not from the interpreter's start: a slow start under
        # load can neither pass for the hang nor eat the window.
        assert process.stdout.readline() == "calling\n"
        with pytest.raises(subprocess.TimeoutExpired):
            process.wait(timeout=1.5)
    finally:
        process.kill()
        process.wait()


def test_scenarios_name_real_patches_and_properties(repo: ExampleRepo) -> None:
    known = {BUDGET_PROPERTY, OUTPUT_PROPERTY, TRIM_PROPERTY, FLAKY_PROPERTY}
    for scenario in SCENARIOS:
        assert scenario.patch in repo.patches
        assert set(scenario.properties) <= known


def test_the_wide_user_record_is_the_generators_and_the_walkthrough_shape(
    repo: ExampleRepo,
) -> None:
    record = json.loads(repo.user_fixture.read_text())
    assert record == wide_user(USER_FIXTURE_KEYS) == wide_user()
    assert list(record) == list(wide_user())  # key order too: the shrinker drops from the end
    assert len(record) == 200
    assert record["user_id"] >= 0
    assert record["role"] not in {"admin", "editor", "viewer"}
    assert len(wide_user(50)) == 50
    assert len(wide_user(800)) == 800
    assert wide_user(50, seed=1) != wide_user(50)


def test_the_role_property_fails_only_with_raw_role_on_wide_and_minimal_records(
    trees: dict[str, Path], repo: ExampleRepo, tmp_path: Path
) -> None:
    minimal = tmp_path / "minimal.json"
    minimal.write_text(json.dumps(MINIMAL_USER))
    no_role = tmp_path / "no-role.json"
    no_role.write_text(json.dumps({"user_id": 0}))
    n = 0
    keys = {}
    for fixture in (repo.user_fixture, minimal, no_role):
        for side in ("base", "raw-role"):
            n += 1
            entry = probe_run(trees[side], [ROLE_PROPERTY], fixture, tmp_path, n)[ROLE_PROPERTY]
            keys[fixture.name, side] = (entry["label"], entry["assertion_key"])
    role_miss = (
        "assert_fail",
        f"{ROLE_PROPERTY}@test_known_users_carry_an_allowed_role+3:AssertionError",
    )
    assert keys["user-wide.json", "base"] == ("assert_pass", None)
    assert keys["user-wide.json", "raw-role"] == role_miss
    assert keys["minimal.json", "base"] == ("assert_pass", None)
    assert keys["minimal.json", "raw-role"] == role_miss
    # Without the role the miss becomes another error (seed 000: the empty role stays).
    assert keys["no-role.json", "raw-role"] == (
        "assert_fail",
        f"{ROLE_PROPERTY}@test_known_users_carry_an_allowed_role+1:KeyError",
    )
