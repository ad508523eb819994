"""Expected: fails result
Hint: an all-reduce on a ring sends its data twice

The all-reduce's bytes counted as a gather's, once.
"""


def matmul_traffic(a_spec, b_spec, out_spec, x, y):
    n = {"x": x, "y": y, None: 1}
    a_rows, a_inner = a_spec
    b_inner, b_columns = b_spec
    if n[a_inner] > 1 and a_inner == b_inner:
        block = 16 // n[a_rows] * 64 // n[b_columns]
        return {f"all-reduce over {a_inner}": (n[a_inner] - 1) / n[a_inner] * block * 4}
    if n[a_inner] > 1:
        return {
            f"all-gather over {a_inner}": (n[a_inner] - 1) / n[a_inner] * 16 // n[a_rows] * 32 * 4
        }
    if n[b_inner] > 1:
        return {
            f"all-gather over {b_inner}": (n[b_inner] - 1)
            / n[b_inner]
            * 32
            * 64
            // n[b_columns]
            * 4
        }
    return {}
