"""Expected: fails result
Hint: b2 is added after the sum over 'model'

Tensor parallelism taken to split every parameter n ways, b2 included.
"""


def predict_memory(strategy, devices, width, hidden):
    full = 4 * (2 * width * hidden + hidden + width)
    split = {"dp": 1, "zero1": 1, "zero3": devices, "tp": devices}[strategy]
    moment_split = {"dp": 1, "zero1": devices, "zero3": devices, "tp": devices}[strategy]
    parameters = full // split
    return {
        "parameters": parameters,
        "optimizer_state": 2 * full // moment_split,
        "gradients": parameters,
    }
