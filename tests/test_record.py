"""benchmarks/record.sh: valid bash, every stage its header names exists, an
unknown stage fails, and no stage leaves more than 4 files in $OUT."""

import hashlib
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


def test_peer_wheels_sh_lays_out_what_quack_b_and_liger_take(tmp_path):
    """benchmarks/peer_wheels.sh over stand-in wheels (no download): the large wheel split in
    two halves that join back to its recorded sha256, each wheel in the folder record.sh's
    stage takes it from."""
    for tool in ("bash", "split", "sha256sum"):
        if shutil.which(tool) is None:
            pytest.skip(f"no {tool}")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    names = ["apache_tvm_ffi-0.1-x.whl", "nvidia_cutlass_dsl-4.8.1-x.whl", "nvidia_cutlass_dsl_libs_base-4.8.1-x.whl",
             "nvidia_cutlass_dsl_libs_core-4.8.1-x.whl", "torch_c_dlpack_ext-0.1-x.whl", "quack_kernels-0.6.5-x.whl",
             "cuda_bindings-13-x.whl", "protobuf-7-x.whl", "cuda_pathfinder-1-x.whl", "liger_kernel-0.8.5-x.whl"]
    for name in names:
        (wheels / name).write_bytes(name.encode())
    (wheels / "tests").mkdir()  # the test extra's wheels, laid out rather than downloaded
    (wheels / "tests" / "pytest-9-x.whl").write_bytes(b"pytest")
    large = bytes(range(256)) * 3 + b"tail"
    (wheels / "nvidia_cutlass_dsl_libs_cu13-4.8.1-x.whl").write_bytes(large)
    dest = tmp_path / "dest"
    subprocess.run(["bash", str(SCRIPT.with_name("peer_wheels.sh"))], check=True, capture_output=True,
                   env={"PATH": "/usr/bin:/bin", "WHEELS": str(wheels), "DEST": str(dest), "PART_BYTES": "500"})
    a, b = dest / ".whl-quack" / "a", dest / ".whl-quack" / "b"
    assert (a / "cu13.whl.part-aa").read_bytes() + (b / "cu13.whl.part-ab").read_bytes() == large
    digest, wheel_name = (b / "cu13.sha256").read_text().split()
    assert wheel_name == "nvidia_cutlass_dsl_libs_cu13-4.8.1-x.whl"
    assert digest == hashlib.sha256(large).hexdigest()
    assert sorted(p.name for p in a.glob("*.whl")) == sorted(names[:5])
    assert [p.name for p in b.glob("*.whl")] == [names[5]]
    assert sorted(p.name for p in (b / "ifmissing").iterdir()) == sorted(names[6:9])
    assert [p.name for p in (dest / ".whl").iterdir()] == [names[9]]
    assert sorted(p.name for p in (dest / ".whl-tests").iterdir()) == ["pytest-9-x.whl", "requirements.txt"]
    assert "pytest" in (dest / ".whl-tests" / "requirements.txt").read_text()
    # record.sh's quack-b joins the parts and checks them against cu13.sha256, by that file's name
    text = SCRIPT.read_text()
    assert "cu13.whl.part-aa cu13.whl.part-ab" in text and "sha256sum -c cu13.sha256" in text
    assert ".whl-quack/b/* " in text and "ifmissing" in text and ".whl/liger_kernel-*.whl" in text


def test_peer_wheels_sh_refuses_a_missing_wheel(tmp_path):
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    run = subprocess.run(["bash", str(SCRIPT.with_name("peer_wheels.sh"))], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "WHEELS": str(tmp_path), "DEST": str(tmp_path / "d")})
    assert run.returncode == 2 and "no single nvidia_cutlass_dsl_libs_cu13 wheel" in run.stderr
