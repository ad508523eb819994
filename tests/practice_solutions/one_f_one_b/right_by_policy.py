"""Expected: pass

Simulated tick by tick with a rule rather than an order: each stage runs a backward whose input
is ready, else a forward whose input is ready while it holds fewer than S - s microbatches,
else waits.
"""

import numpy as np


def one_f_one_b(stages, microbatches):
    done_at = {}  # (stage, step) -> tick
    next_forward = [0] * stages
    next_backward = [0] * stages
    rows = [[] for _ in range(stages)]
    tick = 0
    while min(next_backward) < microbatches:
        for s in range(stages):
            f, b = next_forward[s], next_backward[s]
            backward_input = (s + 1, -(b + 1)) if s < stages - 1 else (s, b + 1)
            forward_input = (s - 1, f + 1) if s > 0 else None
            if b < f and done_at.get(backward_input, tick) < tick:
                step = -(b + 1)
                next_backward[s] += 1
            elif (
                f < microbatches
                and f - b < stages - s
                and (forward_input is None or done_at.get(forward_input, tick) < tick)
            ):
                step = f + 1
                next_forward[s] += 1
            else:
                step = 0
            rows[s].append(step)
        for s in range(stages):
            if rows[s][tick]:
                done_at[s, rows[s][tick]] = tick
        tick += 1
    return np.array(rows)
