"""Expected: fails result
Hint: each stage runs each of the

1F1B's warm-up and alternation, but the loop over microbatches stops one short of the last
backward.
"""

import numpy as np


def one_f_one_b(stages, microbatches):
    rows = []
    for s in range(stages):
        warmup = min(stages - s - 1, microbatches)
        row = [0] * s + [m + 1 for m in range(warmup)]
        for m in range(microbatches - 1):
            if warmup + m < microbatches:
                row.append(warmup + m + 1)
            row.append(-(m + 1))
        rows.append(row)
    width = max(map(len, rows))
    return np.array([row + [0] * (width - len(row)) for row in rows])
