"""The README's snippet is the first code a visitor copies; it must run and print what it says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from spmd_guide.devices import environment_without_jax_settings

README = Path(__file__).parents[1] / "README.md"


def test_readme_snippet_runs_and_prints_its_comment():
    (snippet,) = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    promised = re.search(r"print\(.*\)\s+# (.+)", snippet).group(1).strip()
    env = environment_without_jax_settings()
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", snippet],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == promised
