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
