"""Expected: pass

The four cases named, each with the value its collective carries.
"""


def matmul_traffic(a_spec, b_spec, out_spec, x, y):
    n = {"x": x, "y": y}
    a_rows, a_contraction = a_spec
    b_contraction, b_columns = b_spec

    def split(axis):
        return n[axis] if axis else 1

    def ring(kind, axis, values):
        share = (split(axis) - 1) / split(axis) * values * 4
        return {f"{kind} over {axis}": share * (2 if kind == "all-reduce" else 1)}

    both = a_contraction and a_contraction == b_contraction and split(a_contraction) > 1
    if both:  # case 3: partial sums of this device's block of the product
        return ring("all-reduce", a_contraction, (16 // split(a_rows)) * (64 // split(b_columns)))
    if a_contraction and split(a_contraction) > 1:  # case 2, A: gather A's rows whole along J
        return ring("all-gather", a_contraction, (16 // split(a_rows)) * 32)
    if b_contraction and split(b_contraction) > 1:  # case 2, B
        return ring("all-gather", b_contraction, 32 * (64 // split(b_columns)))
    return {}  # case 1
