"""Sphinx configuration for the spmd-guide site: settings only.

Every page is a MyST notebook executed during the build on CPU devices. The build's machinery
lives in extensions under _ext/, each hooked on a Sphinx event: kernel_environment (the devices
and the IPython profile every kernel starts with), execution_cache (a cache keyed on everything
that decides the outputs), offline_inventories (cross-references without the network),
build_info (the versions the pages name), source_downloads, sharding_pictures and the rest.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from urllib.parse import urlparse

import spmd_guide

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

from hosting import site_urls  # noqa: E402  (found through the path above)

project = "SPMD in JAX"
author = "The spmd-guide authors"
copyright = "2026, the spmd-guide authors"
release = spmd_guide.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "sphinx_copybutton",
    "sphinx_design",
    "notfound.extension",
    "sphinxext.opengraph",
    "answer_checks",
    "api_signatures",
    "build_info",
    "course",
    "error_search",
    "execution_cache",
    "execution_status",
    "figure_alt_text",
    "gpu_figures",
    "kernel_environment",
    "moved_sections",
    "offline_inventories",
    "page_scripts",
    "page_times",
    "reading_order",
    "sharding_pictures",
    "sitemap",
    "source_downloads",
    "stream_outputs",
    "term_order",
    "tpu_plans",
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
html_baseurl, REPOSITORY_URL = site_urls(DOCS.parent / "pyproject.toml")
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
# The planner's formulas, then its form, on its page only; the explorer's formulas and form on
# its page, with the planner's for the chips' rates; on the search page, the errors the pages
# raise (written by error_search), then the search that lists their sections first.
page_scripts = {
    "guide/planner": ["planner/model.js", "planner/planner.js"],
    "explorer": ["planner/model.js", "explorer/model.js", "explorer/explorer.js"],
    "search": ["error-messages.js", "error-search.js"],
}
# Where one error is raised in several sections, the page whose section a search lists first.
error_search_pages = [
    "troubleshooting",
    "troubleshooting-processes",
    "guide/explicit-ops",
    "guide/explicit-ops-edges",
]
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


# `cache` executes a page only when its code or the execution fingerprint changed
# (_ext/execution_cache.py); `force` (the drift canary's) executes every page and caches nothing.
nb_execution_mode = os.environ.get("SPMD_GUIDE_EXECUTION_MODE", "cache")
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

# -- Cross-references ------------------------------------------------------------------------
# _ext/offline_inventories.py maps the projects whose inventory is kept in _inventories/.
intersphinx_timeout = 5

html_context = {"repository_url": REPOSITORY_URL}
