"""softmax-lab: GPU softmax on huge rows, side by side.

    import softmax_lab
    y = softmax_lab.softmax(x)                 # x: float32/float16 CuPy/torch/JAX GPU array, or torch bfloat16
    y = softmax_lab.log_softmax(x)
    dx = softmax_lab.softmax_backward(dy, y)   # and log_softmax_backward(dy, y); softmax_lab.torch: autograd
    lse = softmax_lab.logsumexp(x)             # float32 row statistics in one read (return_max=True: and the max)
    loss = softmax_lab.cross_entropy(logits, target, grad_out=logits)  # the loss, its gradient over the logits
    softmax_lab.variants()                     # name -> kernel file, launch rule, traffic model
"""

from importlib import metadata as _metadata

from .api import log_softmax, log_softmax_backward, softmax, softmax_backward
from .cross_entropy import cross_entropy
from .device import NoDeviceError, device_info
from .row_stats import logsumexp
from .variants import CannotRun, Variant, choose, get_variant, variants

try:
    __version__ = _metadata.version("softmax-lab")
except _metadata.PackageNotFoundError:  # a source checkout on PYTHONPATH
    __version__ = "0.1.0+source"

__all__ = ["__version__", "softmax", "log_softmax", "softmax_backward", "log_softmax_backward", "logsumexp", "cross_entropy", "variants", "get_variant", "choose", "Variant", "CannotRun", "device_info", "NoDeviceError"]
