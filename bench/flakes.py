"""Planted flakes and planted regressions against the evidence rule (docs/lanes.md 3b).

    .venv/bin/python bench/flakes.py table [--cap 20] [--replays 5]
    .venv/bin/python bench/flakes.py simulate [--trials 400] [--seed 1]
    .venv/bin/python bench/flakes.py docker [--tests 80] [--runs 10] [--seed 7] [--keep]

- ``table``: what the rule costs and what it can detect, computed exactly (no sampling):
  for a property replayed without screening (N per side, then rounds up to the cap), the
  probability that it blocks and the expected replays per side it gets, summed over
  every outcome of every look with the real pure core (``lanes.decide`` then
  ``significance.weigh``), for failure rates planted on base and on the patch, and for
  1, 10 and 100 properties at stake in the run. docs/lanes.md section 3b prints it.
- ``simulate``: the whole policy over many drawn pull requests, with the real pure core:
  screening (K = 1 per side, the signal of ``core.screening``), the second phase to N,
  the first-look count of properties at stake, then the rounds the core plans
  (``core.evidence_rounds``) until every verdict is kept, blocked or set aside. Flakes at
  1 %, 5 %, 20 % and 50 % on both sides alike (false blocks per property, and per pull
  request of 50, 500 and 5,000 properties that are all such flakes: the worst case for
  the share of the false-block rate), planted regressions (P to F, P to M at 20 % and
  50 %, a retry disguise whose extra call comes with the flake it hides, and the seed's
  constant one): how often they block, and the replays the rounds spent.
- ``docker``: a real run through the CLI and Docker. A generated repository whose tests
  each fail at a planted rate (every replay draws from a random generator seeded by the
  bench seed, the side, the test, the container's host name and the replay's count in
  that container, so each draw is fresh and the rates are exact in expectation): flakes
  alike on both sides, and regressions only on the patch. It counts false blocks and
  detected regressions and reads the rounds from summary.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from math import comb
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from orchestrator.core.evidence_rounds import round_plan, settled, weigh_outcomes  # noqa: E402
from orchestrator.core.lanes import decide  # noqa: E402
from orchestrator.core.replay_run import PropertyOutcome  # noqa: E402
from orchestrator.core.screening import signal_reasons  # noqa: E402
from orchestrator.core.significance import (  # noqa: E402
    EvidencePolicy,
    count_at_stake,
    weigh,
)
from orchestrator.model import Evidence, Replay  # noqa: E402

ASSERTION = "tests/test_x.py::test_x@tests/test_x.py:3:AssertionError"
KEY = "tests/test_x.py::test_x@test_x+1:AssertionError"
PASS = Replay(label="assert_pass", calls={"clock": 1})
FAIL = Replay(label="assert_fail", assertion_id=ASSERTION, assertion_key=KEY, calls={"clock": 1})
PASS_RETRIED = Replay(label="assert_pass", calls={"clock": 2})  # a retry that hid a failure


def evidence(base: Sequence[Replay], patch: Sequence[Replay], property_id: str = "p") -> Evidence:
    return Evidence(
        base_rev="b" * 40,
        patch_rev="c" * 40,
        image_digest="sha256:" + "1" * 64,
        runner_id="local",
        command="pytest -q",
        property_id=property_id,
        seed=0,
        fixture_digest="sha256:" + "2" * 64,
        origin_digest="sha256:" + "2" * 64,
        oracle_changed=False,
        shrink=None,
        replays=len(base),
        base=tuple(base),
        patch=tuple(patch),
    )


# ---------------------------------------------------------------- table: exact


@cache
def _weighed(
    base_failed: int, patch_failed: int, replays: int, at_stake: int, cap: int, first: int
) -> tuple[bool, bool, int]:
    """(blocks now, on a mixed side, more replays wanted) for these counts, by the real
    core."""
    policy = EvidencePolicy(cap=cap, replays=first)
    ev = evidence(
        [FAIL] * base_failed + [PASS] * (replays - base_failed),
        [FAIL] * patch_failed + [PASS] * (replays - patch_failed),
    )
    weighing = weigh(ev, decide(ev), policy=policy, at_stake=at_stake)
    blocks = weighing.decision.blocking and weighing.more == 0
    return blocks, blocks and weighing.claim is not None, weighing.more


def _binomial(n: int, rate: float) -> list[float]:
    return [comb(n, k) * rate**k * (1 - rate) ** (n - k) for k in range(n + 1)]


def exact(
    base_rate: float, patch_rate: float, *, replays: int, cap: int, at_stake: int
) -> tuple[float, float, float]:
    """P(the property blocks), P(it blocks on a mixed side: by the exact test) and
    E[replays per side], summed over every outcome."""
    states = {(0, 0): 1.0}  # (base failed, patch failed) -> probability, at `done` replays
    done = 0
    blocked = mixed = 0.0
    spent = 0.0
    step = replays
    while states and step:
        base_step, patch_step = _binomial(step, base_rate), _binomial(step, patch_rate)
        grown: dict[tuple[int, int], float] = {}
        for (b, a), probability in states.items():
            for db, pb in enumerate(base_step):
                for da, pa in enumerate(patch_step):
                    key = (b + db, a + da)
                    grown[key] = grown.get(key, 0.0) + probability * pb * pa
        done += step
        states = {}
        next_step = 0
        for (b, a), probability in grown.items():
            blocks, tested, more = _weighed(b, a, done, at_stake, cap, replays)
            if more:
                states[(b, a)] = probability
                next_step = more
                continue
            spent += probability * done
            blocked += probability * blocks
            mixed += probability * tested
        step = next_step
    return blocked, mixed, spent


def print_table(replays: int, cap: int) -> None:
    policy = EvidencePolicy(cap=cap, replays=replays)
    print(f"N = {replays}, cap = {cap}, looks at {', '.join(map(str, policy.looks))}")
    cases = [
        ("flake 1 % both sides", 0.01, 0.01),
        ("flake 5 % both sides", 0.05, 0.05),
        ("flake 20 % both sides", 0.2, 0.2),
        ("flake 50 % both sides", 0.5, 0.5),
        ("flake 90 % both sides", 0.9, 0.9),
        ("new failure 5 % (base 0)", 0.0, 0.05),
        ("new failure 10 % (base 0)", 0.0, 0.1),
        ("new failure 20 % (base 0)", 0.0, 0.2),
        ("new failure 30 % (base 0)", 0.0, 0.3),
        ("new failure 50 % (base 0)", 0.0, 0.5),
        ("new failure 80 % (base 0)", 0.0, 0.8),
        ("always fails on patch (base 0)", 0.0, 1.0),
        ("5 % on base, 50 % on patch", 0.05, 0.5),
    ]
    stakes = (1, 10, 100)
    header = " | ".join(f"m = {m}: P(block) | tested | replays/side" for m in stakes)
    print(f"| planted | {header} |")
    print("|---|" + "---:|" * (3 * len(stakes)))
    for name, base_rate, patch_rate in cases:
        cells = []
        for m in stakes:
            blocked, mixed, spent = exact(
                base_rate, patch_rate, replays=replays, cap=cap, at_stake=m
            )
            cells += [f"{blocked:.4f}", f"{mixed:.4f}", f"{spent:.1f}"]
        print(f"| {name} | " + " | ".join(cells) + " |")


def print_caps(replays: int, caps: Sequence[int]) -> None:
    """What a larger cap buys: P(block) and replays per side of a new failure rate."""
    rates = (0.1, 0.2, 0.3, 0.5)
    print(f"N = {replays}; a new failure at rate r on the patch, none on base")
    header = " | ".join(f"r = {r:.0%}: m = 1 | m = 10" for r in rates)
    print(f"| cap | looks | {header} | flake 20 % both sides: replays/side |")
    print("|---:|---|" + "---:|" * (2 * len(rates) + 1))
    for cap in caps:
        looks = ", ".join(map(str, EvidencePolicy(cap=cap, replays=replays).looks))
        cells = []
        for r in rates:
            for m in (1, 10):
                blocked, _, spent = exact(0.0, r, replays=replays, cap=cap, at_stake=m)
                cells.append(f"{blocked:.2f} ({spent:.0f})")
        _, _, flake = exact(0.2, 0.2, replays=replays, cap=cap, at_stake=1)
        print(f"| {cap} | {looks} | " + " | ".join(cells) + f" | {flake:.1f} |")


# ---------------------------------------------------------------- simulate: sampled

Draw = Callable[[random.Random], Replay]


def rate(r: float) -> Draw:
    return lambda rng: FAIL if rng.random() < r else PASS


def retried(r: float) -> Draw:
    """Passes always; a failure (at rate r) is retried, at the cost of a second call."""
    return lambda rng: PASS_RETRIED if rng.random() < r else PASS


@dataclass(frozen=True)
class Planted:
    name: str
    base: Draw
    patch: Draw
    regression: bool


PLANTED = [
    Planted("flake 1 %", rate(0.01), rate(0.01), False),
    Planted("flake 5 %", rate(0.05), rate(0.05), False),
    Planted("flake 20 %", rate(0.2), rate(0.2), False),
    Planted("flake 50 %", rate(0.5), rate(0.5), False),
    Planted("regression P to F", rate(0.0), rate(1.0), True),
    Planted("new instability 20 %", rate(0.0), rate(0.2), True),
    Planted("new instability 50 %", rate(0.0), rate(0.5), True),
    Planted("retry disguise, 50 % retried", rate(0.5), retried(0.5), True),
    Planted("retry disguise, 20 % retried", rate(0.2), retried(0.2), True),
    Planted("retry disguise, constant (seed 001)", rate(0.2), lambda rng: PASS_RETRIED, True),
]


@dataclass
class RunResult:
    blocked: set[str]
    red: set[str]  # of which deterministic: every replay of each side alike (no test)
    spent: int  # replays of both sides the rounds cost
    rounds: int
    at_stake: int


def run_policy(
    properties: Sequence[tuple[str, Planted]],
    rng: random.Random,
    *,
    screen: int = 1,
    replays: int = 5,
    cap: int = 20,
    alpha: float = 0.01,
) -> RunResult:
    """One pull request through the whole policy, with the real pure core."""
    policy = EvidencePolicy(alpha=alpha, cap=cap, replays=replays)
    sides: dict[str, tuple[list[Replay], list[Replay]]] = {}
    for property_id, planted in properties:
        base = [planted.base(rng) for _ in range(screen)]
        patch = [planted.patch(rng) for _ in range(screen)]
        if signal_reasons(base, patch, None):  # the second phase, to N
            base += [planted.base(rng) for _ in range(replays - screen)]
            patch += [planted.patch(rng) for _ in range(replays - screen)]
        sides[property_id] = (base, patch)
    plant = dict(properties)
    outcomes = []
    for index, (property_id, (base, patch)) in enumerate(sides.items(), start=1):
        ev = evidence(base, patch, property_id)
        outcomes.append(PropertyOutcome(index=index, evidence=ev, decision=decide(ev)))
    at_stake = count_at_stake(item.evidence for item in outcomes)
    done: list[PropertyOutcome] = []
    tested: set[str] = set()
    spent = rounds = 0
    current = outcomes
    while current:
        weighings = weigh_outcomes(current, policy=policy, at_stake=at_stake)
        tested |= {p for p, w in weighings.items() if w.claim is not None and not w.more}
        done.extend(settled(current, weighings))
        planned = round_plan(current, weighings, first=rounds + 1)
        if not planned:
            break
        again = []
        for one in planned:
            rounds += 1
            spent += one.spent
            for property_id in one.property_ids:
                base, patch = sides[property_id]
                base += [plant[property_id].base(rng) for _ in range(one.replays)]
                patch += [plant[property_id].patch(rng) for _ in range(one.replays)]
                ev = evidence(base, patch, property_id)
                again.append(PropertyOutcome(index=0, evidence=ev, decision=decide(ev)))
        current = again
    blocked = {str(item.evidence.property_id) for item in done if item.decision.blocking}
    red = blocked - tested
    return RunResult(blocked=blocked, red=red, spent=spent, rounds=rounds, at_stake=at_stake)


def simulate(trials: int, seed: int) -> None:
    rng = random.Random(seed)
    print(
        "policy: --screen 1, --replays 5, --evidence-cap 20, --false-block-rate 0.01;"
        f" {trials} trials"
    )
    print()
    print("Per property: a pull request whose only property at stake is the planted one")
    print("(the strictest share of the rate: all of it)")
    print()
    print(
        "| planted | blocked on a mixed side | blocked, deterministic (no test) |"
        " mean replays spent by rounds | max |"
    )
    print("|---|---:|---:|---:|---:|")
    for planted in PLANTED:
        many = trials * (10 if not planted.regression else 1)
        blocked = red = 0
        spent: list[int] = []
        for _ in range(many):
            result = run_policy([("p", planted)], rng)
            blocked += bool(result.blocked - result.red)
            red += bool(result.red)
            spent.append(result.spent)
        print(
            f"| {planted.name} | {blocked}/{many} ({blocked / many:.2%}) | {red}/{many} |"
            f" {sum(spent) / many:.2f} | {max(spent)} |"
        )
    print()
    print("Per pull request: every property is the planted flake (the worst case)")
    print()
    print(
        "| flake | properties | PRs blocked on a mixed side | PRs blocked, deterministic |"
        " mean at stake | mean replays spent | max |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for planted in PLANTED[:4]:
        for size in (50, 500, 5000):
            runs = max(20, trials // (size // 50))
            blocked = red = 0
            spent = []
            stake: list[int] = []
            for _ in range(runs):
                result = run_policy([(f"t{i}", planted) for i in range(size)], rng)
                blocked += bool(result.blocked - result.red)
                red += bool(result.red)
                spent.append(result.spent)
                stake.append(result.at_stake)
            print(
                f"| {planted.name} | {size} | {blocked}/{runs} | {red}/{runs} |"
                f" {sum(stake) / runs:.1f} | {sum(spent) / runs:.0f} | {max(spent)} |"
            )
    print()
    print("Per pull request: 500 properties, 10 of them flakes at 20 %, and one planted")
    print("regression among them")
    print()
    print("| regression | detected | other properties blocked | mean replays spent |")
    print("|---|---:|---:|---:|")
    for planted in PLANTED[4:]:
        runs = max(20, trials // 4)
        found = false = 0
        spent = []
        for _ in range(runs):
            suite = [(f"clean{i}", Planted("clean", rate(0), rate(0), False)) for i in range(489)]
            suite += [(f"flake{i}", PLANTED[2]) for i in range(10)]
            suite.append(("regression", planted))
            result = run_policy(suite, rng)
            found += "regression" in result.blocked
            false += bool(result.blocked - {"regression"})
            spent.append(result.spent)
        print(f"| {planted.name} | {found}/{runs} | {false}/{runs} | {sum(spent) / runs:.0f} |")


# ---------------------------------------------------------------- docker: a real run

LIBRARY = '''"""Code under test: each test's outcome is drawn at its planted rate."""
import hashlib
import os
import socket

SIDE = "{side}"
RATES = {rates}
SEED = {seed}


def draw(test: str) -> bool:
    """True: this replay fails. A fresh, seeded draw per replay: the count of this test's
    runs in this container (kept in /tmp), the container's host name, the side."""
    counter = f"/tmp/draws-{{test}}"
    count = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
    with open(counter, "w") as handle:
        handle.write(str(count))
    text = f"{{SEED}}:{{SIDE}}:{{test}}:{{socket.gethostname()}}:{{count}}"
    value = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64
    return value < RATES.get(test, 0.0)
'''

TEST = """from planted import draw


def test_{name}():
    assert not draw("{name}")
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()


def make_repo(root: Path, plan: dict[str, tuple[float, float]], seed: int) -> tuple[str, str]:
    repo = root / "repo"
    (repo / "tests").mkdir(parents=True)
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "bench@example.invalid")
    _git(repo, "config", "user.name", "bench")
    for name in plan:
        (repo / "tests" / f"test_{name}.py").write_text(TEST.format(name=name))
    revs = []
    for index, side in enumerate(("base", "patch")):
        rates = {name: rates[index] for name, rates in plan.items()}
        (repo / "tests" / "planted.py").write_text(
            LIBRARY.format(side=side, rates=repr(rates), seed=seed)
        )
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", side)
        revs.append(_git(repo, "rev-parse", "HEAD"))
    return revs[0], revs[1]


REGRESSIONS = {
    **{f"reg_always_{i}": (0.0, 1.0) for i in range(2)},
    **{f"reg_m50_{i}": (0.0, 0.5) for i in range(4)},
    **{f"reg_m80_{i}": (0.0, 0.8) for i in range(4)},
}
FLAKE_RATES = (0.01, 0.05, 0.2, 0.5)


def docker_once(tests: int, seed: int, keep: bool, image: str) -> dict[str, Any]:
    """One pull request of ``tests`` planted flakes and the planted regressions, replayed
    by the CLI as a CI job would (screened, the default rule); what it decided."""
    plan: dict[str, tuple[float, float]] = {}
    for index in range(tests):
        flake = FLAKE_RATES[index % len(FLAKE_RATES)]
        plan[f"flake{int(flake * 100):02d}_{index}"] = (flake, flake)
    plan.update(REGRESSIONS)
    order = list(plan)
    random.Random(seed).shuffle(order)
    root = Path(tempfile.mkdtemp(prefix="flakes-bench-"))
    try:
        base, patch = make_repo(root, {name: plan[name] for name in order}, seed)
        started = time.monotonic()
        completed = subprocess.run(
            [
                sys.executable, "-m", "orchestrator", "replay",
                "--repo", str(root / "repo"), "--base", base, "--patch", patch,
                "--image", image, "--command", "pytest -q -p no:cacheprovider tests",
                "--out", str(root / "run"), "--no-record", "--json",
            ],
            capture_output=True, text=True, cwd=root, check=False,
        )  # fmt: skip
        seconds = time.monotonic() - started
        if not completed.stdout.strip():
            print(completed.stderr[-3000:])
            raise SystemExit(f"replay printed no report (exit {completed.returncode})")
        report = json.loads(completed.stdout)
    finally:
        if keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    decided = {
        entry["property_id"].split("::")[-1].removeprefix("test_"): entry
        for entry in report["decisions"]
    }
    evidence_doc = report.get("evidence", {})
    return {
        "seconds": seconds,
        "exit_status": report["exit_status"],
        "false_blocks": [n for n in plan if n not in REGRESSIONS and decided[n]["blocking"]],
        "detected": [n for n in REGRESSIONS if decided[n]["blocking"]],
        "weak": [n for n, entry in decided.items() if entry["code"] == "weak_evidence"],
        "at_stake": evidence_doc.get("at_stake"),
        "rounds": len(evidence_doc.get("rounds", [])),
        "replayed_more": evidence_doc.get("replayed_more"),
        "spent": evidence_doc.get("replays_spent"),
        "replays": sum(2 * entry["replays"] for entry in report["decisions"]),
    }


def docker_run(tests: int, seed: int, keep: bool, image: str, runs: int) -> None:
    print(
        f"{runs} pull requests, each {tests} flakes ({', '.join(f'{r:.0%}' for r in FLAKE_RATES)}"
        f" on both sides, in turn) and {len(REGRESSIONS)} regressions (2 always failing, 4"
        " failing 50 % and 4 failing 80 % of the patch's replays); the default policy"
    )
    print()
    print(
        "| run | seconds | exit | false blocks | regressions blocked | weak_evidence |"
        " at stake | rounds | replayed more | replays spent by rounds | replays in all |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    totals = {"false": 0, "detected": 0, "always": 0, "spent": 0, "replays": 0}
    for run in range(1, runs + 1):
        got = docker_once(tests, seed + run, keep, image)
        totals["false"] += len(got["false_blocks"])
        totals["detected"] += len(got["detected"])
        totals["always"] += sum(name.startswith("reg_always") for name in got["detected"])
        totals["spent"] += got["spent"] or 0
        totals["replays"] += got["replays"]
        print(
            f"| {run} | {got['seconds']:.0f} | {got['exit_status']} | {len(got['false_blocks'])}"
            f" | {len(got['detected'])}/{len(REGRESSIONS)} | {len(got['weak'])} |"
            f" {got['at_stake']} | {got['rounds']} | {got['replayed_more']} | {got['spent']} |"
            f" {got['replays']} |"
        )
    print()
    print(
        f"false blocks: {totals['false']} of {runs * tests} flaky tests replayed;"
        f" regressions blocked: {totals['detected']} of {runs * len(REGRESSIONS)}"
        f" (always failing: {totals['always']} of {runs * 2});"
        f" replays spent by rounds: {totals['spent']} of {totals['replays']}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="what", required=True)
    table = commands.add_parser("table")
    table.add_argument("--replays", type=int, default=5)
    table.add_argument("--cap", type=int, default=20)
    sim = commands.add_parser("simulate")
    sim.add_argument("--trials", type=int, default=400)
    sim.add_argument("--seed", type=int, default=1)
    real = commands.add_parser("docker")
    real.add_argument("--tests", type=int, default=80)
    real.add_argument("--seed", type=int, default=7)
    real.add_argument(
        "--image", default=os.environ.get("ORCHESTRATOR_IMAGE", "orchestrator-runner:latest")
    )
    real.add_argument("--runs", type=int, default=10)
    real.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    if args.what == "table":
        print_table(args.replays, args.cap)
        print()
        print_caps(args.replays, (10, 20, 40, 80, 160))
    elif args.what == "simulate":
        simulate(args.trials, args.seed)
    else:
        docker_run(args.tests, args.seed, args.keep, args.image, args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
