"""Expected: fails worked_out
Hint: your function called Traced.lower, Lowered.compile

The collective's kind read off the compiled program, its axis and bytes from the specs: right
everywhere, but the kind was looked up, not worked out.
"""

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
    sizes = {"x": x, "y": y, None: 1}
    axis = a_spec[1] or b_spec[0]
    n = sizes[axis]
    if "all-reduce" in text:
        block = 16 // sizes[a_spec[0]] * 64 // sizes[b_spec[1]]
        return {f"all-reduce over {axis}": 2 * (n - 1) / n * block * 4}
    if "all-gather" in text:
        return {f"all-gather over {axis}": (n - 1) / n * 16 // sizes[a_spec[0]] * 32 * 4}
    return {}
