"""Every top-level package imports on its own, in any order (no import cycles), and imports only go down
the layers that planner.LAYERS states."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("first", ["costmodels", "graphs", "planner", "planner.api", "planner.cli.main"])
def test_package_imports_first_in_a_fresh_interpreter(first):
    code = f"import {first}; import planner; from planner.api import plan; print(plan.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "plan"


def test_the_package_exposes_no_lazy_attributes():
    """planner/__init__ imports the bottom layers only: no module __getattr__ dodging a cycle."""
    import planner

    assert not hasattr(planner, "__getattr__") and not hasattr(planner, "plan")


def _imports(path: Path):
    """Every project module ``path`` imports, at module level or inside a function."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno


def _layer(module: str) -> int | None:
    """The index in LAYERS of the package ``module`` belongs to (None: not a project module)."""
    from planner import LAYERS

    for k, packages in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in packages):
            return k
    return None


def test_every_package_has_a_layer():
    for top in ("planner", "graphs", "costmodels"):
        for path in (ROOT / top).rglob("*.py"):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            if module == "planner":
                continue
            assert _layer(module) is not None, f"{module} is in no layer of planner.LAYERS"


def test_no_import_goes_up_the_layers():
    """A module imports only its own layer and the layers below it (planner.LAYERS), also inside functions."""
    from planner import LAYERS

    wrong = []
    for top in ("planner", "graphs", "costmodels"):
        for path in (ROOT / top).rglob("*.py"):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            mine = _layer(module if module != "planner" else "planner.ir")  # the package imports the bottom layers
            for imported, line in _imports(path):
                theirs = _layer(imported)
                if imported == "planner" or theirs is None:
                    continue
                if theirs > mine:
                    wrong.append(f"{path.relative_to(ROOT)}:{line} ({LAYERS[mine][0]}) imports {imported} "
                                 f"({LAYERS[theirs][0]})")
    assert not wrong, "imports up the layers:\n" + "\n".join(wrong)
