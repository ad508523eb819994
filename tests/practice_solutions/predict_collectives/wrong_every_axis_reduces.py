"""Expected: fails result
Hint: an axis with one device needs no collective
"""


def predict_collectives(data, model):
    if data * model == 1:
        return {}
    return {"all-reduce": 2}
