# Runs at the start of every notebook kernel the docs build launches (see conf.py).
# A Python warning raised by a page's code becomes an exception, so the cell fails and
# the build stops: a deprecated call cannot slip into a page as a line of stderr.
# Warnings from the kernel's own machinery stay warnings; they are not the page's doing.
import warnings

warnings.filterwarnings("error")
warnings.filterwarnings(
    "default",
    module=r"(ipykernel|IPython|jupyter_client|jupyter_core|zmq|traitlets|tornado|comm|debugpy)(\.|$)",
)

# A cell that raises on purpose should show the error, not JAX's internal call stack.
get_ipython().run_line_magic("xmode", "minimal")  # noqa: F821

# ipykernel names each cell after a temporary file on the build machine
# (/tmp/ipykernel_<pid>/<hash>.py), and JAX quotes that name in some messages ("true_fun is
# <lambda> at ..."). Call every cell "<cell>": a line number within it is what a reader can use.
get_ipython().compile.get_code_name = lambda raw_code, code, number: "<cell>"  # noqa: F821
