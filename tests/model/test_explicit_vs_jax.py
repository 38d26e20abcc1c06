"""Explicit mode against JAX 0.10.2's sharding-in-types, program by program.

Every program below is built once, as a shardplan graph; the same graph is run through JAX
with an Explicit mesh on 8 host CPU devices (each op by its catalogue ``jax_form``, the
``jax.numpy`` program with the op's semantics; an ``out_sharding`` passed to JAX's op, or
``jax.sharding.reshard`` for a ``sharding_constraint``), reading ``jax.typeof(y).sharding``
of every value while tracing, and through :func:`planner.model.explicit_types.explicit_shardings`.
The expected side is JAX's, at test time: every tensor's type must equal JAX's, and where
JAX raises, shardplan must raise a RuleError at the same op for the same class of problem
(:data:`PROBLEMS` pairs JAX's message with ours).

JAX runs in one subprocess for the whole module (the device count is fixed when JAX
starts, and other tests in this process may have started it with fewer devices).
"""

import re
import textwrap

import pytest

from graphs.graph_builder import GraphBuilder
from planner.errors import RuleError
from planner.ir.mesh import AxisType
from planner.model.axis_types import explicit_prefixes
from planner.model.explicit_types import explicit_shardings
from tests.jax_devices import run_on_eight_devices

pytest.importorskip("jax")


M1 = {"X": 8}
M2 = {"X": 2, "Y": 4}
M3 = {"X": 2, "Y": 2, "Z": 2}


def P(*dims, unreduced=""):
    """A sharding in our text form from PartitionSpec-like entries: None, an axis, or a tuple of axes."""
    def dim(d):
        names = () if d is None else (d,) if isinstance(d, str) else d
        return "{" + ", ".join(f'"{n}"' for n in names) + "}"
    text = "[" + ", ".join(dim(d) for d in dims) + "]"
    if unreduced:
        text += ", unreduced={" + ", ".join(f'"{n}"' for n in unreduced) + "}"
    return text


def prog(mesh, tensors, ops, auto_axes=()):
    """``tensors``: name -> (shape, sharding or None); ``ops``: (op, inputs, output, attrs) in order;
    ``auto_axes``: regions (axes, op indices, {output: out-sharding}), seed 001's ``auto_axes``."""
    return {"mesh": mesh, "tensors": tensors, "ops": ops, "auto_axes": auto_axes}


A = "A"  # a placeholder name used by several programs: the first input
MLP_W = {"x": ((8, 16), None), "w1": ((16, 32), P(None, "Y")), "w2": ((32, 16), P("Y", None))}

# id -> program. Each covers one rule of seed 001 / JAX; the comment says which.
#: two products of a[X, Y] with weights w and v row-sharded on Y, c and d, each left pending over Y (an unreduced
#: out_sharding, seed 001)
PENDING_IN = {"a": ((8, 16), P("X", "Y")), "w": ((16, 8), P("Y", None)), "v": ((16, 8), P("Y", None))}
PENDING_C = ("matmul", ["a", "w"], "c", {"out_sharding": P("X", None, unreduced="Y")})
PENDING_D = ("matmul", ["a", "v"], "d", {"out_sharding": P("X", None, unreduced="Y")})


PROGRAMS = {
    # a window read at constant starts: along a free dimension of a split operand, and along a split one (JAX 0.10.2
    # types the window's rows as the operand's, f32[4@X,32@Y])
    "ds_window_free_dim": prog(M2, {"x": ((16, 32), P(None, "Y"))},
                               [("dynamic_slice", ["x"], "y", {"sizes": [4, 32], "starts": [3, 0]})]),
    "ds_window_split_dim": prog(M2, {"x": ((16, 32), P("X", "Y"))},
                                [("dynamic_slice", ["x"], "y", {"sizes": [4, 32], "starts": [3, 0]})]),
    # a KV cache's write at a constant position: the update typed as the cache is (JAX types the result as the
    # operand), and one whose update is split otherwise (JAX raises)
    "dus_update_typed_alike": prog(M2, {"cache": ((2, 16, 32), P("X", None, "Y")),
                                        "new": ((2, 1, 32), P("X", None, "Y"))},
                                   [("dynamic_update_slice", ["cache", "new"], "k", {"starts": [0, 3, 0]})]),
    "dus_update_typed_otherwise": prog(M2, {"cache": ((2, 16, 32), P("X", "Y", None)),
                                            "new": ((2, 1, 32), P("X", None, None))},
                                       [("dynamic_update_slice", ["cache", "new"], "k", {"starts": [0, 3, 0]})]),
    # a seventh held-out batch, written before its first run and run once as written: a dot on 2x2x2 keeping the batch
    # split, heads contracted where both operands split them, free minor dimensions merged, a sharded major dimension
    # merged with a free one, a minimum over a split dimension, a layer norm over a split hidden dimension, a
    # concatenate along a split dimension, a slice of split columns, a transpose into a dot against a replicated
    # weight, a product broadcast over a sub-axis pair, a sum of everything on 2x2x2, a GELU into a row-parallel dot
    "ho7_matmul_batch_split_3d": prog(M3, {"a": ((4, 8, 16), P("X", "Y", None)), "w": ((16, 8), P(None, "Z"))},
                                      [("matmul", ["a", "w"], "y", {})]),
    "ho7_einsum_heads_contract": prog(M2, {"o": ((2, 4, 8), P("X", "Y", None)), "w": ((4, 8, 16), P("Y", None, None))},
                                      [("einsum", ["o", "w"], "y", {"equation": "bhd,hdf->bf"})]),
    "ho7_merge_free_minors": prog(M2, {"a": ((8, 4, 4), P("X", None, None))},
                                  [("reshape", ["a"], "r", {"shape": (8, 16)})]),
    "ho7_merge_sharded_major": prog(M2, {"a": ((8, 4, 4), P(None, "Y", None))},
                                    [("reshape", ["a"], "r", {"shape": (8, 16)})]),
    "ho7_min_split_axis": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("min", ["a"], "m", {"axes": (1,)})]),
    "ho7_layernorm_split_hidden": prog(M2, {"a": ((8, 16), P("X", "Y")), "g": ((16,), P("Y")), "b": ((16,), P("Y"))},
                                       [("layernorm", ["a", "g", "b"], "n", {})]),
    "ho7_concat_split_axis": prog(M2, {"a": ((8, 16), P("X", "Y")), "b": ((8, 16), P("X", "Y"))},
                                  [("concat", ["a", "b"], "c", {"axis": 1})]),
    "ho7_slice_split_cols": prog(M2, {"a": ((8, 16), P(None, "Y"))},
                                 [("slice", ["a"], "s", {"starts": (0, 0), "stops": (8, 8)})]),
    "ho7_transpose_into_dot": prog(M2, {"a": ((16, 8), P("Y", "X")), "w": ((16, 4), None)},
                                   [("transpose", ["a"], "t", {"perm": (1, 0)}), ("matmul", ["t", "w"], "y", {})]),
    "ho7_mul_sub_axis_pair_3d": prog(M3, {"a": ((4, 8), P("X", ("Y", "Z"))), "b": ((1, 8), P(None, ("Y", "Z")))},
                                     [("mul", ["a", "b"], "c", {})]),
    "ho7_sum_everything_3d": prog(M3, {"a": ((2, 4, 8), P("X", "Y", "Z"))},
                                  [("sum", ["a"], "s", {"axes": (0, 1, 2)})]),
    "ho7_gelu_row_parallel": prog(M2, {"x": ((8, 16), P("X", "Y")), "w": ((16, 8), P("Y", None))},
                                  [("gelu", ["x"], "g", {}), ("matmul", ["g", "w"], "y", {})]),
    # a sixth held-out batch, written before its first run and run once as written, half of it meant to be refused:
    # a dot contracting a dimension both operands split on 2x2x2, an add of operands split on other axes, an einsum
    # whose result would use one axis twice, a split of a sharded major dimension, a concatenate of operands split
    # alike elsewhere, a slice of three rows of a split dimension, a transpose added to its like, a kept sum, a dot
    # contracting over two different axes, softmax along the split dimension on 1-D, a scan along a split
    # dimension, a kept maximum on 2x2x2
    "ho6_dot_both_split_3d": prog(M3, {"a": ((8, 16), P(None, "X")), "w": ((16, 8), P("X", None))},
                                  [("matmul", ["a", "w"], "y", {})]),
    "ho6_add_other_axes_3d": prog(M3, {"a": ((8, 16), P("X", None)), "b": ((8, 16), P("Y", None))},
                                  [("add", ["a", "b"], "c", {})]),
    "ho6_einsum_axis_twice": prog(M2, {"a": ((8, 16), P("X", None)), "b": ((16, 8), P(None, "X"))},
                                  [("einsum", ["a", "b"], "c", {"equation": "ij,jk->ik"})]),
    "ho6_split_sharded_major": prog(M2, {"a": ((8, 16), P("X", None))},
                                    [("reshape", ["a"], "r", {"shape": (2, 4, 16)})]),
    "ho6_concat_split_elsewhere": prog(M2, {"a": ((8, 16), P("X", None)), "b": ((8, 16), P("Y", None))},
                                       [("concat", ["a", "b"], "c", {"axis": 1})]),
    "ho6_slice_three_rows": prog(M2, {"a": ((8, 16), P("X", "Y"))},
                                 [("slice", ["a"], "s", {"starts": (0, 0), "stops": (3, 16)})]),
    "ho6_transpose_add_like": prog(M2, {"a": ((8, 16), P("X", "Y")), "b": ((16, 8), P("Y", "X"))},
                                   [("transpose", ["a"], "t", {"perm": (1, 0)}), ("add", ["t", "b"], "c", {})]),
    "ho6_kept_sum": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("sum", ["a"], "s", {"axes": (1,), "keepdims": True})]),
    "ho6_dot_contract_two_axes": prog(M2, {"a": ((8, 16), P(None, "X")), "w": ((16, 8), P("Y", None))},
                                      [("matmul", ["a", "w"], "y", {})]),
    "ho6_softmax_split_axis_1d": prog(M1, {"a": ((8, 16), P(None, "X"))}, [("softmax", ["a"], "p", {"axis": 1})]),
    "ho6_cumsum_split_axis": prog(M2, {"a": ((8, 16), P(None, "Y"))}, [("cumsum", ["a"], "c", {"axis": 1})]),
    "ho6_kept_max_3d": prog(M3, {"a": ((4, 8, 16), P("X", "Y", "Z"))},
                            [("max", ["a"], "m", {"axes": (2,), "keepdims": True})]),
    # a fifth held-out batch, written before its first run and run once as written: an RMS norm over a free hidden
    # dimension, a layer norm of rows on 2x2x2, a column-parallel dot then its bias and ReLU, attention over heads
    # (scores, softmax, weighted values), a maximum along a free dimension, a scan along a free dimension, a 3-D
    # transpose, a split of a free minor dimension, a concatenate of rows sharded alike, a sum over a sharded
    # dimension on 1-D, a centring by a kept mean, a softmax written out (exp, a kept sum, a division)
    "ho5_rmsnorm_free_hidden": prog(M2, {"a": ((8, 16), P("X", None)), "g": ((16,), None)},
                                    [("rmsnorm", ["a", "g"], "n", {})]),
    "ho5_layernorm_rows_3d": prog(M3, {"a": ((4, 8, 16), P("X", ("Y", "Z"), None)), "g": ((16,), None),
                                       "b": ((16,), None)}, [("layernorm", ["a", "g", "b"], "n", {})]),
    "ho5_column_dot_bias_relu": prog(M2, {"a": ((8, 16), P("X", None)), "w": ((16, 32), P(None, "Y")),
                                          "b": ((32,), P("Y"))},
                                     [("matmul", ["a", "w"], "h", {}), ("add", ["h", "b"], "z", {}),
                                      ("relu", ["z"], "r", {})]),
    "ho5_attention_over_heads": prog(M2, {"q": ((2, 4, 8, 4), P("X", "Y", None, None)),
                                          "k": ((2, 4, 8, 4), P("X", "Y", None, None)),
                                          "v": ((2, 4, 8, 4), P("X", "Y", None, None))},
                                     [("einsum", ["q", "k"], "s", {"equation": "bhsd,bhtd->bhst"}),
                                      ("softmax", ["s"], "p", {"axis": 3}),
                                      ("einsum", ["p", "v"], "o", {"equation": "bhst,bhtd->bhsd"})]),
    "ho5_max_free_axis": prog(M2, {"a": ((8, 16), P("X", None))}, [("max", ["a"], "m", {"axes": (1,)})]),
    "ho5_cumsum_free_axis": prog(M2, {"a": ((8, 16), P("X", None))}, [("cumsum", ["a"], "c", {"axis": 1})]),
    "ho5_transpose_3d": prog(M2, {"a": ((2, 4, 8), P("X", "Y", None))},
                             [("transpose", ["a"], "t", {"perm": (2, 0, 1)})]),
    "ho5_split_free_minor": prog(M2, {"a": ((8, 16), P("X", None))},
                                 [("reshape", ["a"], "r", {"shape": (8, 4, 4)})]),
    "ho5_concat_rows_alike": prog(M2, {"a": ((8, 16), P(None, "Y")), "b": ((8, 16), P(None, "Y"))},
                                  [("concat", ["a", "b"], "c", {"axis": 0})]),
    "ho5_sum_sharded_rows_1d": prog(M1, {"a": ((16, 8), P("X", None))}, [("sum", ["a"], "s", {"axes": (0,)})]),
    "ho5_centre_by_kept_mean": prog(M2, {"a": ((8, 16), P("X", "Y"))},
                                    [("mean", ["a"], "m", {"axes": (1,), "keepdims": True}),
                                     ("sub", ["a", "m"], "c", {})]),
    "ho5_softmax_written_out": prog(M2, {"a": ((8, 16), P("X", None))},
                                    [("exp", ["a"], "e", {}), ("sum", ["e"], "s", {"axes": (1,), "keepdims": True}),
                                     ("div", ["e", "s"], "d", {})]),
    # -- elementwise and broadcasting (consensus) ----------------------------------------------------------
    "seed001_add_outer": prog(M2, {"a": ((4, 1), P("X", None)), "b": ((1, 8), P(None, "Y"))},
                              [("add", ["a", "b"], "c", {})]),
    "seed001_add_axis_twice": prog(M2, {"a": ((4, 4), P("X", None)), "b": ((4, 4), P(None, "X"))},
                                   [("add", ["a", "b"], "c", {})]),
    "add_conflicting_axes": prog(M2, {"a": ((8,), P("X")), "b": ((8,), P("Y"))}, [("add", ["a", "b"], "c", {})]),
    "broadcast_lower_rank": prog(M2, {"a": ((4, 8), P("X", None)), "b": ((8,), P("Y"))},
                                 [("mul", ["a", "b"], "c", {}), ("tanh", ["c"], "d", {})]),
    "unary_chain_3d": prog(M3, {"a": ((4, 4, 8), P("X", "Y", "Z"))},
                           [("exp", ["a"], "b", {}), ("relu", ["b"], "c", {}), ("neg", ["c"], "d", {})]),
    "transpose_3d": prog(M3, {"a": ((2, 4, 8), P("X", None, ("Y", "Z")))},
                         [("transpose", ["a"], "b", {"perm": (2, 0, 1)})]),
    # -- dots --------------------------------------------------------------------------------------------
    "matmul_row_col": prog(M2, {"x": ((8, 16), P("X", None)), "w": ((16, 4), P(None, "Y"))},
                           [("matmul", ["x", "w"], "y", {})]),
    "megatron_mlp": prog(M2, MLP_W, [("matmul", ["x", "w1"], "h", {}), ("gelu", ["h"], "g", {}),
                                     ("matmul", ["g", "w2"], "y", {})]),
    "megatron_mlp_out_sharding": prog(M2, MLP_W, [("matmul", ["x", "w1"], "h", {}), ("gelu", ["h"], "g", {}),
                                                  ("matmul", ["g", "w2"], "y", {"out_sharding": P(None, None)})]),
    "megatron_mlp_unreduced_then_reshard": prog(
        M2, MLP_W, [("matmul", ["x", "w1"], "h", {}), ("gelu", ["h"], "g", {}),
                    ("matmul", ["g", "w2"], "y", {"out_sharding": P(None, None, unreduced="Y")}),
                    ("sharding_constraint", ["y"], "r", {"out_sharding": P("X", None)}),
                    ("relu", ["r"], "z", {})]),
    "unreduced_read_by_elementwise": prog(
        M2, MLP_W, [("matmul", ["x", "w1"], "h", {}),
                    ("matmul", ["h", "w2"], "y", {"out_sharding": P(None, None, unreduced="Y")}),
                    ("exp", ["y"], "z", {})]),
    "unreduced_other_axes": prog(M2, MLP_W, [("matmul", ["x", "w1"], "h", {}),
                                             ("matmul", ["h", "w2"], "y",
                                              {"out_sharding": P(None, None, unreduced="X")})]),
    "contracting_one_side": prog(M2, {"a": ((8, 16), P("X", "Y")), "b": ((16, 4), None)},
                                 [("matmul", ["a", "b"], "c", {})]),
    "contracting_one_side_axis_reused": prog(M1, {"a": ((8, 16), P(None, "X")), "b": ((16, 8), P(None, "X"))},
                                             [("matmul", ["a", "b"], "c", {})]),
    "contracting_differs": prog(M2, {"a": ((8, 16), P(None, "X")), "b": ((16, 4), P("Y", None))},
                                [("matmul", ["a", "b"], "c", {})]),
    "matmul_axis_twice": prog(M2, {"a": ((8, 16), P("X", None)), "b": ((16, 4), P(None, "X"))},
                              [("matmul", ["a", "b"], "c", {})]),
    "einsum_batch_left": prog(M3, {"a": ((2, 4, 8), P(None, "Y", None)), "b": ((2, 8, 4), P("X", None, "Z"))},
                              [("einsum", ["a", "b"], "c", {"equation": "bij,bjk->bik"})]),
    "einsum_heads_3d": prog(M3, {"q": ((2, 4, 8, 4), P("X", "Y", None, None)),
                                 "k": ((2, 4, 8, 4), P("X", "Y", None, None))},
                            [("einsum", ["q", "k"], "s", {"equation": "bhqd,bhkd->bhqk"}),
                             ("softmax", ["s"], "p", {"axis": -1})]),
    "einsum_contract_both_out_sharding": prog(
        M2, {"a": ((8, 16), P(None, "Y")), "b": ((16, 4), P("Y", None))},
        [("einsum", ["a", "b"], "c", {"equation": "ik,kj->ij", "out_sharding": P("X", None)})]),
    # -- reductions ------------------------------------------------------------------------------------
    "sum_sharded_axis": prog(M2, {"a": ((4, 8), P("X", "Y"))}, [("sum", ["a"], "s", {"axes": (1,)})]),
    "mean_sharded_axis_3d": prog(M3, {"a": ((4, 4, 8), P("X", "Y", "Z"))}, [("mean", ["a"], "m", {"axes": (0, 2)})]),
    "max_sharded_axis": prog(M2, {"a": ((4, 8), P(None, "X"))}, [("max", ["a"], "m", {"axes": (1,)})]),
    "min_sharded_axis_3d": prog(M3, {"a": ((4, 8), P("X", ("Y", "Z")))}, [("min", ["a"], "m", {"axes": (1,)})]),
    "max_keepdims_1d": prog(M1, {"a": ((8, 16), P("X", None))},
                            [("max", ["a"], "m", {"axes": (0,), "keepdims": True}), ("sub", ["a", "m"], "d", {})]),
    # -- normalisations ---------------------------------------------------------------------------------
    "softmax_sharded_axis": prog(M2, {"a": ((4, 8), P(None, "X"))}, [("softmax", ["a"], "p", {"axis": 1})]),
    "layernorm_sharded_axis": prog(M2, {"a": ((4, 8), P("Y", "X")), "g": ((8,), None), "b": ((8,), None)},
                                   [("layernorm", ["a", "g", "b"], "n", {})]),
    "layernorm_weight_conflicts": prog(M2, {"a": ((4, 8), P(None, "X")), "g": ((8,), P("Y")), "b": ((8,), None)},
                                       [("layernorm", ["a", "g", "b"], "n", {})]),
    "rmsnorm_weight_sharded": prog(M1, {"a": ((4, 8), None), "g": ((8,), P("X"))}, [("rmsnorm", ["a", "g"], "n", {})]),
    # -- concat and slice -------------------------------------------------------------------------------
    "concat_along_sharded": prog(M2, {"a": ((4, 8), P(None, "X")), "b": ((4, 8), P(None, "X"))},
                                 [("concat", ["a", "b"], "c", {"axis": 1})]),
    "concat_mixed_shardings": prog(M2, {"a": ((4, 8), P(None, "X")), "b": ((4, 8), None)},
                                   [("concat", ["a", "b"], "c", {"axis": 1})]),
    "slice_sharded_even": prog(M2, {"a": ((4, 8), P(None, "X"))},
                               [("slice", ["a"], "s", {"starts": (0, 2), "stops": (4, 6)})]),
    "slice_sharded_uneven": prog(M2, {"a": ((4, 8), P(None, "X"))},
                                 [("slice", ["a"], "s", {"starts": (0, 1), "stops": (4, 4)})]),
    "slice_other_dim_3d": prog(M3, {"a": ((4, 8, 4), P(None, ("X", "Y"), "Z"))},
                               [("slice", ["a"], "s", {"starts": (1, 0, 0), "stops": (3, 8, 4)})]),
    # -- reshape --------------------------------------------------------------------------------------
    "reshape_split_major_fits": prog(M2, {"a": ((8,), P("X"))}, [("reshape", ["a"], "r", {"shape": (2, 4)})]),
    "reshape_split_axis_too_big": prog(M2, {"a": ((8,), P("Y"))}, [("reshape", ["a"], "r", {"shape": (2, 4)})]),
    "reshape_split_two_axes": prog(M2, {"a": ((8,), P(("X", "Y")))}, [("reshape", ["a"], "r", {"shape": (2, 4)})]),
    "reshape_split_two_axes_misfit": prog(M2, {"a": ((8,), P(("X", "Y")))},
                                          [("reshape", ["a"], "r", {"shape": (4, 2)})]),
    "reshape_split_heads": prog(M3, {"a": ((4, 8, 16), P("X", None, "Y"))},
                                [("reshape", ["a"], "r", {"shape": (4, 8, 2, 8)})]),
    "reshape_merge_major_sharded": prog(M2, {"a": ((4, 6), P("X", None))}, [("reshape", ["a"], "r", {"shape": (24,)})]),
    "reshape_merge_minor_sharded": prog(M2, {"a": ((4, 6), P(None, "X"))}, [("reshape", ["a"], "r", {"shape": (24,)})]),
    "reshape_merge_both_sharded": prog(M2, {"a": ((4, 8), P("X", "Y"))}, [("reshape", ["a"], "r", {"shape": (32,)})]),
    "reshape_merge_heads_3d": prog(M3, {"a": ((4, 2, 2, 8), P("X", "Y", None, None))},
                                   [("reshape", ["a"], "r", {"shape": (4, 4, 8)})]),
    "reshape_regroup": prog(M2, {"a": ((6, 4), P("X", None))}, [("reshape", ["a"], "r", {"shape": (4, 6)})]),
    "reshape_singletons": prog(M2, {"a": ((4, 8), P("X", "Y"))}, [("reshape", ["a"], "r", {"shape": (4, 1, 8)})]),
    "reshape_out_sharding": prog(M2, {"a": ((4, 6), P(None, "X"))},
                                 [("reshape", ["a"], "r", {"shape": (24,), "out_sharding": P("X")})]),
    # -- auto_axes regions (seed 001): the region's axes are Auto inside, its outputs typed by out_sharding ---
    "seed001_auto_axes_add": prog(M2, {"a": ((4, 4), P("X", None)), "b": ((4, 4), P(None, "X"))},
                                  [("add", ["a", "b"], "c", {}), ("neg", ["c"], "d", {})],
                                  auto_axes=[(("X", "Y"), [0], {"c": P("X", None)})]),
    "seed001_auto_axes_one_axis": prog(M2, {"a": ((4, 4), P("X", "Y"))},
                                       [("exp", ["a"], "x", {}), ("neg", ["x"], "z", {}), ("tanh", ["z"], "w", {})],
                                       auto_axes=[(("X",), [1], {"z": P("X", "Y")})]),
    "auto_axes_types_inside_name_only_explicit_axes": prog(
        M3, {"a": ((4, 4, 8), P("X", "Y", "Z"))},
        [("exp", ["a"], "x", {}), ("neg", ["x"], "z", {}), ("sum", ["z"], "s", {"axes": (2,)}),
         ("tanh", ["s"], "w", {})],
        auto_axes=[(("X", "Z"), [1, 2], {"s": P("X", "Y")})]),
    "auto_axes_row_parallel_matmul": prog(M2, MLP_W, [("matmul", ["x", "w1"], "h", {}), ("gelu", ["h"], "g", {}),
                                                      ("matmul", ["g", "w2"], "y", {}), ("relu", ["y"], "r", {})],
                                          auto_axes=[(("Y",), [2], {"y": P(None, None)})]),
    "auto_axes_does_not_cover_the_conflict": prog(M2, {"a": ((4, 4), P("X", None)), "b": ((4, 4), P(None, "X"))},
                                                  [("add", ["a", "b"], "c", {})],
                                                  auto_axes=[(("Y",), [0], {"c": P("X", None)})]),
    # -- a small attention block: heads split, scores, softmax, merge ------------------------------------
    "attention_heads": prog(M2, {"x": ((2, 8, 16), P("X", None, None)), "wq": ((16, 16), P(None, "Y")),
                                 "wk": ((16, 16), P(None, "Y"))},
                            [("matmul", ["x", "wq"], "q", {}), ("matmul", ["x", "wk"], "k", {}),
                             ("reshape", ["q"], "qh", {"shape": (2, 8, 4, 4)}),
                             ("reshape", ["k"], "kh", {"shape": (2, 8, 4, 4)}),
                             ("einsum", ["qh", "kh"], "s", {"equation": "bqhd,bkhd->bhqk"}),
                             ("softmax", ["s"], "p", {"axis": -1})]),
    # -- more programs of the same kinds: broadcasts, batched dots, einsums, reductions, norms, concat/slice,
    # reshapes, reshards and a whole attention block --------------------------------------------------------
    "add_bias_row_sharded": prog(M2, {"a": ((8, 16), P("X", "Y")), "b": ((16,), P("Y"))},
                                 [("add", ["a", "b"], "c", {})]),
    "add_bias_unsharded": prog(M2, {"a": ((8, 16), P("X", "Y")), "b": ((16,), None)}, [("add", ["a", "b"], "c", {})]),
    "mul_scalar_like": prog(M1, {"a": ((8, 16), P(None, "X")), "b": ((1, 1), None)}, [("mul", ["a", "b"], "c", {})]),
    "sub_mixed_3d": prog(M3, {"a": ((4, 4, 8), P("X", None, "Z")), "b": ((4, 1, 8), P("X", None, "Z"))},
                         [("sub", ["a", "b"], "c", {})]),
    "div_conflict_3d": prog(M3, {"a": ((4, 8), P("X", "Y")), "b": ((4, 8), P("Y", "X"))},
                            [("div", ["a", "b"], "c", {})]),
    "matmul_batched": prog(M2, {"a": ((2, 8, 16), P("X", None, None)), "b": ((2, 16, 8), P("X", None, "Y"))},
                           [("matmul", ["a", "b"], "c", {})]),
    "matmul_broadcast_rhs": prog(M2, {"a": ((2, 8, 16), P("X", "Y", None)), "b": ((16, 8), None)},
                                 [("matmul", ["a", "b"], "c", {})]),
    "matmul_col_then_row_1d": prog(M1, {"a": ((8, 16), None), "w1": ((16, 32), P(None, "X")),
                                        "w2": ((32, 8), P("X", None))},
        [("matmul", ["a", "w1"], "h", {}), ("relu", ["h"], "r", {}),
         ("matmul", ["r", "w2"], "y", {"out_sharding": P(None, None)})]),
    "matmul_fsdp_gather": prog(M2, {"a": ((8, 16), P("X", None)), "w": ((16, 32), P("Y", None))},
                               [("matmul", ["a", "w"], "y", {})]),
    "einsum_outer": prog(M2, {"a": ((8,), P("X")), "b": ((4,), P("Y"))},
                         [("einsum", ["a", "b"], "c", {"equation": "i,j->ij"})]),
    "einsum_trace_like": prog(M2, {"a": ((4, 8, 8), P("X", None, None)), "b": ((4, 8), P("X", "Y"))},
                              [("einsum", ["a", "b"], "c", {"equation": "bij,bj->bi"})]),
    "einsum_moe": prog(M2, {"m": ((16, 4, 2), P("X", None, None)), "x": ((16, 8), P("X", None))},
                       [("einsum", ["m", "x"], "d", {"equation": "tec,th->ech"})]),
    "einsum_moe_experts": prog(M2, {"d": ((4, 2, 8), P("Y", None, None)), "w": ((4, 8, 16), P("Y", None, None))},
                               [("einsum", ["d", "w"], "h", {"equation": "ech,ehf->ecf"})]),
    "sum_all_axes": prog(M2, {"a": ((4, 8), P("X", "Y"))}, [("sum", ["a"], "s", {"axes": (0, 1)})]),
    "sum_keepdims": prog(M2, {"a": ((4, 8), P("X", "Y"))}, [("sum", ["a"], "s", {"axes": (1,), "keepdims": True})]),
    "mean_unsharded_axis": prog(M3, {"a": ((4, 4, 8), P("X", "Y", None))}, [("mean", ["a"], "m", {"axes": (2,)})]),
    "max_two_axes_3d": prog(M3, {"a": ((4, 4, 8), P("X", "Y", "Z"))}, [("max", ["a"], "m", {"axes": (1, 2)})]),
    "maximum_broadcast": prog(M2, {"a": ((4, 8), P("X", None)), "b": ((8,), P("Y"))},
                              [("maximum", ["a", "b"], "c", {})]),
    "softmax_unsharded_axis_3d": prog(M3, {"a": ((2, 4, 8), P("X", "Y", None))},
                                      [("softmax", ["a"], "p", {"axis": -1})]),
    "softmax_axis0": prog(M2, {"a": ((8, 4), P("X", "Y"))}, [("softmax", ["a"], "p", {"axis": 0})]),
    "rmsnorm_sharded_hidden": prog(M2, {"a": ((4, 8), P("X", "Y")), "g": ((8,), P("Y"))},
                                   [("rmsnorm", ["a", "g"], "n", {})]),
    "layernorm_rows": prog(M1, {"a": ((8, 8), P("X", None)), "g": ((8,), None), "b": ((8,), None)},
                           [("layernorm", ["a", "g", "b"], "n", {})]),
    "concat_unsharded_dim": prog(M2, {"a": ((4, 8), P("X", None)), "b": ((4, 8), P("X", None))},
                                 [("concat", ["a", "b"], "c", {"axis": 1})]),
    "concat_three": prog(M1, {"a": ((8, 4), P("X", None)), "b": ((8, 4), P("X", None)), "c": ((8, 8), P("X", None))},
                         [("concat", ["a", "b", "c"], "d", {"axis": 1})]),
    "slice_rows_unsharded": prog(M2, {"a": ((8, 8), P(None, "Y"))},
                                 [("slice", ["a"], "s", {"starts": (2, 0), "stops": (6, 8)})]),
    "slice_sharded_whole": prog(M2, {"a": ((8, 8), P("X", None))},
                                [("slice", ["a"], "s", {"starts": (0, 0), "stops": (8, 4)})]),
    "transpose_2d": prog(M2, {"a": ((4, 8), P("X", "Y"))}, [("transpose", ["a"], "t", {"perm": (1, 0)})]),
    "reshape_flatten_batch": prog(M2, {"a": ((2, 4, 8), P("X", None, "Y"))},
                                  [("reshape", ["a"], "r", {"shape": (8, 8)})]),
    "reshape_unflatten": prog(M2, {"a": ((8, 8), P("X", "Y"))}, [("reshape", ["a"], "r", {"shape": (2, 4, 8)})]),
    "reshape_merge_heads_2d": prog(M2, {"a": ((2, 4, 4, 4), P("X", None, "Y", None))},
                                   [("reshape", ["a"], "r", {"shape": (2, 4, 16)})]),
    "reshard_then_add": prog(M2, {"a": ((4, 8), P("X", None)), "b": ((4, 8), P(None, "Y"))},
        [("sharding_constraint", ["a"], "r", {"out_sharding": P(None, "Y")}), ("add", ["r", "b"], "c", {})]),
    "gelu_tanh_chain": prog(M1, {"a": ((8, 8), P(None, "X"))},
                            [("gelu", ["a"], "g", {}), ("sigmoid", ["g"], "s", {}), ("tanh", ["s"], "t", {})]),
    "cast_sharded": prog(M2, {"a": ((8, 8), P("X", "Y"))}, [("cast", ["a"], "c", {"dtype": "bf16"})]),
    "matmul_out_sharding_then_exp": prog(M2, {"a": ((8, 16), P("X", "Y")), "w": ((16, 8), P("Y", None))},
        [("matmul", ["a", "w"], "y", {"out_sharding": P("X", None)}), ("exp", ["y"], "e", {})]),
    "attention_full": prog(M2, {"x": ((2, 8, 16), P("X", None, None)), "wq": ((16, 16), P(None, "Y")),
                                "wk": ((16, 16), P(None, "Y")), "wv": ((16, 16), P(None, "Y"))},
        [("matmul", ["x", "wq"], "q", {}), ("matmul", ["x", "wk"], "k", {}), ("matmul", ["x", "wv"], "v", {}),
         ("reshape", ["q"], "qh", {"shape": (2, 8, 4, 4)}), ("reshape", ["k"], "kh", {"shape": (2, 8, 4, 4)}),
         ("reshape", ["v"], "vh", {"shape": (2, 8, 4, 4)}),
         ("einsum", ["qh", "kh"], "s", {"equation": "bqhd,bkhd->bhqk"}), ("softmax", ["s"], "p", {"axis": -1}),
         ("einsum", ["p", "vh"], "o", {"equation": "bhqk,bkhd->bqhd"}),
         ("reshape", ["o"], "om", {"shape": (2, 8, 16)})]),
    # written later as held-out programs of the same kinds: transposed matmul operands, pending sums through the
    # linear ops JAX types them through, uneven shards (JAX's types hold equal shards only)
    "mm_transpose_b_sharded": prog(M2, {"a": ((8, 16), P("X", "Y")), "w": ((32, 16), P(None, "Y"))},
        [("matmul", ["a", "w"], "c", {"transpose_b": True})]),
    "mm_transpose_a_rows": prog(M2, {"a": ((16, 8), P(None, "X")), "w": ((16, 32), P(None, "Y"))},
        [("matmul", ["a", "w"], "c", {"transpose_a": True})]),
    "mm_contract_both_out": prog(M2, {"a": ((8, 16), P(None, "Y")), "w": ((16, 32), P("Y", None))},
        [("matmul", ["a", "w"], "c", {"out_sharding": P(None, "Y")})]),
    "mm_contract_both_unreduced": prog(M2, {"a": ((8, 16), P("X", "Y")), "w": ((16, 32), P("Y", None))},
        [PENDING_C]),
    "mm_batch_conflict": prog(M2, {"a": ((2, 8, 16), P("X", None, None)), "b": ((2, 16, 8), P("Y", None, None))},
        [("matmul", ["a", "b"], "c", {})]),
    "mm_result_axis_twice": prog(M2, {"a": ((8, 16), P("X", None)), "w": ((16, 32), P(None, "X"))},
        [("matmul", ["a", "w"], "c", {})]),
    "einsum_contract_two": prog(M3, {"a": ((4, 8, 8), P(None, "X", "Y")), "b": ((8, 8, 4), P(None, None, "Z"))},
        [("einsum", ["a", "b"], "c", {"equation": "ijk,jkl->il"})]),
    "einsum_batch_two_axes": prog(M3, {"a": ((4, 8, 8), P(("X", "Y"), None, None)),
                                       "b": ((4, 8, 8), P(("X", "Y"), None, "Z"))},
        [("einsum", ["a", "b"], "c", {"equation": "bij,bjk->bik"})]),
    "einsum_transpose_out": prog(M2, {"a": ((8, 16), P("X", None)), "b": ((16, 4), P(None, "Y"))},
        [("einsum", ["a", "b"], "c", {"equation": "ij,jk->ki"})]),
    "sum_two_sharded": prog(M3, {"a": ((4, 4, 8), P("X", "Y", "Z"))}, [("sum", ["a"], "s", {"axes": (0, 2)})]),
    "min_keepdims_sharded": prog(M2, {"a": ((4, 8), P("X", "Y"))},
        [("min", ["a"], "m", {"axes": (1,), "keepdims": True})]),
    "mean_all": prog(M2, {"a": ((4, 8), P("X", "Y"))}, [("mean", ["a"], "m", {})]),
    "max_then_sub": prog(M2, {"a": ((4, 8), P("X", "Y"))},
        [("max", ["a"], "m", {"axes": (1,), "keepdims": True}), ("sub", ["a", "m"], "d", {})]),
    "softmax_two_axes_dim": prog(M2, {"a": ((4, 16), P(None, ("X", "Y")))}, [("softmax", ["a"], "p", {"axis": 1})]),
    "layernorm_two_axes_hidden": prog(M2, {"a": ((4, 16), P(None, ("X", "Y"))), "g": ((16,), P(("X", "Y"))),
                                           "b": ((16,), P(("X", "Y")))},
        [("layernorm", ["a", "g", "b"], "n", {})]),
    "rmsnorm_rows_and_hidden": prog(M2, {"a": ((4, 8), P("X", "Y")), "g": ((8,), None)},
        [("rmsnorm", ["a", "g"], "n", {})]),
    "concat_sharded_differs": prog(M2, {"a": ((8, 4), P("X", None)), "b": ((8, 4), P("Y", None))},
        [("concat", ["a", "b"], "c", {"axis": 1})]),
    "concat_along_sharded_rows": prog(M1, {"a": ((8, 4), P("X", None)), "b": ((16, 4), P("X", None))},
        [("concat", ["a", "b"], "c", {"axis": 0})]),
    "slice_uneven_rows": prog(M2, {"a": ((8, 8), P("X", "Y"))},
        [("slice", ["a"], "s", {"starts": (1, 0), "stops": (7, 8)})]),
    "slice_cols_sharded": prog(M2, {"a": ((8, 8), P(None, "Y"))},
        [("slice", ["a"], "s", {"starts": (0, 4), "stops": (8, 8)})]),
    "reshape_split_minor": prog(M2, {"a": ((8, 16), P(None, "Y"))}, [("reshape", ["a"], "r", {"shape": (8, 4, 4)})]),
    "reshape_merge_major_two_axes": prog(M2, {"a": ((8, 4, 4), P(("X", "Y"), None, None))},
        [("reshape", ["a"], "r", {"shape": (32, 4)})]),
    "reshape_add_singleton": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("reshape", ["a"], "r", {"shape": (8, 1, 16)})]),
    "reshape_drop_singleton": prog(M2, {"a": ((8, 1, 16), P("X", None, "Y"))},
        [("reshape", ["a"], "r", {"shape": (8, 16)})]),
    "reshape_flatten_all": prog(M2, {"a": ((8, 16), P("X", None))}, [("reshape", ["a"], "r", {"shape": (128,)})]),
    "reshape_flatten_minor_sharded": prog(M2, {"a": ((8, 16), P(None, "Y"))},
        [("reshape", ["a"], "r", {"shape": (128,)})]),
    "transpose_then_matmul": prog(M2, {"a": ((16, 8), P("Y", "X")), "w": ((16, 4), P("Y", None))},
        [("transpose", ["a"], "t", {"perm": (1, 0)}), ("matmul", ["t", "w"], "c", {})]),
    "maximum_conflict": prog(M2, {"a": ((8, 8), P("X", None)), "b": ((8, 8), P("Y", None))},
        [("maximum", ["a", "b"], "c", {})]),
    "mul_broadcast_sharded_col": prog(M2, {"a": ((8, 16), P(None, "Y")), "b": ((8, 1), P("X", None))},
        [("mul", ["a", "b"], "c", {})]),
    "exp_unreduced": prog(M2, {"a": ((8, 16), P(None, "Y")), "w": ((16, 8), P("Y", None))},
        [("matmul", ["a", "w"], "c", {"out_sharding": P(None, None, unreduced="Y")}), ("exp", ["c"], "e", {})]),
    "constraint_to_unreduced_free": prog(M2, {"a": ((8, 16), P("X", "Y"))},
        [("sharding_constraint", ["a"], "r", {"out_sharding": P(None, None)}), ("neg", ["r"], "n", {})]),
    # pending sums through the ops JAX types them through (add of values pending alike, transpose, concat, slice,
    # cast, sum) and the errors of the others
    "add_pending_pair": prog(M2, PENDING_IN,
        [PENDING_C, PENDING_D,
         ("add", ["c", "d"], "e", {})]),
    "add_pending_three_then_reshard": prog(M2, PENDING_IN,
        [PENDING_C, PENDING_D,
         ("add", ["c", "d"], "e", {}), ("add", ["e", "c"], "f", {}),
         ("sharding_constraint", ["f"], "r", {"out_sharding": P("X", None)})]),
    "pending_through_transpose_cast_slice": prog(M2, PENDING_IN,
        [PENDING_C, ("transpose", ["c"], "t", {"perm": (1, 0)}),
         ("cast", ["t"], "b", {"dtype": "bf16"}), ("slice", ["b"], "s", {"starts": (0, 0), "stops": (8, 4)})]),
    "pending_concat": prog(M2, PENDING_IN,
        [PENDING_C, PENDING_D, ("concat", ["c", "d"], "k", {"axis": 1})]),
    "pending_sum_over_sharded_dim": prog(M2, PENDING_IN,
        [PENDING_C, ("sum", ["c"], "s", {"axes": (0,)})]),
    "pending_sum_all": prog(M2, PENDING_IN, [PENDING_C, ("sum", ["c"], "s", {})]),
    "pending_add_one_side": prog(M2, PENDING_IN,
        [PENDING_C, ("matmul", ["a", "v"], "d", {"out_sharding": P("X", None)}), ("add", ["c", "d"], "e", {})]),
    "pending_add_other_axes": prog(M2, {"a": ((8, 16), P(None, "Y")), "w": ((16, 8), P("Y", None)),
                                        "b": ((8, 16), P(None, "X")), "v": ((16, 8), P("X", None))},
        [("matmul", ["a", "w"], "c", {"out_sharding": P(None, None, unreduced="Y")}),
         ("matmul", ["b", "v"], "d", {"out_sharding": P(None, None, unreduced="X")}), ("add", ["c", "d"], "e", {})]),
    "pending_mul_pair": prog(M2, PENDING_IN, [PENDING_C, PENDING_D, ("mul", ["c", "d"], "e", {})]),
    "pending_neg": prog(M2, PENDING_IN, [PENDING_C, ("neg", ["c"], "n", {})]),
    "pending_mean": prog(M2, PENDING_IN, [PENDING_C, ("mean", ["c"], "m", {"axes": (1,)})]),
    "pending_matmul": prog(M2, {**PENDING_IN, "r": ((8, 8), None)}, [PENDING_C, ("matmul", ["c", "r"], "e", {})]),
    "uneven_input_neg": prog(M2, {"a": ((6, 8), P("Y", None))}, [("neg", ["a"], "n", {})]),
    "uneven_input_two_axes": prog(M2, {"a": ((4, 8), P(("X", "Y"), None))}, [("neg", ["a"], "n", {})]),
    "uneven_out_sharding_matmul": prog(M2, {"a": ((6, 8), P(None, None)), "w": ((8, 8), P(None, "Y"))},
        [("matmul", ["a", "w"], "c", {"out_sharding": P("Y", "X")})]),
    "uneven_reshape_out": prog(M2, {"a": ((8, 6), P("X", None))}, [("reshape", ["a"], "r", {"shape": (6, 8)})]),
    "uneven_constraint": prog(M2, {"a": ((6, 8), P(None, None))},
        [("sharding_constraint", ["a"], "r", {"out_sharding": P("Y", None)})]),
    "uneven_einsum_out": prog(M2, {"a": ((6, 8), P(None, "Y")), "b": ((8, 4), P("Y", None))},
        [("einsum", ["a", "b"], "c", {"equation": "ij,jk->ik", "out_sharding": P("X", None, unreduced="Y")})]),
    # -- first written as held-out programs of a later session: abs, sqrt and rsqrt, three-way concat, casts,
    # norms and softmax on other axes, transposed and outer dots, reductions over every axis ----------------
    "abs_sqrt_chain": prog(M2, {"a": ((8, 16), P("X", "Y"))},
        [("abs", ["a"], "b", {}), ("sqrt", ["b"], "c", {}), ("rsqrt", ["c"], "d", {})]),
    "concat_three_row_sharded": prog(M1, {"a": ((4, 8), P("X", None)), "b": ((4, 8), P("X", None)),
                                          "c": ((4, 8), P("X", None))},
        [("concat", ["a", "b", "c"], "d", {"axis": 1})]),
    "cast_bf16": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("cast", ["a"], "b", {"dtype": "bf16"})]),
    "softmax_axis0_sharded_other": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("softmax", ["a"], "p", {"axis": 0})]),
    "layernorm_3d": prog(M3, {"a": ((2, 4, 8), P("X", "Y", None)), "g": ((8,), None), "b": ((8,), None)},
        [("layernorm", ["a", "g", "b"], "n", {})]),
    "mean_keepdims_sub": prog(M2, {"a": ((8, 16), P("X", "Y"))},
        [("mean", ["a"], "m", {"axes": (1,), "keepdims": True}), ("sub", ["a", "m"], "d", {})]),
    "maximum_broadcast_rows": prog(M2, {"a": ((8, 16), P("X", None)), "b": ((16,), P("Y"))},
        [("maximum", ["a", "b"], "c", {})]),
    "transpose_then_matmul_2d": prog(M2, {"a": ((16, 8), P("Y", "X")), "w": ((16, 4), None)},
        [("transpose", ["a"], "t", {"perm": (1, 0)}), ("matmul", ["t", "w"], "y", {})]),
    "matmul_transpose_b": prog(M2, {"a": ((8, 16), P("X", None)), "w": ((4, 16), P("Y", None))},
        [("matmul", ["a", "w"], "y", {"transpose_b": True})]),
    "einsum_outer_two_axes": prog(M2, {"a": ((8,), P("X")), "b": ((4,), P("Y"))},
        [("einsum", ["a", "b"], "c", {"equation": "i,j->ij"})]),
    "sum_all": prog(M3, {"a": ((4, 8), P("X", ("Y", "Z")))}, [("sum", ["a"], "s", {"axes": (0, 1)})]),
    "slice_then_concat": prog(M1, {"a": ((8, 16), P(None, "X"))},
        [("slice", ["a"], "l", {"starts": (0, 0), "stops": (8, 8)}),
         ("slice", ["a"], "r", {"starts": (0, 8), "stops": (8, 16)}), ("concat", ["r", "l"], "c", {"axis": 1})]),
    "reshape_flatten_3d": prog(M3, {"a": ((2, 4, 8), P("X", "Y", "Z"))}, [("reshape", ["a"], "r", {"shape": (8, 8)})]),
    "rmsnorm_then_matmul": prog(M2, {"a": ((8, 16), P("X", None)), "g": ((16,), None), "w": ((16, 8), P(None, "Y"))},
        [("rmsnorm", ["a", "g"], "n", {}), ("matmul", ["n", "w"], "y", {})]),
    "sigmoid_mul_gate": prog(M2, {"a": ((8, 16), P("X", "Y")), "b": ((8, 16), P("X", "Y"))},
        [("sigmoid", ["a"], "s", {}), ("mul", ["s", "b"], "c", {})]),
    "div_broadcast_keepdims": prog(M2, {"a": ((8, 16), P("X", "Y"))},
        [("sum", ["a"], "s", {"axes": (1,), "keepdims": True}), ("div", ["a", "s"], "d", {})]),
    "max_all_axes": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("max", ["a"], "m", {"axes": (0, 1)})]),
    "minimum_3d": prog(M3, {"a": ((2, 4, 8), P("X", "Y", "Z")), "b": ((2, 4, 8), P("X", "Y", "Z"))},
        [("minimum", ["a", "b"], "c", {})]),
    # -- comparison and select (jnp.where): JAX wants the cases and the predicate sharded alike unless one is
    # broadcast ------------------------------------------------------------------------------------------
    "where_consensus": prog(M2, {"a": ((8, 16), P("X", None)), "b": ((8, 16), P(None, "Y"))},
        [("comparison", ["a", "b"], "p", {"direction": "gt"}), ("select", ["p", "a", "b"], "c", {})]),
    "where_broadcast_3d": prog(M3, {"a": ((2, 4, 8), P("X", "Y", None)), "b": ((8,), P("Z"))},
        [("comparison", ["a", "b"], "p", {"direction": "le"}), ("select", ["p", "b", "a"], "c", {})]),
    "where_pred_differs": prog(M2, {"a": ((8, 16), P("X", None)), "b": ((8, 16), P("X", None)),
                                    "q": ((8, 16), P(None, "Y"))},
        [("comparison", ["q", "q"], "p", {"direction": "gt"}), ("select", ["p", "a", "b"], "c", {})]),
    "where_cases_alike": prog(M1, {"a": ((8, 16), P("X", None)), "b": ((8, 16), P("X", None))},
        [("comparison", ["a", "b"], "p", {"direction": "ge"}), ("select", ["p", "a", "b"], "c", {}),
         ("tanh", ["c"], "t", {})]),
    "where_conflict": prog(M2, {"a": ((8, 16), P("X", None)), "b": ((8, 16), P("Y", None))},
        [("comparison", ["a", "b"], "p", {"direction": "eq"})]),
    # -- iota (replicated, as JAX types lax.iota without a sharding), expm1, log1p, is_finite ---------------
    "iota_then_add": prog(M2, {"a": ((8, 16), P("X", "Y"))},
        [("iota", [], "i", {"shape": (8, 16), "dimension": 1, "dtype": "f32"}), ("add", ["a", "i"], "c", {})]),
    "iota_mask": prog(M2, {"s": ((8, 8), P("X", None))},
        [("iota", [], "r", {"shape": (8, 8), "dimension": 0}), ("iota", [], "c", {"shape": (8, 8), "dimension": 1}),
         ("comparison", ["r", "c"], "m", {"direction": "ge"}), ("select", ["m", "s", "s"], "o", {})]),
    "abs_expm1": prog(M1, {"a": ((8, 16), P("X", None))},
        [("expm1", ["a"], "b", {}), ("log1p", ["b"], "c", {}), ("is_finite", ["c"], "d", {})]),
    # argmax and argmin: JAX types the index replicated on the reduced axis, sharded or not
    "argmax_free_axis": prog(M2, {"a": ((8, 16), P("X", None))}, [("argmax", ["a"], "i", {"axis": 1})]),
    "argmax_sharded_axis": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("argmax", ["a"], "i", {"axis": 1})]),
    "argmin_rows": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("argmin", ["a"], "i", {"axis": 0})]),
    # cumsum: along an unsharded axis the running sum keeps the input's type; along a sharded one JAX raises
    "cumsum_free_axis": prog(M2, {"a": ((8, 16), P("X", None))},
                             [("cumsum", ["a"], "c", {"axis": 1, "reverse": True})]),
    "cumsum_sharded_rows": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("cumsum", ["a"], "c", {"axis": 0})]),
    "cumsum_sharded_axis": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("cumsum", ["a"], "c", {"axis": 1})]),
    "cumsum_3d": prog(M3, {"a": ((4, 8, 16), P(("X", "Y"), None, "Z"))}, [("cumsum", ["a"], "c", {"axis": 1})]),
    # top_k: the k-dimension replicated, the others kept; along a sharded axis JAX raises
    "top_k_free_axis": prog(M2, {"a": ((8, 16), P("X", None))}, [("top_k", ["a"], "v", {"k": 2})]),
    "top_k_indices": prog(M2, {"a": ((8, 16), P("X", None))}, [("top_k", ["a"], "i", {"k": 3, "returns": "indices"})]),
    "top_k_sharded_axis": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("top_k", ["a"], "v", {"k": 2})]),
    "top_k_axis_0": prog(M3, {"a": ((8, 4, 4), P(None, "X", ("Y", "Z")))},
                         [("top_k", ["a"], "v", {"k": 2, "axis": 0})]),
    "argmax_3d": prog(M3, {"a": ((4, 8, 16), P("X", "Y", None))},
                      [("argmax", ["a"], "i", {"axis": 2, "index_dtype": "i32"})]),
    # gathers (JAX's _gather_spec_computation): the indexed dimension and the indices' own dimensions replicated,
    # batch dimensions resolved (consensus); else JAX asks for an out_sharding
    "take_along_free_axis": prog(M2, {"a": ((8, 16), P("X", None)), "i": ((8, 2), P("X", None), "i32")},
                                 [("take_along_axis", ["a", "i"], "c", {"axis": 1})]),
    "take_along_batch_from_operand": prog(M2, {"a": ((8, 16), P("X", None)), "i": ((8, 4), P(None, None), "i32")},
                                          [("take_along_axis", ["a", "i"], "c", {"axis": 1})]),
    "take_along_batch_from_indices": prog(M2, {"a": ((8, 16), P(None, None)), "i": ((8, 4), P("X", None), "i32")},
                                          [("take_along_axis", ["a", "i"], "c", {"axis": 1})]),
    "take_along_sharded_axis": prog(M2, {"a": ((8, 16), P("X", "Y")), "i": ((8, 2), P("X", None), "i32")},
                                    [("take_along_axis", ["a", "i"], "c", {"axis": 1})]),
    "take_along_indices_sharded": prog(M2, {"a": ((8, 16), P("X", None)), "i": ((8, 4), P("X", "Y"), "i32")},
                                       [("take_along_axis", ["a", "i"], "c", {"axis": 1})]),
    "take_along_axis_0_3d": prog(M3, {"a": ((4, 8, 16), P("X", "Y", "Z")), "i": ((2, 8, 16), P(None, "Y", "Z"), "i32")},
                                 [("take_along_axis", ["a", "i"], "c", {"axis": 0})]),
    "take_along_batch_conflict": prog(M2, {"a": ((8, 16), P("X", None)), "i": ((8, 4), P("Y", None), "i32")},
                                      [("take_along_axis", ["a", "i"], "c", {"axis": 1})]),
    "gather_hidden_sharded": prog(M2, {"t": ((16, 8), P(None, "Y")), "i": ((8,), P(None), "i32")},
                                  [("gather", ["t", "i"], "c", {})]),
    "gather_tokens_sharded": prog(M2, {"t": ((16, 8), P(None, None)), "i": ((8,), P("X"), "i32")},
                                  [("gather", ["t", "i"], "c", {})]),
    "gather_vocab_sharded": prog(M2, {"t": ((16, 8), P("Y", None)), "i": ((8,), P(None), "i32")},
                                 [("gather", ["t", "i"], "c", {})]),
    "gather_columns": prog(M2, {"t": ((8, 16), P("X", None)), "i": ((4,), P(None), "i32")},
                           [("gather", ["t", "i"], "c", {"axis": 1})]),
    "gather_sharded_columns": prog(M2, {"t": ((8, 16), P("X", "Y")), "i": ((4,), P(None), "i32")},
                                   [("gather", ["t", "i"], "c", {"axis": 1})]),
    "gather_columns_3d": prog(M3, {"t": ((4, 8, 16), P("X", None, ("Y", "Z"))), "i": ((2, 3), P(None, None), "i32")},
                              [("gather", ["t", "i"], "c", {"axis": 1})]),
    # pad (lax.pad): the operand's sharding kept on every dimension, a padded one too where its shards divide it
    "pad_free_axis": prog(M2, {"a": ((8, 16), P("X", None))}, [("pad", ["a"], "c", {"low": [0, 2], "high": [0, 2]})]),
    "pad_sharded_axis": prog(M2, {"a": ((8, 16), P("X", "Y"))},
                             [("pad", ["a"], "c", {"low": [0, 2], "high": [0, 2]})]),
    "pad_uneven": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("pad", ["a"], "c", {"low": [0, 1], "high": [0, 1]})]),
    "pad_rows_by_a_value": prog(M2, {"a": ((8, 16), P("X", "Y"))},
                                [("pad", ["a"], "c", {"low": [1, 0], "high": [1, 0], "value": 3.0})]),
    "pad_shift": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("pad", ["a"], "c", {"low": [0, 1], "high": [0, -1]})]),
    "pad_three_dims": prog(M3, {"a": ((4, 8, 16), P("X", "Y", "Z"))},
                           [("pad", ["a"], "c", {"low": [2, 0, 4], "high": [2, 0, 4]})]),
    # flip (lax.rev): the operand's sharding kept
    "flip_sharded_axis": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("flip", ["a"], "c", {"axes": [1]})]),
    "flip_two_axes_3d": prog(M3, {"a": ((4, 8, 16), P("X", "Y", "Z"))}, [("flip", ["a"], "c", {"axes": [0, 2]})]),
    # roll (jnp.roll: two slices and a concatenate): the operand's sharding kept where both slices divide among the
    # rolled dimension's devices (a roll by a block), JAX's slicing error where one does not
    "roll_by_a_block": prog(M2, {"a": ((16, 32), P("X", "Y"))}, [("roll", ["a"], "c", {"shift": -8, "axis": 1})]),
    "roll_uneven_pieces": prog(M2, {"a": ((16, 32), P("X", "Y"))}, [("roll", ["a"], "c", {"shift": 3, "axis": 1})]),
    "roll_free_axis": prog(M2, {"a": ((16, 32), P("X", None))}, [("roll", ["a"], "c", {"shift": 3, "axis": 1})]),
    "roll_rows_by_one": prog(M2, {"a": ((16, 32), P("X", "Y"))}, [("roll", ["a"], "c", {"shift": 1, "axis": 0})]),
    # sort (JAX's _sort_sharding_rule): every operand sharded alike and unsharded over the sorted dimension
    "sort_free_axis": prog(M2, {"a": ((8, 16), P("X", None))}, [("sort", ["a"], "c", {"axis": 1})]),
    "sort_sharded_axis": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("sort", ["a"], "c", {"axis": 1})]),
    "sort_1d": prog(M1, {"a": ((16,), P("X"))}, [("sort", ["a"], "c", {"axis": 0})]),
    "sort_payload_alike": prog(M2, {"a": ((8, 16), P("X", None)), "i": ((8, 16), P("X", None), "i32")},
                               [("sort", ["a", "i"], "c", {"axis": 1, "returns": "payload"})]),
    "sort_payload_unlike": prog(M2, {"a": ((8, 16), P("X", None)), "i": ((8, 16), P(None, None), "i32")},
                                [("sort", ["a", "i"], "c", {"axis": 1, "returns": "payload"})]),
    "sort_3d_rows": prog(M3, {"a": ((4, 8, 16), P(None, "Y", "Z"))}, [("sort", ["a"], "c", {"axis": 0})]),
    "sort_3d_sharded": prog(M3, {"a": ((4, 8, 16), P("X", "Y", "Z"))}, [("sort", ["a"], "c", {"axis": 0})]),
    # stop_gradient: the operand's type, whatever it is sharded over (a stopped shift of optax's cross-entropy), a
    # pending sum included
    "stop_gradient_sharded": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("stop_gradient", ["a"], "c", {})]),
    "stop_gradient_shift": prog(M2, {"a": ((8, 16), P("X", "Y"))},
                                [("max", ["a"], "m", {"axes": [1], "keepdims": True}),
                                 ("stop_gradient", ["m"], "s", {}), ("sub", ["a", "s"], "c", {})]),
    "stop_gradient_pending": prog(M2, PENDING_IN, [PENDING_C, ("stop_gradient", ["c"], "s", {})]),
    "stop_gradient_3d": prog(M3, {"a": ((4, 8, 16), P("X", "Y", "Z"))},
                             [("stop_gradient", ["a"], "b", {}), ("mul", ["a", "b"], "c", {})]),
    # -- written as held-out programs of this session --------------------------------------------------------
    "layernorm_3d_weight_bias": prog(M3, {"a": ((4, 8, 16), P("X", "Y", None)), "g": ((16,), P(None)),
                                          "b": ((16,), P(None))}, [("layernorm", ["a", "g", "b"], "c", {})]),
    "softmax_then_matmul": prog(M2, {"a": ((8, 16), P("X", None)), "w": ((16, 8), P(None, "Y"))},
                                [("softmax", ["a"], "p", {"axis": -1}), ("matmul", ["p", "w"], "c", {})]),
    "concat_rows_sharded": prog(M2, {"a": ((8, 16), P("X", "Y")), "b": ((8, 16), P("X", "Y"))},
                                [("concat", ["a", "b"], "c", {"axis": 0})]),
    "slice_free_cols": prog(M2, {"a": ((8, 16), P("X", None))},
                            [("slice", ["a"], "c", {"starts": [0, 4], "stops": [8, 12]})]),
    "mean_then_centre": prog(M2, {"a": ((8, 16), P("X", "Y"))},
                             [("mean", ["a"], "m", {"axes": [1], "keepdims": True}), ("sub", ["a", "m"], "c", {})]),
    "transpose_then_matmul_out": prog(M2, {"a": ((16, 8), P("Y", "X")), "w": ((16, 4), P("Y", None))},
                                      [("transpose", ["a"], "t", {"perm": (1, 0)}),
                                       ("matmul", ["t", "w"], "c", {"out_sharding": P("X", None)})]),
    "reshape_heads_3d": prog(M3, {"a": ((4, 8, 16), P("X", None, "Y"))},
                             [("reshape", ["a"], "c", {"shape": (4, 8, 4, 4)})]),
    "gelu_chain_sum_1d": prog(M1, {"a": ((16, 8), P("X", None)), "w": ((8, 8), P(None, None))},
                              [("matmul", ["a", "w"], "h", {}), ("gelu", ["h"], "g", {}),
                               ("sum", ["g"], "s", {"axes": [0]})]),
    "max_sharded_last_3d": prog(M3, {"a": ((4, 8, 16), P("X", "Y", "Z"))}, [("max", ["a"], "c", {"axes": [2]})]),
    "einsum_out_unreduced": prog(M2, {"a": ((8, 16), P("X", "Y")), "b": ((16, 4), P("Y", None))},
                                 [("einsum", ["a", "b"], "c", {"equation": "ik,kj->ij",
                                                               "out_sharding": P("X", None, unreduced="Y")})]),
    "where_against_a_broadcast_row": prog(M2, {"a": ((8, 16), P("X", "Y")), "b": ((16,), P("Y"))},
                                          [("comparison", ["a", "b"], "p", {"direction": "lt"}),
                                           ("select", ["p", "a", "b"], "c", {})]),
    # attention scores over features on Y, an MLP on 2x2x2, a hand-written RMS norm on 1-D, a row sum taken from
    # another array, a concatenation along a free dimension, a merge of free dimensions, a transpose then a matmul
    # on 2x2x2, a shifted exponential, a matmul whose out_sharding merges X and Y, three additions on 2x2x2
    "attention_scores_over_features": prog(M2, {"q": ((4, 8, 16), P("X", None, "Y")),
                                                "k": ((4, 8, 16), P("X", None, "Y"))},
                                           [("einsum", ["q", "k"], "s", {"equation": "bqd,bkd->bqk"}),
                                            ("softmax", ["s"], "p", {"axis": -1})]),
    "mlp_contracting_on_z_3d": prog(M3, {"x": ((8, 16), P(("X", "Y"), None)), "w1": ((16, 32), P(None, "Z")),
                                         "w2": ((32, 16), P("Z", None))},
                                    [("matmul", ["x", "w1"], "h", {}), ("relu", ["h"], "r", {}),
                                     ("matmul", ["r", "w2"], "y", {})]),
    "rms_norm_by_hand_1d": prog(M1, {"a": ((8, 16), P("X", None)), "s": ((16,), None)},
                                [("mul", ["a", "a"], "sq", {}),
                                 ("mean", ["sq"], "m", {"axes": (1,), "keepdims": True}),
                                 ("rsqrt", ["m"], "r", {}), ("mul", ["a", "r"], "n", {}),
                                 ("mul", ["n", "s"], "y", {})]),
    "row_sum_subtracted_from_another": prog(M2, {"a": ((4, 8), P("X", "Y")), "b": ((4, 8), P("X", "Y"))},
                                            [("sum", ["a"], "s", {"axes": (1,), "keepdims": True}),
                                             ("sub", ["b", "s"], "d", {})]),
    "concat_along_a_free_dimension": prog(M2, {"a": ((4, 8), P("X", None)), "b": ((4, 8), P("X", None))},
                                          [("concat", ["a", "b"], "c", {"axis": 1})]),
    "reshape_merging_free_dimensions": prog(M2, {"a": ((4, 2, 8), P("X", None, None))},
                                            [("reshape", ["a"], "b", {"shape": (4, 16)})]),
    "transpose_then_matmul_3d": prog(M3, {"a": ((16, 8), P("X", "Y")), "b": ((16, 4), P("X", "Z"))},
                                     [("transpose", ["a"], "at", {"perm": (1, 0)}), ("matmul", ["at", "b"], "c", {})]),
    "shifted_exponential": prog(M2, {"a": ((4, 16), P("X", "Y"))},
                                [("max", ["a"], "m", {"axes": (1,), "keepdims": True}), ("sub", ["a", "m"], "d", {}),
                                 ("exp", ["d"], "e", {})]),
    "matmul_out_sharding_merging_axes_3d": prog(M3, {"a": ((8, 16), P("X", None)), "b": ((16, 8), P(None, "Y"))},
                                                [("matmul", ["a", "b"], "c", {"out_sharding": P(("X", "Y"), None)})]),
    "three_additions_3d": prog(M3, {"a": ((8, 8), P("X", None)), "b": ((8, 8), P("X", None)),
                                    "c": ((8, 8), P("X", None))},
                               [("add", ["a", "b"], "d", {}), ("add", ["d", "c"], "e", {})]),
    # -- held-out programs of a third batch: a Megatron block with a residual on 2x2x2, GQA-like scores, a bias on
    # the hidden sharded the other way, norms over two sharded dimensions, a slice then matmul, a merge of heads
    # then a row-parallel projection, a cross-entropy pick, reductions of a pending sum, a cumulative sum into a
    # matmul, an outer product over one axis
    "megatron_block_residual_3d": prog(M3, {"x": ((8, 16), P("X", None)), "w1": ((16, 32), P(None, ("Y", "Z"))),
                                            "w2": ((32, 16), P(("Y", "Z"), None))},
                                       [("matmul", ["x", "w1"], "h", {}), ("relu", ["h"], "r", {}),
                                        ("matmul", ["r", "w2"], "y", {"out_sharding": P("X", None)}),
                                        ("add", ["x", "y"], "z", {})]),
    "scores_heads_on_two_axes": prog(M3, {"q": ((2, 4, 8, 8), P("X", ("Y", "Z"), None, None)),
                                          "k": ((2, 4, 8, 8), P("X", ("Y", "Z"), None, None))},
                                     [("einsum", ["q", "k"], "s", {"equation": "bhqd,bhkd->bhqk"}),
                                      ("softmax", ["s"], "p", {"axis": -1}),
                                      ("einsum", ["p", "k"], "o", {"equation": "bhqk,bhkd->bhqd"})]),
    "bias_hidden_other_axis": prog(M2, {"a": ((8, 16), P(None, "X")), "b": ((16,), P("Y"))},
                                   [("add", ["a", "b"], "c", {})]),
    "rmsnorm_rows_sharded_3d": prog(M3, {"a": ((4, 8, 16), P(("X", "Y"), "Z", None)), "s": ((16,), None)},
                                    [("rmsnorm", ["a", "s"], "c", {})]),
    "slice_then_matmul_rows": prog(M2, {"a": ((16, 8), P("X", None)), "w": ((8, 4), P(None, "Y"))},
                                   [("slice", ["a"], "s", {"starts": [0, 0], "stops": [8, 8]}),
                                    ("matmul", ["s", "w"], "c", {})]),
    "merge_heads_then_row_parallel": prog(M2, {"o": ((8, 4, 8), P("X", "Y", None)), "w": ((32, 16), P("Y", None))},
                                          [("reshape", ["o"], "m", {"shape": (8, 32)}),
                                           ("matmul", ["m", "w"], "y", {"out_sharding": P("X", None)})]),
    "pending_max_is_refused": prog(M2, {"a": ((8, 16), P("X", "Y")), "w": ((16, 8), P("Y", None))},
                                   [("matmul", ["a", "w"], "c", {"out_sharding": P("X", None, unreduced="Y")}),
                                    ("max", ["c"], "m", {"axes": [1]})]),
    "cumsum_then_matmul": prog(M2, {"a": ((8, 16), P("X", None)), "w": ((16, 8), P(None, "Y"))},
                               [("cumsum", ["a"], "c", {"axis": 1}), ("matmul", ["c", "w"], "y", {})]),
    "einsum_outer_one_axis": prog(M2, {"a": ((8,), P("X")), "b": ((16,), P("X"))},
                                  [("einsum", ["a", "b"], "c", {"equation": "i,j->ij"})]),
    "transpose_3d_then_reshape": prog(M3, {"a": ((2, 4, 8), P("X", "Y", None))},
                                      [("transpose", ["a"], "t", {"perm": (1, 0, 2)}),
                                       ("reshape", ["t"], "r", {"shape": (8, 8)})]),
    "mean_over_sharded_rows_keepdims_3d": prog(M3, {"a": ((8, 4, 16), P("X", "Y", "Z"))},
                                               [("mean", ["a"], "m", {"axes": [0, 2], "keepdims": True}),
                                                ("sub", ["a", "m"], "c", {})]),
    "concat_heads_then_scale": prog(M3, {"a": ((2, 4, 8), P("X", "Y", None)), "b": ((2, 4, 8), P("X", "Y", None))},
                                    [("concat", ["a", "b"], "c", {"axis": 2}), ("mul", ["c", "c"], "d", {})]),
    "slice_last_axis_sharded_3d": prog(M3, {"a": ((4, 8, 16), P(None, "X", ("Y", "Z")))},
                                       [("slice", ["a"], "c", {"starts": [0, 0, 0], "stops": [4, 8, 8]})]),
    "sigmoid_gate_3d": prog(M3, {"x": ((8, 16), P("X", None)), "wg": ((16, 32), P(None, "Y")),
                                 "wu": ((16, 32), P(None, "Y"))},
                            [("matmul", ["x", "wg"], "g", {}), ("sigmoid", ["g"], "s", {}),
                             ("matmul", ["x", "wu"], "u", {}), ("mul", ["s", "u"], "h", {})]),
    "reshape_split_sharded_major_two_axes": prog(M3, {"a": ((16, 8), P(("X", "Y"), None))},
                                                 [("reshape", ["a"], "b", {"shape": (4, 4, 8)})]),
    "matmul_batch_rhs_broadcast_3d": prog(M3, {"a": ((2, 8, 16), P("X", "Y", None)), "w": ((16, 8), P(None, "Z"))},
                                          [("matmul", ["a", "w"], "c", {})]),
    "minimum_then_sum_sharded": prog(M2, {"a": ((8, 16), P("X", "Y")), "b": ((8, 16), P("X", "Y"))},
                                     [("minimum", ["a", "b"], "m", {}), ("sum", ["m"], "s", {"axes": [1]})]),
    "log_softmax_by_hand": prog(M2, {"a": ((8, 16), P("X", "Y"))},
                                [("max", ["a"], "m", {"axes": [1], "keepdims": True}), ("sub", ["a", "m"], "d", {}),
                                 ("exp", ["d"], "e", {}), ("sum", ["e"], "s", {"axes": [1], "keepdims": True}),
                                 ("log", ["s"], "l", {}), ("sub", ["d", "l"], "y", {})]),
    "constraint_swaps_axes": prog(M2, {"a": ((8, 16), P("X", "Y"))},
                                  [("sharding_constraint", ["a"], "b", {"out_sharding": P("Y", "X")}),
                                   ("exp", ["b"], "c", {})]),
    # held-out, equal when first run: one position of a sharded dimension (an error in JAX and here) and of another,
    # a squeeze, max and mean over sharded dimensions, softmax over a sharded axis, a 3-D transpose, a concat along
    # a free dimension, a dot with a batch-sharded operand, a window after an elementwise op
    "ho_pos_sharded_dim": prog(M2, {"a": ((4, 8), P(None, "Y"))},
                               [("slice", ["a"], "s", {"starts": (0, 5), "stops": (4, 6)})]),
    "ho_pos_other_dim": prog(M2, {"a": ((8, 8), P("X", None))},
                             [("slice", ["a"], "s", {"starts": (0, 3), "stops": (8, 4)})]),
    "ho_pos_first_row_3d": prog(M3, {"a": ((4, 8, 4), P("X", "Y", "Z"))},
                                [("slice", ["a"], "s", {"starts": (0, 0, 0), "stops": (4, 1, 4)})]),
    "ho_squeeze_unsharded": prog(M2, {"a": ((8, 1, 16), P("X", None, "Y"))},
                                 [("reshape", ["a"], "r", {"shape": (8, 16)})]),
    "ho_max_sharded": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("max", ["a"], "m", {"axes": (1,)})]),
    "ho_mean_rows_3d": prog(M3, {"a": ((4, 8, 4), P("X", "Y", "Z"))}, [("mean", ["a"], "m", {"axes": (0,)})]),
    "ho_softmax_sharded_axis": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("softmax", ["a"], "s", {"axis": 1})]),
    "ho_transpose_3d": prog(M3, {"a": ((4, 8, 4), P("X", "Y", "Z"))},
                            [("transpose", ["a"], "t", {"perm": (2, 0, 1)})]),
    "ho_concat_other": prog(M2, {"a": ((8, 4), P("X", None)), "b": ((8, 4), P("X", None))},
                            [("concat", ["a", "b"], "c", {"axis": 1})]),
    "ho_mm_batch": prog(M2, {"a": ((8, 16), P("X", None)), "w": ((16, 8), P(None, "Y"))},
                        [("matmul", ["a", "w"], "y", {})]),
    "ho_tanh_then_slice": prog(M1, {"a": ((16, 8), P("X", None))},
                               [("tanh", ["a"], "t", {}), ("slice", ["t"], "s", {"starts": (0, 2), "stops": (16, 5)})]),
    # a second held-out batch, written before its first run and run once as written: a dot whose contraction only one
    # operand shards, an add of conflicting shardings (an error in both), a merge whose minor dimension is sharded (an
    # error in both), sums and means over sharded dimensions, a transpose, a concat along a sharded dimension, a sum
    # after exp on 1-D, a batched dot, a slice of a free dimension, softmax over sharded rows, an einsum over heads
    "ho2_mm_contract_lhs_only": prog(M2, {"a": ((8, 16), P(None, "Y")), "w": ((16, 8), P(None, None))},
                                     [("matmul", ["a", "w"], "y", {})]),
    "ho2_add_mismatch": prog(M2, {"a": ((8, 8), P("X", None)), "b": ((8, 8), P(None, "X"))},
                             [("add", ["a", "b"], "c", {})]),
    "ho2_reshape_merge_minor_sharded": prog(M2, {"a": ((4, 8), P(None, "Y"))},
                                            [("reshape", ["a"], "r", {"shape": (32,)})]),
    "ho2_sum_sharded_rows": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("sum", ["a"], "s", {"axes": (0,)})]),
    "ho2_mean_two_3d": prog(M3, {"a": ((4, 8, 4), P("X", "Y", "Z"))}, [("mean", ["a"], "m", {"axes": (0, 1)})]),
    "ho2_transpose_2d": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("transpose", ["a"], "t", {"perm": (1, 0)})]),
    "ho2_concat_sharded_dim": prog(M2, {"a": ((8, 4), P("X", None)), "b": ((8, 4), P("X", None))},
                                   [("concat", ["a", "b"], "c", {"axis": 0})]),
    "ho2_exp_then_sum": prog(M1, {"a": ((16, 8), P(None, "X"))},
                             [("exp", ["a"], "e", {}), ("sum", ["e"], "s", {"axes": (1,)})]),
    "ho2_batched_mm": prog(M2, {"a": ((2, 8, 16), P("X", None, None)), "w": ((16, 4), P(None, None))},
                           [("matmul", ["a", "w"], "y", {})]),
    "ho2_slice_free_dim": prog(M2, {"a": ((8, 16), P(None, "Y"))},
                               [("slice", ["a"], "s", {"starts": (2, 0), "stops": (6, 16)})]),
    "ho2_softmax_sharded_rows": prog(M2, {"a": ((8, 16), P("X", None))}, [("softmax", ["a"], "s", {"axis": 0})]),
    "ho2_einsum_heads": prog(M2, {"q": ((2, 4, 8, 4), P("X", "Y", None, None)),
                                  "k": ((2, 4, 8, 4), P("X", "Y", None, None))},
                             [("einsum", ["q", "k"], "s", {"equation": "bhqd,bhkd->bhqk"})]),
    # a third held-out batch, likewise: a dot of row- and column-sharded operands, a row broadcast, a max over a
    # sharded dimension, a split of a free dimension, a layer norm on 2x2x2, a roll by two blocks, a flip of rows, a
    # transpose on 2x2x2, a subtraction of conflicting shardings (an error in both), a cumsum along a free
    # dimension, a mean then exp, an einsum contracting a dimension both operands shard (an error in both)
    "ho3_mm_rows_and_cols": prog(M2, {"a": ((8, 16), P("X", None)), "w": ((16, 8), P(None, "Y"))},
                                 [("matmul", ["a", "w"], "y", {})]),
    "ho3_mul_broadcast_row": prog(M2, {"a": ((8, 16), P("X", "Y")), "b": ((16,), P("Y"))},
                                  [("mul", ["a", "b"], "c", {})]),
    "ho3_max_over_sharded": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("max", ["a"], "m", {"axes": (1,)})]),
    "ho3_reshape_split_free": prog(M2, {"a": ((8, 16), P("X", None))}, [("reshape", ["a"], "r", {"shape": (8, 4, 4)})]),
    "ho3_layernorm_rows_3d": prog(M3, {"a": ((4, 8), P(("X", "Y"), "Z")), "g": ((8,), P("Z")),
                                       "b": ((8,), P("Z"))},
                                  [("layernorm", ["a", "g", "b"], "n", {})]),
    "ho3_roll_by_two_blocks": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("roll", ["a"], "r", {"shift": 8, "axis": 1})]),
    "ho3_flip_rows": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("flip", ["a"], "f", {"axes": [0]})]),
    "ho3_transpose_3d": prog(M3, {"a": ((4, 8, 2), P("X", "Y", "Z"))},
                             [("transpose", ["a"], "t", {"perm": (2, 0, 1)})]),
    "ho3_sub_mismatch_cols": prog(M2, {"a": ((8, 16), P(None, "Y")), "b": ((8, 16), P(None, "X"))},
                                  [("sub", ["a", "b"], "c", {})]),
    "ho3_cumsum_free": prog(M2, {"a": ((8, 16), P("X", None))}, [("cumsum", ["a"], "c", {"axis": 1})]),
    "ho3_mean_rows_then_exp": prog(M2, {"a": ((8, 16), P("X", "Y"))},
                                   [("mean", ["a"], "m", {"axes": (0,)}), ("exp", ["m"], "e", {})]),
    "ho3_einsum_contract_both": prog(M2, {"a": ((8, 16), P(None, "Y")), "b": ((16, 4), P("Y", None))},
                                     [("einsum", ["a", "b"], "c", {"equation": "ij,jk->ik"})]),
    # a fourth held-out batch, written before its first run and run once as written: attention scores over heads on
    # 2x2x2, a dot contracting a dimension only one operand shards, a replicated bias added, a transpose into a
    # dot, softmax along a free dimension, a merge of a sharded minor dimension, a concatenate along a free
    # dimension on 2x2x2, a sum over every dimension, GELU then tanh, a dot of rows on 1-D, a mean over free rows, a
    # slice of whole blocks of a sharded dimension, an outer product by einsum
    "ho4_scores_heads_3d": prog(M3, {"q": ((2, 4, 8, 4), P("X", "Y", None, None)),
                                     "k": ((2, 4, 8, 4), P("X", "Y", None, None))},
                                [("einsum", ["q", "k"], "s", {"equation": "bhsd,bhtd->bhst"})]),
    "ho4_mm_contract_one_side": prog(M2, {"a": ((8, 16), P(None, "Y")), "w": ((16, 4), P(None, None))},
                                     [("matmul", ["a", "w"], "y", {})]),
    "ho4_add_replicated_bias": prog(M2, {"a": ((8, 16), P("X", "Y")), "b": ((16,), None)},
                                    [("add", ["a", "b"], "c", {})]),
    "ho4_transpose_then_mm": prog(M2, {"a": ((16, 8), P("Y", "X")), "w": ((16, 4), P(None, None))},
                                  [("transpose", ["a"], "t", {"perm": (1, 0)}), ("matmul", ["t", "w"], "y", {})]),
    "ho4_softmax_free_axis": prog(M2, {"a": ((8, 16), P("X", None))}, [("softmax", ["a"], "s", {"axis": 1})]),
    "ho4_merge_sharded_minor": prog(M2, {"a": ((8, 4, 4), P("X", "Y", None))},
                                    [("reshape", ["a"], "r", {"shape": (8, 16)})]),
    "ho4_concat_free_3d": prog(M3, {"a": ((4, 8, 2), P("X", "Y", None)), "b": ((4, 8, 2), P("X", "Y", None))},
                               [("concat", ["a", "b"], "c", {"axis": 2})]),
    "ho4_sum_everything": prog(M2, {"a": ((8, 16), P("X", "Y"))}, [("sum", ["a"], "s", {"axes": (0, 1)})]),
    "ho4_gelu_then_tanh": prog(M2, {"a": ((8, 16), P("X", "Y"))},
                               [("gelu", ["a"], "g", {}), ("tanh", ["g"], "t", {})]),
    "ho4_mm_rows_1d": prog(M1, {"a": ((16, 8), P("X", None)), "w": ((8, 4), P(None, None))},
                           [("matmul", ["a", "w"], "y", {})]),
    "ho4_mean_free_rows": prog(M2, {"a": ((8, 16), P(None, "Y"))}, [("mean", ["a"], "m", {"axes": (0,)})]),
    "ho4_slice_whole_blocks": prog(M2, {"a": ((8, 16), P("X", "Y"))},
                                   [("slice", ["a"], "s", {"starts": (0, 0), "stops": (8, 8)})]),
    "ho4_outer_einsum": prog(M2, {"a": ((8,), P("X")), "b": ((16,), P("Y"))},
                             [("einsum", ["a", "b"], "c", {"equation": "i,j->ij"})]),
}

#: JAX's message for a class of problem, and what shardplan's message says for it.
PROBLEMS = {
    "contracting dimension sharded on both sides": (r"Contracting dimensions are sharded and it is ambiguous",
                                                    r"shards its contracting dimension over .* in both inputs"),
    "contracting dimensions sharded differently": (r"requires contracting dimensions to have consistent sharding",
                                                   r"shards its contracting dimension differently"),
    "an axis used twice in the result": (r"produces an illegally sharded result",
                                         r"produces an illegally sharded result"),
    "operands disagree on a dimension": (r"incompatible shardings for broadcasting",
                                         r"has conflicting shardings for one dimension"),
    "a reshape JAX does not type": (r"This reshape is not supported", r"in a way JAX does not type"),
    "concat operands sharded differently": (r"All operands should have the same sharding",
                                            r"needs every input sharded alike"),
    "a slice its shards do not divide": (r"slicing on sharded dims where out dim \(\d+\) is not divisible",
                                         r"shards do not divide"),
    "pending sums other than the contraction": (r"unreduced axes should be equal to the contracting specs",
                                                r"the pending sums must be those axes"),
    # (a max reading one: JAX's reduce_max refuses the unreduced spec it is given, "Using *pspec is dangerous")
    "an op reading a pending sum": (r"unreduced rule for \w+ is not implemented|is unreduced while|cannot be unreduced"
                                    r"|must be unreduced along the same mesh axes"
                                    r"|Using \*pspec is dangerous when PartitionSpec has non-empty unreduced",
                                    r"reads input \d with pending sums"),
    "a sharding that splits a dimension unevenly": (r"does not evenly divide the dimension size",
                                                    r"which does not evenly divide the dimension size"),
    "dynamic_update_slice's operand and update sharded differently": (
        r"dynamic_update_slice operand sharding must be equal to update sharding",
        r"needs its inputs sharded alike \(JAX's dynamic_update_slice"),
    "select's inputs sharded differently": (r"select cases must have the same shardings|select `which` must be",
                                            r"needs its inputs of the result's shape sharded alike"),
    "a cumulative sum along a sharded dimension": (r"Input should be unsharded over the axis being reduced",
                                                   r"but cumsum needs that dimension replicated"),
    "a gather JAX cannot type": (r"out sharding could not be resolved unambiguously",
                                 r"the gather's result type cannot be resolved unambiguously"),
    "a pad its shards do not divide": (r"padding on sharded dims where out dim \(\d+\) is not divisible",
                                       r"shards do not divide"),
    "a sort along a sharded dimension": (r"Arguments to sort must be unsharded over the sorting dimension",
                                         r"but sort needs that dimension replicated"),
    "sort's operands sharded differently": (r"Arguments to sort must have equal shardings",
                                            r"needs its inputs of the result's shape sharded alike"),
    "top_k along a sharded dimension": (r"should be unsharded over the axis along which to compute the top_k",
                                        r"but top_k needs that dimension replicated"),
}

OUT_SHARDING = "out_sharding"

# The JAX side: one process, an Explicit mesh per program, every op by its catalogue jax_form (or with the
# out_sharding JAX's own op takes), types read while tracing.
RUNNER = textwrap.dedent('''
    import ast, json, sys
    import jax, jax.numpy as jnp
    from jax import lax
    from jax.sharding import AxisType, NamedSharding, PartitionSpec
    from graphs.ops.registry import get_op

    assert jax.device_count() >= 8, jax.devices()

    def spec(dims, unreduced=()):
        parts = [None if not d else d[0] if len(d) == 1 else tuple(d) for d in dims]
        return PartitionSpec(*parts, unreduced=frozenset(unreduced)) if unreduced else PartitionSpec(*parts)

    def read(value):
        s = jax.typeof(value).sharding.spec
        dims = [[] if p is None else [p] if isinstance(p, str) else list(p) for p in s.partitions]
        dims += [[]] * (value.ndim - len(dims))
        return {"dims": dims, "unreduced": sorted(s.unreduced)}

    def apply(kind, arrays, attrs, out):
        if out is None:
            return get_op(kind).jax_form(jnp, lax, arrays, attrs)
        sharding = spec(*out)
        if kind == "matmul":
            return jnp.matmul(*arrays, out_sharding=sharding)
        if kind == "einsum":
            return jnp.einsum(attrs["equation"], *arrays, out_sharding=sharding)
        if kind == "reshape":
            return jnp.reshape(arrays[0], attrs["shape"], out_sharding=sharding)
        if kind == "sharding_constraint":
            return jax.sharding.reshard(arrays[0], sharding)
        raise ValueError(f"no out_sharding form for {kind}")

    results = {}
    for name, p in ast.literal_eval(sys.stdin.read()).items():
        mesh = jax.make_mesh(tuple(p["mesh"].values()), tuple(p["mesh"]),
                             axis_types=(AxisType.Explicit,) * len(p["mesh"]))
        types, where = {}, {"op": None}
        def run_ops(env, ops):
            for op_name, kind, ins, out, attrs, out_sharding in ops:
                where["op"] = op_name
                env[out] = apply(kind, [env[t] for t in ins], attrs, out_sharding)
                types[out] = read(env[out])
        def program(*arrays):
            env = dict(zip(p["inputs"], arrays))
            done = set()
            for op in p["ops"]:
                region = next((r for r in p["regions"] if op[0] in r[1]), None)
                if region is None:
                    run_ops(env, [op])
                    continue
                if op[0] in done:
                    continue
                axes, names, outs = region
                body = [o for o in p["ops"] if o[0] in names]
                done.update(names)
                made = {o[3] for o in body}
                reads = sorted({t for o in body for t in o[2] if t not in made})
                def inside(*values, body=body, reads=reads, outs=outs):
                    local = dict(zip(reads, values))
                    run_ops(local, body)
                    return [local[t] for t in outs]
                call = jax.sharding.auto_axes(inside, axes=tuple(axes),
                                              out_sharding=[spec(*outs[t]) for t in outs])
                for t, value in zip(outs, call(*[env[t] for t in reads])):
                    env[t] = value
                    types[t] = read(value)  # back in the caller: typed by its out_sharding
            return [env[o] for o in p["outputs"]]
        with jax.set_mesh(mesh):
            args = [jax.ShapeDtypeStruct(shape, {"f32": jnp.float32, "i32": jnp.int32}[dtype],
                                         sharding=NamedSharding(mesh, spec(dims)))
                    for shape, dims, dtype in p["input_types"]]
            try:
                jax.jit(program).trace(*args)
                results[name] = {"types": types}
            except Exception as e:
                results[name] = {"error": f"{type(e).__name__}: {e}", "op": where["op"]}
    print(json.dumps(results))
''')


def build(program):
    """The program as a shardplan graph."""
    b = GraphBuilder("p", program["mesh"])
    for name, (shape, sharding, *dtype) in program["tensors"].items():  # f32 unless a third entry says
        b.tensor(name, list(shape), dtype=dtype[0] if dtype else "f32", sharding=sharding)
    for k, (kind, ins, out, attrs) in enumerate(program["ops"]):
        b.op(kind, ins, output=out, name=f"{kind}{k}", **attrs)
    for r, (axes, ops, outs) in enumerate(program["auto_axes"]):
        names = [f"{program['ops'][k][0]}{k}" for k in ops]
        b.auto_axes(f"g{r}", list(axes), names, outs)
    return b.build()


def shardplan_types(graph):
    """Each tensor's type in explicit mode, as seen where it is made. With auto_axes regions, the typing
    explicit mode plans such a model by (every axis Explicit, a region's axes Auto inside it) must agree."""
    types = explicit_shardings(graph)
    out = {t: types.sharding(t) for t in graph.tensors}
    if graph.axis_regions:
        mesh = graph.mesh.with_types({a.name: AxisType.EXPLICIT for a in graph.mesh.axes})
        planned = explicit_prefixes(graph, mesh)[2]
        assert {t: _dims(s) for t, s in planned.items()} == {t: _dims(out[t]) for t in planned}
    return out


def _dims(sharding):
    """Per dimension the axis names (a sub-axis as its text, which JAX never names), and the pending-sum axes."""
    name = lambda a: a.name if a.is_full else str(a)  # noqa: E731
    return {"dims": [[name(a) for a in d.axes] for d in sharding.dims],
            "unreduced": sorted(name(a) for a in sharding.unreduced)}


def _for_jax(graph):
    """What the runner needs of a graph: inputs with their types, ops with canonical attributes, outputs."""
    inputs = [t for t in graph.tensors.values() if t.kind != "activation"]
    ops = []
    for op, _, _ in graph.walk():
        out = None if op.out_sharding is None else tuple(_dims(op.out_sharding).values())
        ops.append((op.name, op.op, list(op.inputs), op.output, dict(op.attrs_dict), out))
    used = {t for op in graph.ops for t in op.inputs}
    regions = [(r.axes, list(r.ops), {t: tuple(_dims(s).values()) for t, s in r.shardings})
               for r in graph.axis_regions]
    return {"mesh": dict((a.name, a.size) for a in graph.mesh.axes), "regions": regions,
            "inputs": [t.name for t in inputs],
            "input_types": [(tuple(t.shape), _dims(t.sharding)["dims"] if t.sharding is not None else [[]] * t.rank,
                             t.dtype) for t in inputs],
            "ops": ops, "outputs": [op.output for op in graph.ops if op.output not in used]}


@pytest.fixture(scope="module")
def jax_results():
    return run_on_eight_devices(RUNNER, stdin=repr({name: _for_jax(build(p)) for name, p in PROGRAMS.items()}),
                                timeout=300)


def test_the_suite_has_thirty_programs_on_1d_to_3d_meshes():
    assert len(PROGRAMS) >= 30
    assert {len(p["mesh"]) for p in PROGRAMS.values()} == {1, 2, 3}


def test_no_program_name_is_written_twice():
    # a dict literal keeps the last of two equal keys: a program written later under a taken name would replace one
    import ast
    from pathlib import Path

    tree = ast.parse(Path(__file__).read_text())
    [literal] = [n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                 and any(getattr(t, "id", None) == "PROGRAMS" for t in n.targets)]
    names = [k.value for k in literal.keys]
    assert len(names) == len(set(names)) == len(PROGRAMS)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_explicit_mode_types_the_program_as_jax_does(name, jax_results):
    graph = build(PROGRAMS[name])
    expected = jax_results[name]
    if "error" in expected:
        classes = [c for c, (theirs, _) in PROBLEMS.items() if re.search(theirs, expected["error"])]
        assert classes, f"JAX raised an error no class of PROBLEMS covers: {expected['error']}"
        with pytest.raises(RuleError) as err:
            shardplan_types(graph)
        ours = PROBLEMS[classes[0]][1]
        assert re.search(ours, str(err.value)), (classes[0], str(err.value), expected["error"])
        # the same op; JAX refuses an input's type before any op, and so does shardplan, naming the input
        assert f"to op {expected['op']!r}" in str(err.value) if expected["op"] else \
            re.match(r"(input|param) '", str(err.value))
        return
    types = shardplan_types(graph)
    got = {t: _dims(types[t]) for t in expected["types"]}
    assert got == expected["types"]


def test_runner_reads_the_types_jax_prints_for_seed001(jax_results):
    # seed 001: arg0 f32[4@X,1] + arg1 f32[1,8@Y] is f32[4@X,8@Y] (the seed's own printed result)
    assert jax_results["seed001_add_outer"]["types"]["c"] == {"dims": [["X"], ["Y"]], "unreduced": []}
    assert "illegally sharded result: f32[4@X,4@X]" in jax_results["seed001_add_axis_twice"]["error"]
