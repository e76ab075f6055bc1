"""Fixtures for the report tests: the published JUnit schema, real and generated run folders.

No skipping: a missing browser or schema fails loudly, naming the make target that
sets it up.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path
from typing import Any

import pytest
from example_runs import replay_example
from report_factories import make_run_folder

from fixtures.build_example import ExampleRepo

ROOT = Path(__file__).resolve().parents[2]
XSD_MEMBER = "testing/example_scripts/junit-10.xsd"


@pytest.fixture(scope="session")
def junit_xsd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Jenkins' JUnit schema (junit-10.xsd), from pytest's source distribution that
    `make test` downloads into .venv/cache (nothing of another repository is committed)."""
    configured = os.environ.get("ORCHESTRATOR_JUNIT_XSD_SDIST")
    candidates = (
        [Path(configured)] if configured else sorted(ROOT.glob(".venv/cache/pytest-*.tar.gz"))
    )
    if not candidates or not candidates[-1].is_file():
        pytest.fail("pytest's sdist with junit-10.xsd is missing (`make junit-xsd` downloads it)")
    with tarfile.open(candidates[-1]) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith("/" + XSD_MEMBER))
        source = archive.extractfile(member)
        assert source is not None
        target = tmp_path_factory.mktemp("junit-xsd") / "junit-10.xsd"
        target.write_bytes(source.read())
    return target


@pytest.fixture(scope="session")
def junit_schema(junit_xsd: Path) -> Any:
    """junit-10.xsd as an xmlschema.XMLSchema, built once: building it costs more than
    validating a report (and xmlschema is imported only by the tests that use it)."""
    import xmlschema

    return xmlschema.XMLSchema(junit_xsd)


@pytest.fixture(scope="session")
def example(
    tmp_path_factory: pytest.TempPathFactory, runner_image_id: str
) -> tuple[ExampleRepo, list[Path]]:
    """The example repository and three finished run folders of it (real replays)."""
    return replay_example(tmp_path_factory.mktemp("report-example"))


@pytest.fixture(scope="session")
def big_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated run folder of 5,000 properties, every lane among them."""
    return make_run_folder(tmp_path_factory.mktemp("report-big") / "run", properties=5000)
