"""Expected: fails held
Hint: that is GPipe's order

Every forward, then every backward, each on the first tick its input is ready: a valid schedule
with 1F1B's idle share, but stage 0 holds all M microbatches' activations at once.
"""

import numpy as np


def one_f_one_b(stages, microbatches):
    ticks = 2 * (microbatches + stages - 1)
    table = np.zeros((stages, ticks), dtype=int)
    for s in range(stages):
        for m in range(microbatches):
            table[s, s + m] = m + 1
            # The last stage's backward of m follows its forward of the last microbatch.
            table[s, microbatches + stages - 1 + (stages - 1 - s) + m] = -(m + 1)
    return table
