"""Runs a Python script under compute-sanitizer, for the GPU tests of each kernel family."""

import os
import shutil
import subprocess
import sys

import pytest


def run_sanitized(tool: str, script_text: str, tmp_path, timeout: int = 900) -> str:
    """Run script_text under `compute-sanitizer --tool tool` and return its stdout; skip where the
    sanitizer is not installed.  Fails unless the script exits 0, prints "sanitized" (it ran to its
    end) and the tool reports no error or hazard."""
    exe = shutil.which("compute-sanitizer")
    if exe is None:
        pytest.skip("compute-sanitizer is not installed")
    script = tmp_path / "run.py"
    script.write_text(script_text)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([exe, "--tool", tool, "--error-exitcode", "3", sys.executable, str(script)],
                          capture_output=True, text=True, env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "sanitized" in proc.stdout, proc.stdout[-3000:]
    assert "ERROR SUMMARY: 0 errors" in proc.stdout or "RACECHECK SUMMARY: 0 hazards" in proc.stdout, proc.stdout[-3000:]
    return proc.stdout
