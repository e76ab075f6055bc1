"""In-container replay probe: a pytest plugin and a replay driver.

Standard library and pytest only; nothing here may import the rest of the package's
dependencies, because the runner image has nothing else installed.
"""

PROBE_VERSION = "1.0.0"
RESULT_SCHEMA = "replay-probe/1"
RUN_SCHEMA = "replay-run/1"
DRIVER_SCHEMA = "replay-driver/1"
JOB_SCHEMA = "replay-job/1"
SPLIT_SCHEMA = "replay-split/1"
# A worker of a split replay (orchestrator/probe/workers.py): its share, ``w/J``, and the
# file it writes its split to. Here, not in workers.py, so a session imports no more.
WORKER_ENV = "REPLAY_WORKER"
SPLIT_ENV = "REPLAY_SPLIT"
