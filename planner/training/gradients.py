"""Where gradients live: the layout the backward pass gives each operand's gradient.

In the backward pass of an op with factor rule ``R`` under a strategy, the gradient
of operand ``k`` is computed by contracting the result's gradient with the other
operands over every factor that does **not** appear in operand ``k``. Where such a
factor is sharded, each device holds only a partial sum: the gradient has operand
``k``'s layout plus pending sums over those axes. Everything the seed-004
transposes say follows from this one rule:

* a replicated weight used by batch-sharded computation gets a gradient pending
  over the batch axes: the data-parallel gradient AllReduce;
* Megatron's column-parallel matmul ``X @ W[:, tp]`` gives ``dX`` pending over ``tp``
  (the backward AllReduce of the identity-forward / all-reduce-backward pair);
* a forward AllGather of ``X`` into a consumer that shards the gathered axis
  becomes a backward ReduceScatter, a forward AllReduce becomes no communication
  (the result's gradient is simply replicated: psum transposes to pbroadcast).

The gradient of a result that fed several consumers is the sum of their
contributions, each redistributed to the producer's result layout without pending
sums (the backward op reads it whole; a pending forward sum's gradient is
broadcast, not summed).

>>> from planner.ir.mesh import Mesh
>>> from planner.rules.registry import rule_for
>>> from planner.enumeration import make_strategy
>>> from planner.ir.axis import AxisRef
>>> mesh = Mesh.from_sizes("mesh", {"dp": 2})
>>> rule = rule_for("matmul", [(8, 4), (4, 4)], (8, 4))
>>> s = make_strategy(rule, ((AxisRef("dp"),), (), ()), mesh)   # batch-sharded X, replicated W
>>> operand_gradient(rule, s, 1).dims_text()
'[{}, {}], unreduced={"dp"}'
"""

from __future__ import annotations

from planner.ir.axis import sort_axes
from planner.ir.sharding import TensorSharding
from planner.rules.factors import FactorKind, OpShardingRule


def operand_gradient(rule: OpShardingRule, strategy, k: int, manual: tuple = ()) -> TensorSharding:
    """Layout of d(operand ``k``) under ``strategy``: its layout, pending over absent factors' axes.

    ``manual`` (an op of a manual region): the manual axes the op varies on but operand ``k`` does
    not (its implicit pbroadcast there, :func:`planner.model.manual.manual_pending`): the
    cotangent is pending over them too (the psum that transposes that pbroadcast). A ``MANUAL``
    factor (a region boundary's blocks) is never summed: each device's block is its own."""
    present = {f for dim in rule.operands[k] for f in dim}
    pending = [a for f, axes in enumerate(strategy.factor_axes)
               if f not in present and rule.factor_kinds[f] is not FactorKind.MANUAL for a in axes]
    pending += list(manual)
    layout = strategy.operands[k]
    mesh = layout.mesh
    return layout.with_unreduced(sort_axes(pending, mesh)) if pending else layout


def result_gradient(strategy) -> TensorSharding:
    """Layout the backward op reads its result's gradient in: the result's, without pending sums."""
    result = strategy.result
    return result.with_unreduced(()) if result.unreduced else result
