"""Expected: pass

The lookup as a product of one-hot ids with the table (its contraction over the split vocabulary,
so the product's layout is named), and the loss from log_softmax.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def explicit_model(ids, labels, lengths, table, w_out, *, mesh):
    split = NamedSharding(mesh, P("data", None, "model"))
    rows = NamedSharding(mesh, P("data"))
    vocab = table.shape[0]
    table = jax.device_put(table, NamedSharding(mesh, P("model", None)))
    w_out = jax.device_put(w_out, NamedSharding(mesh, P(None, "model")))
    ids, labels, lengths = (jax.device_put(v, rows) for v in (ids, labels, lengths))
    hidden = jnp.einsum(
        "btv,vd->btd", jax.nn.one_hot(ids, vocab, out_sharding=split), table, out_sharding=rows
    )
    logits = jnp.einsum("btd,dv->btv", hidden, w_out)
    picked = jax.nn.one_hot(labels, vocab, out_sharding=split)
    losses = -jnp.sum(jax.nn.log_softmax(logits, axis=-1) * picked, axis=-1)
    last = losses.at[jnp.arange(losses.shape[0]), lengths - 1].get(out_sharding=rows)
    return {"hidden": hidden, "logits": logits, "losses": losses, "last": last}
