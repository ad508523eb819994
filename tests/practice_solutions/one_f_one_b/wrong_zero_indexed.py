"""Expected: fails result
Hint: 0 means waiting

1F1B's ticks worked out right, but each step written as m and -m, so microbatch 0's forward and
backward read as waits.
"""

import numpy as np


def one_f_one_b(stages, microbatches):
    orders = []
    for s in range(stages):
        warmup = min(stages - s - 1, microbatches)
        order = [("F", m) for m in range(warmup)]
        for m in range(microbatches):
            if warmup + m < microbatches:
                order.append(("F", warmup + m))
            order.append(("B", m))
        orders.append(order)
    ran = {}
    rows = [[] for _ in range(stages)]
    tick = 0
    while any(len(rows[s]) - rows[s].count(None) < len(orders[s]) for s in range(stages)):
        for s in range(stages):
            done = len(rows[s]) - rows[s].count(None)
            step = orders[s][done] if done < len(orders[s]) else None
            if step:
                kind, m = step
                if kind == "F":
                    needed = (s - 1, step) if s > 0 else None
                else:
                    needed = (s + 1, step) if s < stages - 1 else (s, ("F", m))
                if needed and ran.get(needed, tick) >= tick:
                    step = None
            rows[s].append(step)
        for s in range(stages):
            if rows[s][tick]:
                ran[s, rows[s][tick]] = tick
        tick += 1
    return np.array(
        [[0 if st is None else (st[1] if st[0] == "F" else -st[1]) for st in row] for row in rows]
    )
