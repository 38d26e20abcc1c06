"""Rules of contractions: ``matmul`` (with ``transpose_a`` / ``transpose_b`` and batch dims) and ``einsum``.

``matmul`` follows the catalogue (:mod:`graphs.ops.matmul`): the last two
dimensions of each operand are the matrix (swapped by its transpose flag), the
leading ones are batch dimensions that broadcast the numpy way. Its factors are
named ``i`` (rows), ``k`` (contracting, a reduction), ``j`` (columns) and
``a, b, c, ...`` for batch dimensions.

>>> str(matmul([(8, 32), (32, 16)], (8, 16), {}))
'([i,k],[k,j])->([i,j]) {i=8,j=16,k=32} reduction={k}'
>>> str(matmul([(2, 8, 32), (16, 32)], (2, 8, 16), {"transpose_b": True}))
'([a,i,k],[j,k])->([a,i,j]) {a=2,i=8,j=16,k=32} reduction={k}'
>>> str(einsum([(2, 3), (3, 4), (4, 5)], (2, 5), {"equation": "ij,jk,kl->il"}))
'([i,j],[j,k],[k,l])->([i,l]) {i=2,j=3,k=4,l=5} reduction={j,k}'
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from planner.errors import RuleError
from planner.rules.builder import rule_from_einsum
from planner.rules.factors import OpShardingRule

_BATCH_LETTERS = "abcdefgh"


def matmul_equation(rank_a: int, rank_b: int, transpose_a: bool, transpose_b: bool) -> str:
    """The einsum spec of a matmul: ``"ik,kj->ij"``, ``"aik,kj->aij"``, ...

    >>> matmul_equation(2, 3, True, False)
    'ki,akj->aij'
    """
    batch = max(rank_a, rank_b) - 2
    if batch > len(_BATCH_LETTERS):
        raise RuleError(f"matmul with {batch} batch dimensions is not supported (at most {len(_BATCH_LETTERS)})")
    letters = _BATCH_LETTERS[:batch]
    a = letters[batch - (rank_a - 2):] + ("ki" if transpose_a else "ik")
    b = letters[batch - (rank_b - 2):] + ("jk" if transpose_b else "kj")
    return f"{a},{b}->{letters}ij"


def matmul(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> OpShardingRule:
    """``[..., i, k] @ [..., k, j] -> [..., i, j]``, batch dims broadcasting; ``k`` is a reduction."""
    eq = matmul_equation(len(in_shapes[0]), len(in_shapes[1]),
                         bool(attrs.get("transpose_a", False)), bool(attrs.get("transpose_b", False)))
    return rule_from_einsum(eq, in_shapes)


def einsum(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> OpShardingRule:
    """The equation itself: output letters pass through, the others are reductions."""
    return rule_from_einsum(attrs["equation"], in_shapes)
