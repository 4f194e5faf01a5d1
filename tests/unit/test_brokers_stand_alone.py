"""The adapter contract stands alone: no module under brokers/ imports scaler, at its top or
lazily inside a function, so a format from another distribution needs brokers/ only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BROKERS = Path(__file__).resolve().parents[2] / "brokers"


def imported_modules(tree: ast.AST) -> set[str]:
    """Every module an ``import``, ``from ... import``, ``importlib.import_module("...")`` or
    ``__import__("...")`` anywhere in ``tree`` names (relative imports stay in the package)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            found.add(node.module)
        elif isinstance(node, ast.Call) and node.args:
            called = node.func
            name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
            first = node.args[0]
            if name in {"import_module", "__import__"} and isinstance(first, ast.Constant):
                found.add(str(first.value))
    return found


def scaler_imports(source: str) -> list[str]:
    return sorted(
        name
        for name in imported_modules(ast.parse(source))
        if name == "scaler" or name.startswith("scaler.")
    )


def test_no_module_under_brokers_imports_scaler() -> None:
    modules = sorted(BROKERS.rglob("*.py"))
    assert len(modules) > 10  # the walk found the package
    offenders = {
        str(path.relative_to(BROKERS.parent)): found
        for path in modules
        if (found := scaler_imports(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("import scaler.errors", ["scaler.errors"], id="import"),
        pytest.param("from scaler.errors import X", ["scaler.errors"], id="from"),
        pytest.param("from scaler import errors", ["scaler"], id="from the package"),
        pytest.param("def f():\n    from scaler.spec import p\n", ["scaler.spec"], id="lazy"),
        pytest.param(
            "if TYPE_CHECKING:\n    import scaler.trigger_spec\n",
            ["scaler.trigger_spec"],
            id="for types only",
        ),
        pytest.param(
            "importlib.import_module('scaler.service')", ["scaler.service"], id="import_module"
        ),
        pytest.param("__import__('scaler')", ["scaler"], id="__import__"),
        pytest.param("from . import scaler_like", [], id="relative: inside brokers"),
        pytest.param("import scalers\nfrom brokers import base", [], id="other names"),
    ],
)
def test_the_walk_sees_every_kind_of_import(source: str, expected: list[str]) -> None:
    assert scaler_imports(source) == expected
