"""Assertions on a measured time, each leaving its observed value where the stress check reads it.

A build must never fail because the machine was busy, so a page or test asserts a time only in
one of two ways:

- ``ratio_above(check, larger, smaller, margin)``: one measured time is at least ``margin`` times
  another, where ``nox -s stress`` has seen the ratio stay at least 5 times ``margin`` with two
  CPU-bound processes running beside the page;
- ``after_timer(check, seconds, timer)``: a time that includes a wait the program itself sets
  (a sleep, a timeout), so it is never shorter than that wait, however loaded the machine.

When ``SPMD_GUIDE_TIMING_LOG`` names a file, each check appends one JSON line to it, whether it
passes or fails: the check's name, its kind, the observed value and the bound.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

LOG_VARIABLE = "SPMD_GUIDE_TIMING_LOG"


def _record(check: str, kind: str, observed: float, bound: float) -> None:
    log = os.environ.get(LOG_VARIABLE)
    if log:
        line = {"check": check, "kind": kind, "observed": observed, "bound": bound}
        with Path(log).open("a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")


def ratio_above(check: str, larger: float, smaller: float, margin: float) -> float:
    """Assert ``larger >= margin * smaller`` (both times, in one unit) and return the ratio.

    Raises:
        ValueError: if a time is negative or ``margin`` is not positive.
        AssertionError: if the ratio is below ``margin``; the message names the check.
    """
    if larger < 0 or smaller < 0 or margin <= 0:
        raise ValueError(
            f"{check}: times must be non-negative and the margin positive, got larger={larger}, "
            f"smaller={smaller}, margin={margin}"
        )
    ratio = larger / smaller if smaller else float("inf")
    _record(check, "ratio", ratio, margin)
    assert ratio >= margin, f"{check}: {larger} is {ratio:.2f} times {smaller}, below {margin}"
    return ratio


def after_timer(check: str, seconds: float, timer: float) -> None:
    """Assert that ``seconds`` is at least ``timer``, a wait the measured program sets itself.

    Raises:
        AssertionError: if ``seconds < timer``: the program did not wait as it was told to.
    """
    _record(check, "timer", seconds, timer)
    assert seconds >= timer, f"{check}: {seconds} s is shorter than the {timer} s timer"
