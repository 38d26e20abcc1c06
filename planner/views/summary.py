"""One sharding seen every way at once: the data behind ``shardplan describe``."""

from __future__ import annotations

from typing import Any, Sequence

from planner.errors import NotExpressibleError
from planner.ir.layout import device_index_ranges
from planner.ir.sharding import TensorSharding
from planner.notations.dtensor import to_placements
from planner.notations.jax import to_jax_type, to_partition_spec
from planner.notations.mindspore import to_tensor_layout


def _or_reason(fn, *args) -> tuple[Any, str | None]:
    try:
        return fn(*args), None
    except NotExpressibleError as e:
        return None, e.message


def describe(sharding: TensorSharding, shape: Sequence[int], dtype: str = "f32") -> dict:
    """Canonical text, local shape, every device's index ranges and the other notations.

    Views that cannot express the sharding are ``None``; ``not_expressible`` says why.

    >>> from planner.ir.text import parse_mesh, parse_sharding
    >>> mesh = parse_mesh('@m = <["x"=2]>')
    >>> d = describe(parse_sharding('[{"x"}]', mesh), (4,))
    >>> d["local_shape"], d["devices"][1], d["partition_spec"]
    ([2], {'device': 1, 'index': [[2, 4]]}, "P('x')")
    """
    sharding.check_rank(shape)
    ranges = device_index_ranges(sharding, shape)
    spec, spec_why = _or_reason(to_partition_spec, sharding)
    layout, layout_why = _or_reason(to_tensor_layout, sharding)
    placements, dt_why = _or_reason(to_placements, sharding, shape)
    reasons = {k: v for k, v in (("partition_spec", spec_why), ("mindspore", layout_why), ("dtensor", dt_why)) if v}
    return {
        "sharding": str(sharding),
        "mesh": str(sharding.mesh),
        "shape": list(shape),
        "dtype": dtype,
        "local_shape": list(sharding.local_shape(shape)),
        "devices": [
            {"device": d, "index": [[int(a), int(b)] for a, b in ranges[d]]} for d in range(len(ranges))
        ],
        "partition_spec": spec,
        "jax_type": to_jax_type(sharding, shape, dtype),
        "mindspore": None if layout is None else {"device_matrix": layout[0], "tensor_map": layout[1]},
        "dtensor": placements,
        "not_expressible": reasons,
    }
