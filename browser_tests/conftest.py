"""Serve the built site on 127.0.0.1 and drive it with Debian's Chromium through Playwright."""

from __future__ import annotations

import functools
import http.server
import sys
import threading
import tomllib
from pathlib import Path

import pytest

SITE = Path(__file__).resolve().parents[1] / "docs" / "_build" / "html"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


class SiteServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # A tab that moves to the next page drops the downloads it no longer needs.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


@pytest.fixture(scope="session")
def site_url():
    if not (SITE / "index.html").is_file():
        pytest.exit(f"no built site at {SITE}: run `nox -s docs` first", returncode=2)
    handler = functools.partial(QuietHandler, directory=str(SITE))
    server = SiteServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        pytest.exit(
            f"{CHROMIUM} not found: install Debian's Chromium (apt-get install chromium)",
            returncode=2,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def new_context(browser, site_url, width=1280):
    """A browser context with a ``width`` px window that refuses, and records in its
    ``outside_requests``, every request off this machine: the site must not need the network."""
    context = browser.new_context(
        viewport={"width": width, "height": 900},
        permissions=["clipboard-read", "clipboard-write"],
    )
    outside: list[str] = []

    def block(route):
        outside.append(route.request.url)
        route.abort()

    context.route(lambda url: not url.startswith(site_url) and not url.startswith("data:"), block)
    context.outside_requests = outside
    return context


@pytest.fixture
def context(browser, site_url):
    context = new_context(browser, site_url)
    yield context
    context.close()


def content_pages() -> list[str]:
    """Every HTML page of the site, as a path relative to its root."""
    skip = ("_static", "_sources", "_modules", "_images")
    return sorted(
        str(path.relative_to(SITE))
        for path in SITE.rglob("*.html")
        if not str(path.relative_to(SITE)).startswith(skip)
    )


def project_urls() -> dict[str, str]:
    """pyproject.toml's [project.urls]: where the site is served and its repository."""
    with open(SITE.parents[2] / "pyproject.toml", "rb") as pyproject:
        return tomllib.load(pyproject)["project"]["urls"]
