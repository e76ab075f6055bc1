"""In-container replay probe: a pytest plugin and a replay driver.

Standard library and pytest only; nothing here may import the rest of the package's
dependencies, because the runner image has nothing else installed.
"""

PROBE_VERSION = "1.0.0"
RESULT_SCHEMA = "replay-probe/1"
RUN_SCHEMA = "replay-run/1"
DRIVER_SCHEMA = "replay-driver/1"
JOB_SCHEMA = "replay-job/1"
