"""The operator catalogue: one :class:`~graphs.ops.opdef.OpDef` per op, one module per family.

Families: :mod:`~graphs.ops.pointwise` (unary and broadcasting binary),
:mod:`~graphs.ops.matmul` (matmul, einsum), :mod:`~graphs.ops.reductions`,
:mod:`~graphs.ops.normalization` (softmax, layernorm, rmsnorm),
:mod:`~graphs.ops.shape_ops` (reshape, transpose, concat, slice),
:mod:`~graphs.ops.gather`, :mod:`~graphs.ops.loss` (cross_entropy),
:mod:`~graphs.ops.conv` and :mod:`~graphs.ops.annotation` (sharding_constraint,
propagation_barrier: identities that carry sharding intent). :mod:`~graphs.ops.registry` is the one place ops are
registered; look them up with :func:`~graphs.ops.registry.get_op`. An op's traits (its sharding rule, whether it
is elementwise, follows its operand or passes shardings through, its JAX form, its simulator kernels) are fields
of its :class:`~graphs.ops.opdef.OpDef`, set where the op is defined.
"""

from graphs.ops.opdef import OpDef
from graphs.ops.registry import OPS, get_op, op_names

__all__ = ["OPS", "OpDef", "get_op", "op_names"]
