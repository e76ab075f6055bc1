"""Entry point of the in-container replay driver (the driver itself: `driver.py`).

    python -m orchestrator.probe.replay --replays N --timeout SECONDS --out DIR [--seed S] \
        [--spawn fork|exec] -- <pytest args>

In fork mode (the default) every replay is forked from this interpreter, so it must
already hash strings with PYTHONHASHSEED = seed mod 2**32, which is fixed when an
interpreter starts. When it does not, this module re-executes the interpreter once with
it set, before anything heavy is imported or compiled (the driver module is compiled
from source in the runner, whose package mount is read-only). Only os and sys here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

ENTRY_MODULE = "orchestrator.probe.replay"


def wanted_hash_seed(argv: Sequence[str], environ: dict[str, str] | os._Environ[str]) -> str | None:
    """The PYTHONHASHSEED fork mode needs, or None (exec mode, or arguments the driver's
    own parser will reject with a message)."""
    own = list(argv)
    if "--" in own:
        own = own[: own.index("--")]
    values: dict[str, str] = {}
    for index, arg in enumerate(own):
        for name in ("--seed", "--spawn"):
            if arg == name and index + 1 < len(own):
                values[name] = own[index + 1]
            elif arg.startswith(name + "="):
                values[name] = arg.split("=", 1)[1]
    if values.get("--spawn", "fork") != "fork":
        return None
    raw = values.get("--seed", environ.get("REPLAY_SEED", "")).strip() or "0"
    try:
        return str(int(raw) % 2**32)
    except ValueError:
        return None


def pin_hash_seed(argv: Sequence[str]) -> None:
    """Re-execute this interpreter with the wanted PYTHONHASHSEED unless it already has it."""
    wanted = wanted_hash_seed(argv, os.environ)
    if wanted is None or sys.flags.ignore_environment:
        return
    if os.environ.get("PYTHONHASHSEED") == wanted:
        return
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = wanted
    # The package root, so `-m` finds this module again whatever PYTHONPATH was.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = [path for path in env.get("PYTHONPATH", "").split(os.pathsep) if path]
    if root not in paths:
        env["PYTHONPATH"] = os.pathsep.join([root, *paths])
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", ENTRY_MODULE, *argv], env)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    pin_hash_seed(arguments)
    from orchestrator.probe.driver import main as run_driver

    return run_driver(arguments)


if __name__ == "__main__":
    sys.exit(main())
