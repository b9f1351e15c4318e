"""benchmarks/record.sh: valid bash, every stage its header names exists, an
unknown stage fails, and no stage leaves more than 4 files in $OUT."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "record.sh"


def test_record_sh_is_valid_bash():
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_the_stages_in_its_header_are_the_stages_it_runs():
    text = SCRIPT.read_text()
    named = {s for line in re.findall(r"record\.sh ([a-z\- ]+)", text) for s in line.split()}
    cases = set(re.findall(r"^    ([a-z\-]+)\)", text, re.M))
    assert named <= cases and {"bench", "sweep", "profile", "profile-rows", "quack-a", "quack-b"} <= cases


def test_no_stage_leaves_more_than_4_files():
    text = SCRIPT.read_text()
    for stage, body in re.findall(r"^    ([a-z\-]+)\)\n(.*?);;", text, re.M | re.S):
        written = set(re.findall(r'\$OUT/([\w.]+)', body))
        plotted = {"bench": 1, "sweep": 2, "profile": 1, "profile-rows": 1}.get(stage, 0)
        assert len(written - {"notebook.err"}) + plotted <= 4, (stage, written)


def test_an_unknown_stage_fails(tmp_path):
    p = subprocess.run(["bash", str(SCRIPT), "nope"], capture_output=True, text=True, env={"OUT": str(tmp_path),
                                                                                           "PATH": "/usr/bin:/bin"})
    assert p.returncode == 2 and "unknown stage nope" in p.stdout
