"""Rule-based propagation through manual regions: Shardy's free-axis rule (basic_propagation_manual_computation.mlir)."""

from pathlib import Path

import pytest

from graphs import load_model, load_model_text
from planner.api import plan
from planner.errors import PlanningError, VarianceError
from planner.searches.propagate import propagate
from planner.simulation.run import simulate

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_free_axis_annotated_in_the_body_is_appended_after_the_manual_axis_of_the_operand():
    # append_in_sharding_from_inside: manual "b", free "a" on the body's add, a barrier after it
    p = plan(str(CONFIGS / "manual_free_axis.yaml"), search="propagate")
    assert p.tensors["x"].sharding.dims_text() == '[{"b", "a", ?}, {?}]'  # the operand (and in-sharding)
    assert p.tensors["y"].sharding.dims_text() == '[{"b", ?}, {?}]'  # the out-sharding: the barrier stops "a"
    assert p.tensors["r/x"].sharding.dims_text() == '[{"a", ?}, {?}]'  # the body argument: free axes only
    r = simulate(p)
    assert r.ok and r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device


def test_without_the_barrier_the_free_axis_also_leaves_forwards():
    # append_out_sharding_from_inside's direction: the add's "a" reaches the out-sharding, after "b"
    text = (CONFIGS / "manual_free_axis.yaml").read_text().replace("op: propagation_barrier", "op: relu")
    p = plan(load_model_text(text), search="propagate")
    assert p.tensors["y"].sharding.dims_text() == '[{"b", "a", ?}, {?}]'
    assert p.tensors["x"].sharding.dims_text() == '[{"b", "a", ?}, {?}]'


def test_manual_axes_never_reach_a_body_tensor():
    g = load_model(CONFIGS / "megatron_by_hand.yaml")
    p = plan(g, search="propagate")
    for r in g.manual_regions:
        for t in r.body_tensors:
            assert not {a.name for a in p.tensors[t].sharding.used_axes()} & set(r.manual_axes), t
    assert p.tensors["w1"].sharding.dims_text() == '[{}, {"tp"}]'  # the in-sharding, manual axis and all


def test_basic_propagation_keeps_the_region_boundary_shardings():
    g = load_model(CONFIGS / "megatron_by_hand.yaml")
    shardings = propagate(g, g.mesh, "basic", boundaries={"w1": g.manual_regions[0].in_shardings[1]},
                          typed_axes={t: frozenset({"tp"}) for t in g.manual_regions[0].body_tensors}).shardings
    assert shardings["w1"].dims_text() == '[{}, {"tp"}]'


# -- Explicit axes beside a region's manual ones (seed 001 at the boundary) ------------------------------------

# the Megatron-by-hand region (configs/megatron_by_hand.yaml) on a mesh with an Explicit dp beside the
# manual tp, x typed on dp, and the in/out shardings of x and y open on the rows
TYPED_REGION = ((CONFIGS / "megatron_by_hand.yaml").read_text()
                .replace("mesh: {tp: 4}", "mesh: {axes: {dp: 2, tp: 4}, axis_types: {dp: Explicit}}")
                .replace("x:  {shape: [16, 128]}", "x:  {shape: [16, 128], sharding: '[{\"dp\"}, {}]'}")
                .replace("in_shardings: ['[{}, {}]',", "in_shardings: ['[{?}, {}]',")
                .replace("out_shardings: ['[{}, {}]']", "out_shardings: ['[{?}, {}]']"))


def test_an_explicit_axis_passes_through_a_region_as_a_free_axis_and_every_search_keeps_it():
    """x's type shards rows on the Explicit dp; the region's open in-sharding lets dp through as a free axis,
    so every body tensor and y carry dp on dimension 0 (the search never moves it), and the plan trains exactly."""
    graph = load_model_text(TYPED_REGION)
    for search in ("bfs", "ilp", "propagate"):
        p = plan(graph, search=search, training=True)
        for t in ("mlp/x", "mlp/h", "mlp/a", "mlp/p", "mlp/y", "y"):
            assert [a.name for a in p.tensors[t].sharding.dims[0].axes][:1] == ["dp"], (search, t)
        assert simulate(p).ok, search


def test_explicit_mode_over_a_region_types_every_axis_and_trains_exactly():
    """--search explicit: every axis Explicit (tp manual in the body); with the weights annotated as the region
    reads them, the types agree at the boundary and the plan is the typed one, searched nowhere."""
    text = TYPED_REGION.replace("axis_types: {dp: Explicit}", "axis_types: {dp: Explicit, tp: Explicit}")
    text = text.replace("w1: {shape: [128, 512], kind: param}",
                        "w1: {shape: [128, 512], kind: param, sharding: '[{}, {\"tp\"}]'}")
    text = text.replace("w2: {shape: [512, 128], kind: param}",
                        "w2: {shape: [512, 128], kind: param, sharding: '[{\"tp\"}, {}]'}")
    p = plan(load_model_text(text), search="explicit", training=True)
    assert p.search == "explicit"
    assert simulate(p).ok


def test_a_closed_out_sharding_that_drops_an_explicit_axis_is_refused_naming_the_region():
    text = TYPED_REGION.replace("out_shardings: ['[{?}, {}]']", "out_shardings: ['[{}, {}]']")
    with pytest.raises(PlanningError, match=r"region 'mlp': the out-sharding \[\{\}, \{\}\].* of 'y' disagrees with "
                                            r"its type \[\{\"dp\"\}, \{\}\].*only an explicit reshard"):
        plan(load_model_text(text))


# -- all_gather_invariant and pscatter in a region's body (seed 004) ----------------------------------------------

# p = x * w varies over tp; all_gather_invariant makes it whole and invariant, so its out-sharding may replicate it.
# v is invariant (replicated in-sharding); pscatter keeps each device's quarter without communication.
INVARIANT_GATHER = """\
name: invariant_gather
mesh: {tp: 4}
tensors:
  x: {shape: [8, 16]}
  w: {shape: [8, 16], kind: param}
  v: {shape: [8, 16], kind: param}
regions:
  - name: r
    manual_axes: [tp]
    inputs: [x, w, v]
    in_shardings: ['[{"tp"}, {}]', '[{"tp"}, {}]', '[{}, {}]']
    outputs: [g, s]
    out_shardings: ['[{}, {}]', '[{"tp"}, {}]']
    ops:
      - {name: xw, op: mul, inputs: [x, w], output: p}
      - {name: gather, op: all_gather_invariant, axes: [tp], dim: 0, inputs: [p], output: g}
      - {name: sq, op: mul, inputs: [v, v], output: vv}
      - {name: scatter, op: pscatter, axes: [tp], dim: 0, inputs: [vv], output: s}
outputs: [g, s]
"""


def test_all_gather_invariant_and_pscatter_are_typed_as_seed_004_says():
    from planner.model.manual import manual_pending, manual_variance

    g = load_model_text(INVARIANT_GATHER)
    variance = manual_variance(g)
    # all_gather_invariant: varying -> invariant; pscatter: invariant -> varying
    assert variance["r/p"] == {"tp"} and variance["r/g"] == frozenset()
    assert variance["r/vv"] == frozenset() and variance["r/s"] == {"tp"}
    # neither pbroadcasts its operand: no cotangent comes back pending (pscatter's transpose gathers it whole)
    assert manual_pending(g, g.op("r/gather"), variance) == ((),)
    assert manual_pending(g, g.op("r/scatter"), variance) == ((),)


def test_all_gather_invariant_and_pscatter_train_exactly_and_transpose_into_each_other():
    p = plan(load_model_text(INVARIANT_GATHER), training=True)
    r = simulate(p)
    assert r.ok and set(r.gradients) == {"w", "v"}
    # each device's [2, 16] f32 quarter gathered from the 3 others: 3 * 2 * 16 * 4 B. Forward: the
    # all_gather_invariant; backward: pscatter's transpose (all_gather_invariant of s's cotangent); the transpose
    # of the forward gather is pscatter, a local slice
    quarter = 2 * 16 * 4
    for phase in ("forward", "backward"):
        assert r.phases[phase]["collectives"] == {"AllGather": 1}, phase
        assert r.phases[phase]["measured_comm_bytes_per_device"] == 3 * quarter \
            == r.phases[phase]["predicted_comm_bytes_per_device"]


def test_pscatter_of_a_varying_value_is_refused_naming_the_op():
    # vv made varying by a pbroadcast: its devices' copies may differ, so taking a piece of each is no transpose of
    # all_gather_invariant (psum_scatter sums them)
    text = INVARIANT_GATHER.replace(
        "      - {name: scatter, op: pscatter, axes: [tp], dim: 0, inputs: [vv], output: s}",
        "      - {name: vary, op: pbroadcast, axes: [tp], inputs: [vv], output: vb}\n"
        "      - {name: scatter, op: pscatter, axes: [tp], dim: 0, inputs: [vb], output: s}")
    with pytest.raises(VarianceError, match=r"op 'r/scatter'.*pscatter over 'tp' needs an operand that is invariant "
                                            r"over 'tp'.*use psum_scatter"):
        plan(load_model_text(text))


def test_a_replicated_out_sharding_takes_all_gather_invariant_but_not_all_gather():
    # all_gather's result varies (a pbroadcast is fused in), so replicating it needs a psum
    text = INVARIANT_GATHER.replace("op: all_gather_invariant", "op: all_gather")
    with pytest.raises(VarianceError, match=r"output 'g' of region 'r' varies over tp but its out-sharding "
                                            r"replicates it"):
        plan(load_model_text(text))
