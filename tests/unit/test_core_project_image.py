"""What goes into a project image, its tag and its Dockerfile: pure, no engine, no pip."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core import project_image as core
from orchestrator.core import replay_env
from orchestrator.errors import InputError

PYPROJECT = """\
[project]
name = "Demo_Lib"
dependencies = ["attrs>=23", "tomli; python_version < '3.11'"]

[project.optional-dependencies]
Speed = ["ujson"]
all = ["demo-lib[speed]", "rich"]

[dependency-groups]
test = ["pytest>=8", {include-group = "cov"}]
cov = ["coverage[toml]"]
loop = [{include-group = "loop"}]
"""


def metadata(text: str = PYPROJECT) -> core.ProjectMetadata:
    return core.read_metadata(pyproject=text, setup_cfg=None, setup_py=None)


def collect(files: dict[str, str] | None = None, **kwargs) -> core.Requirements:
    """The collector over ``files`` (repository paths, or ``/folder/name`` for the
    operator's own files on disk); ``requirement_files`` as the command line gives them."""
    files = files or {}

    def read(ref: core.FileRef) -> str | None:
        return files.get(ref.shown)

    refs = [
        core.operator_file(given, repo="/repo", cwd="/repo")
        for given in kwargs.pop("requirement_files", ())
    ]
    return core.collect_requirements(
        metadata=kwargs.pop("meta", None) or metadata(),
        read=read,
        requirement_files=refs,
        **kwargs,
    )


def test_pyproject_gives_name_dependencies_extras_and_groups():
    meta = metadata()
    assert meta.name == "Demo_Lib"
    assert meta.canonical_name == "demo-lib"
    assert meta.dependencies == ("attrs>=23", "tomli; python_version < '3.11'")
    assert set(meta.optional) == {"speed", "all"}
    assert set(meta.groups) == {"test", "cov", "loop"}
    assert meta.source == "pyproject.toml"


def test_setup_cfg_gives_install_requires_and_setup_py_a_name():
    cfg = "[metadata]\nname = old-lib\n[options]\ninstall_requires =\n    six  # compat\n    idna\n"
    meta = core.read_metadata(pyproject=None, setup_cfg=cfg, setup_py=None)
    assert (meta.name, meta.dependencies, meta.source) == ("old-lib", ("six", "idna"), "setup.cfg")
    meta = core.read_metadata(
        pyproject=None, setup_cfg=None, setup_py="setup(name='legacy', install_requires=['x'])"
    )
    assert meta.name == "legacy"
    assert any("install_requires are not read" in note for note in meta.notes)


def test_runtime_dependencies_come_first_then_extras_groups_files_and_specs():
    found = collect(
        {"req/dev.txt": "-r base.txt\nflake8 --hash=sha256:abc\n", "req/base.txt": "black\n"},
        extras=["all"],
        groups=["test"],
        requirement_files=["req/dev.txt"],
        pip_specs=["hypothesis==6.100"],
    )
    assert found.lines == (
        "attrs>=23",
        "tomli; python_version < '3.11'",
        "ujson",
        "rich",
        "pytest>=8",
        "coverage[toml]",
        "black",
        "flake8",
        "hypothesis==6.100",
    )
    assert any("left out 'demo-lib[speed]'" in note for note in found.notes)


@pytest.mark.parametrize(
    "line",
    ["-e .", "-e .[speed]", ".", "./", "file:.", "--editable=.", "demo-lib", "DEMO_LIB[speed]>=1"],
)
def test_a_requirement_naming_the_project_is_left_out_with_a_note(line):
    found = collect({"dev.txt": f"{line}\nrequests\n"}, requirement_files=["dev.txt"])
    assert "requests" in found.lines
    assert not any("demo" in item.lower() or item.startswith(".") for item in found.lines)
    assert any(note.startswith("left out") and "project under test" in note for note in found.notes)
    if "speed" in line:
        assert "ujson" in found.lines  # its extras are installed instead


def test_harmless_options_and_constraints_are_kept_for_pip():
    found = collect(
        {"dev.txt": "--prefer-binary\n--only-binary=:all:\n-c pins.txt\nrequests\n",
         "pins.txt": "urllib3<2\n"},
        requirement_files=["dev.txt"],
    )  # fmt: skip
    assert found.options == ("--prefer-binary", "--only-binary=:all:")
    assert found.constraints == ("urllib3<2",)
    assert found.requirements_text().splitlines()[:2] == ["--prefer-binary", "--only-binary=:all:"]


@pytest.mark.parametrize(
    ("line", "instead"),
    [
        ("--index-url https://user:s3cret@mirror.example/simple", "--index-url"),
        ("-i https://user:s3cret@mirror.example/simple", "--index-url"),
        ("-ihttps://user:s3cret@mirror.example/simple", "--index-url"),
        ("--index-url=https://user:s3cret@mirror.example/simple", "--index-url"),
        ("--extra-index-url https://user:s3cret@evil.example/simple", "--extra-index-url"),
        ("-f https://user:s3cret@evil.example/wheels", "--find-links"),
        ("--find-links /s3cret/wheels", "--find-links"),
        ("--no-index", "--no-index"),
        ("--trusted-host s3cret.example", "--trusted-host"),
    ],
)
def test_index_and_trust_options_of_a_file_are_left_out_with_a_note(line, instead):
    found = collect(
        {"req/dev.txt": f"requests\n{line}\n", "req/pins.txt": f"{line}\nidna<4\n"},
        requirement_files=["req/dev.txt"],
        tree_requirement_files=["req/pins.txt"],
    )
    assert found.options == ()
    assert "s3cret" not in found.requirements_text()
    notes = [note for note in found.notes if note.startswith("left out")]
    assert any("req/dev.txt:2" in note and f"pass {instead} " in note for note in notes)
    assert any("req/pins.txt:1" in note for note in notes)
    assert not any("s3cret" in note for note in found.notes)  # a password is never repeated


def test_line_continuations_and_comments():
    found = collect(
        {"dev.txt": "# tools\nrequests \\\n  >=2  # http\n\n"}, requirement_files=["dev.txt"]
    )
    assert "requests >=2" in found.lines


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"groups": ["docs"]}, "no dependency group 'docs'"),
        ({"groups": ["loop"]}, "include-group cycle"),
        ({"extras": ["nope"]}, "no extra 'nope'"),
        ({"requirement_files": ["gone.txt"]}, "no such file gone.txt"),
        ({"pip_specs": ["../other"]}, "local path requirement"),
        ({"pip_specs": ["not a requirement!"]}, "not a requirement"),
        ({"requirement_files": ["bad.txt"]}, "pip option '--user'"),
        ({"requirement_files": ["vcs.txt"]}, "editable requirement"),
    ],
)
def test_bad_input_is_refused_in_one_line(kwargs, message):
    files = {"bad.txt": "--user\n", "vcs.txt": "-e git+https://example.com/x.git#egg=x\n"}
    with pytest.raises(InputError, match=re.escape(message)):
        collect(files, **kwargs)


def test_pytest_is_added_only_when_nothing_names_it():
    plain = collect(meta=core.ProjectMetadata(name="p"))
    assert plain.lines == ("pytest",)
    assert any("added pytest" in note for note in plain.notes)
    cov_only = collect(meta=core.ProjectMetadata(name="p"), pip_specs=["pytest-cov"])
    assert cov_only.lines == ("pytest-cov", "pytest")
    pinned = collect(meta=core.ProjectMetadata(name="p"), pip_specs=["PyTest==8.3.5"])
    assert pinned.lines == ("PyTest==8.3.5",)


# ---------------------------------------------------------------- wheels, tag, labels

names = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)
hexes = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)


@st.composite
def wheelhouses(draw):
    packages = draw(st.lists(names, min_size=1, max_size=6, unique=True))
    return [
        core.wheel(f"{name}-1.{index}-py3-none-any.whl", draw(hexes))
        for index, name in enumerate(packages)
    ]


def _digest(wheels, apt=("graphviz",), base="sha256:" + "b" * 64, revision="a" * 40):
    text = core.dockerfile(base_image_id=base, add_user=False)
    labels = core.image_labels(
        project="p", wheels=wheels, excluded=(), apt=apt, base_image_id=base, revision=revision
    )
    return core.inputs_digest(
        base_image_id=base, wheels=wheels, apt=apt, dockerfile_text=text, labels=labels
    )


@given(wheelhouses(), st.randoms())
def test_the_digest_ignores_the_order_of_the_wheels(wheels, random):
    shuffled = list(wheels)
    random.shuffle(shuffled)
    assert _digest(wheels) == _digest(shuffled)


@given(wheelhouses(), st.data())
def test_any_change_of_an_input_changes_the_digest(wheels, data):
    index = data.draw(st.integers(0, len(wheels) - 1))
    other_hash = data.draw(hexes.filter(lambda h: h != wheels[index].sha256))
    changed = [*wheels]
    changed[index] = core.wheel(wheels[index].filename, other_hash)
    assert _digest(changed) != _digest(wheels)
    assert _digest(wheels, apt=("graphviz", "git")) != _digest(wheels)
    assert _digest(wheels, base="sha256:" + "c" * 64) != _digest(wheels)
    assert _digest(wheels, revision="c" * 40) != _digest(wheels)  # an image per revision


@given(wheelhouses(), names)
def test_the_projects_own_wheels_are_always_left_out(wheels, project):
    own = core.wheel(f"{project.upper()}-9.9-py3-none-any.whl", "0" * 64)
    kept, excluded = core.split_project([*wheels, own], project)
    assert all(item.name != project for item in kept)
    assert own in excluded
    assert len(kept) + len(excluded) == len(wheels) + 1


@given(st.text(min_size=0, max_size=30), hexes)
def test_the_tag_is_a_valid_docker_reference(project, hexdigest):
    tag = core.image_tag(project or None, "sha256:" + hexdigest)
    repository, name = tag.split(":")
    assert re.fullmatch(r"orchestrator-project/[a-z0-9]+(?:-[a-z0-9]+)*", repository)
    assert name == hexdigest[:16]


def test_the_dockerfile_installs_offline_and_keeps_no_wheel():
    text = core.dockerfile(base_image_id="sha256:" + "a" * 64, add_user=False)
    assert text.count("FROM sha256:" + "a" * 64) == 2
    assert "--no-index" in text
    assert "--no-deps" in text
    stages = text.split("\nFROM ")
    assert "wheels" not in stages[-1]  # the final stage copies the venv only
    assert "useradd" not in text
    assert "useradd" in core.dockerfile(base_image_id="x", add_user=True)


def test_labels_list_the_pins_and_name_the_interpreter():
    wheels = [core.wheel("Foo_Bar-2.0-py3-none-any.whl", "1" * 64)]
    labels = core.image_labels(
        project="p",
        wheels=wheels,
        excluded=(),
        apt=("git",),
        base_image_id="sha256:x",
        revision="d" * 40,
    )
    assert labels[core.LABEL_PACKAGES] == "foo-bar==2.0"
    assert labels[core.LABEL_REVISION] == "d" * 40
    assert replay_env.interpreter_from_labels(labels) == core.VENV_PYTHON
    assert replay_env.interpreter_from_labels({}) == "python3"
    relative = {replay_env.LABEL_PYTHON: "relative/python"}
    assert replay_env.interpreter_from_labels(relative) == "python3"


def test_apt_names_and_sources():
    assert core.apt_includes(["git", "tzdata", "git"]) == (*core.BASE_INCLUDES, "git")
    with pytest.raises(InputError, match="not a Debian package name"):
        core.check_apt(["rm -rf"])
    one_line = (
        "/etc/apt/sources.list",
        "deb [signed-by=/k.gpg] http://deb.example/debian bookworm main\n"
        "deb http://deb.example/debian bookworm-updates main\n"
        "deb http://other.example trixie main\n# deb http://x bookworm main\n",
    )
    deb822 = (
        "/etc/apt/sources.list.d/debian.sources",
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\nSigned-By: /usr/share/keyrings/debian.gpg\n\n"
        "Types: deb\nURIs: http://off.example\nSuites: bookworm\nEnabled: no\n",
    )
    assert core.apt_sources([one_line, deb822], "bookworm") == (
        "deb [signed-by=/k.gpg] http://deb.example/debian bookworm main",
        "deb http://deb.example/debian bookworm-updates main",
        "deb [signed-by=/usr/share/keyrings/debian.gpg] http://mirror.example/debian bookworm main",
        "deb [signed-by=/usr/share/keyrings/debian.gpg] http://mirror.example/debian "
        "bookworm-updates main",
    )
    first = core.apt_base_tag(suite="bookworm", includes=("a",), sources=("s",))
    assert first != core.apt_base_tag(suite="bookworm", includes=("a", "b"), sources=("s",))
