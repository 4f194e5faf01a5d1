"""One version number in one place: scaler/__init__.py's ``__version__``, which hatch reads for
the wheel and the sdist, ``queue-age-scaler --version`` prints, and the manifests' image tag
follows."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

import scaler
from scaler.cli import main

ROOT = Path(__file__).resolve().parents[2]


def the_one_version() -> str:
    """The version as hatch reads it: the ``__version__ = "..."`` line of the file
    ``[tool.hatch.version]`` names."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"], "a second version number in pyproject.toml"
    assert pyproject["project"]["dynamic"] == ["version"]
    source = ROOT / pyproject["tool"]["hatch"]["version"]["path"]
    (version,) = re.findall(r'^__version__ = "([^"]+)"$', source.read_text(), re.MULTILINE)
    assert isinstance(version, str)
    return version


def test_the_version_is_a_pep_440_version_in_scaler_init() -> None:
    version = the_one_version()
    assert str(Version(version)) == version
    assert scaler.__version__ == version


def test_dash_dash_version_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"queue-age-scaler {the_one_version()}\n"


def test_the_installed_command_prints_it() -> None:
    command = Path(sys.executable).parent / "queue-age-scaler"
    result = subprocess.run(
        [str(command), "--version"], capture_output=True, text=True, timeout=30, check=True
    )
    assert result.stdout == f"queue-age-scaler {the_one_version()}\n"


@pytest.mark.parametrize("overlay", ["base", "keda-sidecar"])
def test_the_manifests_run_the_image_of_this_version(overlay: str) -> None:
    kustomization = yaml.safe_load((ROOT / "deploy" / overlay / "kustomization.yaml").read_text())
    tags = {
        image["newTag"]
        for image in kustomization["images"]
        if image["name"] == "queue-age-scaler" or image.get("newName") == "queue-age-scaler"
    }
    assert tags == {the_one_version()}
