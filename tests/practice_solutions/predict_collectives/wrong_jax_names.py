"""Expected: fails result
Hint: name the collectives as the compiled program does
"""


def predict_collectives(data, model):
    return {"psum": int(data > 1) + int(model > 1)}
