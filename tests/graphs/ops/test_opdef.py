"""Each op's traits are set in its OpDef, and consistently with each other and with its rule."""

import inspect
from types import MappingProxyType

import numpy as np
import pytest

from graphs.ops import annotation, collectives, conv, gather, loss, matmul, normalization, pointwise, reductions
from graphs.ops import shape_ops
from graphs.ops.collectives import BOUNDARY_OPS, is_collective
from graphs.ops.registry import OPS, op_names
from planner.rules.factors import FactorKind
from planner.rules.registry import NO_RULE, RULES, rule_for

FAMILY_MODULES = (annotation, collectives, conv, gather, loss, matmul, normalization, pointwise, reductions,
                  shape_ops)


def _defines(module, op) -> bool:
    """Whether ``module`` defines ``op``: as one of its names, or in a table of ops it builds (the collectives)."""
    return any(v is op or (isinstance(v, MappingProxyType) and any(x is op for x in v.values()))
               for v in vars(module).values())


def defining_module(name):
    """The family module whose module-level OpDef is the registered one."""
    return next(m for m in FAMILY_MODULES if _defines(m, OPS[name]))


def region_op(name):
    return is_collective(name) or name in BOUNDARY_OPS


def test_every_registered_op_is_defined_in_one_family_module():
    for name in op_names():
        homes = [m for m in FAMILY_MODULES if _defines(m, OPS[name])]
        assert len(homes) == 1, name


def test_every_op_names_its_rule_in_its_definition():
    """Every OpDef names its rule (the collectives and region boundaries too); no op is left without one."""
    for name, op in OPS.items():
        assert op.rule is not None, name
    assert set(RULES) == set(OPS) and not NO_RULE


@pytest.mark.parametrize("name", [n for n in op_names() if OPS[n].rule is not None])
def test_a_named_rule_is_a_function_of_planner_rules_resolved_once(name):
    module, fn = OPS[name].rule.split(".")
    assert RULES[name].__module__ == f"planner.rules.{module}" and RULES[name].__name__ == fn


def test_followers_are_unary_elementwise_ops_that_pass_shardings():
    followers = [n for n, op in OPS.items() if op.follows_operand]
    assert followers == ["abs", "cast", "ceil", "cos", "erf", "erfc", "exp", "expm1", "floor", "gelu", "is_finite",
                         "log", "log1p", "logical_not", "neg", "relu", "round", "rsqrt", "sigmoid", "sign", "sin",
                         "sqrt", "tanh"]
    for name in followers:
        op = OPS[name]
        assert (op.min_inputs, op.max_inputs) == (1, 1) and op.family == "pointwise", name
        assert op.elementwise and op.passes_shardings, name


@pytest.mark.parametrize("name", [n for n, op in OPS.items() if op.follows_operand])
def test_a_followers_rule_gives_its_result_its_operands_layout(name):
    attrs = {"dtype": "f32"} if name == "cast" else {}
    rule = rule_for(name, [(4, 6, 8)], (4, 6, 8), attrs)
    assert rule.operands[0] == rule.result
    assert set(rule.factor_kinds) == {FactorKind.PASS_THROUGH}


def test_elementwise_ops_pass_shardings_with_the_pointwise_rule():
    for name, op in OPS.items():
        if op.elementwise:
            assert op.passes_shardings and op.rule == "pointwise.elementwise", name
    assert {n for n, op in OPS.items() if op.elementwise} == (
        {n for n, op in OPS.items() if op.family == "pointwise"} | {"propagation_barrier", "sharding_constraint", "stop_gradient"})


def test_shardys_pass_through_ops_are_the_elementwise_ops_reshape_and_transpose():
    passing = {n for n, op in OPS.items() if op.passes_shardings}
    assert passing == {n for n, op in OPS.items() if op.elementwise} | {"reshape", "transpose"}


def test_every_op_with_a_vjp_has_a_jax_form_unless_jax_regions_lowers_it():
    for name, op in OPS.items():
        if region_op(name):
            assert op.jax_form is None, name
        else:
            assert op.vjp is not None and op.jax_form is not None, name


def test_jax_forms_take_the_modules_then_the_operands_and_attributes():
    for name, op in OPS.items():
        if op.jax_form is not None:
            assert list(inspect.signature(op.jax_form).parameters)[:2] == ["jnp", "lax"], name
            assert len(inspect.signature(op.jax_form).parameters) == 4, name


def test_local_kernels_come_in_pairs_and_read_operands_that_exist():
    for name, op in OPS.items():
        assert (op.local_reference is None) == (op.local_vjp is None), name
        if op.local_vjp_reads is not None:
            assert op.local_vjp is not None, name
            assert all(0 <= i < op.min_inputs for i in op.local_vjp_reads), name


def test_index_operands_are_integer_operands_of_the_op():
    for name, op in OPS.items():
        for i, j, d in op.indexes:
            assert i != j and 0 <= i < op.min_inputs and 0 <= j < op.min_inputs, name
            assert isinstance(d, int) or dict(op.attrs).get(d, "absent") != "absent", name  # an attribute it has
    assert OPS["gather"].indexes == ((1, 0, "axis"),) and OPS["cross_entropy"].indexes == ((1, 0, -1),)


def test_fan_in_dims_name_operands_of_the_op():
    for name, op in OPS.items():
        for i, dims in op.fan_in_dims:
            assert 0 <= i < op.min_inputs and all(isinstance(d, int) for d in dims), name


def test_the_local_vjp_reads_of_a_gather_are_its_indices_only():
    from planner.simulation.local_vjp import local_vjp_inputs

    assert local_vjp_inputs("gather", (0,), 2) == (1,)
    assert local_vjp_inputs("cross_entropy", (0,), 2) == (0, 1)
    assert local_vjp_inputs("matmul", (0,), 2) == (1,)


def test_a_mean_on_a_block_divides_by_the_global_count():
    from planner.simulation.local_ops import LocalBlock, LocalContext

    ctx = LocalContext((LocalBlock((4, 6), ((0, 4), (0, 3)), (4, 3)),), LocalBlock((4,), ((0, 4),), (4,)))
    block = np.ones((4, 3))
    got = OPS["mean"].local_reference([block], {"axes": (1,), "keepdims": False}, ctx, None)
    assert got.tolist() == [0.5] * 4


def test_the_default_bytes_read_every_operand_and_write_the_result_once():
    # a broadcasting bf16 add of an 8x4 matrix and a 4-vector into an f32 result: 32 x 2 + 4 x 2 + 32 x 4
    add = OPS["add"]
    assert add.bytes_accessed([(8, 4), (4,)], (8, 4), (2, 2, 4), {}) == 32 * 2 + 4 * 2 + 32 * 4
    # a 16x32 @ 32x8 f32 matmul reads both operands once (ideal reuse) and writes its result once
    assert OPS["matmul"].bytes_accessed([(16, 32), (32, 8)], (16, 8), (4, 4, 4), {}) == (512 + 256 + 128) * 4


def test_bytes_need_one_itemsize_per_operand_and_one_for_the_result():
    with pytest.raises(Exception, match="one itemsize per operand and one for the result: 3, got 2"):
        OPS["add"].bytes_accessed([(8, 4), (4,)], (8, 4), (4, 4), {})


def test_markers_and_region_ops_touch_no_memory():
    for name in ("sharding_constraint", "propagation_barrier", *BOUNDARY_OPS):
        assert OPS[name].bytes_accessed([(8, 4)], (8, 4), (4, 4), {}) == 0, name
    for name in OPS:
        if is_collective(name):
            assert OPS[name].bytes_accessed([(8, 4)], (8, 4), (4, 4), {}) == 0, name


def test_exactly_the_contractions_and_conv_run_on_the_matmul_units():
    assert {name for name, op in OPS.items() if op.matmul_units} == {"conv2d", "einsum", "matmul"}
