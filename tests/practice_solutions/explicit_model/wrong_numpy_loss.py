"""Expected: fails jit

The loss computed in NumPy from the logits: under jax.jit, NumPy meets traced values.
"""

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def explicit_model(ids, labels, lengths, table, w_out, *, mesh):
    rows = NamedSharding(mesh, P("data"))
    ids, labels, lengths = (jax.device_put(v, rows) for v in (ids, labels, lengths))
    table = jax.device_put(table, NamedSharding(mesh, P("model", None)))
    w_out = jax.device_put(w_out, NamedSharding(mesh, P(None, "model")))
    hidden = table.at[ids].get(out_sharding=rows)
    logits = hidden @ w_out
    whole = np.asarray(logits)
    top = whole.max(axis=-1, keepdims=True)
    log_z = np.log(np.exp(whole - top).sum(axis=-1)) + top[..., 0]
    picked = np.take_along_axis(whole, np.asarray(labels)[..., None], axis=-1)[..., 0]
    losses = jax.device_put(log_z - picked, rows)
    last = losses.at[jax.numpy.arange(len(lengths)), lengths - 1].get(out_sharding=rows)
    return {"hidden": hidden, "logits": logits, "losses": losses, "last": last}
