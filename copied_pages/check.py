"""Copy every page's visible cells into a fresh process without spmd_guide, and run them.

    python copied_pages/check.py [PAGE.md ...]      (all pages under docs/ when none are named)

Each page runs in its own process, started in an empty folder, with JAX on the CPU and no device
count set: the page's first cell has to ask for its 8 devices itself, as it must for a reader.
Pages run side by side, one per core. Exits 1 and names each page that failed, with the cell.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent / "docs"
PAGE_TIMEOUT_SECONDS = 300

# What a reader's machine without accelerators looks like to JAX, plus the variables that keep
# libtpu (installed with jax[tpu] for the page that compiles for TPUs) quiet and shareable; the
# same values the docs build uses, in src/spmd_guide/environment.py, which this environment
# does not import.
MACHINE = {
    "JAX_PLATFORMS": "cpu",
    "TPU_ACCELERATOR_TYPE": "v5litepod-8",
    "TPU_WORKER_HOSTNAMES": "localhost",
    "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
    "TPU_LOG_DIR": "disabled",
}


def pages() -> list[Path]:
    return sorted(
        page
        for page in DOCS.rglob("*.md")
        if "_build" not in page.parts and "{code-cell}" in page.read_text(encoding="utf-8")
    )


def run(page: Path) -> tuple[Path, int, float, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("JAX_", "XLA_", "PYTHONPATH"))
    }
    env.update(MACHINE)
    env["PYTHONPATH"] = str(HERE)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="copied-page-") as folder:
        try:
            done = subprocess.run(
                [sys.executable, str(HERE / "run_visible_cells.py"), str(page)],
                cwd=folder,
                env=env,
                capture_output=True,
                text=True,
                timeout=PAGE_TIMEOUT_SECONDS,
            )
            code, message = done.returncode, (done.stderr.strip().splitlines() or [""])[-1]
            if code != 0:
                message = done.stderr.strip()[-3000:]
        except subprocess.TimeoutExpired:
            code, message = 1, f"still running after {PAGE_TIMEOUT_SECONDS} s; stopped"
    return page, code, time.perf_counter() - start, message


def main(names: list[str]) -> int:
    chosen = [Path(name).resolve() for name in names] or pages()
    failed = []
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for page, code, seconds, message in pool.map(run, chosen):
            name = page.relative_to(DOCS) if page.is_relative_to(DOCS) else page
            print(f"{'ok  ' if code == 0 else 'FAIL'} {seconds:5.1f} s  {name}", flush=True)
            if code != 0:
                failed.append((name, message))
    for name, message in failed:
        print(f"\n--- {name}\n{message}", file=sys.stderr)
    print(
        f"\n{len(chosen) - len(failed)} of {len(chosen)} pages ran from their visible cells alone"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
