"""A scratch project with dependencies, its local wheelhouse, and the CLI, for the
project-image tests.

Nothing here needs a network: the wheels come from folders built in the test with
`pip wheel` and from the wheelhouse `make test` downloads before pytest starts
(.cache/wheelhouse: pytest 8 and 9, pluggy, setuptools for the builds).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "wheelhouse"
sys.path.insert(0, str(ROOT / "tests" / "replay"))

from support.scratch_git import commit, git, init  # noqa: E402

__all__ = ["commit", "git", "init"]

PROJECT = "scratchproj"

PYPROJECT = """\
[project]
name = "scratchproj"
version = "1.0.0"
dependencies = []

[dependency-groups]
test = ["tinydep>=1.0", {include-group = "runner"}]
runner = ["pytest==8.3.5", "pluggy==1.5.0"]

[tool.pytest.ini_options]
filterwarnings = ["error"]
"""

# pip's view of the project itself, twice: an editable install and its name.
REQUIREMENTS_DEV = """\
# what a developer installs
-e .
scratchproj>=0.0.1
"""

SOURCE = """\
def add(a, b):
    return a + b
"""

BROKEN_SOURCE = """\
def add(a, b):
    return a + b + 1
"""

TESTS = """\
import datetime
import os
import pathlib
import sys
import zoneinfo

import pytest
import scratchproj
import tinydep


def test_add():
    assert scratchproj.add(2, 3) == 5


def test_imported_from_the_tree():
    assert scratchproj.__file__.startswith("/src/src/scratchproj/")


def test_test_dependency():
    assert tinydep.double(4) == 8


def test_runs_in_the_project_venv():
    assert sys.prefix == "/opt/orchestrator-venv"
    assert pytest.__version__ == "8.3.5"


def test_writes_into_its_tree():
    marker = pathlib.Path("written.txt")
    assert not marker.exists()  # every replay starts from a fresh copy
    marker.write_text("x")


def test_time_zone_data():
    paris = zoneinfo.ZoneInfo("Europe/Paris")
    summer = datetime.datetime(2024, 7, 1, 12, tzinfo=paris)
    assert summer.utcoffset() == datetime.timedelta(hours=2)


def test_home_and_tmpdir_are_writable(tmp_path):
    home = pathlib.Path(os.environ["HOME"])
    (home / ".config").mkdir(exist_ok=True)
    (home / ".config" / "seen").write_text("x")
    assert str(tmp_path).startswith(os.environ["TMPDIR"])


def test_tz_is_what_the_replay_set():
    assert os.environ.get("TZ") == os.environ.get("EXPECTED_TZ")
"""

TINYDEP_PYPROJECT = """\
[build-system]
requires = ["setuptools>=70.1"]
build-backend = "setuptools.build_meta"

[project]
name = "tinydep"
version = "1.2.0"
# A test tool that depends on the project under test: pip pulls the project's wheel in,
# and the image must leave it out.
dependencies = ["scratchproj"]
"""

TINYDEP_SOURCE = """\
def double(x):
    return 2 * x
"""

OLD_RELEASE_PYPROJECT = """\
[build-system]
requires = ["setuptools>=70.1"]
build-backend = "setuptools.build_meta"

[project]
name = "scratchproj"
version = "0.0.1"
"""

OLD_RELEASE_SOURCE = """\
def add(a, b):
    raise AssertionError("the released scratchproj was imported instead of the tree")
"""


def pip_env(*find_links: Path) -> dict[str, str]:
    """The host's pip, told to use only these folders (no index, no config files)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    env["PIP_NO_INDEX"] = "1"
    env["PIP_FIND_LINKS"] = " ".join(str(path) for path in (*find_links, CACHE))
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def pip_wheel(folder: Path, dest: Path) -> Path:
    """A wheel of ``folder`` made by `pip wheel`, its build backend from the cache."""
    before = set(dest.glob("*.whl"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(dest), str(folder)],
        env=pip_env(),
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    (made,) = set(dest.glob("*.whl")) - before
    return made


def write(folder: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return folder


def local_wheelhouse(root: Path) -> Path:
    """tinydep 1.2.0 (which needs scratchproj) and an old scratchproj release."""
    wheels = root / "wheels"
    wheels.mkdir(parents=True)
    tinydep = write(
        root / "tinydep", {"pyproject.toml": TINYDEP_PYPROJECT, "tinydep.py": TINYDEP_SOURCE}
    )
    old = write(
        root / "old-release",
        {
            "pyproject.toml": OLD_RELEASE_PYPROJECT,
            "src/scratchproj/__init__.py": OLD_RELEASE_SOURCE,
        },
    )
    pip_wheel(tinydep, wheels)
    pip_wheel(old, wheels)
    return wheels


@dataclass(frozen=True, kw_only=True)
class ScratchRepo:
    path: Path
    base: str  # add() right
    patch: str  # add() off by one


def scratch_repo(path: Path) -> ScratchRepo:
    init(path)
    base = commit(
        path,
        {
            "pyproject.toml": PYPROJECT,
            "requirements-dev.txt": REQUIREMENTS_DEV,
            "src/scratchproj/__init__.py": SOURCE,
            "tests/test_scratch.py": TESTS,
        },
        "scratch project",
    )
    patch = commit(path, {"src/scratchproj/__init__.py": BROKEN_SOURCE}, "add: off by one")
    return ScratchRepo(path=path, base=base, patch=patch)


@dataclass(frozen=True, kw_only=True)
class Cli:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        try:
            return json.loads(self.stdout)
        except json.JSONDecodeError:
            raise AssertionError(
                f"no JSON (exit {self.exit_code}); stderr: {self.stderr[-3000:]}"
            ) from None


def orchestrator(
    *args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None, timeout: float = 900
) -> Cli:
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "--log-format", "console", *args],
        env=dict(env if env is not None else os.environ),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Cli(exit_code=done.returncode, stdout=done.stdout, stderr=done.stderr)


def build_args(repo: Path, *extra: str) -> list[str]:
    return ["image", "build", "--repo", str(repo), "--json", *extra]


def by_property(report: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {decision["property_id"].split("::")[-1]: decision for decision in report["decisions"]}


def remove_images(client: Any, image_ids: Sequence[str]) -> None:
    """Remove images this test built (never another's)."""
    for image_id in image_ids:
        try:
            client.images.remove(image_id, force=True)
        except Exception as error:  # already gone is fine; anything else is worth a note
            if "No such image" not in str(error):
                print(f"could not remove {image_id}: {error}", file=sys.stderr)
