"""Expected: fails result
Hint: two reductions, not one
"""


def predict_collectives(data, model):
    # One psum over every device adds everything up.
    return {"all-reduce": 1 if data * model > 1 else 0}
