"""Corpus: `orchestrator replay` against plain pytest on real libraries' upstream fixes.

    .venv/bin/python bench/corpus.py --mirror-root /work/.mirror --work /tmp/corpus \
        [--library NAME ...] [--commit SHA ...] [--scenario forward|reversed|noop ...]
        [--tag TAG] [--first N] [--build-arg ARG ...] [--markdown]
    .venv/bin/python bench/corpus.py --work /tmp/corpus --report-only [--tag TAG] [--markdown]
        [--before TAG]

The libraries and their fix commits are in bench/corpus.toml. The script never fetches:
`--mirror-root` holds one git repository per library, `<root>/<owner>+<name>/repo` (a bare
mirror) or `<root>/<owner>+<name>` (a clone); it is cloned once into `WORK/clones/NAME`,
where the no-op commits are made. Nothing is written into this project.

For each fix commit FIX with parent PARENT:

- **Ground truth**, plain pytest in the same image (the library's image, the tree mounted
  read-only, no network, non-root, `python -m pytest -q -p no:cacheprovider` as the user
  would type it: the tree's root importable, as the tool's replays have it; a failure on
  the read-only tree, `[Errno 30] Read-only file system`, counts as an error, as the
  tool's `read_only_tree`), plus a small plugin that writes each test's outcome and
  failing line, and `--continue-on-collection-errors`, so that a test module that does
  not import on a side (its tests are errors there) leaves the other modules' outcomes):
  the tree at FIX, and at PARENT with the fix's test files laid over (SWE-bench style:
  every file the fix changed under a test folder, or named `test_*.py`, `*_test.py`,
  `conftest.py`; added, modified and deleted alike).
- **forward**: `orchestrator replay --base PARENT --patch FIX --tests-from patch` with
  README's defaults: the default command (the whole suite), the default deadline, no
  `--writable-tree`, the runner image or the one `orchestrator image build` printed
  (`build_args` per library, `--build-arg` for every build). Expected per test: base as
  plain pytest on PARENT + fix tests, patch as on FIX.
- **reversed**: `--base FIX --patch PARENT --tests-from base` (the fix undone, judged by
  the fix's tests): must block (exit 1) when the fix's tests catch the bug.
- **noop**: `--base FIX --patch NOOP --tests-from patch`, NOOP a commit on top of FIX that
  adds one comment line to a test module and to a code module: must not block.

Per test, the tool's labels on each side are compared with pytest's outcome there, and its
lane with the lane those outcomes call for (docs/lanes.md, section 3): pass/pass
no_freeze, fail/pass fix_candidate, pass/fail property_regression, fail/fail block_patch
(same failing line) or different_bug, an error infra_queue. A test pytest skipped (or
xfailed) on both sides must be shown and not block.

Each replay is also judged as a pull request, by its exit status alone: a fix and a no-op
must pass (0); the fix undone must block (1) when plain pytest says the fix's tests catch
the bug (a test that passed on FIX fails, or does not import, on PARENT + fix tests),
else pass. A wrong exit is a false block (1 for 0), a missed block (0 for 1), undecided
(3) or bad input (2), printed with the tool's reason (its error line, or the decisions
behind the exit) and the cause `notes` in corpus.toml record. Results are kept under
`WORK/results/TAG/` (ground truth under `WORK/truth/`, shared by every tag), so a second
run with another `--tag` (the tool after some fixes) reuses the ground truth and its
table sits beside the first.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import run_folder  # bench/, beside this script

ROOT = Path(__file__).resolve().parents[1]
CLI = ROOT / ".venv" / "bin" / "orchestrator"
CORPUS = Path(__file__).with_name("corpus.toml")
RUNNER_IMAGE = "orchestrator-runner:latest"
SCENARIOS = ("forward", "reversed", "noop")
BLOCKING = {"reject_run", "property_regression", "different_bug", "block_patch"}
UNDECIDED = {"reject_malformed", "infra_queue", "rerun_shrink"}
INTERNAL_ERROR = 3  # pytest.ExitCode.INTERNAL_ERROR
TEST_DIRS = re.compile(r"^(tests?|testing|testsuite|test_.*|.*_tests?)$")  # as the tool
TEST_FILE = re.compile(r"^(test_.*\.py|.*_test\.py|conftest\.py)$")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "corpus",
    "GIT_AUTHOR_EMAIL": "corpus@example.invalid",
    "GIT_COMMITTER_NAME": "corpus",
    "GIT_COMMITTER_EMAIL": "corpus@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}

# Loaded with -p into the plain pytest run: each test's outcome, and for a failure the
# deepest line in the test's own file and the exception type.
PLUGIN = """
import json
import os

OUTCOMES = {}


def _failure(report):
    longrepr = report.longrepr
    chain = getattr(longrepr, "chain", None)
    traceback = chain[-1][0] if chain else getattr(longrepr, "reprtraceback", None)
    crash = getattr(longrepr, "reprcrash", None)
    kind = None
    if crash is not None and crash.message:
        head = crash.message.split(":", 1)[0].strip()
        kind = head.rsplit(".", 1)[-1] if head.replace(".", "").isidentifier() else None
        if crash.message.startswith("assert "):  # a rewritten plain assert
            kind = "AssertionError"
    own = os.path.normpath(report.location[0])
    line = None
    for entry in getattr(traceback, "reprentries", None) or ():
        where = getattr(entry, "reprfileloc", None)
        if where is not None and os.path.normpath(os.path.relpath(where.path)) == own:
            line = where.lineno
    return {"line": f"{own}:{line}" if line else None, "type": kind}


def pytest_runtest_logreport(report):
    record = OUTCOMES.setdefault(report.nodeid, {"outcome": None})
    xfail = hasattr(report, "wasxfail")
    if report.when == "setup":
        if report.failed:
            record["outcome"] = "error"
        elif report.skipped:
            record["outcome"] = "xfailed" if xfail else "skipped"
    elif report.when == "call":
        if xfail:
            record["outcome"] = "xfailed" if report.skipped else "xpassed"
        elif report.skipped:
            record["outcome"] = "skipped"
        elif report.failed and "[Errno 30] Read-only file system" in report.longreprtext:
            record["outcome"] = "error"  # the sandbox's read-only tree: no verdict
        elif report.failed:
            if record["outcome"] != "failed":  # the first failing subtest names it
                record.update(_failure(report))
            record["outcome"] = "failed"
        elif record["outcome"] != "failed":  # pytest 9: a failed subtest fails its test
            record["outcome"] = "passed"
    elif report.failed and record["outcome"] in (None, "passed"):
        record["outcome"] = "error"


def pytest_collectreport(report):
    if report.failed:
        OUTCOMES[report.nodeid or "<session>"] = {"outcome": "collect_error"}


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput"):  # a pytest-xdist worker: the controller writes
        return
    with open(os.environ["CORPUS_OUT"], "w") as out:
        json.dump({"exitstatus": int(exitstatus), "tests": OUTCOMES}, out)
"""


# ---------------------------------------------------------------- the corpus


@dataclass(frozen=True, kw_only=True)
class Library:
    name: str
    repo: str
    style: str
    image: str
    build_args: tuple[str, ...] = ()
    build_rev: str = "HEAD"
    commits: tuple[str, ...] = ()
    timeout: int = 600  # plain pytest's (the replay keeps README's default deadline)
    run: bool = True  # in a run that names no --library
    truth_writable: bool = False  # plain pytest on a writable copy (see plain_pytest)
    notes: Mapping[str, str] = field(default_factory=dict)  # a wrong exit's cause, see note()


def load_corpus(path: Path) -> list[Library]:
    data = tomllib.loads(path.read_text())
    return [
        Library(
            name=item["name"],
            repo=item["repo"],
            style=item.get("style", ""),
            image=item.get("image", "runner"),
            build_args=tuple(item.get("build_args", ())),
            build_rev=item.get("build_rev", "HEAD"),
            commits=tuple(item["commits"]),
            timeout=int(item.get("timeout", 600)),
            run=bool(item.get("run", True)),
            notes=dict(item.get("notes", {})),
            truth_writable=bool(item.get("truth_writable", False)),
        )
        for item in data["library"]
    ]


def git(repo: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **(env or {})},
    )
    return done.stdout.strip()


def clone(library: Library, mirror_root: Path, work: Path) -> Path:
    dest = work / "clones" / library.name
    if dest.exists():
        return dest
    folder = mirror_root / library.repo.replace("/", "+")
    source = folder / "repo" if (folder / "repo").exists() else folder
    if not source.exists():
        raise SystemExit(f"{library.name}: no mirror at {folder} (fetch github:{library.repo})")
    dest.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "--quiet", str(source), str(dest)], check=True)
    return dest


def is_test_path(path: str) -> bool:
    """The ground truth's test files: SWE-bench's test patch, by path."""
    parts = path.split("/")
    return any(TEST_DIRS.match(part) for part in parts[:-1]) or bool(TEST_FILE.match(parts[-1]))


@dataclass(frozen=True, kw_only=True)
class Commit:
    fix: str
    parent: str
    subject: str
    test_changes: tuple[tuple[str, str], ...]  # (status A/M/D, path)


def describe(repo: Path, sha: str) -> Commit:
    fix = git(repo, "rev-parse", sha)
    parent = git(repo, "rev-parse", f"{fix}^")
    subject = git(repo, "log", "-1", "--format=%s", fix)
    changes = []
    for line in git(repo, "diff", "--name-status", "--no-renames", parent, fix).splitlines():
        status, path = line.split("\t", 1)
        if is_test_path(path):
            changes.append((status[0], path))
    return Commit(fix=fix, parent=parent, subject=subject, test_changes=tuple(changes))


# ---------------------------------------------------------------- images


@dataclass(frozen=True, kw_only=True)
class Image:
    ref: str
    pytest: str  # pytest as the user would run it there (`python -m pytest`)


def library_image(library: Library, repo: Path, extra_build_args: Sequence[str] = ()) -> Image:
    """The image README sends a user to: the runner image, or `orchestrator image build`
    with the library's `build_args` and the operator's `extra_build_args` (an index, a
    wheelhouse, a certificate: whatever the build step on this machine takes)."""
    if library.image == "runner":
        return Image(ref=RUNNER_IMAGE, pytest="python3 -m pytest")
    done = subprocess.run(
        [
            str(CLI),
            "image",
            "build",
            "--repo",
            str(repo),
            "--rev",
            library.build_rev,
            "--json",
            *library.build_args,
            *extra_build_args,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{library.name}: image build failed: {done.stderr[-2000:]}")
    image_id = json.loads(done.stdout)["image_id"]
    labels = json.loads(
        subprocess.run(
            ["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", image_id],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    python = (labels or {}).get("orchestrator.python", "python3")
    return Image(ref=image_id, pytest=f"{python} -m pytest")


# ---------------------------------------------------------------- ground truth


def export(repo: Path, rev: str, dest: Path) -> None:
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", rev], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


def tree(repo: Path, work: Path, library: str, commit: Commit, variant: str) -> Path:
    """A tree to run plain pytest on: `fix` or `parent+fixtests`."""
    dest = work / "trees" / library / f"{commit.fix[:12]}-{variant}"
    if dest.exists():
        return dest
    staging = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    export(repo, commit.fix if variant == "fix" else commit.parent, staging)
    if variant == "parent+fixtests":
        for status, path in commit.test_changes:
            target = staging / path
            if status == "D":
                target.unlink(missing_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            blob = subprocess.run(
                ["git", "-C", str(repo), "show", f"{commit.fix}:{path}"],
                capture_output=True,
                check=True,
            ).stdout
            target.write_bytes(blob)
    for entry in [staging, *staging.rglob("*")]:
        if not entry.is_symlink():
            entry.chmod(0o755 if entry.is_dir() else 0o644)
    staging.rename(dest)
    return dest


def src_layout(root: Path) -> bool:
    src = root / "src"
    return (
        src.is_dir()
        and not (src / "__init__.py").exists()
        and any(
            (child.is_dir() and (child / "__init__.py").exists()) or child.suffix == ".py"
            for child in src.iterdir()
        )  # a package, or a module (setup.cfg's py_modules under package_dir = src)
    )


def truth_file(truth_dir: Path, fix: str, variant: str, *, reading: bool = False) -> Path:
    """Where one tree's ground truth is kept: ``-m`` since it runs ``python -m pytest``;
    reading falls back to the truth of earlier runs (the ``pytest`` script) when that is
    all there is."""
    current = truth_dir / f"{fix}-{variant}-m.json"
    earlier = truth_dir / f"{fix}-{variant}.json"
    return earlier if reading and not current.exists() and earlier.exists() else current


def plain_pytest(
    image: Image, root: Path, out: Path, timeout: int, *, writable: bool = False
) -> dict[str, Any]:
    """One plain pytest run of the whole suite; its outcomes and wall time (cached).
    `writable` runs it on a copy of the tree in the container's tmpfs, as in a user's
    checkout (a library whose pytest-cov erases `.coverage` at the session's start has no
    outcome at all on a read-only tree)."""
    if out.exists():
        cached: dict[str, Any] = json.loads(out.read_text())
        return cached
    scratch = out.with_suffix(".d")
    shutil.rmtree(scratch, ignore_errors=True)
    (scratch / "plugin").mkdir(parents=True)
    (scratch / "plugin" / "corpus_outcomes.py").write_text(PLUGIN)
    (scratch / "out").mkdir()
    (scratch / "out").chmod(0o777)
    src = "/tmp/src" if writable else "/src"
    pythonpath = "/corpus-plugin" + (f":{src}/src" if src_layout(root) else "")
    copy = "cp -r /ro /tmp/src && cd /tmp/src && " if writable else ""
    command = [
        "docker", "run", "--rm", "--network", "none", "--read-only",
        "--tmpfs", "/tmp:rw,exec,size=512m", "--cpus", "1", "--memory", "1g",
        "--user", "1000:1000", "--workdir", "/tmp" if writable else "/src",
        "-e", "PYTHONDONTWRITEBYTECODE=1", "-e", "HOME=/tmp/home", "-e", "TMPDIR=/tmp",
        "-e", "PYTHONHASHSEED=0", "-e", "REPLAY_SEED=0", "-e", f"PYTHONPATH={pythonpath}",
        "-e", "HYPOTHESIS_STORAGE_DIRECTORY=/tmp/hypothesis",
        "-e", "CORPUS_OUT=/out/outcomes.json",
        "-v", f"{root}:{'/ro' if writable else '/src'}:ro",
        "-v", f"{scratch / 'plugin'}:/corpus-plugin:ro", "-v", f"{scratch / 'out'}:/out",
        image.ref, "sh", "-c",
        f"mkdir -p /tmp/home && {copy}exec {image.pytest} -q -p no:cacheprovider"
        " -p corpus_outcomes --continue-on-collection-errors",
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=timeout)
    wall = time.perf_counter() - started
    result_file = scratch / "out" / "outcomes.json"
    if not result_file.exists():
        said = (done.stdout[-2000:] + done.stderr[-2000:]).strip()
        raise SystemExit(f"plain pytest wrote nothing on {root}: {said}")
    result: dict[str, Any] = json.loads(result_file.read_text())
    result["wall_s"] = round(wall, 2)
    result["tail"] = done.stdout[-1500:]
    out.write_text(json.dumps(result, indent=1, sort_keys=True))
    shutil.rmtree(scratch)
    return result


# ---------------------------------------------------------------- replays


def noop_commit(repo: Path, fix: str) -> str:
    """A commit on top of FIX adding one comment line to a test module and a code module."""
    branch = f"corpus-noop-{fix[:12]}"
    existing = git(repo, "branch", "--list", branch)
    if existing:
        return git(repo, "rev-parse", branch)
    files = git(repo, "ls-tree", "-r", "--name-only", fix).splitlines()
    python = [path for path in files if path.endswith(".py")]
    tests = sorted(
        (path for path in python if TEST_FILE.match(path.rsplit("/", 1)[-1])),
        key=lambda path: (not any(TEST_DIRS.match(part) for part in path.split("/")[:-1]), path),
    )
    # the package's own __init__.py (src/pkg/ or pkg/), not docs/ or benchmarks/
    code = sorted(
        (path for path in python if path.endswith("/__init__.py") and not is_test_path(path)),
        key=lambda path: (not path.startswith("src/"), path.count("/"), path),
    )
    worktree = repo.parent / f".noop-{fix[:12]}"
    shutil.rmtree(worktree, ignore_errors=True)
    git(repo, "worktree", "add", "--quiet", "-b", branch, str(worktree), fix)
    try:
        for path in tests[:1] + code[:1]:
            target = worktree / path
            target.write_text(target.read_text() + "# a comment: nothing else changes\n")
            git(worktree, "add", path)
        git(worktree, "commit", "--quiet", "--allow-empty", "-m", "corpus: no-op", env=GIT_ENV)
        return git(worktree, "rev-parse", "HEAD")
    finally:
        git(repo, "worktree", "remove", "--force", str(worktree))


def replay_argv(
    repo: Path, image: Image, base: str, patch: str, tests_from: str, run_dir: Path
) -> list[str]:
    """`orchestrator replay` with README's defaults: the default command (the whole suite),
    the default deadline, no --writable-tree and no test paths; the image a user names
    (the runner image, or the one `orchestrator image build` printed), `--tests-from` as
    README's walk-through asks a fix's question. `--no-record --out` decide nothing."""
    return [
        str(CLI), "replay", "--repo", str(repo), "--base", base, "--patch", patch,
        "--image", image.ref, "--tests-from", tests_from, "--no-record", "--out", str(run_dir),
    ]  # fmt: skip


def replay(
    repo: Path, image: Image, base: str, patch: str, tests_from: str, run_dir: Path
) -> dict[str, Any]:
    """One `orchestrator replay` as README tells a user; its report and wall time."""
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    command = replay_argv(repo, image, base, patch, tests_from, run_dir)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=run_dir.parent, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    summary_file = run_dir / "summary.json"
    summary: dict[str, Any] = run_folder.report(run_dir) if summary_file.exists() else {}
    decisions = summary.get("decisions", [])
    return {
        "exit": done.returncode,
        "argv": command[1:],
        "readme_defaults": True,
        "wall_s": round(wall, 2),
        "stderr": done.stderr[-4000:],
        "stdout_tail": done.stdout[-1500:],
        "decisions": [
            slim(decision, evidence)
            for decision, evidence in zip(
                decisions, run_folder.evidences(run_dir, decisions), strict=True
            )
        ],
        "screening": summary.get("screening"),
    }


def slim(decision: Mapping[str, Any], evidence: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the comparison needs of one decision, with each side's failing lines."""
    lines: dict[str, list[str]] = {"base": [], "patch": []}
    if evidence is not None:
        for side in ("base", "patch"):
            for replay_record in evidence.get(side) or []:
                assertion = replay_record.get("assertion_id")
                if assertion:
                    lines[side].append(str(assertion).split("@", 1)[-1])
    return {
        "property_id": decision["property_id"],
        "lane": decision["lane"],
        "code": decision["code"],
        "base_labels": list(decision.get("base_labels") or []),
        "patch_labels": list(decision.get("patch_labels") or []),
        "base_reasons": list(decision.get("base_reasons") or []),
        "patch_reasons": list(decision.get("patch_reasons") or []),
        "reasons": list(decision.get("reasons") or []),
        "failing_lines": lines,
    }


# ---------------------------------------------------------------- comparison

OUTCOME = {
    "passed": "pass",
    "failed": "fail",
    "error": "error",
    "skipped": "skip",
    "xfailed": "skip",
    "xpassed": "skip",
}
LABEL = {"pass": "assert_pass", "fail": "assert_fail", "error": "harness_error"}


def expected_lanes(base: Mapping[str, Any] | None, patch: Mapping[str, Any] | None) -> set[str]:
    """The lanes plain pytest's outcomes on the two sides call for."""
    b = OUTCOME.get(base["outcome"], "error") if base else "absent"
    p = OUTCOME.get(patch["outcome"], "error") if patch else "absent"
    if b == p == "absent":
        return set()  # the tool made it up: any lane disagrees
    if "error" in (b, p):
        return {"infra_queue"}
    if b == "absent":  # row 2a: every corpus replay runs under --tests-from, so both
        # sides run the same test files and a test one side lacks was made by the code
        # under test (its data, its docstrings' lines): the side that has it is judged alone
        return (
            {"property_regression"} if p == "fail" else {"skipped" if p == "skip" else "no_freeze"}
        )
    if p == "absent":  # row 2a, base only: the patch no longer has it
        return {"no_freeze", "skipped"}
    if b == "skip" and p == "fail":
        return {"property_regression"}  # pytest is red on the patch
    if "skip" in (b, p):
        return {"skipped"}  # shown, never blocking
    table = {
        ("pass", "pass"): {"no_freeze"},
        ("fail", "pass"): {"fix_candidate"},
        ("pass", "fail"): {"property_regression"},
    }
    if (b, p) in table:
        return table[(b, p)]
    assert base is not None
    assert patch is not None
    same = base.get("line") and (base.get("line"), base.get("type")) == (
        patch.get("line"),
        patch.get("type"),
    )
    return {"block_patch"} if same else {"different_bug", "block_patch"}


def short(outcome: Mapping[str, Any] | None) -> str:
    return OUTCOME.get(outcome["outcome"], "error") if outcome else "absent"


def labels_agree(outcome: Mapping[str, Any] | None, labels: Sequence[str]) -> bool:
    kind = short(outcome)
    if kind == "absent":
        return not labels or set(labels) == {"harness_error"}
    if kind == "skip":
        return all("skip" in label for label in labels)
    return bool(labels) and set(labels) == {LABEL[kind]}


def outcomes(truth: Mapping[str, Any]) -> dict[str, Any]:
    """Each test's outcome; a module that did not import leaves none (see `errored`). A
    session pytest ended with INTERNALERROR (exit 3: a plugin's hook raised around the
    tests, e.g. pytest-cov saving into the read-only tree) is an error of `<session>`."""
    found = {k: v for k, v in truth["tests"].items() if v["outcome"] != "collect_error"}
    if truth.get("exitstatus") == INTERNAL_ERROR:
        found.setdefault("<session>", {"outcome": "error"})
    return found


def errored(truth: Mapping[str, Any], node: str) -> bool:
    """Whether the node, a collector above it (its module, a class) or the whole session
    failed to collect on that side."""
    broken = {k for k, v in truth["tests"].items() if v["outcome"] == "collect_error"}
    parts = node.split("::")
    above = {"::".join(parts[:end]) for end in range(1, len(parts) + 1)}
    return bool(broken & ({"<session>", ""} | above))


@dataclass(kw_only=True)
class Comparison:
    tests: int = 0
    agree: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    located: int = 0
    located_same: int = 0

    def add(self, kind: str | None, node: str) -> None:
        self.tests += 1
        if kind is None:
            self.agree += 1
            return
        self.kinds[kind] += 1
        self.examples.setdefault(kind, node)


FAILED = {"outcome": "failed", "line": None, "type": None}
PASSED = {"outcome": "passed"}


def sided(
    base_truth: Mapping[str, Any],
    patch_truth: Mapping[str, Any],
    node: str,
    b: Mapping[str, Any] | None,
    p: Mapping[str, Any] | None,
) -> tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]:
    """A node's outcome on each side where its module (or class) did not collect: an
    error where it failed on both sides; where it failed on one side only, the reading of
    docs/lanes.md section 11 (the test files are the same, so the code under test broke
    the import): its tests fail there, and the module's own entry passes on the side
    where it imported."""
    b_broken = b is None and errored(base_truth, node)
    p_broken = p is None and errored(patch_truth, node)
    if b_broken and p_broken:
        return {"outcome": "error"}, {"outcome": "error"}
    if b_broken:
        return FAILED, PASSED if p is None and collector(base_truth, node) else p
    if p_broken:
        return PASSED if b is None and collector(patch_truth, node) else b, FAILED
    return b, p


def collector(truth: Mapping[str, Any], node: str) -> bool:
    """Whether the node is a collector (a module, a class) that failed to collect there."""
    return truth["tests"].get(node, {}).get("outcome") == "collect_error"


def compare(
    base_truth: Mapping[str, Any], patch_truth: Mapping[str, Any], result: Mapping[str, Any]
) -> tuple[Comparison, int]:
    """Per test: the tool's labels and lane against plain pytest; and the exit expected."""
    truth_b, truth_p = outcomes(base_truth), outcomes(patch_truth)
    decided = {d["property_id"]: d for d in result["decisions"]}
    comparison = Comparison()
    worst = 0
    for node in sorted(set(truth_b) | set(truth_p) | set(decided)):
        b, p = sided(base_truth, patch_truth, node, truth_b.get(node), truth_p.get(node))
        lanes = expected_lanes(b, p)
        if lanes & BLOCKING and not lanes - BLOCKING:
            worst = 1
        elif lanes & UNDECIDED and worst == 0:
            worst = 3
        decision = decided.get(node)
        pytest_says = f"pytest {short(b)}/{short(p)}"
        if decision is None:
            comparison.add(f"not shown ({pytest_says})", node)
            continue
        skip_code = decision["code"].startswith("skipped") and decision["lane"] == "no_freeze"
        lane = "skipped" if skip_code else decision["lane"]
        shown = f"{decision['lane']}/{decision['code']}"
        other_failure = ""
        for side, truth in (("base", b), ("patch", p)):
            lines = set(decision["failing_lines"][side])
            if lines and truth and truth.get("outcome") == "failed" and truth.get("line"):
                comparison.located += 1
                where = {line.rsplit(":", 1)[0] if not truth["type"] else line for line in lines}
                comparison.located_same += where == {
                    f"{truth['line']}:{truth['type']}" if truth["type"] else truth["line"]
                }
            types = {line.rsplit(":", 1)[-1] for line in lines} - {"Failed"}
            if truth and truth.get("type") and types and types != {truth["type"]}:
                # "Failed" is the probe's type for a unittest failure: the line column
                # counts it; another type means the side failed for another reason.
                other_failure = f"{side} fails with {','.join(sorted(types))} ({truth['type']})"
        if not labels_agree(b, decision["base_labels"]) or not labels_agree(
            p, decision["patch_labels"]
        ):
            labels = "/".join(
                ",".join(sorted(set(decision[f"{side}_labels"])) or ["-"])
                for side in ("base", "patch")
            )
            comparison.add(f"{shown} [{labels}] ({pytest_says})", node)
        elif lane not in lanes:
            comparison.add(f"{shown} ({pytest_says})", node)
        elif other_failure:
            comparison.add(f"{shown}, {other_failure}", node)
        else:
            comparison.add(None, node)
    return comparison, worst


# ---------------------------------------------------------------- the exit


RED = ("failed", "error")


def catching_tests(fixed: Mapping[str, Any], reverted: Mapping[str, Any]) -> list[str]:
    """The tests plain pytest says catch the bug: passed on FIX, failed or errored (their
    module did not import) on PARENT with the fix's tests laid over."""
    good, bad = outcomes(fixed), outcomes(reverted)
    caught = []
    for node, record in good.items():
        if node == "<session>" or record.get("outcome") != "passed":
            continue
        after = bad.get(node)
        red = errored(reverted, node) if after is None else after.get("outcome") in RED
        if red:
            caught.append(node)
    return sorted(caught)


def expected_exit(
    scenario: str, base_truth: Mapping[str, Any], patch_truth: Mapping[str, Any]
) -> int:
    """The exit plain pytest implies for a pull request: a fix and a no-op pass (0); the fix
    undone blocks (1) when the fix's tests catch the bug, else it passes. A tree already
    red on both sides does not change that: a user's pull request did not make it red."""
    if scenario != "reversed":
        return 0
    return 1 if catching_tests(base_truth, patch_truth) else 0


VERDICTS = ("right", "false block", "missed block", "undecided", "bad input", "other")


def verdict(exit_code: int, expected: int) -> str:
    if exit_code == expected:
        return "right"
    return {1: "false block", 0: "missed block", 3: "undecided", 2: "bad input"}.get(
        exit_code, "other"
    )


def error_line(stderr: str) -> str | None:
    lines = [line for line in stderr.splitlines() if line.startswith("orchestrator: error:")]
    return lines[-1] if lines else None


def said(decision: Mapping[str, Any]) -> str:
    labels = "/".join(
        ",".join(sorted(set(decision[f"{side}_labels"]))) or "-" for side in ("base", "patch")
    )
    reasons = "; ".join(decision.get("reasons") or [])
    line = f"`{decision['property_id']}` {decision['lane']}/{decision['code']} [{labels}]"
    return f"{line}: {reasons[:120]}" if reasons else line


def reason_line(result: Mapping[str, Any], caught: Sequence[str]) -> str:
    """Why the tool gave the exit it gave: its error line, else the decisions behind it."""
    decisions = result["decisions"]
    exit_code = result["exit"]
    if exit_code == 1:
        picked = [d for d in decisions if d["lane"] in BLOCKING]
    elif exit_code == 0:  # a missed block: what the tool said of the tests that catch it
        wanted = set(caught)
        picked = [d for d in decisions if d["property_id"] in wanted]
        if not picked:
            return f"none of the {len(caught)} catching tests decided (e.g. `{caught[0]}`)"
    else:
        line = error_line(result.get("stderr", ""))
        if line or not decisions:
            return line or f"exit {exit_code}, no decision: {result.get('stderr', '')[-200:]}"
        picked = [d for d in decisions if d["lane"] in UNDECIDED]
    kinds = Counter(f"{d['lane']}/{d['code']}" for d in picked)
    head = ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
    return f"{head}; e.g. {said(picked[0])}" if picked else head


# ---------------------------------------------------------------- one library


def run_library(
    library: Library,
    mirror_root: Path,
    work: Path,
    tag: str,
    only: Sequence[str],
    scenarios: Sequence[str] = SCENARIOS,
    extra_build_args: Sequence[str] = (),
) -> None:
    repo = clone(library, mirror_root, work)
    image = library_image(library, repo, extra_build_args)
    print(f"== {library.name}: image {image.ref[:19]}", file=sys.stderr)
    for sha in library.commits:
        if only and not any(sha.startswith(o) or o.startswith(sha) for o in only):
            continue
        commit = describe(repo, sha)
        truth_dir = work / "truth" / library.name
        truth_dir.mkdir(parents=True, exist_ok=True)
        truths = {}
        for variant in ("fix", "parent+fixtests"):
            root = tree(repo, work, library.name, commit, variant)
            out = truth_file(truth_dir, commit.fix[:12], variant)
            truths[variant] = plain_pytest(
                image, root, out, library.timeout * 2, writable=library.truth_writable
            )
        noop = noop_commit(repo, commit.fix)
        plans = {
            "forward": (commit.parent, commit.fix, "patch"),
            "reversed": (commit.fix, commit.parent, "base"),
            "noop": (commit.fix, noop, "patch"),
        }
        results_dir = work / "results" / tag / library.name
        results_dir.mkdir(parents=True, exist_ok=True)
        for scenario, (base, patch, tests_from) in plans.items():
            if scenario not in scenarios:
                continue
            out = results_dir / f"{commit.fix[:12]}-{scenario}.json"
            if out.exists():
                continue
            run_dir = work / "runs" / tag / library.name / f"{commit.fix[:12]}-{scenario}"
            result = replay(repo, image, base, patch, tests_from, run_dir)
            result.update(
                library=library.name,
                fix=commit.fix,
                parent=commit.parent,
                subject=commit.subject,
                scenario=scenario,
                image=image.ref,
                test_changes=[list(change) for change in commit.test_changes],
            )
            out.write_text(json.dumps(result, indent=1, sort_keys=True))
            print(
                f"   {commit.fix[:8]} {scenario:8} exit {result['exit']} "
                f"{len(result['decisions'])} decisions {result['wall_s']} s",
                file=sys.stderr,
            )


# ---------------------------------------------------------------- the tables


SIDES = {
    "forward": ("parent+fixtests", "fix"),
    "reversed": ("fix", "parent+fixtests"),
    "noop": ("fix", "fix"),
}


@dataclass(kw_only=True)
class Row:
    library: str
    fix: str
    subject: str
    scenario: str
    comparison: Comparison
    exit: int
    expected_exit: int  # the pull request's (expected_exit)
    lane_exit: int  # the worst lane pytest's outcomes call for, test by test
    verdict: str
    reason: str  # why the tool gave its exit, for a wrong one
    note: str  # the cause, as corpus.toml records it
    caught: int  # tests plain pytest says catch the bug (reversed)
    readme_defaults: bool  # run with README's command line (no --timeout)
    replay_s: float
    plain_s: float
    plain_exit: tuple[int, int]


def note(library: Library, fix: str, scenario: str) -> str:
    """The cause corpus.toml records for a wrong exit: "<fix>-<scenario>", "<fix>",
    "*-<scenario>" or "*", the first that is there."""
    for key in (f"{fix[:7]}-{scenario}", fix[:7], f"*-{scenario}", "*"):
        if key in library.notes:
            return library.notes[key]
    return ""


def rows(work: Path, tag: str, libraries: Iterable[Library]) -> list[Row]:
    found: list[Row] = []
    for library in libraries:
        results_dir = work / "results" / tag / library.name
        for sha in library.commits:
            for scenario in SCENARIOS:
                matches = sorted(results_dir.glob(f"{sha}*-{scenario}.json"))
                if not matches:
                    continue
                result = json.loads(matches[0].read_text())
                fix = result["fix"][:12]
                base_variant, patch_variant = SIDES[scenario]
                truth_dir = work / "truth" / library.name
                base_truth = json.loads(
                    truth_file(truth_dir, fix, base_variant, reading=True).read_text()
                )
                patch_truth = json.loads(
                    truth_file(truth_dir, fix, patch_variant, reading=True).read_text()
                )
                comparison, lane_exit = compare(base_truth, patch_truth, result)
                expected = expected_exit(scenario, base_truth, patch_truth)
                caught = catching_tests(base_truth, patch_truth) if scenario == "reversed" else []
                judged = verdict(result["exit"], expected)
                plain = base_truth["wall_s"] + patch_truth["wall_s"]
                found.append(
                    Row(
                        library=library.name,
                        fix=result["fix"][:7],
                        subject=result["subject"],
                        scenario=scenario,
                        comparison=comparison,
                        exit=result["exit"],
                        expected_exit=expected,
                        lane_exit=lane_exit,
                        verdict=judged,
                        reason="" if judged == "right" else reason_line(result, caught),
                        note="" if judged == "right" else note(library, result["fix"], scenario),
                        caught=len(caught),
                        readme_defaults=bool(result.get("readme_defaults")),
                        replay_s=result["wall_s"],
                        plain_s=plain,
                        plain_exit=(base_truth["exitstatus"], patch_truth["exitstatus"]),
                    )
                )
    return found


def kinds_text(kinds: Counter[str]) -> str:
    return "; ".join(f"{count} {kind}" for kind, count in kinds.most_common()) or "-"


def brief(kind: str) -> str:
    """A disagreement's kind without the tool's labels: lane/code (pytest's outcomes)."""
    return re.sub(r" \[[^]]*\]", "", kind)


def library_table(library: str, found: Sequence[Row], markdown: bool) -> list[str]:
    header = [
        "commit",
        "scenario",
        "tests",
        "agree",
        "disagree (kind)",
        "failing line same",
        "exit (expected)",
        "replay s",
        "plain b+p s",
    ]
    body: list[list[str]] = []
    for row in found:
        c = row.comparison
        body.append(
            [
                row.fix,
                row.scenario,
                str(c.tests),
                str(c.agree),
                kinds_text(Counter({brief(kind): n for kind, n in c.kinds.items()})),
                f"{c.located_same}/{c.located}" if c.located else "-",
                f"{row.exit} ({row.expected_exit})",
                f"{row.replay_s:.1f}",
                f"{row.plain_s:.1f}",
            ]
        )
    total_tests = sum(row.comparison.tests for row in found)
    total_agree = sum(row.comparison.agree for row in found)
    exits_ok = sum(row.exit == row.expected_exit for row in found)
    kinds: Counter[str] = Counter()
    for row in found:
        for kind, n in row.comparison.kinds.items():
            kinds[brief(kind)] += n
    body.append(
        [
            "all",
            f"{len(found)} replays",
            str(total_tests),
            str(total_agree),
            kinds_text(kinds),
            "",
            f"{exits_ok}/{len(found)} as expected",
            f"{sum(row.replay_s for row in found):.1f}",
            f"{sum(row.plain_s for row in found):.1f}",
        ]
    )
    title = [f"#### {library}", ""] if markdown else [f"== {library}"]
    return title + render(header, body, markdown)


def overall_table(found: Sequence[Row], libraries: Sequence[Library], markdown: bool) -> list[str]:
    header = [
        "library",
        "commits",
        "tests compared",
        "agree",
        "disagree",
        "exit as expected",
        "reversed blocks",
        "no-op passes",
        "replay s",
        "plain b+p s",
    ]
    body: list[list[str]] = []
    for library in [*libraries, None]:
        mine = [row for row in found if library is None or row.library == library.name]
        if not mine:
            continue
        tests = sum(row.comparison.tests for row in mine)
        agree = sum(row.comparison.agree for row in mine)
        reversed_rows = [row for row in mine if row.scenario == "reversed"]
        noop_rows = [row for row in mine if row.scenario == "noop"]
        body.append(
            [
                library.name if library else "all",
                str(len({(row.library, row.fix) for row in mine})),
                str(tests),
                f"{agree} ({100 * agree / tests:.1f} %)" if tests else "0",
                str(tests - agree),
                f"{sum(row.exit == row.expected_exit for row in mine)}/{len(mine)}",
                f"{sum(row.exit == 1 for row in reversed_rows)}/"
                f"{sum(row.expected_exit == 1 for row in reversed_rows)}"
                f" of {len(reversed_rows)}",
                f"{sum(row.exit != 1 for row in noop_rows)}/{len(noop_rows)}",
                f"{sum(row.replay_s for row in mine):.0f}",
                f"{sum(row.plain_s for row in mine):.0f}",
            ]
        )
    return render(header, body, markdown)


def render(header: Sequence[str], body: Sequence[Sequence[str]], markdown: bool) -> list[str]:
    if markdown:
        return [
            "| " + " | ".join(header) + " |",
            "|" + "---|" * len(header),
            *("| " + " | ".join(cells) + " |" for cells in body),
        ]
    widths = [max(len(cells[i]) for cells in [header, *body]) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()
        for cells in [header, *body]
    ]


def exit_summary(found: Sequence[Row], libraries: Sequence[Library], markdown: bool) -> list[str]:
    """Judged per pull request: the tool's exit against the one plain pytest implies."""
    header = [
        "library",
        "commits",
        "replays",
        "exit right",
        "commits right",
        "false blocks",
        "missed blocks",
        "undecided (3)",
        "bad input (2)",
        "other",
    ]
    body: list[list[str]] = []
    for library in [*libraries, None]:
        mine = [row for row in found if library is None or row.library == library.name]
        if not mine:
            continue
        fixes: dict[tuple[str, str], list[Row]] = {}
        for row in mine:
            fixes.setdefault((row.library, row.fix), []).append(row)
        counts = Counter(row.verdict for row in mine)
        complete = [group for group in fixes.values() if len(group) == len(SCENARIOS)]
        body.append(
            [
                library.name if library else "all",
                str(len(fixes)),
                str(len(mine)),
                f"{counts['right']}/{len(mine)}",
                f"{sum(all(r.verdict == 'right' for r in group) for group in complete)}"
                f"/{len(complete)}",
                *(str(counts[kind]) for kind in VERDICTS[1:]),
            ]
        )
    return render(header, body, markdown)


def exit_table(found: Sequence[Row], markdown: bool) -> list[str]:
    """One line per fix commit: each scenario's exit (expected), and what was wrong."""
    header = ["library", "commit", *SCENARIOS, "caught by (plain pytest)", "replay s"]
    body: list[list[str]] = []
    fixes: dict[tuple[str, str], dict[str, Row]] = {}
    for row in found:
        fixes.setdefault((row.library, row.fix), {})[row.scenario] = row
    for (library, fix), by_scenario in fixes.items():
        cells = []
        for scenario in SCENARIOS:
            row = by_scenario.get(scenario)
            if row is None:
                cells.append("not run")
                continue
            mark = "ok" if row.verdict == "right" else row.verdict
            cells.append(f"{row.exit} ({row.expected_exit}) {mark}")
        reversed_row = by_scenario.get("reversed")
        caught = f"{reversed_row.caught} tests" if reversed_row else "-"
        seconds = sum(row.replay_s for row in by_scenario.values())
        body.append([library, fix, *cells, caught, f"{seconds:.0f}"])
    return render(header, body, markdown)


def wrong_exits(found: Sequence[Row], markdown: bool) -> list[str]:
    """Every wrong exit with the tool's reason and the cause corpus.toml records; those of
    one library with the same exit, reason and cause on one line."""
    groups: dict[tuple[str, int, int, str, str, str], list[Row]] = {}
    for row in found:
        if row.verdict == "right":
            continue
        head = row.reason.split("; e.g. ", 1)[0]
        key = (row.library, row.exit, row.expected_exit, row.verdict, head, row.note)
        groups.setdefault(key, []).append(row)
    lines = []
    prefix = "- " if markdown else "  "
    for (library, exit_code, expected, judged, _, cause), members in groups.items():
        where = ", ".join(f"{row.fix} {row.scenario}" for row in members)
        older = [row for row in members if not row.readme_defaults]
        defaults = " (not README's command line: an older run)" if older else ""
        lines.append(
            f"{prefix}{library} {where}: exit {exit_code}, expected {expected} ({judged})"
            f"{defaults}: {members[0].reason}." + (f" Cause: {cause}" if cause else "")
        )
    return lines or [f"{prefix}none"]


def commit_list(found: Sequence[Row], libraries: Sequence[Library]) -> list[str]:
    lines = ["| library | repository | test style | fix commits (parent is the base) |"]
    lines.append("|---|---|---|---|")
    for library in libraries:
        subjects = {row.fix: row.subject for row in found if row.library == library.name}
        if subjects:
            listed = "<br>".join(
                f"`{fix}` {subject.replace('|', '/')}" for fix, subject in subjects.items()
            )
            lines.append(
                f"| {library.name} | [{library.repo}](https://github.com/{library.repo}) "
                f"| {library.style} | {listed} |"
            )
    return lines


def print_report(work: Path, tag: str, libraries: Sequence[Library], markdown: bool) -> None:
    found = rows(work, tag, libraries)
    if markdown:
        print("\n".join(commit_list(found, libraries)))
        print()
    print("\n".join(exit_summary(found, libraries, markdown)))
    print()
    print("\n".join(exit_table(found, markdown)))
    print()
    print("Wrong exits:" if not markdown else "Wrong exits, with the tool's reason:")
    print()
    print("\n".join(wrong_exits(found, markdown)))
    print()
    print("\n".join(overall_table(found, libraries, markdown)))
    print()
    for library in libraries:
        mine = [row for row in found if row.library == library.name]
        if mine:
            print("\n".join(library_table(library.name, mine, markdown)))
            print()
    print("Disagreements, one example each:" if not markdown else "Disagreements:")
    print()
    for row in found:
        for kind, count in row.comparison.kinds.most_common():
            node = row.comparison.examples[kind]
            prefix = "- " if markdown else "  "
            print(
                f"{prefix}{row.library} {row.fix} {row.scenario}: {count} x {kind}; e.g. `{node}`"
            )


def located(comparison: Comparison) -> str:
    return f"{comparison.located_same}/{comparison.located}" if comparison.located else "-"


def before_after(
    work: Path, before: str, after: str, libraries: Sequence[Library], markdown: bool
) -> list[str]:
    """The replays run under both tags, side by side."""
    earlier = {(row.library, row.fix, row.scenario): row for row in rows(work, before, libraries)}
    header = [
        "library",
        "commit",
        "scenario",
        "tests",
        f"agree {before}",
        f"agree {after}",
        f"line same {before}",
        f"line same {after}",
        f"exit {before}",
        f"exit {after}",
        "expected",
        f"verdict {after}",
        f"disagreements left ({after})",
    ]
    body: list[list[str]] = []
    for row in rows(work, after, libraries):
        old = earlier.get((row.library, row.fix, row.scenario))
        if old is None:
            continue
        kinds = Counter({brief(kind): n for kind, n in row.comparison.kinds.items()})
        body.append(
            [
                row.library,
                row.fix,
                row.scenario,
                str(row.comparison.tests),
                f"{old.comparison.agree}/{old.comparison.tests}",
                f"{row.comparison.agree}/{row.comparison.tests}",
                located(old.comparison),
                located(row.comparison),
                str(old.exit),
                str(row.exit),
                str(row.expected_exit),
                row.verdict if old.verdict == row.verdict else f"{old.verdict} -> {row.verdict}",
                kinds_text(kinds),
            ]
        )
    return render(header, body, markdown)


def count_changes(
    work: Path, before: str, after: str, libraries: Sequence[Library], markdown: bool
) -> list[str]:
    """Per library, the pull requests each verdict counts under both tags ("before ->
    after"), over the replays both tags have."""
    earlier = {(row.library, row.fix, row.scenario): row for row in rows(work, before, libraries)}
    pairs = [
        (earlier[(row.library, row.fix, row.scenario)], row)
        for row in rows(work, after, libraries)
        if (row.library, row.fix, row.scenario) in earlier
    ]
    kinds = VERDICTS[:4]
    header = ["library", "replays", *kinds, "changed"]
    body: list[list[str]] = []
    for library in [*libraries, None]:
        mine = [(old, new) for old, new in pairs if library is None or new.library == library.name]
        if not mine:
            continue
        old_counts = Counter(old.verdict for old, _ in mine)
        new_counts = Counter(new.verdict for _, new in mine)
        body.append(
            [
                library.name if library else "all",
                str(len(mine)),
                *(
                    str(old_counts[kind])
                    if old_counts[kind] == new_counts[kind]
                    else f"{old_counts[kind]} -> {new_counts[kind]}"
                    for kind in kinds
                ),
                str(sum(old.verdict != new.verdict for old, new in mine)),
            ]
        )
    return render(header, body, markdown)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mirror-root", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/corpus"))
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--library", action="append", default=[])
    parser.add_argument("--commit", action="append", default=[])
    parser.add_argument(
        "--first", type=int, default=0, metavar="N", help="each library's first N commits only"
    )
    parser.add_argument("--scenario", action="append", choices=SCENARIOS, default=[])
    parser.add_argument("--tag", default=None, help="results folder (default: this HEAD)")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--before", help="with --report-only: a tag to set beside --tag")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument(
        "--build-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more argument to every `orchestrator image build` (e.g. --build-arg=--pip "
        "--build-arg=NAME, or an index option the build step takes); after the library's "
        "build_args",
    )
    args = parser.parse_args(argv)
    tag = args.tag or git(ROOT, "rev-parse", "--short", "HEAD")
    libraries = [
        library
        for library in load_corpus(args.corpus)
        if library.name in args.library or (not args.library and (library.run or args.report_only))
    ]
    if args.first:
        libraries = [
            dataclasses.replace(library, commits=library.commits[: args.first])
            for library in libraries
        ]
    work = args.work.resolve()
    if not args.report_only:
        for library in libraries:
            scenarios = args.scenario or SCENARIOS
            run_library(
                library, args.mirror_root, work, tag, args.commit, scenarios, args.build_arg
            )
    if args.report_only and args.before:
        print("\n".join(before_after(work, args.before, tag, libraries, args.markdown)))
        print()
        print("\n".join(count_changes(work, args.before, tag, libraries, args.markdown)))
        return 0
    print_report(work, tag, libraries, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
