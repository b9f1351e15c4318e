"""pyproject.toml, environment.yml, README.md and .ci/run agree."""

import re
import sysconfig
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def _name(req: str) -> str:
    return re.split(r"[\[<>=! ]", req, maxsplit=1)[0].lower()


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = {_name(d) for d in env["dependencies"] if isinstance(d, str)}
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    pip_names = {_name(p) for p in pip if not p.startswith("-e")}
    runtime = {_name(d) for d in project["dependencies"]}
    assert runtime == (conda | pip_names) - {"python", "pip", "jupyterlab"}
    assert "cupy-cuda12x[ctk]" in pip and "-e ." in pip
    assert {_name(d) for d in project["optional-dependencies"]["notebooks"]} <= conda
    assert project["requires-python"] == ">=3.11" and "python>=3.11" in env["dependencies"]


def test_ci_runs_the_readme_commands():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    install, test = "python -m pip install '.[test]'", "python -m pytest -q"
    assert f"{install} && {test}" in readme
    assert install in ci and test in ci


def test_installed_package_carries_the_kernels():
    """A non-editable install (as CI does) puts the CUDA sources in site-packages/softmax_lab/kernels."""
    installed = Path(sysconfig.get_paths()["purelib"]) / "softmax_lab"
    if not installed.is_dir():
        pytest.skip("softmax-lab is not installed into this environment (or installed editable)")
    for name in ("common.cuh", "three_pass.cu", "two_pass.cu", "multi_block.cu", "single_read.cu", "copy.cu"):
        assert (installed / "kernels" / name).is_file(), name
    assert (installed / "results_schema.json").is_file()
