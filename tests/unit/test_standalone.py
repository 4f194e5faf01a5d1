"""The repository stands alone: no tracked file refers to a path outside the clone.

A fresh clone with nothing beside it must pass its tests and read its own docs, so no file may
name a folder beside the repository (``../shared``), a path of one machine (``/work/``, a home
folder), or climb out of the clone with more ``../`` (or ``Path.parents``) than it is deep.
Markdown links are resolved from the file that holds them and must land on a file of the clone.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[2]
THIS = PurePosixPath(Path(__file__).resolve().relative_to(ROOT).as_posix())

#: paths of one machine, never of a clone (split so that this file does not name them)
MACHINE_PATHS = re.compile(
    "|".join(
        (
            r"(?<![\w.])/" + "work/",
            r"(?<![\w.])/" + r"home/\w",
            r"(?<![\w.])/" + r"root/\w",
            r"(?<![\w.])/" + r"Users/\w",
            r"\.\./" + "shared",
            r"\bshared/" + "reference",
            r"\bROOT\.parent\b",
        )
    )
)
#: a run of ``../`` in a path
CLIMB = re.compile(r"(?:(?<=[^\w.])|^)((?:\.\./)+)", re.MULTILINE)
#: ``Path(...).parents[N]``
PARENTS = re.compile(r"\.parents\[(\d+)\]")
#: a Markdown link or image to a relative target
MARKDOWN_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")


def tracked_files() -> Iterator[tuple[PurePosixPath, str]]:
    """Every text file git tracks here (untracked work does not ship), with its text."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=30
    )
    for name in listed.stdout.decode().split("\0"):
        path = PurePosixPath(name)
        if not name or path == THIS or not (ROOT / path).is_file():
            continue
        try:
            text = (ROOT / path).read_text(encoding="utf-8")
        except UnicodeDecodeError:  # images
            continue
        yield path, text


def outside_references(path: PurePosixPath, text: str) -> list[str]:
    """What in ``text`` (the content of ``path``) points outside the repository."""
    found = [f"{path}: {m.group(0)!r}" for m in MACHINE_PATHS.finditer(text)]
    depth = len(path.parent.parts)
    for match in CLIMB.finditer(text):
        if match.group(1).count("../") > depth:
            found.append(f"{path}: {match.group(1)!r} climbs above the repository")
    if path.suffix == ".py":
        for match in PARENTS.finditer(text):
            if int(match.group(1)) > depth:
                found.append(f"{path}: {match.group(0)!r} is above the repository")
    if path.suffix == ".md":
        for match in MARKDOWN_LINK.finditer(text):
            target = match.group(1)
            if "://" in target or target.startswith("mailto:"):
                continue
            resolved = (ROOT / path.parent / target).resolve()
            if not resolved.is_relative_to(ROOT) or not resolved.exists():
                found.append(f"{path}: link {target!r} is not a file of the repository")
    return found


def test_no_tracked_file_refers_outside_the_repository() -> None:
    files = list(tracked_files())
    assert len(files) > 100, "git ls-files found too few files: is this a clone?"
    problems = [problem for path, text in files for problem in outside_references(path, text)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("tests/unit/test_x.py", 'KEDA_CRDS = ROOT.parent / "shared" / "keda-crds"'),
        ("scaler/x.py", '"""As ../sha' + 'red/reference/keda.md documents."""'),
        ("docs/x.md", "See /wo" + "rk/shared/DESIGN.md."),
        ("README.md", "Run /ho" + "me/alice/bin/tool."),
        ("scripts/x", 'cd "$(dirname "$0")/../../other"'),
        ("tests/unit/test_x.py", "TOP = Path(__file__).resolve().parents[3]"),
        ("docs/x.md", "The [design](../../DESIGN.md)."),
        ("docs/x.md", "The [design](missing.md)."),
    ],
)
def test_each_kind_of_outside_reference_is_found(path: str, text: str) -> None:
    assert outside_references(PurePosixPath(path), text)


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("scripts/x", 'cd "$(dirname "$0")/.."'),
        ("deploy/overlays/mtls/kustomization.yaml", "resources:\n  - ../../base\n"),
        ("tests/unit/test_x.py", "ROOT = Path(__file__).resolve().parents[2]"),
        ("docs/x.md", "The [metrics](metrics.md#labels), the [README](../README.md)."),
        ("docs/x.md", "[KEDA](https://keda.sh/docs/2.20/)"),
    ],
)
def test_references_inside_the_repository_pass(path: str, text: str) -> None:
    assert outside_references(PurePosixPath(path), text) == []
