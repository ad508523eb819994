# Each page's kernel reads this as its profile's ipython_kernel_config.py, before it opens its
# sockets (see kernel_environment.py). The build talks to its kernels over TCP on localhost, and
# ipykernel warns, once per kernel, that the connection is not encrypted: a line per page that
# hid the build's real messages. This drops that one warning; the kernel's other messages stay.
import logging


class _NotTheLocalConnectionWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "running over TCP without encryption" not in record.getMessage()


logging.getLogger("IPKernelApp").addFilter(_NotTheLocalConnectionWarning())
