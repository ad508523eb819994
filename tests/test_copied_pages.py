"""The copy check's reading of a page: which cells a reader copies."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "visible_cells", ROOT / "copied_pages" / "visible_cells.py"
)
assert _spec is not None and _spec.loader is not None
visible_cells = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(visible_cells)

PAGE = """---
kernelspec:
  name: python3
---

# A page

```{code-cell} ipython3
import jax
```

```{code-cell} ipython3
:tags: [remove-cell]

assert True
```

```{code-cell} ipython3
---
tags: [raises-exception]
---
1 / 0
```

```{code-cell} ipython3
:tags: ["remove-input"]

shown_without_code = 1
```

```{code-cell} ipython3
:tags: [hide-output]

x = 2
```

````{code-cell} ipython3
text = '''
```
'''
````

```python
not_a_cell = True
```
"""


def test_a_reader_copies_only_cells_whose_code_the_page_shows_and_that_do_not_raise(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    assert visible_cells.visible_cells(page) == ["import jax", "text = '''\n```\n'''"]


FOLDS = """---
kernelspec:
  name: python3
---

```{code-cell} ipython3
---
tags: [hide-cell]
mystnb:
  code_prompt_show: "The previous page's model, to copy"
---
model = 1
```

```{code-cell} ipython3
---
tags: [hide-cell]
mystnb:
  code_prompt_show: "Under the hood: its compiled program"
---
program = 2
```
"""


def test_a_fold_that_offers_its_code_to_copy_is_copied_and_any_other_fold_is_not(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(FOLDS)
    assert visible_cells.visible_cells(page) == ["model = 1"]


def test_every_cell_is_read_with_its_tags(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    assert [tags for tags, _ in visible_cells.cells(page)] == [
        [],
        ["remove-cell"],
        ["raises-exception"],
        ["remove-input"],
        ["hide-output"],
        [],
    ]


PAGES = sorted(
    page
    for page in (ROOT / "docs").rglob("*.md")
    if "_build" not in page.parts and "{code-cell}" in page.read_text(encoding="utf-8")
)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT / "docs")))
def test_a_cell_that_raises_on_purpose_holds_only_the_statement_that_raises(page):
    """A reader's copy leaves such cells out, so whatever else one held would be missing later;
    the set-up belongs in a cell of its own before it."""
    for tags, code in visible_cells.cells(page):
        if "raises-exception" in tags:
            statements = ast.parse(code).body
            assert len(statements) == 1, (
                f"{page.relative_to(ROOT)}: a raises-exception cell holds {len(statements)} "
                f"statements; move all but the one that raises into a cell before it:\n{code}"
            )
