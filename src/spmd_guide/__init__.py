"""spmd-guide: the small library behind the guide's executed pages."""

from spmd_guide.devices import requested_device_count, use_cpu_devices
from spmd_guide.environment import DEFAULT_DEVICE_COUNT
from spmd_guide.meshes import make_mesh, mesh_shapes

__all__ = [
    "DEFAULT_DEVICE_COUNT",
    "make_mesh",
    "mesh_shapes",
    "requested_device_count",
    "use_cpu_devices",
]

__version__ = "0.1.0"
