"""softmax-lab: GPU softmax on huge rows, side by side.

    import softmax_lab
    y = softmax_lab.softmax(x)                 # x: float32 CuPy/torch/JAX GPU array
    softmax_lab.variants()                     # name -> kernel file, launch rule, traffic model
"""

from .api import softmax
from .device import NoDeviceError, device_info
from .variants import CannotRun, Variant, choose, get_variant, variants

__all__ = ["softmax", "variants", "get_variant", "choose", "Variant", "CannotRun", "device_info", "NoDeviceError"]
