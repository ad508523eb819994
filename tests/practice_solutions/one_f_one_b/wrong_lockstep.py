"""Expected: fails order
Hint: one tick after stage s - 1

Every stage runs one forward and one backward in turn, all on the same ticks: no idle tick and
one microbatch held, but stage 1 runs a forward on the tick stage 0 does, before its input exists.
"""

import numpy as np


def one_f_one_b(stages, microbatches):
    row = [step for m in range(microbatches) for step in (m + 1, -(m + 1))]
    return np.array([row] * stages)
