"""Every top-level package imports on its own, in any order (no import cycles)."""

import subprocess
import sys

import pytest


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
