"""planner.limits: the named size limits, enforced where meshes and tensors are made, and
errors.quote, which keeps every quoted value short."""

from __future__ import annotations

import time

import pytest

from graphs.specs import TensorSpec
from planner.errors import LimitError, ModelError, quote
from planner.ir.mesh import Mesh
from planner.limits import MAX_MESH_AXES, MAX_MESH_DEVICES, MAX_TENSOR_ELEMENTS


def test_mesh_at_the_device_limit_is_legal_and_twice_that_is_not():
    assert Mesh.from_sizes("m", {"x": MAX_MESH_DEVICES}).size == MAX_MESH_DEVICES
    with pytest.raises(LimitError, match=f"{2 * MAX_MESH_DEVICES:,} devices"):
        Mesh.from_sizes("m", {"x": MAX_MESH_DEVICES, "y": 2})


def test_mesh_axis_limit():
    Mesh.from_sizes("m", {f"a{i}": 1 for i in range(MAX_MESH_AXES)})
    with pytest.raises(LimitError, match=f"{MAX_MESH_AXES + 1} axes"):
        Mesh.from_sizes("m", {f"a{i}": 1 for i in range(MAX_MESH_AXES + 1)})


def test_tensor_at_the_element_limit_is_legal_and_one_more_is_not():
    side = 2**24  # side * side = 2^48 = the limit
    assert TensorSpec("t", [side, side]).numel == MAX_TENSOR_ELEMENTS
    with pytest.raises(ModelError, match="tensor 't' has .* elements .* limit"):
        TensorSpec("t", [side, side + 1])


def test_quote_keeps_a_billion_item_value_short_and_fast():
    value = ["x"] * 10
    for _ in range(8):  # 10^9 leaves, shared like a YAML alias bomb's
        value = [value] * 10
    start = time.process_time()
    text = quote(value)
    assert time.process_time() - start < 0.1
    assert len(text) <= 80 and text.startswith("[[[")


def test_quote_of_a_short_value_is_its_repr():
    assert quote("dense1") == repr("dense1") and quote([1, 2]) == "[1, 2]"


def test_readme_documents_each_limit_with_its_value():
    """The size-limit table of docs/troubleshooting.md states the constants of planner/limits.py."""
    from pathlib import Path

    from planner import limits

    page = Path(__file__).resolve().parent.parent / "docs" / "troubleshooting.md"
    text = page.read_text()
    rows = {
        "elements of one tensor": f"2^{limits.MAX_TENSOR_ELEMENTS.bit_length() - 1}",
        "devices of one mesh": f"{limits.MAX_MESH_DEVICES:,}",
        "axes of one mesh": str(limits.MAX_MESH_AXES),
        "bytes of one input file": limits.format_bytes(limits.MAX_INPUT_FILE_BYTES),
        "digits of one integer": str(limits.MAX_INT_DIGITS),
        "YAML nesting depth": str(limits.MAX_YAML_DEPTH),
        "YAML nodes once aliases are expanded": f"{limits.MAX_YAML_NODES:,}",
        "memory the simulator may need": limits.format_bytes(limits.MAX_SIMULATION_BYTES),
        "FLOPs of one op": f"10^{len(str(limits.MAX_OP_FLOPS)) - 1}",
        "devices of one node of a cluster": f"{limits.MAX_DEVICES_PER_NODE:,}",
        "a rate or size in a cluster": f"at most {limits.MAX_CLUSTER_NUMBER:.0e}; a rate at least "
                                       f"{limits.MIN_CLUSTER_RATE:,.0f} per second".replace("+", ""),
        "a time in a cluster": f"at most {limits.MAX_CLUSTER_SECONDS:.0e} s".replace("+0", ""),
    }
    for label, value in rows.items():
        line = next((ln for ln in text.splitlines() if ln.startswith(f"| {label}")), None)
        assert line is not None and value in line.split("|")[2], (label, value, line)


class _Estimate:
    """What check_simulation_memory reads of a simulation's bound."""

    def __init__(self, total: int):
        self.total = total

    def text(self) -> str:
        return "its parts"


def test_simulation_memory_is_checked_against_the_limit():
    from planner import limits

    limits.check_simulation_memory(_Estimate(limits.MAX_SIMULATION_BYTES), "simulating m", "do less")  # fits
    with pytest.raises(LimitError, match=r"^simulating m needs up to 16 GiB of memory \(its parts\), more than the "
                                         r"simulator's limit of 16 GiB; do less$"):
        limits.check_simulation_memory(_Estimate(limits.MAX_SIMULATION_BYTES + 1), "simulating m", "do less")
