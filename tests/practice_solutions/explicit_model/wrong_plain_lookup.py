"""Expected: fails result
Hint: the table is split over the vocabulary that the ids index

The lookup written as on one device.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def explicit_model(ids, labels, lengths, table, w_out, *, mesh):
    rows = NamedSharding(mesh, P("data"))
    ids, labels, lengths = (jax.device_put(v, rows) for v in (ids, labels, lengths))
    table = jax.device_put(table, NamedSharding(mesh, P("model", None)))
    w_out = jax.device_put(w_out, NamedSharding(mesh, P(None, "model")))
    hidden = table[ids]
    logits = hidden @ w_out
    one_hot = jax.nn.one_hot(
        labels, logits.shape[-1], out_sharding=NamedSharding(mesh, P("data", None, "model"))
    )
    losses = jax.nn.logsumexp(logits, axis=-1) - jnp.sum(logits * one_hot, axis=-1)
    last = losses.at[jnp.arange(len(lengths)), lengths - 1].get(out_sharding=rows)
    return {"hidden": hidden, "logits": logits, "losses": losses, "last": last}
