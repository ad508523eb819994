"""Sphinx configuration for the spmd-guide site.

Every page is a MyST notebook executed during the build on CPU devices (8 unless
JAX_NUM_CPU_DEVICES says otherwise). Executed notebooks are cached under _build; the
cache is keyed on everything besides the code cells that can change an output, so a
stale picture never survives a change to the library, the lock, JAX or the device count.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import sys
from pathlib import Path
from urllib.parse import urlparse

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
BUILD = DOCS / "_build"

# The pages are written for CPU devices; a plain `sphinx-build` gets the same machine as nox.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")

import flax  # noqa: E402
import jax  # noqa: E402
import jaxlib  # noqa: E402

import spmd_guide  # noqa: E402

sys.path.insert(0, str(DOCS / "_ext"))
from hosting import site_urls  # noqa: E402

project = "SPMD in JAX"
author = "The spmd-guide authors"
copyright = "2026, the spmd-guide authors"
release = spmd_guide.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "sphinx.ext.viewcode",
    "sphinx_copybutton",
    "sphinx_design",
    "notfound.extension",
    "sphinxext.opengraph",
    "api_signatures",
    "execution_status",
    "sharding_pictures",
    "sitemap",
    "source_downloads",
]

exclude_patterns = [
    "_build",
    "_ext",
    "_inventories",
    "_templates",
    "README.md",
    "**.ipynb_checkpoints",
]
nitpicky = True

# -- Hosting ---------------------------------------------------------------------------------
# Every build, local ones included, names the hosted address (docs/_ext/hosting.py).
html_baseurl, REPOSITORY_URL = site_urls(ROOT / "pyproject.toml")
ogp_site_url = html_baseurl
ogp_site_name = "SPMD in JAX"
ogp_description_length = 200
ogp_enable_meta_description = True
# Social-card images would be drawn with matplotlib on every build; the pages need none.
ogp_social_cards = {"enable": False}
notfound_urls_prefix = urlparse(html_baseurl).path
notfound_context = {
    "title": "Page not found",
    "body": "<h1>Page not found</h1><p>There is no page at this address. It may have moved: "
    'try the search box, or start from the <a href="'
    + notfound_urls_prefix
    + 'index.html">home page</a>.</p>',
}
# Keep the `.md` suffix on copied sources, so the download links serve real Markdown files.
html_sourcelink_suffix = ""

# -- Theme ---------------------------------------------------------------------------------
html_theme = "furo"
html_title = "SPMD in JAX: an executable guide"
html_short_title = "SPMD in JAX"
html_logo = "_static/logo.svg"
html_favicon = "_static/logo.svg"
html_static_path = ["_static"]
templates_path = ["_templates"]
html_css_files = ["spmd-guide.css"]
html_theme_options = {
    "navigation_with_keys": True,
    # "view" is where _templates/components/view-this-page.html offers the downloads.
    "top_of_page_buttons": ["view", "edit"],
    "source_repository": REPOSITORY_URL + "/",
    "source_branch": "main",
    "source_directory": "docs/",
}
pygments_style = "friendly"
pygments_dark_style = "monokai"
# Concept searches should land on teaching pages before the reference pages.
html_search_scorer = str(DOCS / "_ext" / "search_scorer.js")

# -- MyST and notebook execution --------------------------------------------------------------
# No dollarmath: maths would need MathJax from a CDN, and the site works offline.
myst_enable_extensions = ["colon_fence", "deflist", "substitution"]
myst_heading_anchors = 3


def _execution_fingerprint() -> str:
    """A digest of what, besides a page's code cells, decides its outputs."""
    digest = hashlib.sha256()
    # Pages import the package and run the examples.
    sources = [*(ROOT / "src" / "spmd_guide").rglob("*.py"), *(ROOT / "examples").rglob("*.py")]
    for path in sorted(sources):
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    lock = ROOT / "requirements" / "lock.txt"
    if lock.exists():
        digest.update(lock.read_bytes())
    digest.update((DOCS / "_ext" / "kernel_startup.py").read_bytes())
    for part in (
        jax.__version__,
        jaxlib.__version__,
        flax.__version__,
        sys.version,
        os.environ["JAX_PLATFORMS"],
        os.environ["JAX_NUM_CPU_DEVICES"],
    ):
        digest.update(part.encode())
    return digest.hexdigest()[:16]


# `cache` executes a page only when its code or the fingerprint changed; `force` (the drift
# canary's) executes every page and touches no cache.
nb_execution_mode = os.environ.get("SPMD_GUIDE_EXECUTION_MODE", "cache")
EXECUTION_FINGERPRINT = _execution_fingerprint()
_cache_root = BUILD / "jupyter_cache"
nb_execution_cache_path = str(_cache_root / EXECUTION_FINGERPRINT)
if nb_execution_mode == "cache":
    # Caches made for another library, lock or device count can never be hit again.
    if _cache_root.is_dir():
        for stale in _cache_root.iterdir():
            if stale.name != EXECUTION_FINGERPRINT:
                shutil.rmtree(stale, ignore_errors=True)
    # Creating the cache database up front avoids a race between parallel readers.
    from jupyter_cache import get_cache

    get_cache(nb_execution_cache_path)

nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_timeout = 300
nb_merge_streams = True
# Markdown that a cell displays (such as a measured table) is parsed as MyST, tables included.
nb_render_markdown_format = "myst"
# XLA and absl log to stderr from C++; such lines say nothing about the page. Python
# warnings cannot hide here: the kernel start-up file turns them into errors.
nb_output_stderr = "remove"
# Error outputs carry ANSI colours; the ANSI lexer renders any message, where the IPython
# traceback lexer chokes on some (a backtick in the message is enough).
nb_render_error_lexer = "myst-ansi"

_ipython_dir = BUILD / "ipython"
_startup = _ipython_dir / "profile_default" / "startup"
_startup.mkdir(parents=True, exist_ok=True)
shutil.copyfile(DOCS / "_ext" / "kernel_startup.py", _startup / "00-warnings-are-errors.py")
os.environ["IPYTHONDIR"] = str(_ipython_dir)

# -- Copy buttons: code only, never prompts or outputs -------------------------------------
copybutton_selector = 'div[class*="highlight-"]:not(.output) > div.highlight pre'
copybutton_prompt_text = r">>> |\.\.\. |\$ |In \[\d*\]: | {2,5}\.\.\.: "
copybutton_prompt_is_regexp = True
copybutton_only_copy_prompt_lines = False

# -- API reference ----------------------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# -- Cross-references that work offline -----------------------------------------------------
# Inventories live in _inventories/ and are refreshed by `nox -s inventories` when online.
# Only a project whose inventory is present is mapped, so the build never reaches the network.
_INVENTORY_URLS = {
    "python": "https://docs.python.org/3/",
    "numpy": "https://numpy.org/doc/stable/",
    "jax": "https://docs.jax.dev/en/latest/",
    "flax": "https://flax.readthedocs.io/en/latest/",
}
intersphinx_mapping = {
    name: (url, (str(DOCS / "_inventories" / f"{name}.inv"),))
    for name, url in _INVENTORY_URLS.items()
    if (DOCS / "_inventories" / f"{name}.inv").exists()
}
intersphinx_timeout = 5
# Names from a project with no inventory here cannot resolve; say so rather than warn.
# Type hints name flax's NNX classes by the short alias the code imports (`nnx.Module`).
_UNMAPPED = {"jax": ("jax", "jaxlib"), "flax": ("flax", "nnx"), "numpy": ("numpy", "np")}
nitpick_ignore_regex = [
    (r"py:.*", rf"{prefix}(\..*)?")
    for project, prefixes in {**_UNMAPPED, "optax": ("optax",)}.items()
    if project not in intersphinx_mapping
    for prefix in prefixes
]

# What executed the pages: named on the pages that say so (as substitutions) and in the footer
# of every page (docs/_templates/page.html).
BUILT_WITH = {
    "jax_version": jax.__version__,
    "jaxlib_version": jaxlib.__version__,
    "flax_version": flax.__version__,
    "python_version": platform.python_version(),
    "device_count": os.environ["JAX_NUM_CPU_DEVICES"],
}
myst_substitutions = BUILT_WITH
html_context = {"built_with": BUILT_WITH, "repository_url": REPOSITORY_URL}
