"""The code a reader copies from a page: its visible code cells, in order.

Standard library only, so it runs in the copy environment, which has no spmd_guide and no
MyST tooling. A MyST notebook cell is

    ```{code-cell} ipython3
    :tags: [remove-cell]

    code
    ```

with its options either as ``:key: value`` lines or as a ``---`` YAML block. A cell is left
out when the reader cannot see its code (``remove-cell``, ``remove-input``), sees it folded
away (``hide-*``), or when it raises on purpose (``raises-exception``): what a reader copies
and runs top to bottom is everything else. One fold is copied all the same: a folded cell
whose fold offers its code "to copy" (``code_prompt_show`` says so), such as a page's set-up
repeated from the pages before it, folded so as not to be read twice.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

LEFT_OUT_TAGS = ("remove-cell", "remove-input", "raises-exception")
LEFT_OUT_TAG_PREFIXES = ("hide-",)
# A folded cell whose fold's title offers its code to copy: folded away from reading, not copying.
_TO_COPY = re.compile(r"^\s*code_prompt_show:.*\bto copy\b", re.M | re.I)

_CELL = re.compile(
    r"^(?P<fence>`{3,})\{code-cell\}[^\n]*\n(?P<body>.*?)^(?P=fence)[ \t]*$", re.M | re.S
)
_TAGS = re.compile(r"^(?::tags:|tags:)\s*\[(?P<tags>[^\]]*)\]\s*$", re.M)


def _split_options(body: str) -> tuple[str, str]:
    """(options, code) of one cell's body."""
    lines = body.split("\n")
    if lines and lines[0].strip() == "---":
        end = lines.index("---", 1)
        return "\n".join(lines[1:end]), "\n".join(lines[end + 1 :])
    options = []
    while lines and lines[0].startswith(":"):
        options.append(lines.pop(0))
    return "\n".join(options), "\n".join(lines)


def _read(page: Path) -> list[tuple[list[str], str, str]]:
    """Every code cell of ``page`` as (tags, options, code)."""
    found = []
    for match in _CELL.finditer(page.read_text(encoding="utf-8")):
        options, code = _split_options(match["body"])
        tags_match = _TAGS.search(options)
        tags = []
        if tags_match:
            tags = [
                tag.strip().strip("'\"") for tag in tags_match["tags"].split(",") if tag.strip()
            ]
        found.append((tags, options, code.strip("\n")))
    return found


def cells(page: Path) -> list[tuple[list[str], str]]:
    """Every code cell of ``page`` as (tags, code)."""
    return [(tags, code) for tags, _, code in _read(page)]


def is_visible(tags: list[str], options: str = "") -> bool:
    """Whether a reader copies a cell with these tags (and these options, for a folded cell)."""
    if any(tag in LEFT_OUT_TAGS for tag in tags):
        return False
    folded = any(tag.startswith(LEFT_OUT_TAG_PREFIXES) for tag in tags)
    return not folded or _TO_COPY.search(options) is not None


def visible_cells(page: Path) -> list[str]:
    """The code of each cell a reader sees and would copy, in page order."""
    return [
        code for tags, options, code in _read(page) if is_visible(tags, options) and code.strip()
    ]


if __name__ == "__main__":
    for number, code in enumerate(visible_cells(Path(sys.argv[1])), 1):
        print(f"# --- visible cell {number}\n{code}\n")
