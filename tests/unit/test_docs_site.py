"""The documentation holds: the site builds strictly, and what the pages name exists.

- `mkdocs build --strict` over mkdocs.yml (as `make docs` runs it, into a scratch folder):
  a page left out of the nav, a link to a missing page, file or anchor is a warning, and
  strict makes any warning fail the build. Offline: no plugin that fetches.
- Every path of this repository that README.md or a page names, in a link or in prose
  (`orchestrator/core/lanes.py`, `docs/ci/gitlab-ci.yml`, `bench/scale.py`...), exists;
  README's links are checked here too, since the site does not build it.
- Every `orchestrator ...` command line in their shell and console blocks parses with the
  real command (click's own parser, nothing run): a renamed or dropped option breaks
  this test, not a reader's copy of the line.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from orchestrator.cli import build_command

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
DOCUMENTS = [ROOT / "README.md", *PAGES]

# The folders of this repository a page names files under.
TOP_FOLDERS = ("orchestrator", "bench", "docs", "tests", "images", "fixtures", "scripts")
PATH_IN_PROSE = re.compile(r"(?<![\w./@:$-])((?:" + "|".join(TOP_FOLDERS) + r")/[\w.*/-]*[\w*/])")
# Paths of the projects under test that the pages name as examples, not files of this
# repository: a project's own tests/ and docs/, and the wheel's copy of images/.
FOREIGN_PATHS = frozenset(
    {
        "tests/__init__.py",  # a project's test package (lanes.md, the import roots)
        "tests/unit/test_x.py",  # a project's nested test module (lanes.md, test files)
        "docs/usage.rst",  # a project's doctest file (lanes.md, records.md)
        "docs/conf.py",  # bidict's Sphinx configuration (lanes.md, the corpus)
        "docs/man/locales",  # a project's data folder (engine.md)
        "orchestrator/images/",  # where the wheel carries images/ (engine.md)
    }
)
# A project's test module at the top of its tests/ (tests/test_more.py::LastTests): this
# repository keeps none there, only helpers (tests/conftest.py, tests/tiers.py).
PROJECT_TEST_MODULE = re.compile(r"tests/test_[\w]+\.py$")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)[^\n]*\n.*?^\1[ \t]*$", re.DOTALL | re.MULTILINE)
SHELL_BLOCK = re.compile(r"^```(?:sh|console)\n(.*?)^```", re.DOTALL | re.MULTILINE)
SHELL_ENDS = {">", ">>", "||", "&&", ";", "|"}


def build_site(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """Never with --quiet: mkdocs counts the warnings strict fails on only at the levels it
    logs, so a quiet strict build passes with broken links."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # the theme's banner, not a warning
    command = [sys.executable, "-m", "mkdocs", "build", "--strict"]
    return subprocess.run(
        [*command, "--config-file", str(config), "--site-dir", str(site)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    result = build_site(ROOT / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "ci" / "gitlab-ci.yml").is_file()  # a recipe the pages link


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The strict build is what catches a page's broken link: a copy of the docs with one
    link bent must not build."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for source in DOCS.rglob("*"):
        if source.is_file():
            target = docs / source.relative_to(DOCS)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    page = docs / "quarantine.md"
    text = page.read_text(encoding="utf-8")
    assert "](ci.md)" in text
    page.write_text(text.replace("](ci.md)", "](no-such-page.md)", 1), encoding="utf-8")
    config = tmp_path / "mkdocs.yml"
    config.write_text((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), encoding="utf-8")
    result = build_site(config, tmp_path / "site")
    assert result.returncode != 0
    assert "no-such-page.md" in result.stdout + result.stderr


def test_every_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    names = [page.relative_to(DOCS).as_posix() for page in PAGES]
    missing = [name for name in names if f": {name}\n" not in nav]
    assert not missing, f"pages missing from mkdocs.yml's nav: {missing}"


def prose(text: str) -> str:
    """The text without its fenced blocks: their paths are a shell's or another project's."""
    return FENCE.sub("", text)


def named_paths(text: str) -> set[str]:
    paths = set()
    for match in PATH_IN_PROSE.finditer(prose(text)):
        path = match.group(1).split("::")[0]
        if path in FOREIGN_PATHS or PROJECT_TEST_MODULE.fullmatch(path):
            continue
        paths.add(path)
    return paths


def exists(path: str) -> bool:
    if any(mark in path for mark in "*?["):
        return any(ROOT.glob(path.rstrip("/")))
    return (ROOT / path).exists()


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_path_a_page_names_exists(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    missing = sorted(path for path in named_paths(text) if not exists(path))
    assert not missing, f"{document.name} names paths that do not exist: {missing}"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_link_of_a_page_holds(document: Path) -> None:
    broken = []
    for target in LINK.findall(prose(document.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL, or an anchor the strict build checks
        if not (document.parent / target.split("#")[0]).exists():
            broken.append(target)
    assert not broken, f"{document.name} links to missing files: {broken}"


def test_the_path_check_can_fail() -> None:
    text = "See `orchestrator/core/lanes.py` and `docs/ci/nowhere.yml`, bench/nothing.py too."
    assert {p for p in named_paths(text) if not exists(p)} == {
        "docs/ci/nowhere.yml",
        "bench/nothing.py",
    }


def command_lines(text: str) -> list[list[str]]:
    """The arguments of each `orchestrator` line of the shell and console blocks; a line
    cut short with `...` is left out, and `$NAME` stands for a value of that name."""
    calls = []
    for block in SHELL_BLOCK.findall(text):
        for raw in block.replace("\\\n", " ").splitlines():
            line = raw.strip().removeprefix("$ ")
            if not line.startswith("orchestrator ") or "..." in line:
                continue
            named = re.sub(r"\$([A-Z_]+)", lambda m: m.group(1).lower(), line)
            words = shlex.split(named.removeprefix("orchestrator "), comments=True)
            for index, word in enumerate(words):
                if word in SHELL_ENDS:
                    words = words[:index]
                    break
            calls.append(words)
    return calls


def parse(words: list[str]) -> click.Context:
    command: click.Command | None = build_command()
    words = list(words)
    name = "orchestrator"
    while isinstance(command, click.Group):
        name = words.pop(0)
        command = command.get_command(click.Context(command), name)
    assert command is not None, f"no such command: {name}"
    return command.make_context(name, words)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_command_line_a_page_shows_parses(document: Path) -> None:
    for words in command_lines(document.read_text(encoding="utf-8")):
        try:
            parse(words)
        except click.ClickException as error:
            pytest.fail(f"{document.name}: orchestrator {shlex.join(words)}: {error}")


def test_the_readme_is_a_newcomers_page() -> None:
    """At most about 200 lines, with the two commands and a link into the site."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    assert "make replay" in text
    assert "make test" in text
    assert "docs/quarantine.md" in text
    assert len(command_lines(text)) >= 5  # the loop, shown with the tool's own commands
