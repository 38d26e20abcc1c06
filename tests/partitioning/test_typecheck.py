"""Device-variance types of lowered programs: what a layout varies over, the types the listing shows,
and that every config's program type-checks in both phases."""

from pathlib import Path

import pytest

from planner.api import plan
from planner.ir import parse_mesh, parse_sharding
from planner.partitioning.program import typecheck
from planner.partitioning.typecheck import pbroadcasts, type_text, variance, variance_text

MESH = parse_mesh('@m = <["dp"=2, "tp"=4]>')
CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


def S(text):
    return parse_sharding(text, MESH)


def test_a_value_varies_over_its_sharding_axes_and_its_pending_sums():
    assert variance_text(variance(S('[{"tp"}, {}], unreduced={"dp"}')), MESH) == '{"dp", "tp"}'
    assert variance(S("[{}, {}]")) == frozenset()


def test_sub_axes_are_compared_by_their_pieces():
    # "tp":(1)2 and "tp":(2)2 together are all of "tp"
    whole = variance(S('[{"tp"}, {}]'))
    halves = variance(S('[{"tp":(1)2}, {"tp":(2)2}]'))
    assert whole == halves and variance_text(halves, MESH) == '{"tp"}'


def test_types_are_written_as_in_seed_004():
    # local shape of a 8x16 f32 tensor sharded 4 ways on dim 0, varying over tp: f32[2,16]{"tp"}
    assert type_text("f32", (8, 16), S('[{"tp"}, {}]')) == 'f32[2,16]{"tp"}'
    assert type_text("f32", (8, 16), S("[{}, {}]")) == "f32[8,16]"


def test_a_replicated_weight_read_by_batch_sharded_work_is_pbroadcast_over_the_batch_axis():
    p = plan("""
name: dp
mesh: {dp: 2, tp: 4}
tensors:
  x: {shape: [8, 4], kind: input, sharding: '[{"dp"}, {}]'}
  w: {shape: [4, 4], kind: param, sharding: '[{}, {}]'}
ops:
  - {name: mm, op: matmul, inputs: [x, w], output: y, strategy: [[2, 1], [1, 1]]}
""")
    (s,) = [o.strategy for o in p.ops]
    x_axes, w_axes = pbroadcasts(s)
    assert x_axes == frozenset() and variance_text(w_axes, s.result.mesh) == '{"dp"}'


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_every_configs_program_type_checks(config, training):
    typecheck(plan(config, training=training).program)  # lower() already does; this pins it per config


# -- a CollectivePermute that moves a block from one axis to another --------------------------------------------

def cross_axis_model(dp: int, tp: int) -> str:
    """w is stored sharded over dp; the constraint wants its tanh sharded over tp: the planner moves w's
    blocks from dp to tp (before the tanh, where they are smallest)."""
    return f"""\
name: cross_axis
mesh: {{dp: {dp}, tp: {tp}}}
tensors:
  w: {{shape: [16, 16], kind: param, sharding: '[{{"dp"}}, {{}}]'}}
ops:
  - {{name: act, op: tanh, inputs: [w], output: h}}
  - {{name: h.constraint, op: sharding_constraint, inputs: [h], output: hc, out_sharding: '[{{"tp"}}, {{}}]'}}
  - {{name: sq, op: mul, inputs: [hc, hc], output: s}}
outputs: [s]
"""


def _steps(program, phase):
    """The communicating steps of ``phase`` (local slices aside)."""
    return [(r.tensor, s.kind, s.before.dims_text(), s.after.dims_text(), s.bytes_per_device)
            for r in program.redistributions(phase) for s in r.plan.steps if s.kind != "Slice"]


def test_the_planner_moves_a_block_from_dp_to_tp_in_one_permute():
    """dp=2, tp=4: device (a, t) holds rows half a of w and needs quarter t, which lies in half t // 2. The devices
    with t // 2 != a receive their quarter (4 rows of 16 f32: 256 B) from the device along dp that holds it: one
    permute, where gathering over dp and slicing receives a half (512 B)."""
    from graphs import load_model_text
    from planner.simulation.run import simulate

    p = plan(load_model_text(cross_axis_model(2, 4)))
    assert _steps(p.program, "forward") == [("w", "CollectivePermute", '[{"dp"}, {}]', '[{"tp"}, {}]', 4 * 16 * 4)]
    typecheck(p.program)
    r = simulate(p)
    assert r.ok and r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device == 256


def test_its_backward_is_the_inverse_permute_and_the_plan_trains_exactly():
    """dp = tp = 4: every device lacking its quarter receives it whole; the gradient goes home from [{"tp"}] to
    [{"dp"}] the same way back, one permute of a quarter each way (4 rows of 16 f32)."""
    from graphs import load_model_text
    from planner.simulation.run import simulate

    p = plan(load_model_text(cross_axis_model(4, 4)), training=True)
    quarter = 4 * 16 * 4
    assert _steps(p.program, "forward") == [("w", "CollectivePermute", '[{"dp"}, {}]', '[{"tp"}, {}]', quarter)]
    assert _steps(p.program, "gradient") == [("w", "CollectivePermute", '[{"tp"}, {}]', '[{"dp"}, {}]', quarter)]
    typecheck(p.program)
    r = simulate(p)
    assert r.ok and r.gradients["w"]["ok"]
    assert r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device == 2 * quarter


def test_a_permute_may_drop_only_an_axis_its_pairs_move_along():
    """The permute above drops dp, along which its pairs move blocks (every device along dp ends with the same
    block). A step claiming to drop dp with pairs that move only along tp is refused: that needs a psum or a
    gather."""
    from planner.errors import VarianceError
    from planner.partitioning.typecheck import check_step
    from planner.redistribution.steps import Step

    before, after = S('[{"dp"}, {}]'), S('[{"tp"}, {}]')
    along_dp = Step("CollectivePermute", (), (), before, after, 0, 0.0, ((0, 4),))  # device 4 dp + tp: dp 0 -> 1
    check_step(along_dp, "here")
    along_tp = Step("CollectivePermute", (), (), before, after, 0, 0.0, ((0, 1),))  # tp 0 -> 1, same dp
    with pytest.raises(VarianceError, match=r'here.*ppermute over \{"tp"\}.*axis \{"dp"\} is dropped without a psum '
                                            r'or a gather'):
        check_step(along_tp, "here")
