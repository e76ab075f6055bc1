"""Where the build container's pip downloads from, and over which network: the operator's
choice only. Pure.

The options come from ``image build``'s command line, else from the operator's own
``PIP_INDEX_URL``, ``PIP_EXTRA_INDEX_URL``, ``PIP_FIND_LINKS``, ``PIP_NO_INDEX``,
``PIP_TRUSTED_HOST`` and ``PIP_CERT`` (read here by name and passed to pip as arguments:
the container gets none of the host's environment), never from the tree under test. A local
``--find-links`` folder, and the ``--cert`` CA bundle, are mounted read-only into the
container; the network is ``none``
unless the operator names one (``--network``, ``ORCHESTRATOR_IMAGE_NETWORK``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from orchestrator.errors import InputError

NETWORK_NONE = "none"
NETWORK_ENV = "ORCHESTRATOR_IMAGE_NETWORK"
FIND_LINKS_MOUNT = "/find-links"  # local folder i is mounted at /find-links/<i>
CERT_MOUNT = "/index-cert/ca.pem"  # the operator's --cert bundle, read-only
# A network's name as the engine takes it; "none" and "host" are names too.
_NETWORK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_URL_SCHEMES = ("http://", "https://")
_TRUE = {"1", "true", "yes", "on", "y", "t"}
_FALSE = {"", "0", "false", "no", "off", "n", "f"}


@dataclass(frozen=True, kw_only=True)
class GivenIndex:
    """``image build``'s index options as given (``None``: not given, the environment's
    ``PIP_*`` default applies)."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] | None = None
    find_links: tuple[str, ...] | None = None
    no_index: bool | None = None
    trusted_hosts: tuple[str, ...] | None = None
    cert: str | None = None
    network: str | None = None


@dataclass(frozen=True, kw_only=True)
class IndexOptions:
    """What the build container's pip is told. ``local_links`` are absolute folders on
    this machine (mounted read-only), ``url_links`` are URLs."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    local_links: tuple[str, ...] = ()
    url_links: tuple[str, ...] = ()
    no_index: bool = False
    trusted_hosts: tuple[str, ...] = ()
    cert: str | None = None  # a CA bundle on this machine, for an index behind another CA
    network: str = NETWORK_NONE
    notes: tuple[str, ...] = field(default=(), compare=False)

    def mounts(self) -> tuple[tuple[str, str], ...]:
        """(path on this machine, path in the container) of each local folder, and of the
        CA bundle."""
        folders = tuple(
            (folder, f"{FIND_LINKS_MOUNT}/{number}")
            for number, folder in enumerate(self.local_links)
        )
        return folders if self.cert is None else (*folders, (self.cert, CERT_MOUNT))

    def pip_args(self) -> tuple[str, ...]:
        """pip's arguments for ``download`` and ``wheel`` (its build isolation too)."""
        args: list[str] = []
        if self.no_index:
            args.append("--no-index")
        elif self.index_url is not None:
            args += ["--index-url", self.index_url]
        if not self.no_index:
            for url in self.extra_index_urls:
                args += ["--extra-index-url", url]
        for number, _folder in enumerate(self.local_links):
            args += ["--find-links", f"{FIND_LINKS_MOUNT}/{number}"]
        for url in self.url_links:
            args += ["--find-links", url]
        for host in self.trusted_hosts:
            args += ["--trusted-host", host]
        if self.cert is not None:
            args += ["--cert", CERT_MOUNT]
        return tuple(args)

    def to_json(self) -> dict[str, object]:
        """For the ``project-image/1`` document: URLs without their passwords."""
        return {
            "network": self.network,
            "no_index": self.no_index,
            "index_url": None if self.index_url is None else without_password(self.index_url),
            "extra_index_urls": [without_password(url) for url in self.extra_index_urls],
            "find_links": [
                *self.local_links,
                *(without_password(url) for url in self.url_links),
            ],
            "trusted_hosts": list(self.trusted_hosts),
            "cert": self.cert,
        }


def without_password(url: str) -> str:
    """``url`` with any user and password replaced by ``***`` (for notes and documents)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "***"
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"***@{host}"))


def _words(value: str | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value.split())


def _flag(value: str | None, name: str) -> bool | None:
    if value is None:
        return None
    word = value.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise InputError(f"{name}={value!r}: expected 1 or 0 (yes/no, true/false)")


def _url(value: str, option: str) -> str:
    if not value.startswith(_URL_SCHEMES) or any(char.isspace() for char in value):
        raise InputError(f"{option}: {without_password(value)!r} is not an http(s) URL")
    return value


def check_network(value: str) -> str:
    """A network the build container may join: ``none``, ``host`` or a network's name."""
    if not _NETWORK_NAME.fullmatch(value):
        raise InputError(
            f"--network: {value!r} is not a network's name (none, host, or a name from "
            "`docker network ls`)"
        )
    return value


def index_options(given: GivenIndex, env: Mapping[str, str], *, cwd: str) -> IndexOptions:
    """The operator's options (the command line over the ``PIP_*`` environment), checked.

    With no network (``none``, the default) pip reaches no index: local ``--find-links``
    folders then imply ``--no-index`` (with a note), and without any the build is refused
    here, before any container, with the options to pass."""
    index_url = given.index_url if given.index_url is not None else env.get("PIP_INDEX_URL")
    extra = given.extra_index_urls
    if extra is None:
        extra = _words(env.get("PIP_EXTRA_INDEX_URL")) or ()
    links = given.find_links
    if links is None:
        links = _words(env.get("PIP_FIND_LINKS")) or ()
    no_index = given.no_index
    if no_index is None:
        no_index = bool(_flag(env.get("PIP_NO_INDEX"), "PIP_NO_INDEX"))
    trusted = given.trusted_hosts
    if trusted is None:
        trusted = _words(env.get("PIP_TRUSTED_HOST")) or ()
    network = check_network(given.network or env.get(NETWORK_ENV) or NETWORK_NONE)
    cert = given.cert if given.cert is not None else env.get("PIP_CERT") or None

    local: list[str] = []
    urls: list[str] = []
    for link in links:
        if link.startswith(_URL_SCHEMES):
            urls.append(_url(link, "--find-links"))
            continue
        path = link.removeprefix("file://")
        if "://" in path or not path.strip():
            raise InputError(f"--find-links: {without_password(link)!r} is neither a folder nor "
                             "an http(s) URL")  # fmt: skip
        absolute = posixpath.normpath(posixpath.join(cwd, path))
        if absolute not in local:
            local.append(absolute)
    for host in trusted:
        if not re.fullmatch(r"[A-Za-z0-9.\-\[\]:]+", host):
            raise InputError(f"--trusted-host: {host!r} is not a host name")
    options = IndexOptions(
        index_url=None if not index_url else _url(index_url, "--index-url"),
        extra_index_urls=tuple(_url(url, "--extra-index-url") for url in extra),
        local_links=tuple(local),
        url_links=tuple(urls),
        no_index=no_index,
        trusted_hosts=tuple(trusted),
        cert=None if cert is None else posixpath.normpath(posixpath.join(cwd, cert)),
        network=network,
    )
    return _offline(options)


def _offline(options: IndexOptions) -> IndexOptions:
    if options.network != NETWORK_NONE:
        if options.no_index and not (options.local_links or options.url_links):
            raise InputError("--no-index without --find-links: pip has nowhere to find wheels")
        return options
    if not options.local_links:
        raise InputError(
            "the build container has no network (--network none) and no local wheels: pass "
            "--find-links DIR (a folder of wheels), or --network host (or a network's name) "
            f"to reach the index (default: ${NETWORK_ENV})"
        )
    notes = []
    if not options.no_index:
        notes.append(
            "no network for the build container (--network none): pip asks no index, "
            "wheels come from --find-links (--no-index)"
        )
    if options.url_links:
        notes.append("no network for the build container: --find-links URLs are not read")
    return IndexOptions(
        index_url=None,
        extra_index_urls=(),
        local_links=options.local_links,
        url_links=(),
        no_index=True,
        trusted_hosts=(),
        cert=None,
        network=options.network,
        notes=tuple(notes),
    )
