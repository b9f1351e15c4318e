import atexit
import fcntl
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# A kernel cache of this test run's own, so runs never share a stale one; removed at exit.
if "SOFTMAX_LAB_CACHE_DIR" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="softmax_lab_cache_")
    os.environ["SOFTMAX_LAB_CACHE_DIR"] = _cache
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)


def _gpu_missing_reason():
    try:
        from softmax_lab.device import require_device

        require_device()
    except RuntimeError as e:
        return str(e)
    return None


_REASON = _gpu_missing_reason()


def pytest_collection_modifyitems(config, items):
    if _REASON is None:
        return
    skip = pytest.mark.skip(reason=f"no GPU: {_REASON}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _one_device_memory_hog_at_a_time(request):
    """The GPU tests above 2^31 elements hold tens of GB of device memory each;
    under `-n auto` (README) they take turns, by a lock file that every worker
    sees (three at once ran out of an H200's 140 GB)."""
    if "above_2_to" not in request.node.name:
        yield
        return
    with open(Path(tempfile.gettempdir()) / "softmax_lab_device_memory.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
