"""The docs build's own extensions (docs/_ext), on small inputs."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import nbformat
import pytest
from docutils import frontend, nodes
from docutils.parsers import rst
from docutils.utils import new_document
from sphinx.errors import ConfigError, ExtensionError

from spmd_guide.figures import DEVICE_COLOURS

EXTENSIONS = Path(__file__).resolve().parents[1] / "docs" / "_ext"
sys.path.insert(0, str(EXTENSIONS))

import answer_matching  # noqa: E402
import api_signatures  # noqa: E402
import course  # noqa: E402
import error_search  # noqa: E402
import figure_alt_text  # noqa: E402
import hosting  # noqa: E402
import kernel_environment  # noqa: E402
import reading_order  # noqa: E402
import sharding_pictures  # noqa: E402
import source_downloads  # noqa: E402
import stream_outputs  # noqa: E402
import term_order  # noqa: E402

# The extensions run no JAX.
pytestmark = pytest.mark.once

BASE = "https://example.org/guide/"


def _site(root: Path, pages: list[str]) -> Path:
    root.mkdir()
    (root / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(EXTENSIONS)!r})\n"
        f"extensions = ['sitemap']\nhtml_baseurl = {BASE!r}\n"
    )
    toctree = "\n".join(f"   {page}" for page in pages if page != "index")
    (root / "index.rst").write_text(f"Home\n====\n\n.. toctree::\n\n{toctree}\n")
    for page in pages:
        if page != "index":
            (root / f"{page}.rst").write_text(f"{page}\n{'=' * len(page)}\n\nText.\n")
    return root


def _build(source: Path, out: Path) -> list[str]:
    subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-W", "-j", "2", "-b", "html", source, out],
        check=True,
    )
    tree = ElementTree.parse(out / "sitemap.xml")
    return [loc.text for loc in tree.iter("{http://www.sitemaps.org/schemas/sitemap/0.9}loc")]


def test_sitemap_lists_every_page_after_parallel_and_incremental_builds(tmp_path):
    pages = ["index", "alpha", "beta", "gamma", "delta", "epsilon"]
    source = _site(tmp_path / "src", pages)
    out = tmp_path / "html"
    expected = [BASE + "index.html", *sorted(BASE + f"{p}.html" for p in pages[1:])]
    assert _build(source, out) == expected
    # An incremental build rewrites only the changed page; the sitemap must still list all.
    (source / "beta.rst").write_text("beta\n====\n\nChanged.\n")
    assert _build(source, out) == expected
    (source / "zeta.rst").write_text("zeta\n====\n\nNew.\n")
    (source / "index.rst").write_text((source / "index.rst").read_text() + "   zeta\n")
    assert _build(source, out) == [*expected, BASE + "zeta.html"]


def test_pages_are_read_one_per_task_the_most_code_first(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    code = {"light": 1, "heavy": 30, "middle": 8, "prose": 0}
    record = tmp_path / "read.txt"
    (source / "conf.py").write_text(
        f"import os, sys\nsys.path.insert(0, {str(EXTENSIONS)!r})\n"
        "extensions = ['myst_nb', 'reading_order']\nnb_execution_mode = 'off'\n"
        "suppress_warnings = ['myst-nb.lexer']  # not executed: no language to colour\n"
        "def setup(app):\n"
        "    def note(app, docname, source):\n"
        f"        with open({str(record)!r}, 'a') as out:\n"
        "            out.write(f'{docname} {os.getpid()}\\n')\n"
        "    app.connect('source-read', note)\n"
    )
    header = (
        "---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
        "kernelspec:\n  name: python3\n  display_name: Python 3\n---\n"
    )
    (source / "index.md").write_text("# Home\n\n```{toctree}\n" + "\n".join(code) + "\n```\n")
    for page, lines in code.items():
        cell = "```{code-cell} ipython3\n" + "x = 1\n" * lines + "```\n" if lines else ""
        (source / f"{page}.md").write_text(f"{header}# {page}\n\n{cell}")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-q",
            "-W",
            "-j",
            "2",
            "-b",
            "html",
            source,
            tmp_path / "o",
        ],
        check=True,
    )
    read = dict(line.split() for line in record.read_text().splitlines())
    assert len(set(read.values())) == len(read) == 5  # each page in a task of its own
    assert set(list(read)[:2]) == {"heavy", "middle"}  # the two workers start on these
    assert reading_order.code_lines((source / "middle.md").read_text()) == 8
    assert reading_order.make_chunks_of_sphinx is reading_order.builders.make_chunks  # restored


def _notebook(*cells: tuple[str, list[str]]) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    for source, tags in cells:
        cell = nbformat.v4.new_code_cell(source, metadata={"tags": tags})
        cell.outputs = [
            nbformat.v4.new_output("stream", name="stdout", text="shown\n"),
            nbformat.v4.new_output("stream", name="stderr", text="XLA log line\n"),
        ]
        notebook.cells.append(cell)
    return notebook


def test_the_download_drops_hidden_cells_and_stderr_and_keeps_outputs():
    notebook = _notebook(
        ("x = 1\nprint(x)", []),
        ("assert x == 1\nchecked = True", ["remove-cell"]),
        ("from spmd_guide.analysis import count_collectives", ["remove-input"]),
        ("y = x + 1", []),
    )
    source_downloads.without_hidden_cells(notebook, "page")
    assert [cell.source for cell in notebook.cells] == ["x = 1\nprint(x)", "y = x + 1"]
    for cell in notebook.cells:
        assert [(out.name, out.text) for out in cell.outputs] == [("stdout", "shown\n")]


def test_the_download_refuses_a_visible_cell_that_needs_a_hidden_one():
    notebook = _notebook(
        ("import numpy as np", []),
        ("expected = np.zeros(3)", ["remove-input"]),
        ("np.testing.assert_array_equal(expected, np.zeros(3))", []),
    )
    with pytest.raises(
        ExtensionError, match=r"page: the cell that starts 'np.testing.*' reads expected"
    ):
        source_downloads.without_hidden_cells(notebook, "page")


def test_a_name_a_visible_cell_defines_again_is_not_hidden_only():
    notebook = _notebook(
        ("total = 0", ["remove-cell"]),
        ("total = 3\nprint(total)", []),
        ("def f(total):\n    return total\n\nf(total)", []),
    )
    source_downloads.without_hidden_cells(notebook, "page")
    assert len(notebook.cells) == 2


TAB20B = [
    "#393b79", "#5254a3", "#6b6ecf", "#9c9ede", "#637939", "#8ca252", "#b5cf6b", "#cedb9c",
    "#8c6d31", "#bd9e39", "#e7ba52", "#e7cb94", "#843c39", "#ad494a", "#d6616b", "#e7969c",
    "#7b4173", "#a55194", "#ce6dbd", "#de9ed6",
]  # fmt: skip


def _contrast(a: str, b: str) -> float:
    la, lb = sorted(map(sharding_pictures._luminance, (a, b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def test_every_tile_colour_gets_text_of_at_least_aa_contrast():
    for colour in TAB20B:
        text = sharding_pictures.legible_text_colour(colour)
        assert _contrast(text, colour) >= 4.5, (colour, text)
    # JAX's own choice for this tile is white, at 2.5:1.
    assert sharding_pictures.legible_text_colour("#9c9ede") == "#000000"


def test_a_rich_picture_is_restyled_in_the_sites_palette():
    tile = (
        '<span style="color: #ffffff; text-decoration-color: #ffffff; '
        'background-color: {}">  CPU {}  </span>'
    )
    picture = (
        '<pre style="white-space:pre;overflow-x:auto;line-height:normal;font-family:Menlo">'
        + tile.format("#9c9ede", 0)
        + tile.format("#393b79", 1)
        + tile.format("#9c9ede", 0)
        + "\n</pre>"
    )
    restyled = sharding_pictures.restyle(picture)
    assert restyled.startswith('<pre class="sharding-picture" style="--columns: 27">')
    # matplotlib's colours become the palette's, in the order they first appear, the same
    # colour for the same tile; each tile's text in the ink that reads best on its new colour.
    backgrounds = re.findall(r"background-color: (#\w{6})", restyled)
    assert backgrounds == [DEVICE_COLOURS[0], DEVICE_COLOURS[1], DEVICE_COLOURS[0]]
    inks = re.findall(r"(?<![-\w])color: (#\w{6})", restyled)
    assert inks == [sharding_pictures.legible_text_colour(b) for b in backgrounds]
    assert re.findall(r"text-decoration-color: (#\w{6})", restyled) == inks


def test_a_dataclass_factory_default_reads_as_its_value():
    @dataclasses.dataclass
    class Record:
        name: str
        tags: list[str] = dataclasses.field(default_factory=list)
        extra: dict[str, int] = dataclasses.field(default_factory=dict)

    signature, _ = api_signatures.readable_defaults(
        None, "class", "Record", Record, {}, "(name, tags=<factory>, extra=<factory>)", None
    )
    assert signature == "(name, tags=[], extra={})"


def _pyproject(tmp_path: Path, urls: str) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text(f'[project]\nname = "x"\n\n[project.urls]\n{urls}\n')
    return path


def test_the_site_and_repository_addresses_come_from_pyproject(tmp_path):
    pyproject = _pyproject(
        tmp_path,
        'Documentation = "https://example.org/guide"\nRepository = "https://example.org/src/"',
    )
    assert hosting.site_urls(pyproject) == ("https://example.org/guide/", "https://example.org/src")


@pytest.mark.parametrize(
    "urls",
    [
        'Repository = "https://example.org/src"',
        'Documentation = "http://127.0.0.1:8000/"\nRepository = "https://example.org/src"',
        'Documentation = "https://localhost/"\nRepository = "https://example.org/src"',
        'Documentation = "http://example.org/"\nRepository = "https://example.org/src"',
        'Documentation = "https://example.org/"',
    ],
)
def test_a_build_without_a_public_address_stops_and_says_where_to_set_it(tmp_path, urls):
    with pytest.raises(ConfigError, match=r"\[project.urls\] (Documentation|Repository) must be"):
        hosting.site_urls(_pyproject(tmp_path, urls))


def test_a_build_without_the_tpu_compiler_stops_at_once_and_says_why(monkeypatch):
    real = kernel_environment.importlib.util.find_spec
    monkeypatch.setattr(
        kernel_environment.importlib.util,
        "find_spec",
        lambda name, *rest: None if name == "libtpu" else real(name, *rest),
    )
    with pytest.raises(ConfigError, match=r"libtpu, the TPU compiler, which is not installed"):
        kernel_environment._prepare_kernels(object(), object())


def test_a_notebook_is_offered_only_for_a_page_that_shows_code(tmp_path):
    head = "---\nkernelspec:\n  name: python3\n  display_name: Python 3\n---\n\n# Page\n\n"
    hidden_only = tmp_path / "hidden.md"
    hidden_only.write_text(
        head + "```{code-cell} ipython3\n:tags: [remove-input]\n\nprint(1)\n```\n"
    )
    shown = tmp_path / "shown.md"
    shown.write_text(head + "```{code-cell} ipython3\nprint(1)\n```\n")
    prose = tmp_path / "prose.md"
    prose.write_text("# Page\n\nNo code.\n")
    assert source_downloads._offers_notebook(shown)
    assert not source_downloads._offers_notebook(hidden_only)
    assert not source_downloads._offers_notebook(prose)


def _page(*outputs: nodes.Node) -> nodes.document:
    document = new_document("page", frontend.get_default_settings(rst.Parser))
    document.extend(outputs)
    return document


def test_a_figure_without_alt_text_fails_the_build_and_says_what_to_use():
    label = 'role="img" aria-label="Every device holds 2 values summed over all 8 devices."'
    labelled = nodes.raw(
        "", f"<figure><svg {label} viewBox='0 0 9 9'></svg></figure>", format="html"
    )
    figure_alt_text.check("page", _page(labelled, nodes.image(uri="x.png", alt="A chart of x.")))
    unlabelled = [
        nodes.raw("", "<div><svg viewBox='0 0 9 9'></svg></div>", format="html"),
        nodes.raw("", '<svg role="img" aria-label="chart"></svg>', format="html"),
        nodes.image(uri="../_build/jupyter_execute/page_3_0.png"),
    ]
    for output in unlabelled:
        with pytest.raises(ExtensionError, match=r"page: .* spmd_guide\.figures"):
            figure_alt_text.check("page", _page(output))
    # Markup that merely mentions an svg element is not one.
    figure_alt_text.check("page", _page(nodes.raw("", "<code>&lt;svg&gt;</code>", format="html")))


def _page_sources() -> list[str]:
    docs = EXTENSIONS.parent
    return sorted(
        path.relative_to(docs).with_suffix("").as_posix()
        for path in docs.rglob("*.md")
        if not path.relative_to(docs).parts[0].startswith("_")
    )


def test_the_course_table_places_every_teaching_page():
    table = course.load_course()
    assert course.unplaced_pages(table, _page_sources()) == []
    # The path runs from setting up devices to the practice problems, each page once.
    path = [page.doc for page in table.path]
    assert path[0] == "getting-started/devices" and path[-1] == "problems/index"
    assert len(path) == len(set(path))
    assert table.before(path[1]).doc == path[0] and table.after(path[0]).doc == path[1]
    assert table.after(path[-1]) is None


def test_a_teaching_page_the_table_does_not_place_is_named():
    table = course.load_course()
    assert course.unplaced_pages(table, [*_page_sources(), "guide/new-page"]) == ["guide/new-page"]


@pytest.mark.parametrize(
    ("table", "complaint"),
    [
        (
            '[[step]]\ntitle = "A"\nteaches = "b"\n[[step.page]]\ndoc = "guide/nope"\nwill = "c"\n',
            "'guide/nope' names no page (there is no docs/guide/nope.md)",
        ),
        (
            '[[step]]\ntitle = "A"\nteaches = "b"\n[[step.page]]\ndoc = "index"\n',
            "page 'index' in step 1 has no `will`",
        ),
        ('[[step]]\ntitle = "A"\n', "step 1 lacks page, teaches"),
        ("title = [", "cannot read the course table"),
    ],
)
def test_a_bad_course_table_stops_the_build_and_says_what_to_fix(tmp_path, table, complaint):
    path = tmp_path / "course.toml"
    path.write_text(table)
    with pytest.raises(ExtensionError, match=re.escape(complaint)):
        course.load_course(path)


def test_reading_time_counts_prose_code_and_answers_not_outputs_or_folds_to_skip():
    document = new_document("page", frontend.get_default_settings(rst.Parser))
    document += nodes.paragraph(text="one two three four")
    cell = nodes.container(classes=["cell"])
    cell += nodes.container(
        "", nodes.literal_block(text="x = 1\n\ny = 2\n"), classes=["cell_input"]
    )
    cell += nodes.container("", nodes.literal_block(text="a\nb\nc\n"), classes=["cell_output"])
    document += cell
    answer = nodes.container("", nodes.rubric(text="Answer"), design_component="dropdown")
    answer += nodes.paragraph(text="an answer is read")
    document += answer
    for title in ("Under the hood: the compiled program", "The whole script, to copy"):
        skipped = nodes.container("", nodes.rubric(text=title), design_component="dropdown")
        skipped += nodes.literal_block(text="many\nlines\n")
        skipped += nodes.paragraph(text="words a learner may skip")
        document += skipped
    for prompt, lines in (("Under the hood: compiler readings", 0), ("Show code cell content", 1)):
        folded_cell = nodes.container(
            "", nb_element="cell_code", hide_mode="all", prompt_show=prompt, classes=["cell"]
        )
        folded_cell += nodes.container(
            "", nodes.literal_block(text="z = 3\n" * (lines or 5)), classes=["cell_input"]
        )
        document += folded_cell
    minutes, words, code = course.reading_minutes(document)
    assert (words, code) == (4 + 1 + 4, 2 + 1)
    assert minutes == pytest.approx(9 / 140 + 3 / 12)
    assert course.shown_minutes(0.01) == 1 and course.shown_minutes(12.2) == 13


def _printing_cell(*texts: str) -> nbformat.NotebookNode:
    outputs = [nbformat.v4.new_output("stream", name="stdout", text=text) for text in texts]
    return nbformat.v4.new_code_cell("print(...)", outputs=outputs)


def test_merged_prints_leave_the_executed_notebook_as_it_ran():
    stream_outputs.setup(_Recorder())
    notebook = nbformat.v4.new_notebook(cells=[_printing_cell("a\n", "b\n")])
    import myst_nb.core.render

    (merged,) = myst_nb.core.render.coalesce_streams(notebook.cells[0].outputs)
    assert merged.text == "a\nb\n"
    assert [out.text for out in notebook.cells[0].outputs] == ["a\n", "b\n"]
    assert stream_outputs.repeated_tails(notebook) == []


def test_a_cell_whose_output_repeats_its_tail_is_found():
    notebook = nbformat.v4.new_notebook(
        cells=[_printing_cell("a\nb\n", "b\n"), _printing_cell("x\n", "x\n")]
    )
    # The second cell printed the same line twice, which is no repeat.
    assert stream_outputs.repeated_tails(notebook) == [0]


class _Recorder:
    """Stands in for the Sphinx application: records what an extension connects."""

    def __init__(self) -> None:
        self.connected: list[str] = []

    def connect(self, event: str, handler: object) -> None:
        self.connected.append(event)


def test_a_page_kernel_runs_without_a_line_about_its_local_connection(tmp_path, monkeypatch, capfd):
    from nbclient import NotebookClient

    app = type("App", (), {"doctreedir": str(tmp_path / "doctrees")})()
    monkeypatch.setenv("IPYTHONDIR", "")
    kernel_environment._prepare_kernels(app, object())
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    NotebookClient(notebook, timeout=60).execute()
    assert notebook.cells[0].outputs[0].text == "42\n"
    assert "without encryption" not in capfd.readouterr().err
    # The same kernel outside the build's profile says it: the check can fail.
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "elsewhere"))
    NotebookClient(notebook, timeout=60).execute()
    assert "without encryption" in capfd.readouterr().err


def test_a_built_notebook_keeps_each_printed_line_once_and_the_log_ends_with_the_times(tmp_path):
    source = tmp_path / "site"
    source.mkdir()
    (source / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(EXTENSIONS)!r})\n"
        "extensions = ['myst_nb', 'page_times', 'stream_outputs']\n"
        "nb_merge_streams = True\nnb_execution_mode = 'force'\n"
    )
    code = "import time\nprint('first')\ntime.sleep(0.3)\nprint('second')"
    cell = f"```{{code-cell}} ipython3\n{code}\n```"
    (source / "index.md").write_text(
        "---\njupytext:\n  text_representation:\n    format_name: myst\n"
        f"kernelspec:\n  name: python3\n  display_name: Python 3\n---\n\n# Page\n\n{cell}\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-b", "html", source, tmp_path / "out" / "html"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    executed = nbformat.read(tmp_path / "out" / "jupyter_execute" / "index.ipynb", as_version=4)
    texts = [out.text for out in executed.cells[-1].outputs]
    assert "".join(texts) == "first\nsecond\n", texts
    assert re.search(r"built in \d+ s; 1 pages executed, the slowest index in \d+ s", result.stdout)
    html = (tmp_path / "out" / "html" / "index.html").read_text()
    assert html.count("second") == 2  # the code cell and its output, once each


def _tpu_plans_build(tmp_path, monkeypatch, script: str):
    import tpu_plans

    monkeypatch.setattr(tpu_plans, "COMMAND", [sys.executable, "-c", script])
    monkeypatch.setenv("SPMD_GUIDE_TPU_PLANS", str(tmp_path / "plans"))
    monkeypatch.setenv("SPMD_GUIDE_CPU_PLANS", str(tmp_path / "cpu-plans"))
    config = type("Config", (), {"nb_execution_mode": "cache"})()
    app = type("App", (), {"doctreedir": str(tmp_path / "doctrees"), "config": config})()
    return tpu_plans, app


def test_the_planner_pages_tpu_compiles_run_before_it_is_read(tmp_path, monkeypatch):
    script = "import sys; print(sys.argv[1], sys.argv[2], 'compiled in 1 s')"
    tpu_plans, app = _tpu_plans_build(tmp_path, monkeypatch, script)
    ran = []
    monkeypatch.setattr(tpu_plans.logger, "info", ran.append)
    tpu_plans._compile_before_reading(app, None, ["guide/memory"])
    assert ran == []  # the planner page is not to be read: nothing compiles
    tpu_plans._compile_before_reading(app, None, ["guide/memory", "guide/planner"])
    # Both compilers' steps, each in a process of its own.
    assert f"tpu {tmp_path / 'plans'} compiled in 1 s; cpu {tmp_path / 'cpu-plans'}" in ran[-1]


def test_failed_tpu_compiles_stop_the_build_with_their_output(tmp_path, monkeypatch):
    script = "raise SystemExit('libtpu does not know the topology')"
    tpu_plans, app = _tpu_plans_build(tmp_path, monkeypatch, script)
    with pytest.raises(ExtensionError, match=r"failed \(exit 1\):\nlibtpu does not know"):
        tpu_plans._compile_before_reading(app, None, ["guide/planner"])


def _section_raising(title: str, traceback: str) -> nodes.document:
    document = new_document("page", frontend.get_default_settings(rst.Parser))
    section = nodes.section(ids=["the-section"])
    section += nodes.title(text=title)
    cell = nodes.container(classes=["cell", "tag_raises-exception"])
    cell += nodes.literal_block(text="f(x)")
    cell += nodes.literal_block(text=traceback, classes=["output", "traceback"])
    section += cell
    document += section
    return document


def test_an_error_a_page_raises_is_found_with_its_section():
    traceback = "Traceback (most recent call last):\n  ...\nValueError: can\u2019t go: x of f\nmore"
    title = "\u201cbad thing \u2026 can\u2019t go\u201d"
    document = _section_raising(title, traceback.replace("\u2019", "'"))
    (found,) = error_search.raised_errors(document)
    assert found == {
        "anchor": "the-section",
        "title": title,
        # The whole message: its first line and the lines after it, which a reader may paste.
        "message": "ValueError: can't go: x of f more",
        "titled": False,  # "bad thing" is not in the message
    }
    quote = "\u201cx of \u2026 can\u2019t go\u201d"
    assert error_search.title_quotes(quote, "no: x of f, can't go")
    assert error_search.quoted_titles(document)[0]["message"] == "bad thing \u2026 can't go"


def test_a_message_quoted_in_a_sections_prose_is_found_with_it():
    document = _section_raising("A title", "ValueError: raised")
    section = document[0]
    paragraph = nodes.paragraph()
    paragraph += nodes.Text("Older versions said ")
    paragraph += nodes.literal(text="Check failed: !IsManual()")
    paragraph += nodes.Text(", and the flag is ")
    paragraph += nodes.literal(text="XLA_PYTHON_CLIENT_PREALLOCATE=false")  # a name, not a message
    paragraph += nodes.literal(text="jax.shard_map")
    paragraph += nodes.literal(text="buffer has been deleted or donated")  # a message's sentence
    paragraph += nodes.literal(text="srun --label")  # a command
    section += paragraph
    found = [record["message"] for record in error_search.quoted_in_prose(document)]
    assert found == ["Check failed: !IsManual()", "buffer has been deleted or donated"]


def test_an_error_a_hidden_cell_asserts_on_is_found_with_its_section():
    source = "\n".join(
        [
            "# A title",
            "```{code-cell} ipython3",
            ":tags: [remove-cell]",
            "",
            "try:",
            "    restore()",
            "except ValueError as error:",
            '    assert "ValueError Topology mismatch detected" in str(error)',
            'assert "12 GiB in all" in str(report)  # a figure, not an error',
            "assert \"memory_fraction = os.getenv('X_FAILED'\" in source  # a line of code",
            "```",
            "```{code-cell} ipython3",
            "",
            'assert "this one is shown, and fails loudly" in shown',
            "```",
        ]
    )
    document = _section_raising("A title", "ValueError: raised")
    assert error_search.asserted_in_hidden_cells(source, document) == [
        {
            "anchor": "the-section",
            "title": "a title",
            "message": "ValueError Topology mismatch detected",
            "titled": False,
        }
    ]


def test_a_section_whose_title_quotes_a_message_comes_before_another_raising_it():
    by_page = {
        "a-page": [{"anchor": "a", "title": "t", "message": "E: m", "titled": False}],
        "troubleshooting": [
            {"anchor": "other", "title": "t", "message": "E: n", "titled": False},
            {"anchor": "quoted", "title": "\u201cm\u201d", "message": "E: m", "titled": True},
        ],
    }
    records = error_search.ordered_records(by_page, ["troubleshooting"])
    assert [(r["page"], r["anchor"]) for r in records] == [
        ("troubleshooting", "quoted"),
        ("troubleshooting", "other"),
        ("a-page", "a"),
    ]


def test_a_new_recorded_gpu_run_executes_the_pages_again(tmp_path, monkeypatch):
    import execution_cache

    docs = tmp_path / "docs"
    for path in (
        "src/spmd_guide/module.py",
        "src/spmd_guide/recorded_gpu_runs/run.json",
        "docs/_static/planner/model.js",
        "docs/_static/explorer/model.js",
        "docs/_ext/kernel_startup.py",
    ):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("1")
    (tmp_path / "examples").mkdir()
    monkeypatch.setattr(execution_cache, "ROOT", tmp_path)
    monkeypatch.setattr(execution_cache, "DOCS", docs)
    before = execution_cache.execution_fingerprint()
    (tmp_path / "src/spmd_guide/recorded_gpu_runs/another.json").write_text("{}")
    assert execution_cache.execution_fingerprint() != before


# -- Terms before use -----------------------------------------------------------------------------


def _term_site(tmp_path: Path, pages: dict[str, str], entries: str) -> subprocess.CompletedProcess:
    """Build a small MyST site whose path is ``pages`` in order, with a glossary of ``entries``,
    as the docs build runs: warnings are errors."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(EXTENSIONS)!r})\n"
        f"extensions = ['myst_parser', 'term_order']\nterm_order_path = {list(pages)!r}\n"
    )
    toctree = "\n".join([*pages, "glossary", "reference"])
    (source / "index.md").write_text(f"# Home\n\n```{{toctree}}\n{toctree}\n```\n")
    (source / "glossary.md").write_text(f"# Glossary\n\n```{{glossary}}\n{entries}```\n")
    # A page off the path may use any term.
    (source / "reference.md").write_text("# Reference\n\n{term}`varying`, `{V:x}`.\n")
    for page, text in pages.items():
        (source / f"{page}.md").write_text(f"({page}-label)=\n# {page}\n\n{text}\n")
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-W", "-b", "html", source, tmp_path / "html"],
        capture_output=True,
        text=True,
    )


GLOSSARY = (
    "mesh\n  A grid of devices. Taught on {doc}`first`.\n\n"
    "varying\n  Differs from device to device, `{V:x}`. Taught on\n  {doc}`second`.\n\n"
    "unreduced\nU\n  Partial sums, `{U:x}`. Taught on {doc}`first`.\n\n"
)


def test_a_term_used_before_the_path_teaches_it_fails_the_build_naming_the_fix(tmp_path):
    built = _term_site(
        tmp_path,
        {"first": "A {term}`mesh`, then a {term}`varying <varying>` value.", "second": "Taught."},
        GLOSSARY,
    )
    assert built.returncode != 0
    assert (
        "first links to the term 'varying' with {term}, but the path teaches it later, on second "
        "(page 2 of the path; this is page 1). Link to {doc}`/second` instead of the glossary"
    ) in built.stderr
    assert "mesh" not in built.stderr  # taught on the page itself


def test_a_notation_before_its_teaching_page_fails_unless_the_page_links_there(tmp_path):
    built = _term_site(
        tmp_path,
        {
            "first": "Its type, `float32[2]{U:x, V:x}`, says so.\n\nSee {doc}`second`.",
            "second": "Taught.",
        },
        GLOSSARY,
    )
    assert built.returncode != 0
    assert "first writes `{U:x, V:x}`, the notation for 'varying'," in built.stderr
    assert "'unreduced'" not in built.stderr  # taught on the page itself


@pytest.mark.parametrize(
    "link", ["{ref}`the next page <second-label>`", "[the next page](second.md)", "{doc}`second`"]
)
def test_terms_and_notation_in_path_order_build_without_a_warning(tmp_path, link):
    built = _term_site(
        tmp_path,
        {
            # A notation with a link to its teaching page in the same paragraph is fine.
            "first": f"Typed `{{V:x}}` (see {link}); {{term}}`U` here.",
            "second": "A {term}`varying` value, typed `float32[2]{V:x}`, and a {term}`mesh`.\n\n"
            "```python\nassert typed == 'float32[2]{V:x}'\n```",
        },
        GLOSSARY,
    )
    assert built.returncode == 0, built.stderr


def test_a_glossary_entry_without_its_teaching_page_on_the_path_fails_the_build(tmp_path):
    built = _term_site(
        tmp_path,
        {"first": "Text.", "second": "Text."},
        GLOSSARY + "bubble\n  Idle ticks.\n\nstage\n  Layers. Taught on {doc}`reference`.\n",
    )
    assert built.returncode != 0
    assert "the glossary entry 'bubble' names no teaching page" in built.stderr
    assert (
        "the glossary entry 'stage' is taught on 'reference', which is not a page of the path"
    ) in built.stderr


def test_each_mark_of_a_type_is_read_as_its_term():
    assert list(term_order.marks("float32[2]{V:(x,y), U:z} and f32[4]{R:data}, {U_max:x}")) == [
        ("varying", "{V:(x,y), U:z}"),
        ("unreduced", "{V:(x,y), U:z}"),
        ("reduced", "{R:data}"),
        ("unreduced", "{U_max:x}"),
    ]
    assert list(term_order.marks("{'V': 1} or {x: V}")) == []


def test_every_glossary_term_is_taught_on_a_page_of_the_path():
    docs = EXTENSIONS.parent
    path = {page.doc for page in course.load_course().path}
    text = (docs / "glossary.md").read_text(encoding="utf-8").split("```{glossary}")[1]
    blocks = (block.strip("\n") for block in re.split(r"\n\s*\n", text))
    entries = [block for block in blocks if block.strip("` ") and not block.startswith(":")]
    taught = [re.search(r"Taught on\s+\{doc\}`([^`]+)`", entry) for entry in entries]
    assert all(taught), [entry for entry, page in zip(entries, taught, strict=True) if not page]
    assert {page.group(1) for page in taught} <= path
    assert {"varying", "unreduced", "reduced"} <= {
        line for entry in entries for line in entry.splitlines() if line and line[0] != " "
    }


@pytest.mark.parametrize(
    ("stored", "answers"),
    [
        ("'float32[8@y]'", ["float32[8@y]"]),
        ("4096", ["4096"]),
        ("[\"P('x', None)\", \"P('x')\"]", ["P('x', None)", "P('x')"]),
        ("all-gather", ["all-gather"]),
    ],
)
def test_a_stored_answer_is_read_from_its_text_form(stored, answers):
    assert answer_matching.stored_answers(stored) == answers


def test_an_empty_stored_answer_is_refused():
    with pytest.raises(ValueError, match="empty"):
        answer_matching.stored_answers("''")
    with pytest.raises(ValueError, match="empty"):
        answer_matching.stored_answers("[]")


@pytest.mark.parametrize(
    ("given", "answers", "tolerance", "right"),
    [
        ("Float32[ 8@y ]", ["float32[8@y]"], 0, True),
        ("`float32[8@y]`.", ["float32[8@y]"], 0, True),
        ("float32[8@x]", ["float32[8@y]"], 0, False),
        ('P("x", None)', ["P('x', None)"], 0, True),
        ("4,096", ["4096"], 0, True),
        ("4097", ["4096"], 0, False),
        ("4097", ["4096"], 0.01, True),
        ("raises `ShardingTypeError`", ["raises ShardingTypeError"], 0, True),
        ("all_gather", ["all-gather"], 0, False),
        ("[64, 96]", ["(64, 96)"], 0, True),
        ("64\u00d796", ["64, 96"], 0, True),
        ("64096", ["64, 96"], 0, False),
        ("4,096", ["4096"], 0, True),
        ("11%", ["11.11"], 0.05, True),
    ],
)
def test_an_answer_matches_by_value_not_by_spelling(given, answers, tolerance, right):
    assert answer_matching.matches(given, answers, tolerance) is right


def test_a_number_may_carry_the_fields_unit():
    assert answer_matching.matches("20 MiB", ["20"], 0, "MiB")
    assert answer_matching.matches("135,360 bytes", ["135360"], 0, "bytes")
    assert not answer_matching.matches("20 GiB", ["20"], 0, "MiB")
