"""pyproject.toml, environment.yml, README.md and .ci/run agree; the install is light."""

import re
import sysconfig
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _name(req: str) -> str:
    return re.split(r"[\[<>=!~; ]", req, maxsplit=1)[0].lower()


def test_environment_yml_installs_the_readme_route_from_pyproject():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    (pip,) = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    assert {_name(d) for d in conda} == {"python", "pip"}  # everything else comes from pyproject.toml
    assert f"python{PROJECT['requires-python']}" in conda
    (target,) = pip
    extras = set(re.fullmatch(r"\.\[([\w,]+)\]", target)[1].split(","))
    assert extras == {"test", "notebooks"} and extras <= set(PROJECT["optional-dependencies"])
    assert "jupyterlab" in PROJECT["optional-dependencies"]["notebooks"]


def test_dependencies_are_only_what_is_used():
    deps = {_name(d): d for d in PROJECT["dependencies"]}
    assert set(deps) == {"cupy-cuda12x", "cuda-toolkit", "numpy", "matplotlib", "tqdm", "jsonschema"}
    assert "[ctk]" not in deps["cupy-cuda12x"]
    assert set(re.search(r"\[(.*)\]", deps["cuda-toolkit"])[1].split(",")) == {"nvrtc", "cudart"}
    assert "torch" not in deps and PROJECT["optional-dependencies"]["torch"] == ["torch"]
    assert {"pytest", "pytest-xdist", "nbclient", "ipykernel", "jsonschema"} <= set(PROJECT["optional-dependencies"]["test"])


def test_ci_runs_the_readme_commands():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    install, test = "python -m pip install '.[test]'", "python -m pytest -q -n auto"
    assert f"{install} && {test}" in readme
    assert install in ci and test in ci
    assert "torch" not in ci  # the baselines are not needed on CPU CI


def test_every_subpackage_is_listed_for_a_plain_install():
    """[tool.setuptools] packages is an explicit list (the kernels are mapped in from kernels/),
    so a subpackage missing from it is left out of a plain `pip install .`."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "softmax_lab").rglob("__init__.py")}
    assert on_disk <= listed, f"add {sorted(on_disk - listed)} to [tool.setuptools] packages in pyproject.toml"
    assert {"softmax_lab", "softmax_lab.lab", "softmax_lab.kernels"} <= listed

def test_installed_package_carries_the_kernels_and_schemas():
    """A non-editable install (as CI does) puts the CUDA sources in site-packages/softmax_lab/kernels
    and the lab in site-packages/softmax_lab/lab."""
    installed = Path(sysconfig.get_paths()["purelib"]) / "softmax_lab"
    if not installed.is_dir():
        pytest.skip("softmax-lab is not installed into this environment (or installed editable)")
    for name in ("common.cuh", "elements.cuh", "three_pass.cu", "two_pass.cu", "multi_block.cu", "single_read.cu", "copy.cu"):
        assert (installed / "kernels" / name).is_file(), name
    lab = installed / "lab"  # the lab's modules and the schemas of its files
    assert (lab / "cli.py").is_file() and (lab / "results_schema.json").is_file() and (lab / "profile_schema.json").is_file() \
        and (lab / "context_schema.json").is_file()


def test_version_and_typing_marker():
    import pathlib

    import softmax_lab

    assert isinstance(softmax_lab.__version__, str) and softmax_lab.__version__[0].isdigit()
    assert (pathlib.Path(softmax_lab.__file__).parent / "py.typed").is_file()
