"""softmax_lab.lab.profile: ncu's CSV read on synthetic output in ncu's formats (no GPU
here), summed per call, recorded against the model, and the document's schema."""

import shutil
from pathlib import Path

import pytest
import synthetic

from softmax_lab.lab import candidates as cat
from softmax_lab.lab import profile

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')
VALUES = {  # per kernel: metric -> (unit, value)
    "multi_block_partials": {"dram__bytes_read.sum": ("Gbyte", "1.07"), "dram__bytes_write.sum": ("Kbyte", "64"),
                             "lts__t_sector_hit_rate.pct": ("%", "3.5"),
                             "dram__throughput.avg.pct_of_peak_sustained_elapsed": ("%", "90"),
                             "launch__registers_per_thread": ("register/thread", "32"),
                             "sm__warps_active.avg.pct_of_peak_sustained_active": ("%", "80"),
                             "gpu__time_duration.sum": ("usecond", "300")},
    "multi_block_combine": {"dram__bytes_read.sum": ("byte", "2,048"), "dram__bytes_write.sum": ("byte", "1,024"),
                            "lts__t_sector_hit_rate.pct": ("%", "50"),
                            "dram__throughput.avg.pct_of_peak_sustained_elapsed": ("%", "1"),
                            "launch__registers_per_thread": ("register/thread", "16"),
                            "sm__warps_active.avg.pct_of_peak_sustained_active": ("%", "20"),
                            "gpu__time_duration.sum": ("nsecond", "3,000")},
    "multi_block_write": {"dram__bytes_read.sum": ("Mbyte", "1,073.741824"), "dram__bytes_write.sum": ("Gbyte", "1.07"),
                          "lts__t_sector_hit_rate.pct": ("%", "2"),
                          "dram__throughput.avg.pct_of_peak_sustained_elapsed": ("%", "92"),
                          "launch__registers_per_thread": ("register/thread", "40"),
                          "sm__warps_active.avg.pct_of_peak_sustained_active": ("%", "85"),
                          "gpu__time_duration.sum": ("usecond", "500")},
}


def details_csv(calls=2):
    lines = ["==PROF== Connected to process 4242 (/usr/bin/python3.12)",
             '==PROF== Profiling "multi_block_partials" - 0: 0%....50%....100% - 3 passes', HEADER]
    launch = 0
    for _ in range(calls):
        for kernel, metrics in VALUES.items():
            for metric, (unit, value) in metrics.items():
                lines.append(f'"{launch}","4242","python3.12","127.0.0.1","{kernel}","1","13","(512, 1, 1)",'
                             f'"(8192, 1, 1)","0","9.0","Command line profiler metrics","{metric}","{unit}","{value}"')
            launch += 1
    lines.append("==PROF== Disconnected from process 4242")
    return "\n".join(lines) + "\n"


def raw_csv():
    metrics = list(profile.METRICS)
    head = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
            '"Device","CC",' + ",".join(f'"{m}"' for m in metrics))
    units = ",".join(['""'] * 11 + [f'"{VALUES["multi_block_write"][m][0]}"' for m in metrics])
    row = ('"0","1","python","host","multi_block_write","1","7","(512, 1, 1)","(8192, 1, 1)","0","9.0",'
           + ",".join(f'"{VALUES["multi_block_write"][m][1]}"' for m in metrics))
    return "\n".join([head, units, row])


def test_the_details_page_gives_one_launch_per_kernel_call_in_base_units():
    launches = profile.parse_csv(details_csv())
    assert [launch["kernel"] for launch in launches] == list(VALUES) * 2
    first = launches[0]
    assert first["dram_read_bytes"] == pytest.approx(1.07e9) and first["dram_write_bytes"] == 64e3
    assert first["duration_ns"] == 300e3 and first["registers_per_thread"] == 32
    assert launches[1]["dram_read_bytes"] == 2048 and launches[1]["duration_ns"] == 3000


def test_the_raw_page_with_its_row_of_units_reads_the_same():
    (launch,) = profile.parse_csv(raw_csv())
    assert launch == profile.parse_csv(details_csv(1))[2]


def test_output_without_a_header_gives_no_launch():
    assert profile.parse_csv("==PROF== Connected\n==ERROR== the profiler has no permission\n") == []
    assert profile.parse_csv("") == []


def test_a_multi_kernel_call_is_summed_and_rates_weighted_by_duration():
    m = profile.summarize(profile.parse_csv(details_csv(calls=2)), calls=2)
    assert m["kernels"] == list(VALUES) and m["launches_per_call"] == 3
    assert m["dram_read_bytes"] == pytest.approx(1.07e9 + 2048 + 1073.741824e6)
    assert m["dram_write_bytes"] == pytest.approx(64e3 + 1024 + 1.07e9)
    assert m["duration_ms"] == pytest.approx(0.803)
    assert m["registers_per_thread"] == 40
    assert m["dram_throughput_pct"] == pytest.approx((90 * 300 + 1 * 3 + 92 * 500) / 803)
    with pytest.raises(ValueError):
        profile.summarize([], 1)


def test_a_record_sets_the_measured_passes_beside_the_model():
    rows, cols = 1024, 262144  # 1 GiB
    mb = next(c for c in cat.candidates() if c.name == "multi_block")
    m = profile.summarize(profile.parse_csv(details_csv()), calls=2)
    rec = profile.candidate_record(mb, rows, cols, "ok", None, m)
    assert rec["model"]["reads"] == 2 and rec["model"]["bytes"] == 3 * 2**30
    assert rec["measured_passes"]["reads"] == pytest.approx((1.07e9 + 2048 + 1073.741824e6) / 2**30)
    doc = document([{"shape": [rows, cols], "dtype": "float32", "data_bytes": rows * cols * 4,
                     "candidates": [rec, profile.candidate_record(cat.COPIES[0], rows, cols, "skipped", "no kernel")]}])
    synthetic.validate(doc, "profile_schema.json")


def document(runs):
    from softmax_lab.lab import records

    doc = records.make_document("profile", runs, dict(synthetic.DEVICE), dict(synthetic.VERSIONS),
                                {"calls": 2, "metrics": list(profile.METRICS), "tool": "ncu (synthetic)",
                                 "command": "ncu ...", "summed": "per call"}, command="softmax-lab profile")
    doc["schema"] = profile.SCHEMA
    return doc


def test_the_ncu_command_profiles_only_the_calls_in_the_range():
    cmd = profile.ncu_command("ncu", "two_pass", 4096, 393216, 2, "/tmp/r.json")
    assert cmd[:3] == ["ncu", "--clock-control", "none"]
    assert "--profile-from-start" in cmd and cmd[cmd.index("--profile-from-start") + 1] == "off"
    assert cmd[cmd.index("--metrics") + 1].split(",") == list(profile.METRICS)
    assert cmd[-10:] == ["--child", "two_pass", "--rows", "4096", "--cols", "393216", "--calls", "2",
                         "--result", "/tmp/r.json"]


def test_sweep_shapes_are_a_gib_each():
    for rows, cols in profile.sweep_shapes():
        assert 2**29 < rows * cols * 4 < 2**31


@pytest.mark.gpu
@pytest.mark.skipif(shutil.which("ncu") is None, reason="Nsight Compute (ncu) is not on PATH")
def test_profile_two_variants_on_the_gpu():
    doc = profile.run_profile([(256, 65536)], ["two_pass", "multi_block"], progress=None)
    synthetic.validate(doc, "profile_schema.json")
    recs = {r["name"]: r for r in doc["runs"][0]["candidates"]}
    assert recs["multi_block"]["status"] == "ok" and recs["multi_block"]["measured"]["launches_per_call"] == 3
    assert recs["two_pass"]["measured_passes"]["writes"] == pytest.approx(1, rel=0.1)


def test_the_passes_table_sets_measured_beside_model_per_row_length():
    rows, cols = 1024, 262144
    mb = next(c for c in cat.candidates() if c.name == "multi_block")
    m = profile.summarize(profile.parse_csv(details_csv()), calls=2)
    doc = document([{"shape": [rows, cols], "dtype": "float32", "data_bytes": rows * cols * 4,
                     "candidates": [profile.candidate_record(mb, rows, cols, "ok", None, m),
                                    profile.candidate_record(cat.COPIES[0], rows, cols, "skipped", "no kernel")]}])
    text = profile.format_passes(doc)
    assert "262144 cols" in text
    assert "multi_block" in text and "2.00/2r 1.00/1w" in text
    assert text.splitlines()[-1].split() == ["copy.memcpy", "-"]


def test_load_all_joins_the_recorded_profiles_of_a_folder(tmp_path):
    from softmax_lab.lab import records

    assert profile.load_all(tmp_path) is None
    rows, cols = 1024, 262144
    mb = next(c for c in cat.candidates() if c.name == "multi_block")

    def run(r, c):
        return {"shape": [r, c], "dtype": "float32", "data_bytes": r * c * 4,
                "candidates": [profile.candidate_record(mb, r, c, "skipped", "no ncu")]}

    records.save(document([run(4096, 393216)]), tmp_path / "profile.json")
    records.save(document([run(rows, cols), run(4096, 393216)]), tmp_path / "profile_rows.json")
    doc = profile.load_all(tmp_path)
    assert [r["shape"] for r in doc["runs"]] == [[4096, 393216], [rows, cols]]
    synthetic.validate(doc, "profile_schema.json")


FAKE_NCU = '''#!{python}
"""Stands in for ncu: answers for the child it was asked to run, without a GPU."""
import json, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler (fake)"); sys.exit(0)
get = lambda flag: args[args.index(flag) + 1]
name, rows, cols, calls = get("--child"), int(get("--rows")), int(get("--cols")), int(get("--calls"))
status = {{"quack.softmax": "skipped"}}.get(name, "ok")
open(get("--result"), "w").write(json.dumps({{"status": status, "reason": "no quack" if status != "ok" else None}}))
if name == "copy.memcpy" or status != "ok":
    sys.exit(0)
print("==PROF== Connected to process 1")
print({header!r})
for i in range(calls):
    for metric, unit, value in [("dram__bytes_read.sum", "byte", rows * cols * 4),
                                ("dram__bytes_write.sum", "byte", rows * cols * 4),
                                ("gpu__time_duration.sum", "nsecond", 1000)]:
        print(f'"{{i}}","1","python","h","{{name}}_kernel","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","s","{{metric}}","{{unit}}","{{value}}"')
'''


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch) -> Path:
    """FAKE_NCU as an executable, and the reference H200 as the device."""
    import sys

    from softmax_lab import device

    ncu = tmp_path / "ncu"
    ncu.write_text(FAKE_NCU.format(python=sys.executable, header=HEADER))
    ncu.chmod(0o755)
    monkeypatch.setattr(device, "require_device", lambda: 0)
    monkeypatch.setattr(device, "device_info", lambda *a: cat.reference_device())
    return ncu


def test_run_profile_records_each_candidate_from_a_fake_ncu(fake_ncu, tmp_path):
    ncu = fake_ncu
    doc = profile.run_profile([(64, 4096)], ["two_pass", "quack.softmax"], ncu=str(ncu), progress=None,
                              command="softmax-lab profile (test)")
    synthetic.validate(doc, "profile_schema.json")
    recs = {r["name"]: r for r in doc["runs"][0]["candidates"]}
    assert list(recs) == ["two_pass", "copy.memcpy", "copy.elementwise", "copy.float4", "quack.softmax"]
    assert recs["two_pass"]["status"] == "ok" and recs["two_pass"]["measured"]["kernels"] == ["two_pass_kernel"]
    assert recs["two_pass"]["measured_passes"] == {"reads": 1.0, "writes": 1.0}
    assert recs["copy.memcpy"]["status"] == "skipped" and "not a kernel" in recs["copy.memcpy"]["reason"]
    assert recs["quack.softmax"] == {**recs["quack.softmax"], "status": "skipped", "reason": "no quack"}
    assert doc["method"]["tool"].endswith("(fake)")
    with pytest.raises(FileNotFoundError, match="not on PATH"):
        profile.run_profile([(64, 4096)], ["two_pass"], ncu=str(tmp_path / "missing"), progress=None)


def test_run_profile_takes_the_loss_ops(fake_ncu):
    """The loss with its gradient: its candidates profiled beside their passes (one read and
    one write for auto, whose rows a cluster holds, and for the copies), the file as the
    schema says."""
    ncu = fake_ncu
    doc = profile.run_profile([(64, 4096)], ["auto", "torch.cross_entropy"], ncu=str(ncu), progress=None,
                              command="softmax-lab profile (test)", op="cross_entropy_grad")
    synthetic.validate(doc, "profile_schema.json")
    (run,) = doc["runs"]
    assert run["op"] == "cross_entropy_grad"
    recs = {r["name"]: r for r in run["candidates"]}
    assert list(recs) == ["auto", "copy.memcpy", "copy.elementwise", "copy.float4", "torch.cross_entropy"]
    assert (recs["auto"]["model"]["reads"], recs["auto"]["model"]["writes"]) == (1, 1)
    assert recs["auto"]["measured_passes"] == {"reads": 1.0, "writes": 1.0}  # what the fake ncu counted
