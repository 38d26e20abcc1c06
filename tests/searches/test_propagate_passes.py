"""Shardy's four passes are separate pieces, each building on the previous one, as in Shardy itself."""

from pathlib import Path

from graphs import load_model
from planner.searches.propagate import PASSES, propagate
from planner.searches.propagate.aggressive import AggressivePropagation
from planner.searches.propagate.basic import BasicPropagation
from planner.searches.propagate.engine import Propagator
from planner.searches.propagate.op_priority import LEVELS, OpPriorityPropagation
from planner.searches.propagate.user_priority import UserPriorityPropagation

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "transformer_block.yaml"


def test_the_passes_are_named_in_order_each_subclassing_the_previous():
    assert tuple(PASSES) == ("basic", "aggressive", "op-priority", "user-priority")
    chain = [Propagator, BasicPropagation, AggressivePropagation, OpPriorityPropagation, UserPriorityPropagation]
    assert list(PASSES.values()) == chain[1:]
    for parent, child in zip(chain, chain[1:]):
        assert child.__bases__ == (parent,)


def test_each_pass_overrides_one_step_of_the_engine():
    """basic and aggressive decide how an op's factors are cut and how conflicting ones grow (aggressive
    also caps an elementwise op's operands); op-priority adds the levels; user-priority the annotation
    rounds. Nothing else is overridden."""
    own = {p.how: {k for k in vars(p) if not k.startswith("__")} for p in PASSES.values()}
    assert own == {"basic": {"how", "cut", "order"}, "aggressive": {"how", "cut", "order", "caps_operands"},
                   "op-priority": {"how", "levels"},
                   "user-priority": {"how", "rounds", "round_label"}}
    assert len(LEVELS) == 5


def test_a_pass_composed_from_the_pieces_runs_as_the_named_one():
    """Aggressive conflict resolution with op-priority levels, built by hand from the pieces, gives what the
    registered op-priority pass gives."""

    class Composed(AggressivePropagation):
        how = "op-priority"
        levels = OpPriorityPropagation.levels

    graph = load_model(str(CONFIG))
    ours = Composed(graph, graph.mesh, None, {}, {}, {}, {}).run()
    theirs = propagate(graph, graph.mesh, "op-priority")
    assert dict(ours.shardings) == dict(theirs.shardings)
    assert [p.label for p in ours.phases] == [p.label for p in theirs.phases]
