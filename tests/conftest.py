import atexit
import os
import shutil
import tempfile

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
    # Under `-n auto --dist loadgroup` (README): the GPU tests above 2^31
    # elements hold tens of GB of device memory each, so they share one worker,
    # one at a time (three at once ran out of an H200's 140 GB); the install
    # tests share one so that their module's clone and venv are made once.
    for item in items:
        if "above_2_to" in item.name:
            item.add_marker(pytest.mark.xdist_group("device_memory"))
        elif "install" in item.keywords:
            item.add_marker(pytest.mark.xdist_group("install"))
    if _REASON is None:
        return
    skip = pytest.mark.skip(reason=f"no GPU: {_REASON}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
