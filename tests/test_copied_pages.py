"""The copy check's reading of a page: which cells a reader copies."""

from __future__ import annotations

import importlib.util
from pathlib import Path

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
