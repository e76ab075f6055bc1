"""``orchestrator doctor``'s checks: is everything a replay needs here? One value per part
(the engine, the runner image, git, Python), each with the line the command prints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import (
    EngineError,
    EngineUnavailableError,
    ImageNotFoundError,
    InfrastructureError,
    OrchestratorError,
)


@dataclass(frozen=True, kw_only=True)
class Check:
    name: str
    ok: bool
    detail: str
    facts: Mapping[str, str]

    def line(self) -> str:
        return f"{self.name}: {'ok' if self.ok else 'MISSING'} {self.detail}"

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail, **self.facts}


def check_engine_and_image(
    env: Mapping[str, str], image: str, found: list[dict[str, object]] | None = None
) -> tuple[Check, Check]:
    """The engine and the runner image; ``found`` receives the project images there are."""
    from orchestrator.adapters import docker as docker_adapter

    url = docker_adapter.engine_url(env)
    try:
        client = docker_adapter.connect(env, timeout_s=10)  # a hung engine: answer within ~30 s
    except EngineUnavailableError as error:
        return (
            Check(name="engine", ok=False, detail=str(error), facts={"url": url}),
            Check(name="runner image", ok=False, detail=f"{image}: engine unavailable", facts={}),
        )
    try:
        try:
            info = docker_adapter.engine_info(client)
        except EngineUnavailableError as error:
            lost = Check(name="engine", ok=False, detail=str(error), facts={"url": url})
            return lost, Check(name="runner image", ok=False, detail="engine unavailable", facts={})
        engine_check = Check(
            name="engine",
            ok=True,
            detail=(
                f"docker {info.server_version} (api {info.api_version}, "
                f"storage {info.storage_driver}) at {url}"
            ),
            facts={
                "url": url,
                "server_version": info.server_version,
                "api_version": info.api_version,
                "storage_driver": info.storage_driver,
            },
        )
        try:
            pin = docker_adapter.resolve_image(client, image)
        except EngineError as error:  # not there, or the engine refused to say
            image_check = Check(name="runner image", ok=False, detail=str(error), facts={})
        else:
            image_check = Check(
                name="runner image",
                ok=True,
                detail=f"{pin.id} ({image})",
                facts={"ref": image, "id": pin.id},
            )
        if found is not None:
            found.extend(_project_images(client))
        return engine_check, image_check
    finally:
        client.close()


def _project_images(client: Any) -> list[dict[str, object]]:
    """Images made by `orchestrator image build` (informative: none is fine)."""
    from orchestrator.services.image import project_images

    try:
        return list(project_images(client))
    except EngineError:
        return []


def project_image_line(image: Mapping[str, object]) -> str:
    tags = image.get("tags") or []
    name = str(tags[0]) if isinstance(tags, list) and tags else "(untagged)"
    packages = image.get("packages") or []
    count = len(packages) if isinstance(packages, list) else 0
    return (
        f"project image: {name} {image.get('id')} "
        f"({image.get('project') or 'unnamed'}, {count} packages)"
    )


def check_git() -> Check:
    import shutil
    import subprocess

    git = shutil.which("git")
    if git is None:
        return Check(name="git", ok=False, detail="git is not on PATH; install git", facts={})
    try:
        out = subprocess.run(
            [git, "--version"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as error:
        return Check(name="git", ok=False, detail=f"{git} --version failed: {error}", facts={})
    version = out.removeprefix("git version ").strip()
    return Check(name="git", ok=True, detail=f"{version} ({git})", facts={"version": version})


def check_python() -> Check:
    import platform
    import sys

    version = platform.python_version()
    ok = sys.version_info >= (3, 11)
    detail = f"{version} ({sys.executable})" + ("" if ok else "; orchestrator needs 3.11+")
    return Check(name="python", ok=ok, detail=detail, facts={"version": version})


def first_failure(checks: Sequence[Check]) -> OrchestratorError | None:
    """The error to exit with: the first missing part, named in one line."""
    for check in checks:
        if check.ok:
            continue
        reason = f"{check.name}: {check.detail}"
        if check.name == "engine":
            return EngineUnavailableError(reason)
        if check.name == "runner image":
            return ImageNotFoundError(reason)
        return InfrastructureError(reason)
    return None
