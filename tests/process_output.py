"""What an example printed to stderr, less the notices that depend on how busy the machine is."""

from __future__ import annotations

import re

# Orbax logs this when a save waits more than a second for the one before it: a matter of load,
# not of the example (a loaded 2-core machine shows it; an idle one does not).
_TIMING_NOTICES = re.compile(
    r"^WARNING:absl:Waiting for previous save to complete took [\d.]+ seconds\..*\n?", re.M
)


def stderr_beyond_timing(stderr: str) -> str:
    """``stderr`` without the load-dependent notices: what a test may require to be empty."""
    return _TIMING_NOTICES.sub("", stderr)
