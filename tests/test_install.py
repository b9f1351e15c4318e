"""A plain install, as a newcomer makes it: the checkout's HEAD cloned, `pip install .`
(not editable) into a fresh venv, whose size is measured (at most 1 GB), the
kernels compiled by the NVRTC of the pip wheels (no system CUDA), and every
notebook executed from the clone's notebooks/ folder by that venv's Python,
with no PYTHONPATH and no environment variable of ours.

Marked `install` (select it with -m install); it runs in the README's test
command, and so in CI, too.  About a minute with a warm pip cache.
"""

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_VENV_BYTES = 10**9
NOTEBOOK_TOOLS = ("nbclient", "nbformat", "ipykernel")

RUN_NOTEBOOKS = r"""
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

for path in sorted(Path("notebooks").glob("*.ipynb")):
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": "notebooks"}}).execute()
    text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    print(f"===== {path.name}\n{text}")
"""

NVRTC_FROM_WHEELS = r"""
import cupy, sys
major, minor = cupy.cuda.nvrtc.getVersion()
paths = {line.split()[-1] for line in open("/proc/self/maps") if "libnvrtc" in line}
print(f"NVRTC {major}.{minor} from", *sorted(paths))
assert paths and all(p.startswith(sys.prefix) for p in paths), paths
"""


def _venv_bytes(venv: Path) -> int:
    total = 0
    for folder, _, files in os.walk(venv):
        for name in files:
            st = os.lstat(os.path.join(folder, name))
            total += st.st_size
    return total


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(clone, venv python, env, venv bytes) of a fresh non-editable install of HEAD,
    made once per test run: under pytest-xdist the workers share it, the first
    to take the lock builds it (xdist's recipe for a fixture run once)."""
    if shutil.which("git") is None or subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                                                      check=False).returncode != 0:
        pytest.skip("not a git checkout: nothing to clone")
    base = tmp_path_factory.getbasetemp()
    tmp = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "install"  # the run's, shared
    tmp.mkdir(exist_ok=True)
    clone, venv, done = tmp / "softmax-lab", tmp / "venv", tmp / "venv-bytes"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "CUDA_PATH", "CUDA_HOME", "LD_LIBRARY_PATH")
           and not k.startswith(("SOFTMAX_LAB", "PYTEST_XDIST"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", CUPY_CACHE_DIR=str(tmp / "cupy-cache"),
               MPLBACKEND="Agg", PIP_DISABLE_PIP_VERSION_CHECK="1")
    python = str(venv / "bin" / "python")
    with open(tmp / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.is_file():
            shutil.rmtree(clone, ignore_errors=True)  # what a failed build left
            shutil.rmtree(venv, ignore_errors=True)
            head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True,
                                  check=True).stdout.strip()
            subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(clone)], check=True)
            subprocess.run(["git", "-C", clone, "checkout", "--quiet", "--detach", head], check=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run([python, "-m", "pip", "install", "-q", "."], cwd=clone, env=env, check=True, timeout=900)
            size = _venv_bytes(venv)
            subprocess.run([python, "-m", "pip", "install", "-q", *NOTEBOOK_TOOLS], cwd=clone, env=env, check=True,
                           timeout=600)
            done.write_text(str(size))
    return clone, python, env, int(done.read_text())


@pytest.mark.install
def test_a_plain_install_is_at_most_1_gb(installed):
    size = installed[3]
    print(f"fresh venv after `pip install .`: {size / 1e6:.0f} MB")
    assert size <= MAX_VENV_BYTES, f"{size / 1e6:.0f} MB"


@pytest.mark.install
def test_kernels_compile_with_the_nvrtc_of_the_wheels(installed):
    clone, python, env, _ = installed
    p = subprocess.run([python, "-c", NVRTC_FROM_WHEELS], cwd=clone / "notebooks", env=env, capture_output=True,
                       text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run(["softmax-lab", "info"], cwd=clone / "notebooks", env=env, capture_output=True, text=True,
                       timeout=600, check=False)
    assert p.returncode == 0 and "FAILED" not in p.stdout, p.stdout + p.stderr
    assert "ok     single_read.cu sm_90" in p.stdout


@pytest.mark.install
def test_every_notebook_runs_after_a_plain_install(installed):
    clone, python, env, _ = installed
    p = subprocess.run([python, "-c", "import softmax_lab; print(softmax_lab.__file__)"], cwd=clone / "notebooks",
                       env=env, capture_output=True, text=True, check=True)
    assert "site-packages" in p.stdout, p.stdout  # the installed package, not the clone's folder
    p = subprocess.run([python, "-c", RUN_NOTEBOOKS], cwd=clone, env=env, capture_output=True, text=True,
                       timeout=900, check=False)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-5000:]
    names = sorted(path.name for path in (clone / "notebooks").glob("*.ipynb"))
    assert [line[6:] for line in p.stdout.splitlines() if line.startswith("===== ")] == names
    assert "site-packages/results" not in p.stdout
    if (clone / "results" / "bench.json").is_file():
        assert f"({clone / 'results' / 'bench.json'})" in p.stdout  # found beside notebooks/
