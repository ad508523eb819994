"""Expected: pass

Each array's per-device size from the number of devices its layout splits it over.
"""


def predict_memory(strategy, devices, width, hidden):
    shapes = {"w1": width * hidden, "b1": hidden, "w2": hidden * width, "b2": width}
    tensor_split = {"w1", "b1", "w2"}  # b2 is added after the sum: whole everywhere
    ways = {
        "dp": ({}, {}),
        "zero1": ({}, dict.fromkeys(shapes, devices)),
        "zero3": (dict.fromkeys(shapes, devices), dict.fromkeys(shapes, devices)),
        "tp": (dict.fromkeys(tensor_split, devices),) * 2,
    }[strategy]
    parameter_ways, moment_ways = ways
    bytes_of = lambda split: sum(4 * n // split.get(k, 1) for k, n in shapes.items())  # noqa: E731
    parameters = bytes_of(parameter_ways)
    return {
        "parameters": parameters,
        "optimizer_state": 2 * bytes_of(moment_ways),
        "gradients": parameters,  # a gradient is laid out as its parameter
    }
