"""Every malformed model in bad_models/ fails with the exact file:line and a message saying what is wrong."""

from pathlib import Path

import pytest

from graphs import load_model
from planner.errors import ModelError

BAD = Path(__file__).resolve().parent / "bad_models"

# file, line, fragment of the message
CASES = [
    ("syntax_error.yaml", 6, "YAML syntax error: while parsing a flow mapping (started at line 5)"),
    ("missing_name.yaml", 2, "missing `name`"),
    ("unknown_top_level_key.yaml", 8, "unknown top-level key 'output'; did you mean outputs?"),
    ("unknown_op.yaml", 9, "op 'mm2': unknown op 'matmull'; did you mean matmul? (known ops: abs, add, all_gather,"),
    ("wrong_arity.yaml", 8, "op 'act': relu takes 1 input, got 2 (a, b)"),
    ("shape_mismatch.yaml", 9, "op 'dense': matmul contracts 64 with 32: inputs x (64x64) and w (32x16)"),
    ("undefined_tensor.yaml", 8, "op 'dense1' reads tensor 'w_1', which is not defined; did you mean w1?"),
    ("tensor_defined_twice.yaml", 8, "tensor 'h' is defined twice: declared in tensors at line 6 and produced by op 'r1'"),
    ("output_produced_twice.yaml", 8, "tensor 'h' is defined twice: produced by op 'r1' (line 7) and by op 'r2'"),
    ("duplicate_key.yaml", 7, "key 'w' appears twice in one mapping (first at line 6)"),
    ("cycle.yaml", 8, "ops form a cycle: a (ha) -> b (hb) -> a (ha)"),
    ("bad_sharding.yaml", 6, "tensor 'w': bad sharding: cannot parse sharding at column 8"),
    ("sharding_rank.yaml", 6, "tensor 'w' has rank 2 (shape 8x8) but its sharding [{\"y\"}] has 1 dimension shardings"),
    ("sharding_unknown_axis.yaml", 7, "op 'act' out_sharding: bad sharding: "),
    ("bad_mesh.yaml", 3, "bad mesh 'mesh': mesh axis 'y' has size 0"),
    ("meshes_differ.yaml", 3, "meshes must cover the same devices: @a has 8 devices but @b has 4"),
    ("unknown_attribute.yaml", 7, "op 'sm': softmax has no attribute 'axes'; did you mean axis?"),
    ("bad_strategy.yaml", 8, "op 'dense1.matmul': strategy for input 1 (w, shape f32[64x64]) has 3 split counts"),
    ("strategy_not_positive.yaml", 8, "op 'mm': strategy entry for input 0 dimension 1 is 0"),
    ("unknown_dtype.yaml", 5, "tensor 'x': unknown dtype 'f64'"),
    ("unknown_builder.yaml", 5, "unknown builder 'gpt3'; did you mean gpt? (builders: conv, gpt, mlp, moe, transformer)"),
    ("bad_builder_argument.yaml", 7, "builder transformer has no argument 'dim' (arguments: layers, hidden, heads,"),
    ("pattern_matches_nothing.yaml", 7, "shardings pattern 'layer*.mlp.w1' matches no tensor"),
    ("shard_as_shapes.yaml", 12, "shard_as groups tensors of different shapes: h is f32[8x8] but y is f32[8x4]"),
    ("undefined_output.yaml", 8, "output 'hh' is not a tensor of the model; did you mean h?"),
    ("missing_shape.yaml", 5, "tensor 'x' needs a shape"),
    ("missing_out_sharding.yaml", 8, "op 'c1': sharding_constraint needs an out_sharding, the sharding the readers "
                                     "of hc (f32[8x4]) get; add one {...} per dimension, e.g. out_sharding: "
                                     "'[{\"x\"}, {}]'"),
    ("bad_allowed_direction.yaml", 8, "op 'bar': propagation_barrier's allowed_direction must be one of none, forward, "
                                      "backward, both; got 'backwards'; did you mean backward?"),
    ("shard_like_unknown_tensor.yaml", 10, "shard_like names tensor 'h_2', which is not defined; did you mean h2?"),
    ("shard_like_shapes.yaml", 12, "shard_like groups tensors of different shapes: h is f32[8x8] but y is f32[8x4]"),
    ("shard_like_one_tensor.yaml", 8, "shard_like group ['h'] needs at least two tensors"),
]


@pytest.mark.parametrize("filename, line, fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_model_error_names_file_line_and_problem(filename, line, fragment):
    path = str(BAD / filename)
    with pytest.raises(ModelError) as info:
        load_model(path)
    err = info.value
    assert err.where == f"{path}:{line}"
    assert fragment in err.message
    assert str(err).startswith(f"{path}:{line}: ")


def test_every_bad_model_file_has_a_case():
    assert sorted(p.name for p in BAD.glob("*.yaml")) == sorted(c[0] for c in CASES)


def test_missing_file_is_a_model_error_naming_the_path():
    with pytest.raises(ModelError) as info:
        load_model(str(BAD / "does_not_exist.yaml"))
    assert info.value.where.endswith("does_not_exist.yaml")
    assert "cannot read the model file" in info.value.message
