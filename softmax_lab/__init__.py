"""softmax-lab: GPU softmax on huge rows, side by side.

    import softmax_lab
    y = softmax_lab.softmax(x)                 # x: float32 CuPy/torch/JAX GPU array
    softmax_lab.variants()                     # name -> kernel file, launch rule, traffic model
"""

from importlib import metadata as _metadata

from .api import softmax
from .device import NoDeviceError, device_info
from .variants import CannotRun, Variant, choose, get_variant, variants

try:
    __version__ = _metadata.version("softmax-lab")
except _metadata.PackageNotFoundError:  # a source checkout on PYTHONPATH
    __version__ = "0.1.0+source"

__all__ = ["__version__", "softmax", "variants", "get_variant", "choose", "Variant", "CannotRun", "device_info", "NoDeviceError"]
