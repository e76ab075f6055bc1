"""The chaos loop, long: N replays, each hit by a random fault at a random moment.

    .venv/bin/python bench/chaos.py [--iterations 200] [--seed N] [--max-delay 6]

As root (it starts a private dockerd with scripts/ensure-docker beside the machine's
engine, loads the runner image into it offline, and mounts a small tmpfs for the full
disk). Every iteration is printed as it ends, then the table for bench/README.md:
fault x count x outcome x run folders x leftovers. The exit status is 1 when any
invariant broke (tests/chaos/chaos_loop.py lists them); rerun with the printed seed to
replay the same faults at the same moments.
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "chaos"))

from chaos_loop import chaos, table  # noqa: E402


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # unwinds through chaos(): the private engine is removed


def main() -> int:
    # Started in the background, SIGINT may arrive ignored: both stop the loop cleanly.
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--max-delay", type=float, default=6.0, help="seconds; faults land in [0, this)"
    )
    parser.add_argument(
        "--hang-s",
        type=float,
        default=600.0,
        help="seconds; a run still going after this long is a hang (its stacks are kept)",
    )
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    started = time.monotonic()
    with chaos(seed, max_delay_s=args.max_delay, hang_s=args.hang_s) as loop:
        loop.iterate(args.iterations)
        final = loop.final_check()
        broken = [o for o in loop.history if o.violations]
        minutes = (time.monotonic() - started) / 60
        print()
        print(
            f"seed {seed}: {len(loop.history)} runs ({args.iterations} with a random fault, "
            f"then a clean one) in {minutes:.0f} min; dockerd restarted "
            f"{loop.engine.restarts} times"
        )
        print()
        print(table(loop.history))
        print()
        if broken or final:
            print(f"{len(broken)} runs broke an invariant:")
            for outcome in broken:
                print(f"  #{outcome.plan.index}: {outcome.violations}")
            return 1
        print("every invariant held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
