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
    named = {s for line in re.findall(r"record\.sh ([a-z0-9\- ]+)", text) for s in line.split()}
    cases = set(re.findall(r"^    ([a-z0-9\-]+)\)", text, re.M))
    assert named <= cases and {"bench", "sweep", "profile", "profile-rows", "quack-a", "quack-b", "bench-bf16",
                               "bench-backward", "sweep-bf16", "table", "table-vocab"} <= cases


def test_the_dtype_and_op_stages_ask_for_what_results_readme_names():
    text = SCRIPT.read_text()
    readme = (SCRIPT.parent.parent / "results" / "README.md").read_text()
    for stage, needed in {"bench-bf16": ["--dtype bfloat16 --op forward", "bench_bf16.json"],
                          "bench-backward": ["--dtype bfloat16,float32 --op backward", "bench_backward.json"],
                          "sweep-bf16": ["sweep --dtype bfloat16", "sweep_bf16.json"],
                          "table": ["--dtype bfloat16,float32,float16 --op all", "dtype_op.json", "report --table"],
                          "table-vocab": ["--rows 4096 --cols 151936 --dtype bfloat16,float32,float16 --op all",
                                          "dtype_op_151936.json", "report --table"]}.items():
        body = re.search(rf"^    {stage}\)(.*?);;", text, re.M | re.S)[1]
        assert all(n in body for n in needed), stage
        assert f"`{stage}`" in readme, stage


def test_no_stage_leaves_more_than_4_files():
    text = SCRIPT.read_text()
    for stage, body in re.findall(r"^    ([a-z0-9\-]+)\)\n(.*?);;", text, re.M | re.S):
        written = set(re.findall(r'\$OUT/([\w.]+)', body))
        plotted = {"bench": 1, "sweep": 2, "profile": 1, "profile-rows": 1, "bench-bf16": 1, "bench-backward": 1,
                   "sweep-bf16": 2, "table": 1}.get(stage, 0)
        assert len(written - {"notebook.err"}) + plotted <= 4, (stage, written)


def test_an_unknown_stage_fails(tmp_path):
    p = subprocess.run(["bash", str(SCRIPT), "nope"], capture_output=True, text=True, env={"OUT": str(tmp_path),
                                                                                           "PATH": "/usr/bin:/bin"})
    assert p.returncode == 2 and "unknown stage nope" in p.stdout
