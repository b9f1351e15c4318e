"""Device descriptions the pure tests plan for, and the single_read builds of representative rows."""

from softmax_lab.device import DeviceInfo
from softmax_lab.variants import single_read as SR

H200 = DeviceInfo(0, "NVIDIA H200", 90, 132, 60 * 2**20, 232448, 233472)
A100 = DeviceInfo(0, "NVIDIA A100", 80, 108, 40 * 2**20, 166912, 167936)
SMALL_HOPPER = DeviceInfo(0, "a smaller sm_90 part", 90, 66, 25 * 2**20, 101376, 102400)  # a MIG-like slice

SINGLE_READ_CONFIGS = SR.sample_configs(H200)  # the single_read builds the compile checks cover
