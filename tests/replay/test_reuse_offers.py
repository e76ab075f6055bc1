"""What a run offers for storing is written only by ``SideReuse.flush``, which the replay
calls once its run folder is complete: a run stopped before (interrupted, failed) stores
nothing. A real repository, the real cache folder; no engine (the side's results are given
as a container's reader would have brought them back)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from support.scratch_git import commit, init

from orchestrator.adapters.evidence_cache import FolderStore, decode_entry
from orchestrator.adapters.results import parse_replay_bytes
from orchestrator.core.labels import ContainerFacts
from orchestrator.core.pool import Batch
from orchestrator.core.side_spec import ReplayPlan, SideSpec
from orchestrator.services.evidence_reuse import SideReuse

IMAGE = "sha256:" + "1" * 64


def result_bytes(timeout_s: float) -> bytes:
    return json.dumps(
        {
            "schema": "replay-run/1",
            "replay": 1,
            "status": "completed",
            "exit_code": 0,
            "wall_ms": 12.0,
            "seed": 0,
            "timeout_s": timeout_s,
            "result": {
                "schema": "replay-probe/1",
                "tests": [
                    {"nodeid": "tests/test_a.py::test_x", "label": "assert_pass", "calls": {}}
                ],
                "skipped": [],
            },
        }
    ).encode()


def test_offers_are_stored_only_when_the_run_flushes_them(tmp_path: Path):
    repo = init(tmp_path / "repo")
    rev = commit(repo, {"tests/test_a.py": "def test_x():\n    pass\n"}, "base")
    plan = ReplayPlan(
        image_id=IMAGE, pytest_args=("-q",), property_ids=(), fixture=None, replays=1,
        timeout_s=60.0, seed=0, runner_id="local", interpreter="python3",
    )  # fmt: skip
    side = SideSpec(name="base", repo=repo, rev=rev)
    batch = Batch(key="e1-b1", engine=0, property_ids=())
    run = SimpleNamespace(
        plan=plan, warm=None, parks=False, trees={}, raw_root=lambda _batch: tmp_path / "raw"
    )
    engine = SimpleNamespace(runner_id="local", index=0)
    store = FolderStore(root=tmp_path / "cache")
    reuse = SideReuse(
        stores=[store], lookup=frozenset({"base"}), run_id="r1", repo=repo, patch_rev=rev
    )

    assert reuse.take(run, engine, batch, side, ()) is None  # nothing stored yet
    data = result_bytes(60.0)
    reuse.capture(batch, "base", (1,), {"replay-001.json": data})
    observed = [(parse_replay_bytes(data, 1), ContainerFacts(image_id=IMAGE, exit_code=0))]
    reuse.offer(run, batch, side, observed)
    # Not flushed (the run stopped before its folder was complete): nothing stored.
    key = reuse.to_json()["sides"][0]["key"]
    assert store.load(key) is None

    reuse.flush()
    stored = store.load(key)
    assert stored is not None
    entry, problem = decode_entry(stored, key)
    assert problem is None
    assert entry is not None
    assert entry.replays[0].data == data
    assert reuse.to_json()["sides"][0]["stored_in"] == [store.name]

    # The next run of the same side takes it, the bytes in its raw folder.
    again = SideReuse(
        stores=[store], lookup=frozenset({"base"}), run_id="r2", repo=repo, patch_rev=rev
    )
    taken = again.take(run, engine, batch, side, ())
    assert taken is not None
    assert taken[0][0].doc == observed[0][0].doc
    assert (tmp_path / "raw" / "base" / "replay-001.json").read_bytes() == data
    assert again.to_json()["sides"][0]["reused_from"] == "r1"
