"""notebooks/*.ipynb run headless (nbclient), top to bottom, on results files:
the recorded results/ (skipped until they exist) and synthetic ones.  Both
force the recorded path (SOFTMAX_LAB_RECORDED), so a GPU machine runs no benchmark here."""

import os
from pathlib import Path

import pytest
import synthetic

nbformat = pytest.importorskip("nbformat")
NotebookClient = pytest.importorskip("nbclient").NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
RECORDED = ROOT / "results"
NAMES = [p.name for p in NOTEBOOKS]


def execute(path: Path, results: Path, monkeypatch, tmp_path) -> str:
    monkeypatch.setenv("SOFTMAX_LAB_RECORDED", "1")
    monkeypatch.setenv("SOFTMAX_LAB_RESULTS", str(results))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    return "\n".join(out.get("text", "") for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs)


def test_there_are_three_notebooks_stored_without_outputs():
    assert NAMES == ["01_traffic_model.ipynb", "02_variants.ipynb", "03_bandwidth.ipynb"]
    for path in NOTEBOOKS:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NAMES)
def test_notebook_runs_on_the_recorded_results(path, monkeypatch, tmp_path):
    missing = [n for n in ("bench.json", "sweep.json") if not (RECORDED / n).is_file()]
    if missing:
        pytest.skip(f"no recorded results yet ({', '.join('results/' + n for n in missing)} absent): "
                    "record them on a GPU with softmax-lab bench/sweep --output results/...")
    text = execute(path, RECORDED, monkeypatch, tmp_path)
    assert "showing the results recorded on" in text


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NAMES)
def test_notebook_runs_on_synthetic_results(path, monkeypatch, tmp_path):
    synthetic.write(tmp_path)
    text = execute(path, tmp_path, monkeypatch, tmp_path)
    assert "showing the results recorded on Synthetic H200" in text
