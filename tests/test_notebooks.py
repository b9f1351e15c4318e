"""notebooks/*.ipynb run headless (nbclient) from a notebooks/ folder, top to bottom,
finding the results/ folder beside it by their own location: on the checkout's
recorded results, on synthetic ones, and with none at all.  None of them
measures anything unless its switch is turned on.  (tests/test_install.py runs
them again after a plain `pip install .`.)

They may be committed executed, so that a reader sees the recorded results: the
README's one command (REGENERATE) runs them in place from the recorded results.
A committed notebook is either without outputs or executed whole, top to bottom,
without errors, from the results/ files now in the checkout."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import synthetic
import test_context
import test_plots

import softmax_lab
from softmax_lab.lab import records

nbformat = pytest.importorskip("nbformat")
NotebookClient = pytest.importorskip("nbclient").NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
NAMES = [p.name for p in NOTEBOOKS]
# The one command that executes every notebook in place from the recorded results,
# run from the repository's root (README.md, "From a notebook").
REGENERATE = "python -m jupyter execute --inplace notebooks/*.ipynb"


def execute(path: Path, monkeypatch) -> str:
    """Runs the notebook in its own folder (as Jupyter does) and returns its text output."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    return "\n".join(out.get("text", "") for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs)


def copy_notebooks(tmp_path) -> Path:
    (tmp_path / "notebooks").mkdir()
    for p in NOTEBOOKS:
        shutil.copy(p, tmp_path / "notebooks")
    (tmp_path / "results").mkdir()
    return tmp_path / "notebooks"


def stored_output_problems(path: Path, results: Path) -> list[str]:
    """What is wrong with a notebook's stored outputs: [] for one stored without outputs,
    or for one executed whole (every code cell once, in order, no error) whose notes name
    the recorded files as they are now in `results` (so not executed before a re-recording)."""
    cells = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    if all(c.outputs == [] and c.execution_count is None for c in cells):
        return []
    problems = []
    counts = [c.execution_count for c in cells]
    if counts != list(range(1, len(cells) + 1)):
        problems.append(f"{path.name}: not executed whole, top to bottom (execution counts {counts})")
    text = ""
    for c in cells:
        for out in c.outputs:
            if out.output_type == "error":
                problems.append(f"{path.name}: an error is stored: {out.ename}: {out.evalue}")
            text += out.get("text", "") + "\n"
    for created, file in re.findall(r"Recorded on .+? on (\S+) \((\S+?\.json)\)", text):
        recorded = results / Path(file).name
        if not recorded.is_file():
            problems.append(f"{path.name}: shows {Path(file).name}, which results/ no longer has")
        elif records.load(recorded)["created"] != created:
            problems.append(f"{path.name}: shows {Path(file).name} of {created}; results/ has "
                            f"{records.load(recorded)['created']}: run the README's command again")
    for file in re.findall(r"No recorded \w+ results at (\S+?\.json)", text):
        if (results / Path(file).name).is_file():
            problems.append(f"{path.name}: says {Path(file).name} is not recorded; results/ has it now")
    return problems


def test_there_are_seven_notebooks_stored_without_outputs_or_executed_whole():
    assert NAMES == ["01_traffic_model.ipynb", "02_variants.ipynb", "03_bandwidth.ipynb",
                     "04_hardware_counts.ipynb", "05_dtypes_and_ops.ipynb", "06_cross_entropy.ipynb",
                     "07_softmax_in_context.ipynb"]
    for path in NOTEBOOKS:
        text = path.read_text()
        assert "SOFTMAX_LAB_" not in text and "os.environ" not in text, path.name  # no environment variables
    assert [p for path in NOTEBOOKS for p in stored_output_problems(path, ROOT / "results")] == []


def test_the_readme_command_executes_every_notebook_in_place(tmp_path):
    """REGENERATE, as README.md gives it, run in a copy of notebooks/ and results/: every
    notebook comes back executed whole from the recorded results (the checkout's own
    notebooks are not touched)."""
    assert f"\n{REGENERATE}\n" in (ROOT / "README.md").read_text()
    if not (ROOT / "results" / "bench.json").is_file():
        pytest.skip("no recorded results/bench.json yet: record it on a GPU (benchmarks/record.sh)")
    copy_notebooks(tmp_path)
    for p in (ROOT / "results").glob("*.json"):
        shutil.copy(p, tmp_path / "results")
    python, *args, pattern = shlex.split(REGENERATE)
    assert python == "python" and pattern == "notebooks/*.ipynb"
    paths = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.glob(pattern))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               MPLBACKEND="Agg")
    p = subprocess.run([sys.executable, *args, *paths], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600, check=False)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-5000:]
    for path in sorted((tmp_path / "notebooks").glob("*.ipynb")):
        cells = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
        assert all(c.execution_count for c in cells), path.name
        assert stored_output_problems(path, tmp_path / "results") == []
    # re-recorded after the notebooks ran: their outputs are out of date
    recorded = tmp_path / "results" / "dtype_op.json"
    recorded.write_text(json.dumps(dict(json.loads(recorded.read_text()), created="2027-01-01T00:00:00+00:00")))
    (problem,) = stored_output_problems(tmp_path / "notebooks" / "05_dtypes_and_ops.ipynb", tmp_path / "results")
    assert "dtype_op.json" in problem and "run the README's command again" in problem


def test_long_runs_sit_behind_a_switch_that_is_off():
    cells = [c.source for c in nbformat.read(ROOT / "notebooks" / "03_bandwidth.ipynb", as_version=4).cells]
    assert any("\nMEASURE = False\n" in c for c in cells)
    code = "\n".join(c for c in cells)
    assert "run_bench(" not in code and "run_sweep(" not in code and "measure=MEASURE" in code
    for path in NOTEBOOKS:
        if path.name != "03_bandwidth.ipynb":
            assert "load_or_run" not in path.read_text() and "run_bench" not in path.read_text(), path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NAMES)
def test_notebook_runs_on_the_recorded_results(path, monkeypatch):
    if not (ROOT / "results" / "bench.json").is_file():
        pytest.skip("no recorded results/bench.json yet: record it on a GPU (benchmarks/record.sh)")
    text = execute(path, monkeypatch)
    if path.name == "05_dtypes_and_ops.ipynb":  # recorded or not, it looks beside notebooks/
        assert "results/dtype_op.json" in text
    elif path.name == "06_cross_entropy.ipynb":
        assert "results/loss.json" in text
    elif path.name == "07_softmax_in_context.ipynb":
        assert "results/context.json" in text  # recorded or not, it looks beside notebooks/
    elif path.name == "02_variants.ipynb" and "GPU here" in text:  # on a GPU it runs the kernels instead
        assert all(f"\n{name} " in text for name in softmax_lab.variants()), text
    elif path.name != "04_hardware_counts.ipynb" or (ROOT / "results" / "profile.json").is_file():
        assert "(results/" in text  # the folder beside notebooks/, named without this checkout's path


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NAMES)
def test_notebook_runs_on_synthetic_results(path, monkeypatch, tmp_path):
    here = copy_notebooks(tmp_path)
    synthetic.write(tmp_path / "results", torch=True, dtypes_ops=True)
    (tmp_path / "results" / "profile.json").write_text(json.dumps(test_plots.profile_doc()))
    (tmp_path / "results" / "context.json").write_text(json.dumps(test_context.document()))
    text = execute(here / path.name, monkeypatch)
    if path.name != "02_variants.ipynb" or "GPU here" not in text:
        assert "Recorded on Synthetic H200" in text
    if path.name == "01_traffic_model.ipynb":
        auto = [line for line in text.splitlines() if line.startswith("auto ")]
        assert auto and all(line.split()[1:3] != ["0", "0"] for line in auto)  # never 0 reads 0 writes
    if path.name == "02_variants.ipynb":
        assert text.count("// ======== kernels/common.cuh") == 1
        assert text.count("struct MaxSum") == 1  # the header's text once, not once per kernel
    if path.name == "04_hardware_counts.ipynb":
        assert "measured / model passes" in text and "1.00/3r" in text
    if path.name == "05_dtypes_and_ops.ipynb":
        assert text.count("Recorded on Synthetic H200") == 4
        assert "bfloat16  log_softmax_backward" in text and "x floor" in text and "dtype op" in text
        assert "bfloat16 softmax (3.22 GB per tensor)" in text
    if path.name == "06_cross_entropy.ipynb":
        assert "bfloat16 cross_entropy_grad" in text and "liger" in text and "quack.cross_entropy" in text
        assert "No recorded profile of the loss ops" in text
    if path.name == "07_softmax_in_context.ipynb":
        assert "4096 x 4096 @ 4096 x 128256 bfloat16" in text and "sw_power_cap 90%" in text


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NAMES)
def test_notebook_says_plainly_when_nothing_is_recorded(path, monkeypatch, tmp_path):
    here = copy_notebooks(tmp_path)
    text = execute(here / path.name, monkeypatch)
    if path.name in ("01_traffic_model.ipynb", "03_bandwidth.ipynb"):
        assert "No recorded bench results" in text and "softmax-lab bench --output" in text
    if path.name == "04_hardware_counts.ipynb":
        assert "No recorded profile yet" in text and "softmax-lab profile --output" in text
    if path.name == "05_dtypes_and_ops.ipynb":
        assert "No recorded dtype_op results" in text and "bash benchmarks/record.sh table" in text
        assert "No recorded sweep_bf16 results" in text and "floor.torch_add" in text  # the traffic model still
    if path.name == "07_softmax_in_context.ipynb":
        assert "No recorded context results at results/context.json" in text
        assert "bash benchmarks/record.sh context" in text
    if path.name == "06_cross_entropy.ipynb":
        assert "No recorded loss results" in text and "bash benchmarks/record.sh liger loss" in text
        assert "torch.cross_entropy" in text and "read.words" in text  # the traffic model still
