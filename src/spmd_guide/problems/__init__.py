"""Reference solutions to the guide's practice problems, and what the checker knows of them.

``python -m spmd_guide list`` shows the problems; ``python -m spmd_guide check NAME FILE``
checks a solution of your own on 1, 2, 4 and 8 CPU devices.
"""

from spmd_guide.problems.shard_map_psum import shard_map_psum
from spmd_guide.problems.shard_map_simulate import shard_map_simulate
from spmd_guide.problems.shard_map_vs_vmap import shard_map_vs_vmap

__all__ = ["shard_map_psum", "shard_map_simulate", "shard_map_vs_vmap"]
