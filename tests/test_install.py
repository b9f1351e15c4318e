"""A plain install, as a newcomer makes it: the checkout's HEAD cloned, `pip install .`
(not editable) into a fresh venv, whose size is measured (at most 1 GB), the
kernels compiled by the NVRTC of the pip wheels (no system CUDA), and every
notebook executed from the clone's notebooks/ folder by that venv's Python,
with no PYTHONPATH and no environment variable of ours.

Marked `install` (select it with -m install); it runs in the README's test
command, and so in CI, too.  About a minute with a warm pip cache.

The clone and the venv (about 850 MB) live in a temporary directory that is
removed when the test ends, whether it passed or failed.  It is one test, not
one per check, so that pytest-xdist cannot spread the checks over workers that
would each build (or remove) the install under the others.
"""

import os
import shutil
import subprocess
import sys
import tempfile
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


def _head() -> str | None:
    """The checkout's HEAD commit, or None where there is no git checkout to clone."""
    if shutil.which("git") is None:
        return None
    p = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return p.stdout.strip() if p.returncode == 0 else None


def _index_reason(tmp: Path, env: dict) -> str | None:
    """None where pip reaches a package index (the build backend downloads), else why not:
    a GPU machine without a network cannot make the install this test is about."""
    p = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--retries", "1", "--timeout", "15",
                        "-d", str(tmp / "probe"), "setuptools>=68"],
                       env=env, capture_output=True, text=True, timeout=300, check=False)
    return None if p.returncode == 0 else f"pip reaches no package index here: {(p.stderr.strip() or '?').splitlines()[-1]}"


def _environment(tmp: Path, venv: Path) -> dict:
    """A newcomer's environment: none of our variables, the venv first on PATH, caches in tmp."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "CUDA_PATH", "CUDA_HOME", "LD_LIBRARY_PATH")
           and not k.startswith(("SOFTMAX_LAB", "PYTEST_XDIST"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", CUPY_CACHE_DIR=str(tmp / "cupy-cache"),
               MPLBACKEND="Agg", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def _check_kernels_compile_with_the_nvrtc_of_the_wheels(clone: Path, python: str, env: dict) -> None:
    p = subprocess.run([python, "-c", NVRTC_FROM_WHEELS], cwd=clone / "notebooks", env=env, capture_output=True,
                       text=True, timeout=300, check=False)
    assert p.returncode == 0, "NVRTC is not the wheels':\n" + p.stdout + p.stderr
    p = subprocess.run(["softmax-lab", "info"], cwd=clone / "notebooks", env=env, capture_output=True, text=True,
                       timeout=600, check=False)
    assert p.returncode == 0 and "FAILED" not in p.stdout, "softmax-lab info:\n" + p.stdout + p.stderr
    assert "ok     single_read.cu sm_90" in p.stdout


def _check_every_notebook_runs(clone: Path, python: str, env: dict) -> None:
    p = subprocess.run([python, "-c", "import softmax_lab; print(softmax_lab.__file__)"], cwd=clone / "notebooks",
                       env=env, capture_output=True, text=True, check=True)
    assert "site-packages" in p.stdout, p.stdout  # the installed package, not the clone's folder
    p = subprocess.run([python, "-c", RUN_NOTEBOOKS], cwd=clone, env=env, capture_output=True, text=True,
                       timeout=900, check=False)
    assert p.returncode == 0, "the notebooks:\n" + p.stdout[-3000:] + p.stderr[-5000:]
    names = sorted(path.name for path in (clone / "notebooks").glob("*.ipynb"))
    assert [line[6:] for line in p.stdout.splitlines() if line.startswith("===== ")] == names
    assert "site-packages/results" not in p.stdout
    if (clone / "results" / "bench.json").is_file():
        # found beside notebooks/ (the notes name the folder and file, not the checkout's path)
        assert "Recorded on" in p.stdout and "(results/bench.json)" in p.stdout


@pytest.mark.install
def test_a_plain_install_of_head():
    """At most 1 GB; the kernels compile with the wheels' NVRTC; every notebook runs."""
    head = _head()
    if head is None:
        pytest.skip("not a git checkout: nothing to clone")
    with tempfile.TemporaryDirectory(prefix="softmax-lab-install-", ignore_cleanup_errors=True) as folder:
        tmp = Path(folder)
        clone, venv = tmp / "softmax-lab", tmp / "venv"
        env = _environment(tmp, venv)
        reason = _index_reason(tmp, env)
        if reason is not None:
            pytest.skip(reason)
        python = str(venv / "bin" / "python")
        subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(clone)], check=True)
        subprocess.run(["git", "-C", clone, "checkout", "--quiet", "--detach", head], check=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", "."], cwd=clone, env=env, check=True, timeout=900)

        size = _venv_bytes(venv)
        print(f"fresh venv after `pip install .`: {size / 1e6:.0f} MB")
        assert size <= MAX_VENV_BYTES, f"a plain install takes {size / 1e6:.0f} MB, more than 1 GB"

        _check_kernels_compile_with_the_nvrtc_of_the_wheels(clone, python, env)

        subprocess.run([python, "-m", "pip", "install", "-q", *NOTEBOOK_TOOLS], cwd=clone, env=env, check=True,
                       timeout=600)
        _check_every_notebook_runs(clone, python, env)
    assert not tmp.exists()
