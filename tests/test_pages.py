"""spmd_guide.pages: a page runs another page's code exactly as a reader copies it."""

from __future__ import annotations

import pytest

from spmd_guide import pages


def test_a_page_s_visible_code_leaves_out_what_a_reader_cannot_copy():
    code = pages.visible_code("patterns/pipeline-scheduled")
    # The set-up repeated from the pages before, folded "to copy", is copied all the same.
    assert code[0].startswith("import functools")
    assert any("def scheduled_step(" in cell for cell in code)
    # Hidden checks and the figures' cells are not a reader's to copy.
    assert not any("spmd_guide" in cell for cell in code)


def test_running_a_page_defines_what_its_cells_define():
    namespace: dict[str, object] = {}
    pages.run_page("how-pages-are-checked", namespace)  # a page without code runs nothing
    assert set(namespace) <= {"__builtins__"}
    with pytest.raises(FileNotFoundError, match="no page 'patterns/pipelines'"):
        pages.visible_code("patterns/pipelines")
