"""What each hostile pull request of tests/security costs the host, and whether anything
of the host came out: per attack the command, its exit code, the label or the one-line
refusal, the CLI's peak RSS, peak disk growth, wall time, and whether a canary was seen.

Each attack is the tests' own (tests/security/hostile_repo.py, hostile_results.py,
hostile_tree.py, hostile_image.py, hostile_output.py build the repositories), run once
through the real CLI and engine with the tests' canary in the CLI's environment. Round 1:
the results channel, logs, disk and a compression bomb, each replayed once per side (a
"baseline" row replays a harmless patch the same way). Round 2: leftover processes and
hostile JSON, forged ids and caps, the exported tree and the host's reads of it, `image
build` at a hostile revision, hostile ids in every output.

Peak disk is sampled every 0.1 s on the file systems of the scratch folder and of
Docker's data root (noisy on a shared machine: other jobs write too). "canary" searches
the command's output and every file it wrote in its scratch folder (run folders, ledgers,
scratch trees, reports; not the repository and the host files it was given) for the
canary variable's value and for the host files' secrets; "no" is the only right answer.
In names and refusals, $SECRET is the host file (a canary file), $SECRET_DIR its folder,
$TMP the attack's scratch folder.

    .venv/bin/python bench/hostile.py [--round 1|2|all] [--only NAME] [--list]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "security"))

import hostile_image as image  # noqa: E402
import hostile_results as results  # noqa: E402
import hostile_tree as tree  # noqa: E402
import run_folder as run_folders  # noqa: E402  (bench/, beside this script)
from hostile_output import HOSTILE_IDS, hostile_ids_repo, unsafe  # noqa: E402
from hostile_repo import (  # noqa: E402
    _MEASURE,
    ATTACKS,
    BOMB_CAP,
    CANARY,
    CANARY_NAME,
    CLI,
    PROPERTY,
    bomb_repo,
    hostile_repo,
    replay,
)

DOCKER_ROOT = Path("/var/lib/docker")
MIB = 1024 * 1024
# Every secret a test plants: the CLI's environment variable, the host files' contents.
NEEDLES = {
    "canary variable": CANARY.encode(),
    "host file": image.HOST_FILE_CANARY.encode(),
    "host config": tree.SECRET.encode(),
}
# What the command was given, not what it wrote: left out of the search.
INPUTS = ("repo", "host", "wheels")


class DiskPeak:
    """The largest growth of used bytes on the given file systems while it runs."""

    def __init__(self, paths: list[Path]) -> None:
        self._paths = [path for path in paths if path.exists()]
        self._start = self._used()
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _used(self) -> int:
        devices: dict[int, int] = {}
        for path in self._paths:
            devices[path.stat().st_dev] = shutil.disk_usage(path).used
        return sum(devices.values())

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, self._used() - self._start)

    def __enter__(self) -> DiskPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass(frozen=True)
class Outcome:
    code: int
    said: str  # the label, the one-line refusal, or what the command reported
    rss_kb: int
    wall_s: float
    outputs: tuple[bytes, ...]  # searched for the needles besides the files written


@dataclass(frozen=True)
class Case:
    name: str
    round: int
    command: str
    prepare: Callable[[Path], Any]  # builds the inputs (not measured)
    execute: Callable[[Path, Any], Outcome]


# ---------------------------------------------------------------- reading what came back


def cell(text: str, root: Path) -> str:
    """One table cell: the scratch folder's path shortened, pipes escaped."""
    return text.replace(str(root), "$TMP").replace("|", "\\|").replace("\n", " ")


def error_line(stderr: bytes) -> str:
    lines = stderr.decode(errors="replace").splitlines()
    errors = [line for line in lines if line.startswith("orchestrator: error: ")]
    errors = errors or [line for line in lines if "error:" in line]
    if not errors:
        return f"(no error line; stderr ends {lines[-1][-120:] if lines else ''!r})"
    return errors[0].split("error: ", 1)[1]


def logged(stderr: bytes, event: str) -> list[dict[str, Any]]:
    found = []
    for line in stderr.splitlines():
        if line.startswith(b"{"):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("event") == event:
                found.append(record)
    return found


def labels(decision: dict[str, Any], side: str) -> str:
    shown = []
    for label, reason in zip(
        decision[f"{side}_labels"], decision.get(f"{side}_reasons") or [], strict=False
    ):
        shown.append(f"{label}({reason})" if reason else label)
    return ",".join(shown) or "-"


def decided(summary: Path, stderr: bytes) -> str:
    """``base / patch`` labels of the attacked property, or the refusal."""
    if not summary.exists():
        return error_line(stderr)
    decisions = run_folders.report(summary.parent)["decisions"]
    if not decisions:
        return f"no decision; {error_line(stderr)}"
    chosen = [d for d in decisions if d["property_id"] == PROPERTY] or decisions[:1]
    text = f"{labels(chosen[0], 'base')} / {labels(chosen[0], 'patch')}"
    if len(decisions) > 1:
        text += f"; {len(decisions)} properties decided"
    return text


def folder_size(folder: Path) -> tuple[int, int]:
    sizes = [p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink()]
    return sum(sizes), len(sizes)


def seen(root: Path, outcome: Outcome) -> str:
    """Which needles appear in the outputs or in any file written under ``root``."""
    blobs = list(outcome.outputs)
    for top in root.iterdir() if root.exists() else ():
        if top.name in INPUTS:
            continue
        for path in [top, *top.rglob("*")] if top.is_dir() else [top]:
            if path.is_file() and not path.is_symlink():
                blobs.append(path.read_bytes())
    found = sorted({name for name, needle in NEEDLES.items() for blob in blobs if needle in blob})
    return "**YES: " + ", ".join(found) + "**" if found else "no"


def measured(root: Path, argv: list[str], env: dict[str, str]) -> Outcome:
    """The CLI under the peak-RSS wrapper the tests use, with exactly ``env``."""
    rss_file = root / "max-rss-kb"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(rss_file), str(CLI), *argv],
        env=env, cwd=root, capture_output=True, timeout=1800, check=False,
    )  # fmt: skip
    wall = time.monotonic() - started
    return Outcome(
        code=done.returncode, said="", rss_kb=int(rss_file.read_text()), wall_s=wall,
        outputs=(done.stdout, done.stderr),
    )  # fmt: skip


def timed_cli(call: Callable[[], tree.Run]) -> tuple[tree.Run, float]:
    started = time.monotonic()
    run = call()
    return run, time.monotonic() - started


def from_tree_run(run: tree.Run, wall: float, said: str) -> Outcome:
    return Outcome(run.code, said, run.max_rss_kb, wall, (run.stdout, run.stderr))


# ---------------------------------------------------------------- replays of a hostile patch


def replayed(
    *args: str,
    env: dict[str, str] | None = None,
    select: bool = True,
    deadline_s: float = 600,
    note: Callable[[Any, Path], str] | None = None,
) -> Callable[[Path, Any], Outcome]:
    """``hostile_repo.replay`` of the prepared repository, said as its decision."""

    def execute(root: Path, repo: Any) -> Outcome:
        run = replay(
            root, repo, *args, json_out=False, env=env, deadline_s=deadline_s, select=select
        )
        said = decided(run.run_dir / "summary.json", run.stderr)
        if note is not None:
            said += f"; {note(run, root)}"
        return Outcome(run.code, said, run.max_rss_kb, run.wall_s, (run.stdout, run.stderr))

    return execute


def refused_ids(run: Any, _root: Path) -> str:
    events = logged(run.stderr, "collect.refused_ids")
    return f"{events[0]['ids']} ids refused ({events[0]['reason']})" if events else "none refused"


def failed_collection(run: Any, _root: Path) -> str:
    events = logged(run.stderr, "collect.failed")
    if not events:
        return "no collection failed"
    return f"{events[0]['side']} collection: {events[0]['results_problem'][:72]}"


def run_folder(run: Any, _root: Path) -> str:
    """The run folder's size, and how the properties other than the attacked one went."""
    size, files = folder_size(run.run_dir)
    said = f"run folder {size / MIB:.1f} MiB in {files} files"
    summary = run.run_dir / "summary.json"
    if summary.exists():
        others = Counter(
            f"{labels(d, 'base')} / {labels(d, 'patch')}"
            for d in run_folders.report(summary.parent)["decisions"]
            if d["property_id"] != PROPERTY
        )
        said += "".join(f"; {count} others {pair}" for pair, count in others.most_common())
    return said


def round_one() -> list[Case]:
    cases = [
        Case("baseline", 1, "replay",
             lambda root: hostile_repo(root, "def run():\n    return 1\n"), replayed()),
    ]  # fmt: skip
    for name, (attack, extra) in ATTACKS.items():
        cases.append(
            Case(name, 1, "replay",
                 lambda root, a=attack, e=extra: hostile_repo(root, a, extra=e), replayed())
        )  # fmt: skip
    cases.append(
        Case("compression bomb (96 MiB, cap 64 MiB)", 1, "replay", bomb_repo,
             replayed(env=BOMB_CAP))
    )  # fmt: skip
    return cases


def patch_with(attack: str, extra: dict[str, str] | None = None) -> Callable[[Path], Any]:
    return lambda root: hostile_repo(root, attack, extra=extra)


def round_two_replays() -> list[Case]:
    harmless = "def run():\n    return 3\n"
    forged = results.forged_suite(results.FORGED_TESTS)
    shard = ("--shard", "1/1")
    return [
        Case("reader hijack (a daemon writes a forged tar into the reader's stdout)", 2,
             "replay", patch_with(results.READER_HIJACK), replayed()),
        Case("result rewriter (a daemon keeps writing a forged pass)", 2, "replay",
             patch_with(results.REWRITER), replayed()),
        Case("result 100,000 levels deep", 2, "replay",
             patch_with(results.swap_in(results.DEEP_JSON)), replayed()),
        Case("result with a 5,000-digit number", 2, "replay",
             patch_with(results.swap_in(results.HUGE_INT)), replayed()),
        Case("collection document 100,000 levels deep", 2, "replay --shard 1/1",
             patch_with(harmless, results.DEEP_COLLECTION),
             replayed(*shard, select=False, note=failed_collection)),
        Case("collected ids --deselect, -p, -pevil", 2, "replay --shard 1/1",
             patch_with(harmless, results.FORGE_COLLECTION),
             replayed(*shard, select=False, note=refused_ids)),
        Case("80,000 forged passing tests (cap 1,000)", 2, "replay (whole suite)",
             patch_with(forged),
             replayed(env=results.TESTS_CAP, select=False, note=run_folder)),
        Case("80,000 forged passing tests (default caps)", 2, "replay (whole suite)",
             patch_with(forged), replayed(select=False, deadline_s=1800, note=run_folder)),
        Case("results folder filled to the last byte", 2, "replay",
             patch_with(results.FILL_RESULTS), replayed()),
        Case(".gitattributes bomb (1 MiB, 38 MiB checked out; cap 4 MiB)", 2, "replay",
             lambda root: tree.as_hostile(tree.gitattributes_bomb(root)),
             replayed(env=tree.EXPORT_CAPPED)),
        Case(".gitattributes bomb in tests/, laid over the base", 2,
             "replay --tests-from patch",
             lambda root: tree.as_hostile(tree.gitattributes_bomb_in_tests(root)),
             replayed("--tests-from", "patch", env=tree.EXPORT_CAPPED)),
    ]  # fmt: skip


# ---------------------------------------------------------------- the host's reads of the tree


def runner_image_id() -> str:
    import docker

    return str(docker.from_env().images.get(tree.IMAGE).id)


def linked_pyproject_cases() -> list[Case]:
    def accept(root: Path, repo: tree.Repo) -> Outcome:
        run, wall = timed_cli(lambda: tree.accept(root, repo))
        return from_tree_run(run, wall, tree_said(run, "outcome"))

    def shrink(root: Path, repo: tree.Repo) -> Outcome:
        run, wall = timed_cli(lambda: tree.shrink(root, repo))
        minimal = root / "cwd" / "minimal.json"
        keys = sorted(json.loads(minimal.read_text())) if minimal.exists() else None
        return from_tree_run(run, wall, tree_said(run, None, f"shrunk to the keys {keys}"))

    def thaw(root: Path, repo: tree.Repo) -> Outcome:
        image_id = runner_image_id()
        run, wall = timed_cli(lambda: tree.thaw(root, repo, image_id))
        return from_tree_run(run, wall, tree_said(run, "results"))

    return [
        Case(f"pyproject.toml linked to a host file ({name})", 2, command,
             tree.linked_pyproject, execute)
        for name, command, execute in (
            ("accept", "accept", accept),
            ("shrink", "shrink --test", shrink),
            ("thaw", "thaw", thaw),
        )
    ]  # fmt: skip


def tree_said(run: tree.Run, key: str | None, text: str = "") -> str:
    if run.code == 2:
        return error_line(run.stderr)
    if key is not None:
        try:
            value = run.json()[key]
        except (AssertionError, KeyError):
            value = "?"
        if key == "results" and value != "?":
            value = ", ".join(f"{r.get('outcome')} {r.get('labels')}" for r in value)
        text = f"{key}: {value}"
    refused = b"tree.file_refused" in run.stderr
    return f"{text}; the link {'refused (logged)' if refused else 'NOT refused'}"


def oversize_pyproject(root: Path) -> tree.Repo:
    # As test_a_600_mib_pyproject_is_refused_with_bounded_memory builds it.
    return tree.tree_repo(root, {"pyproject.toml": tree.file(b"#" * (600 * MIB))})


def oversize_replay(root: Path, repo: tree.Repo) -> Outcome:
    argv = [
        "replay", "--repo", str(repo.path), "--base", repo.base, "--patch", repo.head,
        "--image", tree.IMAGE, "--property", tree.PROPERTY, "--replays", "1",
        "--no-record", "--out", str(root / "run"),
    ]  # fmt: skip
    run, wall = timed_cli(lambda: tree.run_cli(root, *argv))
    return from_tree_run(run, wall, error_line(run.stderr))


# ---------------------------------------------------------------- image build


def built(root: Path, repo: Path, rev: str, *args: str, wheels: Path | None = None) -> Outcome:
    return measured(root, image.image_build_args(repo, rev, *args), image.image_build_env(wheels))


def refused_build(*args: str) -> Callable[[Path, Any], Outcome]:
    def execute(root: Path, prepared: tuple[Path, str]) -> Outcome:
        outcome = built(root, *prepared, *args)
        return Outcome(
            outcome.code, error_line(outcome.outputs[1]), outcome.rss_kb, outcome.wall_s,
            outcome.outputs,
        )  # fmt: skip

    return execute


def image_cases() -> list[Case]:
    cases = []
    for attack, _message in image.REQUIREMENT_ATTACKS:
        shown = attack.format(secret="$SECRET", secret_folder="$SECRET_DIR")
        cases.append(
            Case(f"requirements.txt: {shown}", 2, "image build",
                 lambda root, a=attack: image.requirements_attack_repo(
                     root, a, image.host_secret_file(root)),
                 refused_build())
        )  # fmt: skip
    for files, _message in image.CONFIG_ATTACKS:
        text = files["pyproject.toml"]
        line = [line for line in text.splitlines() if "secret" in line][-1]
        shown = line.replace("{{", "{").replace("}}", "}").replace("{secret}", "$SECRET")
        cases.append(
            Case(f"pyproject.toml: {shown}", 2, "image build",
                 lambda root, f=files: image.config_attack_repo(
                     root, f, image.host_secret_file(root)),
                 refused_build())
        )  # fmt: skip

    def linked(root: Path) -> tuple[Path, str]:
        return image.linked_requirements_repo(root, image.host_secret_file(root))

    cases += [
        Case("requirements.txt linked to a host file (the table names it)", 2, "image build",
             linked, refused_build()),
        Case("requirements.txt linked to a host file (--requirements)", 2,
             "image build --requirements", linked,
             refused_build("--requirements", "requirements.txt")),
        Case("index lines in requirements.txt, an sdist whose backend looks for the canaries",
             2, "image build (pip in a container)", evil_build_inputs, evil_build),
    ]  # fmt: skip
    return cases


@dataclass(frozen=True)
class EvilBuild:
    repo: Path
    pull_request: str
    wheels: Path
    tmp_marker: Path
    host_marker: Path


def evil_build_inputs(root: Path) -> EvilBuild:
    """As the ``hostile_build`` fixture of test_image_build_hostile.py prepares it."""
    secret = image.host_secret_file(root)
    tmp_marker = Path("/tmp") / f"orchestrator-bench-marker-{uuid.uuid4().hex}"
    host_marker = root / "host" / "marker"
    wheels = image.evil_sdist(
        root / "wheels", canary_name=CANARY_NAME, secret=str(secret),
        tmp_marker=str(tmp_marker), host_marker=str(host_marker),
    )  # fmt: skip
    repo, _main, pull_request = image.evil_pull_request(root)
    return EvilBuild(repo, pull_request, wheels, tmp_marker, host_marker)


def evil_build(root: Path, inputs: EvilBuild) -> Outcome:
    outcome = built(root, inputs.repo, inputs.pull_request, wheels=inputs.wheels)
    stdout, stderr = outcome.outputs
    if outcome.code != 0:
        said = error_line(stderr)
        return Outcome(outcome.code, said, outcome.rss_kb, outcome.wall_s, outcome.outputs)
    report = json.loads(stdout)
    try:
        notes = [note for note in report["notes"] if "pass --" in note]
        view = subprocess.run(
            ["docker", "run", "--rm", "--network", "none", "--user", "1000:1000",
             report["image_id"], "/opt/orchestrator-venv/bin/python", "-c",
             "import evilsdist_seen; print(repr(evilsdist_seen.SEEN))"],
            capture_output=True, timeout=300, check=False,
        )  # fmt: skip
    finally:
        subprocess.run(
            ["docker", "image", "rm", "--force", report["image_id"]],
            capture_output=True, check=False,
        )  # fmt: skip
    markers = [m for m in (inputs.tmp_marker, inputs.host_marker) if m.exists()]
    inputs.tmp_marker.unlink(missing_ok=True)
    backend = view.stdout.decode(errors="replace").strip()
    said = (
        f"built; {len(notes)} index lines left out with a note; "
        f"network {report['build']['network']}; the backend saw {backend}; "
        f"{'MARKER ON THE HOST' if markers else 'no marker on the host'}"
    )
    if b"canary-index" in stdout + stderr:
        said += "; THE TREE'S INDEX REACHED PIP"
    return Outcome(0, said, outcome.rss_kb, outcome.wall_s, (*outcome.outputs, view.stdout))


# ---------------------------------------------------------------- hostile ids


def hostile_ids(root: Path, prepared: tuple[Path, str, str]) -> Outcome:
    repo, base, patch = prepared
    documents = {"summary": root / "summary.md", "junit": root / "junit.xml",
                 "html": root / "page.html"}  # fmt: skip
    argv = [
        "replay", "--repo", str(repo), "--base", base, "--patch", patch,
        "--image", tree.IMAGE, "--replays", "1", "--replays-all", "--no-record",
        "--out", str(root / "run"), "--json", "--summary", str(documents["summary"]),
        "--junit", str(documents["junit"]), "--html", str(documents["html"]),
    ]  # fmt: skip
    run, wall = timed_cli(lambda: tree.run_cli(root, *argv))
    texts = {"stdout": run.stdout.decode(errors="replace"),
             "stderr": run.stderr.decode(errors="replace")}  # fmt: skip
    texts |= {name: path.read_text() for name, path in documents.items() if path.exists()}
    raw = [name for name, text in texts.items() if unsafe(text)]
    try:
        decisions = json.loads(run.stdout)["decisions"]
    except ValueError:
        return from_tree_run(run, wall, error_line(run.stderr))
    failing = sum(d["patch_labels"][:1] == ["assert_fail"] for d in decisions)
    said = (
        f"{len(decisions)} properties ({len(HOSTILE_IDS)} hostile ids), {failing} fail on "
        f"the patch; raw controls, invisible characters or ##[ in "
        f"{', '.join(raw) if raw else f'none of {len(texts)} outputs'}"
    )
    return from_tree_run(run, wall, said)


def round_two() -> list[Case]:
    return [
        *round_two_replays(),
        *linked_pyproject_cases(),
        Case("pyproject.toml of 600 MiB", 2, "replay", oversize_pyproject, oversize_replay),
        *image_cases(),
        Case("hostile ids: ESC, OSC, ##[ commands, zero-width and tag characters, Markdown",
             2, "replay --summary --junit --html --json", hostile_ids_repo, hostile_ids),
    ]  # fmt: skip


# ---------------------------------------------------------------- the table


def one(case: Case) -> str:
    with tempfile.TemporaryDirectory(prefix="hostile-") as folder:
        root = Path(folder)
        try:
            prepared = case.prepare(root)
            with DiskPeak([root, DOCKER_ROOT]) as disk:
                outcome = case.execute(root, prepared)
            canary = seen(root, outcome)
        except Exception as error:  # a broken case is a row too, not the end of the table
            return f"| {case.name} | {case.command} | - | bench failed: {cell(repr(error), root)} |"
        return (
            f"| {case.name} | {case.command} | {outcome.code} | {cell(outcome.said, root)} | "
            f"{outcome.rss_kb / 1024:.0f} | {disk.peak / MIB:.0f} | {outcome.wall_s:.1f} | "
            f"{canary} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run only the attack of this name")
    parser.add_argument("--round", choices=["1", "2", "all"], default="all")
    parser.add_argument("--list", action="store_true", help="print the attacks' names")
    args = parser.parse_args()
    cases = [
        *(round_one() if args.round in ("1", "all") else []),
        *(round_two() if args.round in ("2", "all") else []),
    ]
    if args.list:
        print("\n".join(f"{case.round}  {case.name}" for case in cases))
        return
    if args.only:
        cases = [case for case in cases if case.name == args.only]
        if not cases:
            sys.exit(f"no attack named {args.only!r}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    print("| attack | command | exit | label (base / patch) or refusal | CLI peak RSS MiB | "
          "peak disk MiB | wall s | canary seen |")  # fmt: skip
    print("|---|---|---:|---|---:|---:|---:|---|")
    for case in cases:
        print(one(case), flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end", flush=True)


if __name__ == "__main__":
    main()
