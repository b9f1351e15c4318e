"""softmax_lab.cli, run as `python -m softmax_lab` in a subprocess: bench and
sweep without a GPU fail in one line; info and plot need no GPU."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import synthetic

import softmax_lab
from softmax_lab import bench, cli

ROOT = Path(__file__).resolve().parent.parent
HAS_GPU = bench.gpu_reason() is None


def run_cli(*args, cwd):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "softmax_lab", *args], check=False, cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU: bench and sweep would run")
@pytest.mark.parametrize("command", [["bench"], ["bench", "--rows", "64", "--cols", "4099"], ["sweep"]])
def test_bench_and_sweep_without_a_gpu_fail_in_one_line(command, tmp_path):
    p = run_cli(*command, "--output", str(tmp_path / "r.json"), cwd=tmp_path)
    out = (p.stdout + p.stderr).strip()
    assert p.returncode != 0
    assert "Traceback" not in out
    assert len(out.splitlines()) == 1, out
    assert "softmax-lab plot results/*.json" in out
    assert not (tmp_path / "r.json").exists()


def test_info_compile_checks_every_kernel_without_needing_a_gpu(tmp_path):
    p = run_cli("info", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    ok = [line for line in p.stdout.splitlines() if line.strip().startswith("ok ")]
    sources = {line.split()[1] for line in ok}
    assert sources == {v.source for v in softmax_lab.variants().values()} | {"copy.cu"}
    assert "FAILED" not in p.stdout


def test_plot_writes_pngs_from_results_files(tmp_path):
    bench_path, sweep_path = synthetic.write(tmp_path)
    p = run_cli("plot", str(bench_path), str(sweep_path), "--output-dir", str(tmp_path / "png"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    written = [Path(line) for line in p.stdout.split()]
    assert [w.name for w in written] == ["bench_bandwidth.png", "bench_time.png", "sweep_sweep.png"]
    assert all(w.read_bytes().startswith(b"\x89PNG") for w in written)


def test_plot_of_a_missing_or_foreign_file_fails_in_one_line(tmp_path):
    (tmp_path / "other.json").write_text("[]")
    for name in ("missing.json", "other.json"):
        p = run_cli("plot", str(tmp_path / name), cwd=tmp_path)
        assert p.returncode != 0 and "Traceback" not in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_arguments_are_checked_before_any_device(capsys):
    for args in (["bench", "--repeats", "3"], ["bench", "--variants", "nope"], ["sweep", "--cols", "0"], []):
        with pytest.raises(SystemExit) as e:
            cli.main(args)
        assert e.value.code == 2
    assert "at least 20 repeats" in capsys.readouterr().err


@pytest.mark.gpu
def test_bench_cli_on_the_gpu(tmp_path):
    out = tmp_path / "bench.json"
    p = run_cli("bench", "--rows", "64", "--cols", "4099", "--variants", "two_pass", "--repeats", "20",
                "--output", str(out), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "two_pass" in p.stdout and "copy ceiling" in p.stdout
    doc = json.loads(out.read_text())
    assert "--variants two_pass" in doc["command"]
    synthetic.validate(doc)


def test_the_recorded_command_reads_as_typed(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/x/softmax_lab/__main__.py", "bench", "--output", "a b.json"])
    assert cli._command() == "python -m softmax_lab bench --output 'a b.json'"
    monkeypatch.setattr(sys, "argv", ["/venv/bin/softmax-lab", "sweep"])
    assert cli._command() == "softmax-lab sweep"
