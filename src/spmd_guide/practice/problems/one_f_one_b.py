"""Problem: 1F1B's schedule written as a table, graded on its order, its idle share and what each
stage holds."""

from __future__ import annotations

# solution
import numpy as np


def one_f_one_b(stages, microbatches):
    """1F1B's pipeline schedule for ``stages`` stages and ``microbatches`` microbatches, as a
    table of what each stage does on each tick.

    Row ``s`` of the table is stage ``s``'s steps, one per tick: ``m + 1`` for the forward of
    microbatch ``m``, ``-(m + 1)`` for its backward, ``0`` for a tick the stage waits. Every
    step takes one tick. A forward on stage ``s > 0`` needs the same microbatch's forward on
    stage ``s - 1`` to have run on an earlier tick; a backward needs stage ``s + 1``'s
    backward of it (the last stage's, its own forward). A stage holds a microbatch's
    activations from its forward to its backward: 1F1B runs ``S - s - 1`` forwards on stage
    ``s`` before it alternates one forward and one backward, so stage ``s`` never holds more
    than ``S - s`` microbatches, where GPipe's every-forward-then-every-backward holds all
    ``M``. Each step runs on the first tick its input is ready.

    Args:
        stages: S, the number of pipeline stages (1 or more).
        microbatches: M, the number of microbatches (1 or more).
    """
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

    finished: dict[tuple[int, int], int] = {}  # (stage, step) -> the tick it ran on
    rows: list[list[int]] = [[] for _ in range(stages)]
    tick = 0
    while any(len(orders[s]) > np.count_nonzero(rows[s]) for s in range(stages)):
        for s in range(stages):
            done = np.count_nonzero(rows[s])
            step = orders[s][done] if done < len(orders[s]) else 0
            needed = input_of(s, step) if step else None
            if needed is not None and finished.get(needed, tick) >= tick:
                step = 0  # its input is not ready: the stage waits
            rows[s].append(step)
        for s in range(stages):
            if rows[s][tick]:
                finished[s, rows[s][tick]] = tick
        tick += 1
    return np.array(rows, dtype=np.int32)


# end solution

from spmd_guide.practice.problem import Case, Problem, ResultHint
from spmd_guide.practice.requirements import Returns, Satisfies

SIZES = ((1, 3), (2, 2), (2, 5), (3, 4), (4, 2), (4, 4), (4, 8))
"""The (stages, microbatches) the checker asks for: one stage, fewer microbatches than stages,
and more."""


def _cases(devices: int) -> list[Case]:
    return [Case((stages, microbatches)) for stages, microbatches in SIZES]


def _table(o) -> np.ndarray:
    return np.asarray(o.value)


def steps_of(expected, got) -> list[str]:
    """Whether ``got`` is a table of the right size in which every stage runs each
    microbatch's forward and backward exactly once."""
    expected, got = np.asarray(expected), np.asarray(got)
    stages, microbatches = len(expected), int(expected.max())
    if got.ndim != 2 or len(got) != stages:
        return [f"expected a 2-D table with a row per stage ({stages}), got shape {got.shape}"]
    if not np.issubdtype(got.dtype, np.integer) and not np.array_equal(got, np.round(got)):
        return [f"expected whole numbers in the table, got {got.dtype}"]
    wanted = sorted([*range(1, microbatches + 1), *range(-microbatches, 0)])
    for s, row in enumerate(got.astype(int)):
        steps = sorted(int(c) for c in row if c)
        if steps != wanted:
            return [
                f"stage {s} runs {_named(steps)}; each stage runs each of the {microbatches} "
                f"microbatches' forward and backward once ({_named(wanted)})"
            ]
    return []


def _named(steps) -> str:
    steps = sorted(steps, key=lambda c: (c < 0, abs(c)))
    shown = " ".join(f"F{c - 1}" if c > 0 else f"B{-c - 1}" for c in steps[:12])
    return shown + (" ..." if len(steps) > 12 else "")


def _ticks(table: np.ndarray) -> dict[tuple[int, int], int]:
    return {(s, int(c)): t for s, row in enumerate(table) for t, c in enumerate(row) if c}


def _order_broken(o) -> str | None:
    """The first step that runs on or before the tick its input is ready."""
    table = _table(o).astype(int)
    stages = len(table)
    ran = _ticks(table)
    for t in range(table.shape[1]):
        for s in range(stages):
            step = int(table[s, t])
            if step > 0 and s > 0:
                needed, what = (s - 1, step), f"stage {s - 1}'s forward of it"
            elif step < 0 and s < stages - 1:
                needed, what = (s + 1, step), f"stage {s + 1}'s backward of it"
            elif step < 0:
                needed, what = (s, -step), "its own forward"
            else:
                continue
            ready = ran.get(needed)
            if ready is None or ready >= t:
                name = f"{'F' if step > 0 else 'B'}{abs(step) - 1}"
                when = "never runs" if ready is None else f"runs on tick {ready}"
                return (
                    f"stage {s} runs {name} on tick {t}, but {what} {when}: a step needs its "
                    "input from an earlier tick"
                )
    return None


def held(table: np.ndarray) -> list[int]:
    """The most microbatches each stage holds at once: forwards it ran whose backward it has
    not."""
    most = []
    for row in np.asarray(table).astype(int):
        holding, peak = 0, 0
        for c in row:
            holding += 1 if c > 0 else -1 if c < 0 else 0
            peak = max(peak, holding)
        most.append(peak)
    return most


def _holds_too_many(o) -> str | None:
    stages, microbatches = o.args
    for s, peak in enumerate(held(_table(o))):
        bound = min(stages - s, microbatches)
        if peak > bound:
            return (
                f"stage {s} holds {peak} microbatches' activations at once; 1F1B holds at most "
                f"min(S - s, M) = {bound} there"
            )
    return None


def idle_share(table: np.ndarray) -> float:
    """Idle cells over all cells, through the last tick on which any stage works."""
    table = np.asarray(table)
    busy = np.flatnonzero(table.any(axis=0))
    ticks = int(busy[-1]) + 1 if busy.size else 0
    return float(np.mean(table[:, :ticks] == 0)) if ticks else 0.0


def _too_idle(o) -> str | None:
    stages, microbatches = o.args
    bound = (stages - 1) / (microbatches + stages - 1)
    share = idle_share(_table(o))
    if share > bound + 1e-9:
        return (
            f"{share:.1%} of your table's cells are idle; 1F1B's are (S - 1) / (M + S - 1) = "
            f"{bound:.1%}: a step waits longer than its input makes it"
        )
    return None


def _gpipe_like(o) -> bool:
    """Every forward before any backward, on every stage."""
    table = _table(o).astype(int)
    return all(
        max((t for t, c in enumerate(row) if c > 0), default=-1)
        < min((t for t, c in enumerate(row) if c < 0), default=len(row))
        for row in table
    )


def _zero_indexed(o) -> bool:
    """Microbatches numbered from 0, so the first one's forward reads as a wait."""
    microbatches = o.args[1]
    table = _table(o)
    return table.ndim == 2 and int(np.max(table, initial=0)) == microbatches - 1


def _same_tick_everywhere(o) -> bool:
    table = _table(o).astype(int)
    return len(table) > 1 and all(np.array_equal(table[0], row) for row in table)


PROBLEM = Problem(
    reference=one_f_one_b,
    title="A 1F1B schedule as a table",
    difficulty="medium",
    teaches="pipeline schedules: 1F1B's order, which bounds what each stage holds to S - s",
    lesson=("held",),
    make_cases=_cases,
    requirements=(
        Returns(
            "result",
            "It returns a table, an integer array with a row per stage: on each tick `m + 1` for "
            "the forward of microbatch `m`, `-(m + 1)` for its backward, `0` for waiting; every "
            "stage runs each microbatch's forward and backward exactly once.",
            compare=steps_of,
        ),
        Satisfies(
            "order",
            "No step runs before its input is ready: a forward on stage s > 0 on a later tick "
            "than stage s - 1's forward of that microbatch, a backward on a later tick than "
            "stage s + 1's backward of it (on the last stage, than its own forward).",
            test=_order_broken,
        ),
        Satisfies(
            "held",
            "Stage s never holds more than `min(S - s, M)` microbatches at once (forwards it "
            "ran whose backward it has not): 1F1B's bound, where GPipe's order holds all M.",
            test=_holds_too_many,
        ),
        Satisfies(
            "idle",
            "No more of the table is idle than 1F1B's: at most (S - 1) / (M + S - 1) of its "
            "cells, counted through the last tick on which any stage works.",
            test=_too_idle,
        ),
    ),
    hints=(
        ResultHint(
            _zero_indexed,
            "0 means waiting: microbatch m's forward is m + 1 and its backward -(m + 1), so "
            "microbatch 0 is written 1 and -1",
        ),
        ResultHint(
            _gpipe_like,
            "every stage runs all its forwards before any backward: that is GPipe's order. "
            "Run S - s - 1 forwards on stage s, then alternate one forward and one backward",
            requirement="held",
        ),
        ResultHint(
            _same_tick_everywhere,
            "every stage runs the same step on the same tick, but a microbatch reaches stage s "
            "one tick after stage s - 1 has run it: place each step on the first tick its "
            "input is ready",
            requirement="order",
        ),
    ),
    starter_imports=("import numpy as np",),
)
