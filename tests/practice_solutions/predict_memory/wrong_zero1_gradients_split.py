"""Expected: fails result
Hint: ZeRO 2 is the stage that splits them

ZeRO 1's gradients taken to be split like its optimizer state: right for ZeRO 2, but ZeRO 1's
parameters are whole, and so are their gradients.
"""


def predict_memory(strategy, devices, width, hidden):
    full = 4 * (2 * width * hidden + hidden + width)
    tensor = 4 * (2 * width * hidden + hidden) // devices + 4 * width
    parameters = {"dp": full, "zero1": full, "zero3": full // devices, "tp": tensor}[strategy]
    moments = {"dp": full, "zero1": full // devices, "zero3": full // devices, "tp": tensor}
    gradients = moments[strategy]
    return {
        "parameters": parameters,
        "optimizer_state": 2 * moments[strategy],
        "gradients": gradients,
    }
