"""A project's runner image as values: what goes in, what is left out, the tag, the labels
and the Dockerfile. Pure: file texts in, values out (``services/image.py`` reads the files
at a revision, downloads the wheels and builds).

What goes into the image's virtual environment: the project's runtime dependencies
(``[project].dependencies``, or ``install_requires`` of ``setup.cfg``), the extras and
dependency groups asked for, the requirement files and ``--pip`` specs, and pytest when
none of them names it (the probe runs under the project's own pytest). The project itself
never goes in: each side's exported tree is what is tested, so a requirement naming it is
dropped (its extras are expanded instead), and a wheel of it that the resolver pulled in as
another package's dependency is left out of the wheelhouse. Every such step leaves a note.

The tag is a digest of everything the image is made of (base image ID, the wheels' names
and hashes, the apt packages, the Dockerfile and the labels), so the same inputs name the
same image and a second build reuses it.

Modules: :mod:`.metadata`, :mod:`.requirements`, :mod:`.wheelhouse`, :mod:`.apt` and
:mod:`.image` (the Dockerfile, labels, tag and report). The names below are imported from
them when first used, so that a caller that needs a label or the metadata (``replay``
reading the project's configuration) does not import the requirement parser (and
``packaging``'s) with them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.lazy_names import lazy_names

if TYPE_CHECKING:
    from orchestrator.core.project_image.apt import (
        APT_BASE_REPOSITORY,
        BASE_INCLUDES,
        DEFAULT_SUITE,
        apt_base_tag,
        apt_includes,
        apt_sources,
        check_apt,
    )
    from orchestrator.core.project_image.image import (
        IMAGE_REPOSITORY,
        INPUTS_SCHEMA,
        LABEL_APT,
        LABEL_BASE,
        LABEL_EXCLUDED,
        LABEL_INPUTS,
        LABEL_PACKAGES,
        LABEL_PROJECT,
        LABEL_PROJECT_IMAGE,
        LABEL_REVISION,
        LABEL_STAGE,
        LABEL_VENV,
        REPORT_SCHEMA,
        VENV,
        VENV_PYTHON,
        WHEELS_DIR,
        dockerfile,
        image_labels,
        image_tag,
        inputs_digest,
        packages_from_label,
        report_document,
    )
    from orchestrator.core.project_image.index import (
        FIND_LINKS_MOUNT,
        NETWORK_ENV,
        NETWORK_NONE,
        GivenIndex,
        IndexOptions,
        check_network,
        index_options,
        without_password,
    )
    from orchestrator.core.project_image.metadata import (
        GroupInclude,
        ProjectMetadata,
        read_metadata,
    )
    from orchestrator.core.project_image.requirements import (
        FileRef,
        Requirements,
        collect_requirements,
        inside_path,
        operator_file,
    )
    from orchestrator.core.project_image.wheelhouse import (
        OUTPUT_BYTES,
        OUTPUT_ENTRIES,
        WHEEL_BYTES,
        Wheel,
        excluded_notes,
        is_sdist,
        output_problem,
        pip_failure,
        sdist_name,
        sdists_to_build,
        split_project,
        wheel,
    )

_HOMES = {
    "APT_BASE_REPOSITORY": "apt",
    "BASE_INCLUDES": "apt",
    "DEFAULT_SUITE": "apt",
    "FIND_LINKS_MOUNT": "index",
    "FileRef": "requirements",
    "GivenIndex": "index",
    "GroupInclude": "metadata",
    "IMAGE_REPOSITORY": "image",
    "INPUTS_SCHEMA": "image",
    "IndexOptions": "index",
    "LABEL_APT": "image",
    "LABEL_BASE": "image",
    "LABEL_EXCLUDED": "image",
    "LABEL_INPUTS": "image",
    "LABEL_PACKAGES": "image",
    "LABEL_PROJECT": "image",
    "LABEL_PROJECT_IMAGE": "image",
    "LABEL_REVISION": "image",
    "LABEL_STAGE": "image",
    "LABEL_VENV": "image",
    "NETWORK_ENV": "index",
    "NETWORK_NONE": "index",
    "OUTPUT_BYTES": "wheelhouse",
    "OUTPUT_ENTRIES": "wheelhouse",
    "WHEEL_BYTES": "wheelhouse",
    "ProjectMetadata": "metadata",
    "REPORT_SCHEMA": "image",
    "Requirements": "requirements",
    "VENV": "image",
    "VENV_PYTHON": "image",
    "WHEELS_DIR": "image",
    "Wheel": "wheelhouse",
    "apt_base_tag": "apt",
    "apt_includes": "apt",
    "apt_sources": "apt",
    "check_apt": "apt",
    "check_network": "index",
    "collect_requirements": "requirements",
    "dockerfile": "image",
    "excluded_notes": "wheelhouse",
    "image_labels": "image",
    "image_tag": "image",
    "index_options": "index",
    "inputs_digest": "image",
    "inside_path": "requirements",
    "is_sdist": "wheelhouse",
    "operator_file": "requirements",
    "output_problem": "wheelhouse",
    "packages_from_label": "image",
    "pip_failure": "wheelhouse",
    "read_metadata": "metadata",
    "report_document": "image",
    "sdist_name": "wheelhouse",
    "sdists_to_build": "wheelhouse",
    "split_project": "wheelhouse",
    "wheel": "wheelhouse",
    "without_password": "index",
}

__all__ = [
    "APT_BASE_REPOSITORY",
    "BASE_INCLUDES",
    "DEFAULT_SUITE",
    "FIND_LINKS_MOUNT",
    "IMAGE_REPOSITORY",
    "INPUTS_SCHEMA",
    "LABEL_APT",
    "LABEL_BASE",
    "LABEL_EXCLUDED",
    "LABEL_INPUTS",
    "LABEL_PACKAGES",
    "LABEL_PROJECT",
    "LABEL_PROJECT_IMAGE",
    "LABEL_REVISION",
    "LABEL_STAGE",
    "LABEL_VENV",
    "NETWORK_ENV",
    "NETWORK_NONE",
    "OUTPUT_BYTES",
    "OUTPUT_ENTRIES",
    "REPORT_SCHEMA",
    "VENV",
    "VENV_PYTHON",
    "WHEELS_DIR",
    "WHEEL_BYTES",
    "FileRef",
    "GivenIndex",
    "GroupInclude",
    "IndexOptions",
    "ProjectMetadata",
    "Requirements",
    "Wheel",
    "apt_base_tag",
    "apt_includes",
    "apt_sources",
    "check_apt",
    "check_network",
    "collect_requirements",
    "dockerfile",
    "excluded_notes",
    "image_labels",
    "image_tag",
    "index_options",
    "inputs_digest",
    "inside_path",
    "is_sdist",
    "operator_file",
    "output_problem",
    "packages_from_label",
    "pip_failure",
    "read_metadata",
    "report_document",
    "sdist_name",
    "sdists_to_build",
    "split_project",
    "wheel",
    "without_password",
]


__getattr__ = lazy_names(__name__, _HOMES)
