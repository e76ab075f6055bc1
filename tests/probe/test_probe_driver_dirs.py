"""The driver's folders: --make-dir makes HOME, and --copy-tree gives each replay a fresh
copy of the tree, whose src/ need not exist when the driver starts."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

from test_probe_driver import PACKAGE_ROOT, SPAWN_MODES, driver_command, driver_env

TEST = """
    import os
    import pathlib

    import pkg


    def test_every_replay_starts_fresh():
        assert pkg.VALUE == 1
        marker = pathlib.Path("marker")
        assert not marker.exists()
        marker.write_text("x")
        home = pathlib.Path(os.environ["HOME"])
        (home / "runs").mkdir(exist_ok=True)
        (home / "runs" / str(len(list((home / "runs").iterdir())))).write_text("x")
"""


@SPAWN_MODES
def test_each_replay_gets_a_fresh_tree_and_a_home(tmp_path: Path, spawn: str) -> None:
    export = tmp_path / "export"
    (export / "src" / "pkg").mkdir(parents=True)
    (export / "src" / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (export / "test_tree.py").write_text(textwrap.dedent(TEST))
    work = tmp_path / "work"  # where the copies go; its src/ does not exist yet
    work.mkdir()
    (work / "stale").write_text("from an earlier run")
    home = tmp_path / "not-yet" / "home"
    out = tmp_path / "out"
    command = driver_command(out, "-p", "no:cacheprovider", "test_tree.py", replays=3, spawn=spawn)
    split = command.index("--")
    command[split:split] = ["--make-dir", str(home), "--copy-tree", f"{export}:{work}"]
    done = subprocess.run(
        command,
        cwd=work,
        env=driver_env(HOME=str(home), PYTHONPATH=f"{work / 'src'}:{PACKAGE_ROOT}"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for k in (1, 2, 3):
        run = json.loads((out / f"replay-{k:03d}.json").read_text())
        assert [entry["label"] for entry in run["result"]["tests"]] == ["assert_pass"], run
    assert not (export / "marker").exists()  # the export itself is never written
    assert not (work / "stale").exists()
    assert sorted(path.name for path in (home / "runs").iterdir()) == ["0", "1", "2"]  # shared
