"""``image build``'s option groups: the project at a revision, what goes into the image
(laid over ``[tool.orchestrator.image-build]`` at that revision) and where pip downloads
from. Each field is one option (``_command_options.py``); an empty tuple or ``None``: not
given."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.commands._command_options import (
    ImageBuildAptOption,
    ImageBuildCertOption,
    ImageBuildExtraIndexUrlsOption,
    ImageBuildExtrasOption,
    ImageBuildFindLinksOption,
    ImageBuildGroupsOption,
    ImageBuildIndexUrlOption,
    ImageBuildNetworkOption,
    ImageBuildNoIndexOption,
    ImageBuildPipOption,
    ImageBuildPythonImageOption,
    ImageBuildRepoOption,
    ImageBuildRequirementsOption,
    ImageBuildRevOption,
    ImageBuildTrustedHostsOption,
)

if TYPE_CHECKING:
    from orchestrator.core.project_image import GivenIndex
    from orchestrator.services.image import ImageOptions


def _given(values: tuple[str, ...]) -> tuple[str, ...] | None:
    return values or None


@dataclass(frozen=True, kw_only=True)
class ImageSource:
    """The project's repository and the revision whose files are read."""

    repo: ImageBuildRepoOption
    rev: ImageBuildRevOption = "HEAD"


@dataclass(frozen=True, kw_only=True)
class PackageIndex:
    """Where pip downloads from: the operator's word (here, or their PIP_* variables)."""

    index_url: ImageBuildIndexUrlOption = None
    extra_index_urls: ImageBuildExtraIndexUrlsOption = ()
    find_links: ImageBuildFindLinksOption = ()
    no_index: ImageBuildNoIndexOption = None
    trusted_hosts: ImageBuildTrustedHostsOption = ()
    cert: ImageBuildCertOption = None
    network: ImageBuildNetworkOption = None

    def given(self) -> GivenIndex:
        from orchestrator.core.project_image import GivenIndex

        return GivenIndex(
            index_url=self.index_url,
            extra_index_urls=_given(self.extra_index_urls),
            find_links=_given(self.find_links),
            no_index=self.no_index,
            trusted_hosts=_given(self.trusted_hosts),
            cert=None if self.cert is None else str(self.cert),
            network=self.network,
        )


@dataclass(frozen=True, kw_only=True)
class ImageInputs:
    """What goes into the image; an option given replaces the table's key."""

    requirements: ImageBuildRequirementsOption = ()
    extras: ImageBuildExtrasOption = ()
    groups: ImageBuildGroupsOption = ()
    pip: ImageBuildPipOption = ()
    apt: ImageBuildAptOption = ()
    python_image: ImageBuildPythonImageOption = None

    def options(self, source: ImageSource, index: PackageIndex) -> ImageOptions:
        """The build's options: ``[tool.orchestrator.image-build]`` at --rev under the
        command line (reading the table asks git)."""
        from orchestrator.core.project_config import ImageBuildInputs, image_build_inputs
        from orchestrator.services.image import ImageOptions
        from orchestrator.services.project_config import load_config

        inputs = image_build_inputs(
            load_config(source.repo, source.rev).config,
            ImageBuildInputs(
                requirements=_given(self.requirements),
                extras=_given(self.extras),
                groups=_given(self.groups),
                pip=_given(self.pip),
                apt=_given(self.apt),
                python_image=self.python_image,
            ),
        )
        # The command line's files may lie outside the repository; the table's never do.
        listed = inputs.requirements or ()
        operator_files = bool(self.requirements)
        return ImageOptions(
            repo=source.repo,
            rev=source.rev,
            requirements=listed if operator_files else (),
            tree_requirements=() if operator_files else listed,
            extras=inputs.extras or (),
            groups=inputs.groups or (),
            pip=inputs.pip or (),
            apt=inputs.apt or (),
            python_image=inputs.python_image,
            index=index.given(),
        )
