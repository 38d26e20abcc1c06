"""The annotation ops (issue 12): identities that carry sharding intent, and their public accessors."""

import numpy as np
import pytest

from graphs import load_model_text
from graphs.ops.annotation import (
    BARRIER_DIRECTIONS,
    PROPAGATION_BARRIER,
    SHARDING_CONSTRAINT,
    barrier_allows,
    barrier_direction,
    is_sharding_constraint,
)
from graphs.specs import OpSpec
from planner.errors import ModelError


@pytest.mark.parametrize("opdef", [SHARDING_CONSTRAINT, PROPAGATION_BARRIER], ids=lambda o: o.name)
def test_identity_keeps_shape_dtype_and_values_at_zero_flops(opdef):
    for dtype in ("f32", "bf16", "i32", "bool"):
        assert opdef.infer([(3, 5)], [dtype], opdef.with_defaults({})) == ((3, 5), dtype)
    assert opdef.flops([(64, 64)], (64, 64), {}) == 0  # no arithmetic: the value passes through
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(opdef.reference([x], opdef.with_defaults({})), x)
    assert opdef.family == "annotation"


def test_only_the_constraint_requires_an_out_sharding():
    assert SHARDING_CONSTRAINT.requires_out_sharding and not PROPAGATION_BARRIER.requires_out_sharding


def test_barrier_direction_defaults_to_none_and_accepts_the_four_values():
    assert BARRIER_DIRECTIONS == ("none", "forward", "backward", "both")
    assert PROPAGATION_BARRIER.with_defaults({}) == {"allowed_direction": "none"}
    for d in BARRIER_DIRECTIONS:
        assert PROPAGATION_BARRIER.infer([(4,)], ["f32"], {"allowed_direction": d}) == ((4,), "f32")
    with pytest.raises(ModelError, match="allowed_direction must be one of none, forward, backward, both; got 3"):
        PROPAGATION_BARRIER.infer([(4,)], ["f32"], {"allowed_direction": 3})


def test_accessors_read_a_built_graphs_ops():
    g = load_model_text("""
name: acc
mesh: {x: 2}
tensors: {a: {shape: [4, 2]}}
ops:
  - {name: c, op: sharding_constraint, inputs: [a], output: ac, out_sharding: '[{"x"}, {}]'}
  - {name: b0, op: propagation_barrier, inputs: [ac], output: h0}
  - {name: b1, op: propagation_barrier, inputs: [h0], output: h1, allowed_direction: forward}
  - {name: b2, op: propagation_barrier, inputs: [h1], output: h2, allowed_direction: both}
""")
    assert [is_sharding_constraint(op) for op in g.ops] == [True, False, False, False]
    assert is_sharding_constraint("sharding_constraint") and not is_sharding_constraint("relu")
    assert [barrier_direction(g.op(n)) for n in ("b0", "b1", "b2")] == ["none", "forward", "both"]
    # (forward, backward) per barrier: none blocks both, both passes both
    assert [(barrier_allows(g.op(n), "forward"), barrier_allows(g.op(n), "backward")) for n in ("b0", "b1", "b2")] \
        == [(False, False), (True, False), (True, True)]
    assert g.tensor("ac").sharding.dims_text() == '[{"x"}, {}]'


def test_accessors_refuse_other_ops_and_directions():
    relu = OpSpec("r", "relu", ["a"], "b")
    with pytest.raises(ModelError, match="op 'r' is a relu, not a propagation_barrier"):
        barrier_direction(relu)
    with pytest.raises(ModelError, match="forward or backward, got 'both'"):
        barrier_allows(OpSpec("b", "propagation_barrier", ["a"], "c"), "both")
