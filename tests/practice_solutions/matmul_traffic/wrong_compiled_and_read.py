"""Expected: fails worked_out
Hint: your function called Traced.lower, Lowered.compile

The collectives read off the compiled program: right everywhere, and no prediction.
"""

import re

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def matmul_traffic(a_spec, b_spec, out_spec, x, y):
    mesh = jax.make_mesh((x, y), ("x", "y"), devices=jax.devices()[: x * y])
    a = jax.ShapeDtypeStruct((16, 32), jnp.float32, sharding=NamedSharding(mesh, P(*a_spec)))
    b = jax.ShapeDtypeStruct((32, 64), jnp.float32, sharding=NamedSharding(mesh, P(*b_spec)))
    out = NamedSharding(mesh, P(*out_spec)) if out_spec else None
    text = jax.jit(lambda a, b: jnp.matmul(a, b, out_sharding=out)).lower(a, b).compile().as_text()
    found = {}
    for kind, groups, shape in (
        re.findall(r"(all-gather|all-reduce)(?:-start)?\(.*?replica_groups=(\S+).*", text) and []
    ):
        found[kind] = shape
    sizes = {"x": x, "y": y}
    for line in text.splitlines():
        match = re.search(r"= f32\[([\d,]*)\].* (all-gather|all-reduce)(?:-start)?\(", line)
        if not match:
            continue
        elements = 1
        for dim in match.group(1).split(","):
            elements *= int(dim)
        kind = match.group(2)
        # The axis whose size matches the replica group's length.
        group = re.search(r"replica_groups=\[(\d+),(\d+)\]", line)
        axis = next(a for a in ("y", "x") if group and sizes[a] == int(group.group(2)))
        share = (sizes[axis] - 1) / sizes[axis] * elements * 4
        found[f"{kind} over {axis}"] = share * (2 if kind == "all-reduce" else 1)
    return found
