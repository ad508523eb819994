"""Where the site is served and where its source lives, read from pyproject.toml.

``[project.urls]`` holds both, and is the only place they are set: conf.py takes the canonical,
Open Graph, sitemap and 404 addresses and the "edit this page" links from it. A build stops if
either is missing or is not a public https address, so no build can advertise a local preview.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from urllib.parse import urlparse

from sphinx.errors import ConfigError

LOCAL_HOSTS = {"localhost", "127.0.0.1", "0.0.0.0", "::1"}


def site_urls(pyproject: Path) -> tuple[str, str]:
    """The site's address (ending in '/') and the repository's, from `pyproject`."""
    with open(pyproject, "rb") as file:
        urls = tomllib.load(file).get("project", {}).get("urls", {})
    found = {}
    for name, what in (("Documentation", "site"), ("Repository", "repository")):
        url = urls.get(name, "")
        parts = urlparse(url)
        if parts.scheme != "https" or not parts.hostname or parts.hostname in LOCAL_HOSTS:
            raise ConfigError(
                f"{pyproject}: [project.urls] {name} must be the public https address of the "
                f"{what}, got {url!r}; set it there (README: Where the site lives)"
            )
        found[name] = url
    site = found["Documentation"].rstrip("/") + "/"
    return site, found["Repository"].rstrip("/")
