"""Serve the built site on 127.0.0.1 and drive it with Debian's Chromium through Playwright."""

from __future__ import annotations

import functools
import http.server
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


@pytest.fixture(scope="session")
def site_url():
    if not (SITE / "index.html").is_file():
        pytest.exit(f"no built site at {SITE}: run `nox -s docs` first", returncode=2)
    handler = functools.partial(QuietHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
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


@pytest.fixture
def context(browser, site_url):
    context = browser.new_context(
        viewport={"width": 1280, "height": 900},
        permissions=["clipboard-read", "clipboard-write"],
    )
    # The site must not need the network: any request off this machine fails the test.
    outside: list[str] = []

    def block(route):
        outside.append(route.request.url)
        route.abort()

    context.route(lambda url: not url.startswith(site_url) and not url.startswith("data:"), block)
    context.outside_requests = outside
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
