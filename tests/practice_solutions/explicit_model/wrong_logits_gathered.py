"""Expected: fails on_the_mesh
Hint: the logits (or the projection) were gathered to dodge a refusal

The loss refusal dodged by gathering each row's whole vocabulary before optax's integer-label
loss: the numbers and the layouts come back right, but every device held every logit.
"""

import jax
import optax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def explicit_model(ids, labels, lengths, table, w_out, *, mesh):
    rows = NamedSharding(mesh, P("data"))
    ids, labels, lengths = (jax.device_put(v, rows) for v in (ids, labels, lengths))
    table = jax.device_put(table, NamedSharding(mesh, P("model", None)))
    w_out = jax.device_put(w_out, NamedSharding(mesh, P(None, "model")))
    hidden = table.at[ids].get(out_sharding=rows)
    logits = hidden @ w_out
    whole_rows = jax.reshard(logits, rows)
    losses = optax.softmax_cross_entropy_with_integer_labels(whole_rows, labels)
    last = losses.at[jax.numpy.arange(len(lengths)), lengths - 1].get(out_sharding=rows)
    return {"hidden": hidden, "logits": logits, "losses": losses, "last": last}
