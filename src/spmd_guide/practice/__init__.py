"""Practice problems on SPMD in JAX, and a checker that runs solutions on 1, 2, 4 and 8 devices.

``python -m spmd_guide list`` shows the problems; ``python -m spmd_guide starter NAME`` writes a
starter file; ``python -m spmd_guide check NAME FILE`` checks it.
"""

from spmd_guide.practice.catalog import PROBLEMS, get_problem
from spmd_guide.practice.checker import (
    DEVICE_COUNTS,
    Report,
    UsageError,
    check,
    check_in_process,
    check_many,
)
from spmd_guide.practice.problem import (
    Case,
    ErrorHint,
    Problem,
    ResultHint,
    statement_markdown,
)

__all__ = [
    "DEVICE_COUNTS",
    "PROBLEMS",
    "Case",
    "ErrorHint",
    "Problem",
    "Report",
    "ResultHint",
    "UsageError",
    "check",
    "check_in_process",
    "check_many",
    "get_problem",
    "statement_markdown",
]
