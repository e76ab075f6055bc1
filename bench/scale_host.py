"""The host's share of a whole-suite replay, without containers: what the CLI does per test.

    .venv/bin/python bench/scale_host.py --tests 100000 [--keep] [--profile FILE] [-- ARGS]

Generates the suite of ``bench/scale.py`` (``--tests`` small tests, the patch failing one)
and runs ``orchestrator replay`` on it in this process, with every container's run
replaced by its results: each side's driver "prints" one progress line per test and hands
back the replay files a real probe writes for that suite (every test passes, but the
patch's planted failure). Everything else is real: the git export, planning against the
engine, labels, screening, the oracle, decisions, the run folder, the ledger, the table.
Prints the wall time, the CPU time, the peak RSS and the run folder's size; with
``--profile`` a cProfile of the whole run (``python -m pstats FILE``).

The figures are the host's work per test without the engine's own (Docker's stream of a
driver's output is not read here): compare with ``bench/scale.py``'s "host CPU/test".
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import scale  # noqa: E402

ENTRY = {
    "assertion_id": None,
    "assertion_key": None,
    "calls": {"http": 0, "open": 0, "sleep": 0, "socket": 0, "sqlite": 0, "subprocess": 0},
    "label": "assert_pass",
    "message": None,
    "reason": None,
}


def suite_ids(tests: int) -> list[str]:
    """The generated suite's node ids, in collection order."""
    ids = []
    modules = max(1, tests // scale.PER_MODULE)
    for module in range(modules):
        first = module * scale.PER_MODULE
        count = scale.PER_MODULE if module < modules - 1 else tests - first
        name = f"tests/test_m{module:04d}.py"
        if module == 0:
            ids.append(f"{name}::test_version_order")
            count -= 1
        ids.extend(f"{name}::test_t{n:05d}" for n in range(first, first + count))
    return ids


_PASS = (
    '{"assertion_id":null,"assertion_key":null,"calls":{"http":0,"open":0,"sleep":0,'
    '"socket":0,"sqlite":0,"subprocess":0},"duration_ms":%s,"label":"assert_pass",'
    '"message":null,"nodeid":%s,"reason":null}'
)
# The whole suite's files are made once and kept on disk, read again per container: the
# reader's bytes are the CLI's for as long as it parses them, never for the whole run.
_CACHE: dict[tuple[str, int, tuple[str, ...] | None], Path] = {}
_CACHE_DIR = Path(tempfile.mkdtemp(prefix="orchestrator-bench-host-results-"))


def result_bytes(ids: list[str], side: str, replay: int, *, whole: bool) -> bytes:
    """The replay file a probe writes for ``ids`` (text made directly, as the probe's is:
    no values of a whole suite's entries are made here, so they do not count in the
    CLI's memory)."""
    key = (side, replay, None if whole else tuple(ids))
    found = _CACHE.get(key)
    if found is not None:
        return found.read_bytes()
    tests = []
    for index, nodeid in enumerate(ids):
        if side == "patch" and nodeid == scale.FAILS_ON_PATCH:
            entry = {
                **ENTRY, "nodeid": nodeid, "duration_ms": 0.2, "label": "assert_fail",
                "assertion_id": f"{nodeid}@tests/test_m0000.py:5:AssertionError",
                "assertion_key": f"{nodeid}@test_version_order+1:AssertionError",
                "message": "assert ('1', '10') > ('1', '9')",
            }  # fmt: skip
            tests.append(json.dumps(entry, sort_keys=True, separators=(",", ":")))
        else:
            tests.append(_PASS % (round(0.02 + (index % 50) / 1000, 3), json.dumps(nodeid)))
    status = 1 if side == "patch" else 0
    head = (
        f'{{"cpu_ms":1.0,"exit_code":{status},"probe_version":"1.0.0","replay":{replay},'
        '"schema":"replay-run/1","seed":0,"spawn":"fork","status":"completed",'
        f'"timeout_s":600.0,"wall_ms":1.0,"result":{{"exit_status":{status},"fixture":null,'
        '"neutralised":[],"probe_version":"1.0.0","pytest":"7.2.1","python":"3.11.2",'
        '"schema":"replay-probe/1","seed":0,"skipped":[],"tests":['
    )
    data = (head + ",".join(tests) + "]}}").encode()
    if whole:
        _CACHE[key] = _CACHE_DIR / f"{side}-{replay}.json"
        _CACHE[key].write_bytes(data)
    return data


class _Container:
    name = "fake"

    def remove(self) -> None:
        pass


def install_fakes(all_ids: list[str]) -> None:
    """Every container's run is replaced by the results the suite's probe would give."""
    from orchestrator.adapters.results import ResultsRead, replay_file_name
    from orchestrator.core.labels import ContainerFacts
    from orchestrator.services.sides import container as run_container
    from orchestrator.services.sides.warm import Parked

    def results(run: Any, side: str, command: Any, numbers: tuple[int, ...], tail: Any) -> Any:
        args = list(command)
        wanted = args[args.index("--") + 1 :] if "--" in args else []
        named = [arg for arg in wanted if "::" in arg]
        ids = named if named else all_ids
        handle = run_container._line_handler(run, side, tail)
        files = {}
        for index in range(1, len(numbers) + 1):
            for done in range(1, len(ids) + 1):
                handle(f"test {done}/{len(ids)} passed")
            handle(f"replay {index}/{len(numbers)} completed")
            files[replay_file_name(index)] = result_bytes(ids, side, index, whole=not named)
        facts = ContainerFacts(image_id=run.plan.image_id, exit_code=0)
        return facts, ResultsRead(files=files, emptied=True)

    def observe(run: Any, *, engine: Any, side: str, job: Any, command: Any, numbers: Any,
                tail: Any) -> Any:  # fmt: skip
        facts, read = results(run, side, command, numbers, tail)
        if run.warm is not None and run.parks:
            run.warm.park(Parked(engine=engine.index, side=side, job=job,
                                 container=_Container(), remove=lambda: None))  # fmt: skip
        return facts, read

    def observe_parked(run: Any, parked: Any, *, side: str, command: Any, numbers: Any,
                       tail: Any) -> Any:  # fmt: skip
        facts, read = results(run, side, command("/replay/out", True), numbers, tail)
        if run.warm is not None and run.parks:
            run.warm.park(parked)
        return facts, read

    run_container._observe = observe
    run_container._observe_parked = observe_parked


def rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def reset_peak() -> None:
    """Start the process's peak resident memory (VmHWM) again from what it holds now."""
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


def peak_mb() -> float:
    """The peak resident memory since :func:`reset_peak` (else since the start), in MB."""
    with contextlib.suppress(OSError), open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def watch_memory(marks: list[tuple[str, float]]) -> None:
    """Note the resident memory around the run's big steps (``--memory``)."""
    import functools

    from orchestrator.core import side_spec
    from orchestrator.services import evidence_reuse, recording, replay, screening
    from orchestrator.services.sides import outcome as side_outcome

    def wrapped(module: Any, name: str) -> None:
        inner = getattr(module, name)

        @functools.wraps(inner)
        def call(*args: Any, **kwargs: Any) -> Any:
            marks.append((f"{name} in", rss_mb()))
            try:
                return inner(*args, **kwargs)
            finally:
                marks.append((f"{name} out", rss_mb()))

        setattr(module, name, call)

    wrapped(side_spec, "label_sides")
    side_outcome.label_sides = side_spec.label_sides
    for module, name in (
        (screening, "settle"),
        (replay, "_replay_and_decide"),
        (replay, "complete_and_record"),
        (recording, "_write_records"),
    ):
        wrapped(module, name)  # fmt: skip
    inner_flush = evidence_reuse.SideReuse.flush

    def flush(self: Any) -> None:
        marks.append(("reuse flush in", rss_mb()))
        try:
            inner_flush(self)
        finally:
            marks.append(("reuse flush out", rss_mb()))

    evidence_reuse.SideReuse.flush = flush  # type: ignore[method-assign]

    import threading

    def sample() -> None:
        while True:
            marks.append(("sample", rss_mb()))
            time.sleep(0.25)

    threading.Thread(target=sample, daemon=True).start()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=20000)
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--memory", action="store_true", help="print RSS around the steps")
    parser.add_argument("rest", nargs="*", help="more replay options (after --)")
    options = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="orchestrator-bench-host-"))
    try:
        suite = scale.generate(scratch, options.tests)
        ids = suite_ids(options.tests)
        for side in ("base", "patch"):  # made before the run: the probe's bytes, not ours
            result_bytes(ids, side, 1, whole=True)
        install_fakes(ids)
        out = scratch / "run"
        args = [
            "--log-format", "json", "replay", "--repo", str(suite.repo), "--base", suite.base,
            "--patch", suite.patch, "--image", scale.IMAGE, "--out", str(out),
            "--timeout", "600", *options.rest,
        ]  # fmt: skip
        os.chdir(scratch)
        os.environ["CI"] = "1"
        from orchestrator import cli

        marks: list[tuple[str, float]] = []
        if options.memory:
            watch_memory(marks)
        profiler = cProfile.Profile() if options.profile else None
        reset_peak()  # the bench's own making of the suite and its results is not the CLI's
        cpu = time.process_time()
        started = time.perf_counter()
        with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
            if profiler is not None:
                profiler.enable()
            try:
                cli.main(args)
            except SystemExit as stop:
                code = stop.code
            if profiler is not None:
                profiler.disable()
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu
        if profiler is not None:
            profiler.dump_stats(options.profile)
        if options.memory:
            peak = 0.0
            for name, value in marks:
                if name != "sample":
                    print(f"  {name:<28} {value:7.1f} MB (peak so far {peak:7.1f} MB)")
                peak = max(peak, value)
        used, files = scale.folder_size(out)
        rss = peak_mb()
        summary = (out / "summary.json").stat().st_size / 1000
        print(
            f"{options.tests} tests: exit {code}, wall {elapsed:.2f} s, CPU {cpu:.2f} s "
            f"({cpu * 1000 / options.tests:.3f} ms/test), peak RSS {rss:.0f} MB, run folder "
            f"{used / 1e6:.1f} MB ({used / options.tests / 1000:.2f} KB/test, {files} files), "
            f"summary.json {summary:.0f} KB"
        )
    finally:
        shutil.rmtree(_CACHE_DIR, ignore_errors=True)
        if options.keep:
            print(f"kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
