"""softmax_lab.lab.cli, mostly as `python -m softmax_lab` in a subprocess: the GPU
commands without a GPU fail in one plain line; info and plot need no GPU; every
option shows its default; each exit status means one thing (cli.EXIT_*); plot
writes outside the checkout unless told, and info compiles through the kernel cache."""

import argparse
import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import synthetic
import test_plots

import softmax_lab
from softmax_lab.lab import bench, cli, profile

ROOT = Path(__file__).resolve().parent.parent
HAS_GPU = bench.gpu_reason() is None


def run_cli(*args, cwd, env=None):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), **(env or {})}
    return subprocess.run([sys.executable, "-m", "softmax_lab", *args], check=False, cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU: bench and sweep would run")
@pytest.mark.parametrize("command", [["bench"], ["bench", "--rows", "64", "--cols", "4099"], ["sweep"], ["profile"],
                                     ["context"]])
def test_gpu_commands_without_a_gpu_fail_in_one_plain_line(command, tmp_path):
    p = run_cli(*command, "--output", str(tmp_path / "r.json"), cwd=tmp_path)
    out = (p.stdout + p.stderr).strip()
    assert p.returncode == cli.EXIT_NO_DEVICE == 3
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    assert "softmax-lab plot results/*.json" in out
    assert "upgrade" not in out.lower() and "insufficient" not in out.lower()
    assert not (tmp_path / "r.json").exists()


def test_info_compile_checks_every_kernel_and_says_plainly_what_is_missing(tmp_path):
    p = run_cli("info", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    ok = [line for line in p.stdout.splitlines() if line.strip().startswith("ok ")]
    sources = {v.source for v in softmax_lab.variants().values()} | {"copy.cu"}
    sources |= {v.backward_source for v in softmax_lab.variants().values() if v.backward_source}
    sources |= {"read.cu", "cross_entropy.cu", "cross_entropy_held.cu"}  # the floor's and the loss's
    assert {line.split()[1] for line in ok} == sources
    assert sum("single_read.cu" in line and "SR_WIDE=1" in line for line in ok) == 2  # fp16 and bf16 softmax
    assert "FAILED" not in p.stdout
    assert re.search(r"CUDA runtime \d+\.\d+, NVRTC \d+\.\d+", p.stdout)
    assert not re.search(r"\b\d{5}\b", p.stdout.splitlines()[1])  # 12090 is written 12.9
    if not HAS_GPU:
        assert "no NVIDIA driver is installed" in p.stdout
        assert "upgrade" not in p.stdout.lower() and "insufficient" not in p.stdout.lower()


def test_a_reader_that_closes_the_pipe_stops_the_cli_quietly(tmp_path):
    """`lab report ... | head -1`: the pipe's reader is gone before the first write."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    try:
        p = subprocess.run([sys.executable, "-m", "softmax_lab", "report", "--table", str(ROOT / "results" / "dtype_op.json")],
                           check=False, cwd=tmp_path, env=env, stdout=write_end, stderr=subprocess.PIPE, text=True,
                           timeout=300)
    finally:
        os.close(write_end)
    assert p.returncode == cli.EXIT_BROKEN_PIPE
    assert "Traceback" not in p.stderr and "BrokenPipeError" not in p.stderr, p.stderr


def test_version(tmp_path):
    p = run_cli("--version", cwd=tmp_path)
    assert p.returncode == 0 and re.fullmatch(r"softmax-lab \d+\.\d+\.\d+.*\n", p.stdout), p.stdout


@pytest.mark.parametrize("command", ["bench", "sweep", "profile", "context", "report", "plot", "info"])
def test_every_option_says_its_default(command, capsys):
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    text = capsys.readouterr().out
    options = re.split(r"\n(?=  -)", text.split("options:", 1)[1])
    for option in options:
        if not option.strip() or option.strip().startswith("-h, --help"):
            continue
        assert "default" in option, option
        assert "(default: None)" not in option, option


def test_plot_writes_plainly_named_pngs(tmp_path):
    bench_path, sweep_path = synthetic.write(tmp_path)
    profile_path = tmp_path / "profile.json"
    profile_path.write_text(json.dumps(test_plots.profile_doc()))
    p = run_cli("plot", str(bench_path), str(sweep_path), str(profile_path), "-o", str(tmp_path / "png"),
                "--profile", str(profile_path), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    written = [Path(line) for line in p.stdout.split()]
    assert [w.name for w in written] == ["bench_time.png", "sweep.png", "grid.png", "traffic.png"]
    assert all(w.parent == tmp_path / "png" and w.read_bytes().startswith(b"\x89PNG") for w in written)


def test_plot_of_a_missing_or_foreign_file_fails_in_one_line(tmp_path):
    (tmp_path / "other.json").write_text("[]")
    for name in ("missing.json", "other.json"):
        p = run_cli("plot", str(tmp_path / name), cwd=tmp_path)
        assert p.returncode == cli.EXIT_USAGE and "Traceback" not in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_arguments_are_checked_before_any_device(capsys):
    for args in (["bench", "--repeats", "3"], ["bench", "--variants", "nope"], ["sweep", "--shape", "0x5"],
                 ["sweep", "--shape", "12"], ["bench", "--json", "--csv"], []):
        with pytest.raises(SystemExit) as e:
            cli.main(args)
        assert e.value.code == 2
    assert "at least 20 repeats" in capsys.readouterr().err


def finish(doc, tmp_path, **kw):
    args = argparse.Namespace(output=tmp_path / "out.json", json=False, csv=False, **kw)
    return cli._finish(doc, args)


def test_a_failed_check_makes_the_exit_status_non_zero(tmp_path, capsys):
    doc = synthetic.document("bench")
    assert finish(doc, tmp_path) == 0
    assert "results:" in capsys.readouterr().out
    r = doc["runs"][0]["candidates"][1]
    r.update(status="failed", stats=None, reason="check failed after the last of 30 timed calls: ...")
    assert finish(doc, tmp_path) == 1
    err = capsys.readouterr().err
    assert f"FAILED {doc['runs'][0]['shape'][0]} x {doc['runs'][0]['shape'][1]} {r['name']}: check failed" in err
    assert json.loads((tmp_path / "out.json").read_text()) == doc  # saved all the same


def test_json_and_csv_go_to_stdout_alone(tmp_path, capsys):
    doc = synthetic.document("sweep", torch=True)
    assert cli._finish(doc, argparse.Namespace(output=None, json=True, csv=False)) == 0
    assert json.loads(capsys.readouterr().out) == doc
    assert cli._finish(doc, argparse.Namespace(output=None, json=False, csv=True)) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == sum(len(run["candidates"]) for run in doc["runs"])
    statuses = {r["status"] for r in rows}
    assert statuses == {"ok", "failed"}  # quack out of shared memory on the longest rows
    assert {r["reason"] for r in rows if r["status"] == "failed"} == {"raised RuntimeError: out of shared memory"}


@pytest.mark.gpu
def test_bench_cli_on_the_gpu(tmp_path):
    out = tmp_path / "bench.json"
    p = run_cli("bench", "--rows", "64", "--cols", "4099", "--variants", "two_pass", "--repeats", "20", "--seed", "3",
                "--output", str(out), "--no-progress", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "two_pass" in p.stdout and "copy ceiling" in p.stdout
    doc = json.loads(out.read_text())
    assert "--variants two_pass" in doc["command"] and doc["method"]["seed"] == 3
    synthetic.validate(doc)


def test_the_recorded_command_reads_as_typed(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/x/softmax_lab/__main__.py", "bench", "--output", "a b.json"])
    assert cli._command() == "python -m softmax_lab bench --output 'a b.json'"
    monkeypatch.setattr(sys, "argv", ["/venv/bin/softmax-lab", "sweep"])
    assert cli._command() == "softmax-lab sweep"


def test_the_profile_table_names_every_candidate():
    doc = test_plots.profile_doc()
    doc["runs"][0]["candidates"][5].update(status="skipped", reason="no kernel", measured=None, measured_passes=None)
    text = profile.format_profile(doc)
    for r in doc["runs"][0]["candidates"]:
        assert r["name"] in text
    assert "SKIPPED: no kernel" in text and "1.00+1.00" in text


def test_dtype_and_op_take_lists_and_groups_and_refuse_the_rest(monkeypatch, capsys):
    seen = {}

    def fake(*args, **kw):
        seen.update(kw)
        return synthetic.document("bench", torch=True, pairs=[(d, o) for d in kw["dtypes"] for o in kw["ops"]])

    monkeypatch.setattr(bench, "gpu_reason", lambda: None)
    monkeypatch.setattr(bench, "run_bench", fake)
    assert cli.main(["bench", "--dtype", "bfloat16,float32", "--op", "backward"]) == 0
    assert seen["dtypes"] == ("bfloat16", "float32") and seen["ops"] == ("softmax_backward", "log_softmax_backward")
    out = capsys.readouterr().out
    assert "by dtype and op:" in out and "bfloat16  log_softmax_backward" in out
    assert cli.main(["bench"]) == 0
    assert seen["dtypes"] == ("float32",) and seen["ops"] == ("softmax",)  # the headline
    capsys.readouterr()
    for args in (["bench", "--dtype", "float64"], ["sweep", "--op", "softmax,nope"], ["profile", "--dtype", "all"]):
        with pytest.raises(SystemExit) as e:
            cli.main(args)
        assert e.value.code == 2
    assert "'float64' is not one of float32, float16, bfloat16, all" in capsys.readouterr().err


def test_report_prints_the_tables_and_the_dtype_op_table(tmp_path):
    doc = synthetic.document("bench", torch=True, pairs=[("float32", "softmax"), ("bfloat16", "softmax_backward")])
    path = tmp_path / "bench_bf16.json"
    path.write_text(json.dumps(doc))
    p = run_cli("report", str(path), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "x floor" in p.stdout and "by dtype and op:" in p.stdout
    p = run_cli("report", "--table", str(path), str(tmp_path / "missing.json"), cwd=tmp_path)
    assert p.returncode == cli.EXIT_USAGE and len(p.stderr.strip().splitlines()) == 1
    table = p.stdout.splitlines()
    assert table[0] == f"{path}:" and table[1].split()[-4:] == ["auto", "torch", "compile", "quack"]
    assert table[4].split()[3:5] == ["bfloat16", "softmax_backward"]


def test_report_takes_every_file_plot_takes_and_a_profile_is_not_a_failure(tmp_path):
    bench_path, sweep_path = synthetic.write(tmp_path)
    profile_path = tmp_path / "profile.json"
    profile_path.write_text(json.dumps(test_plots.profile_doc()))
    p = run_cli("report", str(bench_path), str(profile_path), str(sweep_path), cwd=tmp_path)
    assert p.returncode == cli.EXIT_OK and not p.stderr, p.stderr
    assert f"{profile_path}:\nprofile on " in p.stdout and "measured r+w" in p.stdout  # the profile's table
    p = run_cli("report", "--table", str(profile_path), str(bench_path), cwd=tmp_path)
    assert p.returncode == cli.EXIT_OK and not p.stderr, p.stderr
    note = "profile: measured traffic, no table by dtype and op (report without --table prints its table, plot draws it)"
    assert p.stdout.splitlines()[:2] == [f"{profile_path}:", note]


def test_plot_without_o_writes_outside_the_checkout_and_prints_each_path(tmp_path):
    results = tmp_path / "checkout" / "results"
    results.mkdir(parents=True)
    synthetic.write(results)
    before = sorted(results.iterdir())
    p = run_cli("plot", "results/bench.json", "results/sweep.json", cwd=results.parent,
                env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert p.returncode == cli.EXIT_OK, p.stderr
    assert sorted(results.iterdir()) == before  # nothing new, nothing rewritten beside the JSON
    written = [Path(line) for line in p.stdout.splitlines()]
    assert [w.name for w in written] == ["bench_time.png", "sweep.png", "grid.png"]
    assert all(w.parent == tmp_path / "cache" / "softmax_lab" / "plots" and w.is_file() for w in written)


@pytest.mark.parametrize("output", ["out.png", "OUT.PNG", "a/b/c.png", "a_file", "a_file/below"])
def test_plot_o_naming_a_file_is_a_usage_error_and_makes_nothing(output, tmp_path):
    bench_path, _ = synthetic.write(tmp_path / "in")
    (tmp_path / "a_file").write_text("not a folder")
    before = sorted(tmp_path.rglob("*"))
    p = run_cli("plot", str(bench_path), "-o", output, cwd=tmp_path)
    assert p.returncode == cli.EXIT_USAGE == 2
    assert "Traceback" not in p.stderr and "error: argument -o/--output:" in p.stderr, p.stderr
    assert not p.stdout and sorted(tmp_path.rglob("*")) == before


def test_plot_o_names_a_folder_that_is_made_if_missing(tmp_path):
    bench_path, _ = synthetic.write(tmp_path)
    p = run_cli("plot", str(bench_path), "-o", "new/figures", cwd=tmp_path)
    assert p.returncode == cli.EXIT_OK, p.stderr
    assert p.stdout.split() == [str(Path("new/figures/bench_time.png"))]
    assert (tmp_path / "new" / "figures" / "bench_time.png").is_file()


def test_the_exit_statuses_are_distinct_and_documented_in_help(capsys):
    codes = {"ok": cli.EXIT_OK, "check": cli.EXIT_CHECK_FAILED, "usage": cli.EXIT_USAGE,
             "device": cli.EXIT_NO_DEVICE, "pipe": cli.EXIT_BROKEN_PIPE}
    assert codes == {"ok": 0, "check": 1, "usage": 2, "device": 3, "pipe": 141}
    for command in ([], ["plot"], ["report"], ["bench"]):
        with pytest.raises(SystemExit):
            cli.main([*command, "--help"])
        epilog = capsys.readouterr().out.split("exit status:", 1)[1]
        assert [int(line.split()[0]) for line in epilog.splitlines() if line[2:3].isdigit()] == sorted(codes.values())


def test_exit_status_1_is_a_failed_check_alone(monkeypatch, capsys):
    failed = synthetic.document("bench")
    failed["runs"][0]["candidates"][0].update(status="failed", stats=None, reason="check failed after the first call")
    monkeypatch.setattr(bench, "gpu_reason", lambda: None)
    monkeypatch.setattr(bench, "run_bench", lambda *a, **kw: failed)
    assert cli.main(["bench"]) == cli.EXIT_CHECK_FAILED
    monkeypatch.setattr(bench, "run_bench", lambda *a, **kw: synthetic.document("bench"))
    assert cli.main(["bench"]) == cli.EXIT_OK
    capsys.readouterr()


def test_exit_status_3_is_nothing_to_run_on(monkeypatch, capsys):
    monkeypatch.setattr(bench, "gpu_reason", lambda: "no GPU, said plainly")
    for command in ("bench", "sweep", "profile"):
        assert cli.main([command]) == cli.EXIT_NO_DEVICE
        err = capsys.readouterr().err
        assert err.startswith(f"softmax-lab {command}: no GPU, said plainly.") and cli.RECORDED_HINT in err
        assert str(cli.default_plot_dir()) in err  # where plot will write
    monkeypatch.setattr(bench, "gpu_reason", lambda: None)  # a GPU, but no Nsight Compute
    assert cli.main(["profile", "--ncu", "/no/such/ncu"]) == cli.EXIT_NO_DEVICE
    assert "Nsight Compute" in capsys.readouterr().err


def test_exit_status_2_is_a_bad_command_line_or_an_unreadable_input(tmp_path, capsys):
    (tmp_path / "other.json").write_text("[]")
    with pytest.raises(SystemExit) as e:
        cli.main(["plot"])
    assert e.value.code == cli.EXIT_USAGE
    for command in ("plot", "report"):
        assert cli.main([command, str(tmp_path / "other.json")]) == cli.EXIT_USAGE
        assert cli.main([command, str(tmp_path / "missing.json")]) == cli.EXIT_USAGE
    assert cli.main(["plot", str(tmp_path / "other.json"), "--profile", str(tmp_path / "missing.json")]) == 2
    capsys.readouterr()


def test_info_compiles_each_build_once_then_reads_the_kernel_cache(tmp_path, monkeypatch, capsys):
    """NVRTC replaced by a counter: the first info compiles every build, the second none."""
    from softmax_lab import loader

    monkeypatch.setenv("SOFTMAX_LAB_CACHE_DIR", str(tmp_path / "cache"))
    compiled = []

    def fake_nvrtc(filename, arch, defines=None, extra=()):
        compiled.append((filename, arch, tuple(sorted((defines or {}).items()))))
        return b"\x7fELF" + bytes(3 * 1024), ""

    monkeypatch.setattr(loader, "nvrtc_cubin", fake_nvrtc)
    assert cli.main(["info"]) == cli.EXIT_OK
    first = capsys.readouterr().out
    builds = len(compiled)
    assert builds > 50 and len(set(compiled)) == builds  # each build compiled once
    assert first.count(" (3 KiB cubin)") == builds and f"{builds} of {builds} builds compiled" in first
    assert str(tmp_path / "cache") in first
    assert cli.main(["info"]) == cli.EXIT_OK
    assert len(compiled) == builds  # the second run compiled nothing
    assert capsys.readouterr().out == first


def test_plot_takes_several_profiles_and_each_bench_figure_finds_its_own(tmp_path, monkeypatch):
    from softmax_lab.lab import plots

    bench_path = tmp_path / "bench_bf16.json"
    bench_path.write_text(json.dumps(synthetic.document("bench", torch=True, pairs=[("bfloat16", "softmax")])))
    fp32, bf16 = test_plots.profile_doc(), test_plots.profile_doc()
    for run in bf16["runs"]:
        run["dtype"] = "bfloat16"
    (tmp_path / "profile.json").write_text(json.dumps(fp32))
    (tmp_path / "profile_bf16.json").write_text(json.dumps(bf16))
    seen = []
    monkeypatch.setattr(plots, "write_all", lambda doc, out, profile_doc=None, suffix="": seen.append(profile_doc) or [])
    assert cli.main(["plot", str(bench_path), "--profile", str(tmp_path / "profile.json"),
                     str(tmp_path / "profile_bf16.json"), "-o", str(tmp_path / "png")]) == cli.EXIT_OK
    (merged,) = seen
    shape = bf16["runs"][0]["shape"]
    assert plots.matching_run(merged, shape, ("bfloat16", "softmax")) == bf16["runs"][0]
    assert plots.matching_run(merged, shape) == fp32["runs"][0]
