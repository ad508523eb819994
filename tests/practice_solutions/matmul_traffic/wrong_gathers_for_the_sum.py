"""Expected: fails result
Hint: nothing is gathered

Case 3 read as case 2: A's slices gathered, though B's rows are split the same way.
"""


def matmul_traffic(a_spec, b_spec, out_spec, x, y):
    n = {"x": x, "y": y, None: 1}
    a_rows, a_inner = a_spec
    b_inner, b_columns = b_spec
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
