"""Benchmark the TPU compiler the pages ask: starting libtpu, and compiling training steps for
TPU slices that are described, not attached.

    nox -s bench            (or: python benchmarks/tpu_compile.py, with the package installed)

Each step is one Adam training step of a residual MLP (spmd_guide.memory), compiled in this
process as the memory page compiles it. It prints one line per compile and exits 1 if any takes
longer than its target on 2 cores: a page has 45 s in all, so one compile gets 15 s.
"""

from __future__ import annotations

import sys
import time

from spmd_guide import tpu
from spmd_guide.memory import ResidualMLP, estimate_training_memory

TARGET_SECONDS = 15.0

STEPS = [
    ("1.0 B parameters, FSDP on v5e:2x4", ResidualMLP(30, 2048, 8192), 4096, "v5e:2x4", 8, 1),
    ("1.0 B parameters, DP x TP on v5e:2x4", ResidualMLP(30, 2048, 8192), 4096, "v5e:2x4", 2, 4),
    (
        "25.8 B parameters, FSDP on v5e:16x16",
        ResidualMLP(48, 8192, 32768),
        65536,
        "v5e:16x16",
        256,
        1,
    ),
    ("1.0 B parameters, FSDP on v5p:2x2x2", ResidualMLP(30, 2048, 8192), 4096, "v5p:2x2x2", 8, 1),
    ("1.0 B parameters, FSDP on v6e:2x4", ResidualMLP(30, 2048, 8192), 4096, "v6e:2x4", 8, 1),
]


def main() -> int:
    missed = []
    start = time.perf_counter()
    tpu.compile_only_devices("v5e:2x4")
    print(f"{'starting libtpu':<40} {time.perf_counter() - start:8.2f} s")
    for name, model, batch, topology, data, model_axis in STEPS:
        strategy = "fsdp" if model_axis == 1 else "tp"
        start = time.perf_counter()
        estimate_training_memory(
            model, strategy, batch_size=batch, data=data, model_axis=model_axis, topology=topology
        )
        seconds = time.perf_counter() - start
        late = seconds > TARGET_SECONDS
        print(f"{name:<40} {seconds:8.1f} s{'  (missed target)' if late else ''}")
        if late:
            missed.append(name)
    print(
        f"target: each compile within {TARGET_SECONDS:g} s; missed: {', '.join(missed) or 'none'}"
    )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
