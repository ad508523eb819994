"""``python -m spmd_guide``: the practice problems' command line (see ``--help``)."""

import sys

from spmd_guide.practice.cli import main

if __name__ == "__main__":
    sys.exit(main())
