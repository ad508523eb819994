"""Expected: fails idle

1F1B's order, but each step waits one tick longer than its input needs: the order is valid and
each stage holds what 1F1B holds, but the bubble grows.
"""

import numpy as np


def one_f_one_b(stages, microbatches):
    orders = []
    for s in range(stages):
        warmup = min(stages - s - 1, microbatches)
        order = [m + 1 for m in range(warmup)]
        for m in range(microbatches):
            if warmup + m < microbatches:
                order.append(warmup + m + 1)
            order.append(-(m + 1))
        orders.append(order)

    def input_of(s, step):
        if step > 0:
            return (s - 1, step) if s > 0 else None
        return (s + 1, step) if s < stages - 1 else (s, -step)

    finished = {}
    rows = [[] for _ in range(stages)]
    tick = 0
    while any(len(orders[s]) > np.count_nonzero(rows[s]) for s in range(stages)):
        for s in range(stages):
            done = np.count_nonzero(rows[s])
            step = orders[s][done] if done < len(orders[s]) else 0
            needed = input_of(s, step) if step else None
            # Waits until its input is two ticks old.
            if needed is not None and finished.get(needed, tick) >= tick - 1:
                step = 0
            rows[s].append(step)
        for s in range(stages):
            if rows[s][tick]:
                finished[s, rows[s][tick]] = tick
        tick += 1
    return np.array(rows)
