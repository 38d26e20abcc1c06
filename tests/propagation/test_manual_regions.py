"""Rule-based propagation through manual regions: Shardy's free-axis rule (basic_propagation_manual_computation.mlir)."""

from pathlib import Path

from graphs import load_model, load_model_text
from planner.api import plan
from planner.propagation.propagate import propagate
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
