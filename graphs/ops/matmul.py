"""Contractions: ``matmul`` (with ``transpose_a`` / ``transpose_b``) and ``einsum``.

FLOP convention: a multiply-add is **2 FLOPs**. ``matmul`` of ``[..., m, k]`` by
``[..., k, n]`` costs ``2·m·k·n`` per batch element. An ``einsum`` with two or
more operands costs ``2·(operands-1)`` FLOPs per term, i.e. ``2·(operands-1)``
times the product of the sizes of all its labels; with one operand it costs 1
FLOP per term (an addition).

``matmul`` takes operands of rank >= 2; their leading (batch) dimensions broadcast
the numpy way, so ``[b, s, h] @ [h, f] -> [b, s, f]``. ``transpose_a`` swaps the
last two dimensions of the first operand before multiplying, ``transpose_b`` those
of the second.

``einsum`` takes an explicit equation ``"bsh,hf->bsf"``: one letter per dimension,
one term per operand, every output letter present in some operand, a letter's
size the same everywhere; no ``...`` and no letter repeated inside one term.

>>> MATMUL.infer([(8, 64, 32), (16, 32)], ["f32", "f32"], {"transpose_b": True})
((8, 64, 16), 'f32')
>>> EINSUM.infer([(2, 3, 4), (4, 5)], ["f32", "f32"], {"equation": "bsh,hf->bsf"})
((2, 3, 5), 'f32')
>>> EINSUM.flops([(2, 3, 4), (4, 5)], (2, 3, 5), {"equation": "bsh,hf->bsf"})
240
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from graphs.ops.common import (
    Shape,
    check_bool,
    need_numeric,
    need_rank,
    numel,
    operand,
    same_dtype,
)
from graphs.ops.opdef import REQUIRED, OpDef
from graphs.ops.pointwise import broadcast_shapes
from planner.errors import ModelError


# -- matmul ----------------------------------------------------------------------

def _oriented(shape: Shape, transpose: bool) -> Shape:
    return shape[:-2] + (shape[-1], shape[-2]) if transpose else tuple(shape)


def _matmul_infer(shapes, dtypes, attrs, names=None):
    ta = check_bool(attrs.get("transpose_a", False), "matmul attribute transpose_a")
    tb = check_bool(attrs.get("transpose_b", False), "matmul attribute transpose_b")
    dtype = same_dtype("matmul", dtypes, names)
    need_numeric("matmul", dtypes, names)
    need_rank("matmul", shapes, names, 0, 2)
    need_rank("matmul", shapes, names, 1, 2)
    a, b = _oriented(shapes[0], ta), _oriented(shapes[1], tb)
    if a[-1] != b[-2]:
        flags = [f for f, on in (("transpose_a", ta), ("transpose_b", tb)) if on]
        note = f" (after {' and '.join(flags)})" if flags else ""
        raise ModelError(
            f"matmul contracts {a[-1]} with {b[-2]}{note}: inputs {operand(names, shapes, 0)} and "
            f"{operand(names, shapes, 1)}; the last dimension of the first must equal the "
            "second-to-last of the second"
        )
    batch = broadcast_shapes([a[:-2], b[:-2]], "matmul (batch dimensions)", names)
    return batch + (a[-2], b[-1]), dtype


def _matmul_flops(in_shapes, out_shape, attrs):
    a = _oriented(tuple(in_shapes[0]), attrs.get("transpose_a", False))
    return 2 * numel(out_shape) * a[-1]


def _matmul_reference(arrays, attrs):
    a, b = np.asarray(arrays[0]), np.asarray(arrays[1])
    if attrs.get("transpose_a", False):
        a = np.swapaxes(a, -1, -2)
    if attrs.get("transpose_b", False):
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b)


MATMUL = OpDef(
    "matmul", "matmul", 2, 2, (("transpose_a", False), ("transpose_b", False)),
    _matmul_infer, _matmul_flops, _matmul_reference,
)


# -- einsum ----------------------------------------------------------------------

def parse_equation(equation: object, n_inputs: int) -> tuple[tuple[str, ...], str]:
    """Split ``"bsh,hf->bsf"`` into input terms and the output term, checking its form.

    >>> parse_equation("bsh,hf->bsf", 2)
    (('bsh', 'hf'), 'bsf')
    """
    if not isinstance(equation, str):
        raise ModelError(f"einsum equation must be a string like 'ij,jk->ik', got {equation!r}")
    eq = equation.replace(" ", "")
    if "->" not in eq:
        raise ModelError(f"einsum equation {equation!r} needs an explicit '->' and output term")
    if "." in eq:
        raise ModelError(f"einsum equation {equation!r}: '...' is not supported; name every dimension")
    lhs, out = eq.split("->", 1)
    terms = tuple(lhs.split(","))
    for term in terms + (out,):
        bad = [c for c in term if not c.isalpha()]
        if bad:
            raise ModelError(f"einsum equation {equation!r}: {bad[0]!r} is not a letter; use one letter per dimension")
        for c in term:
            if term.count(c) > 1:
                raise ModelError(f"einsum equation {equation!r}: letter {c!r} repeats in term {term!r}")
    if len(terms) != n_inputs:
        raise ModelError(f"einsum equation {equation!r} has {len(terms)} input terms but the op has {n_inputs} inputs")
    for c in out:
        if not any(c in t for t in terms):
            raise ModelError(f"einsum equation {equation!r}: output letter {c!r} appears in no input term")
    return terms, out


def label_sizes(equation: str, shapes: Sequence[Shape], names: Sequence[str] | None = None) -> dict[str, int]:
    """The size of every letter of ``equation``, checked against ``shapes``."""
    terms, _ = parse_equation(equation, len(shapes))
    sizes: dict[str, int] = {}
    where: dict[str, int] = {}
    for i, (term, shape) in enumerate(zip(terms, shapes)):
        if len(term) != len(shape):
            raise ModelError(
                f"einsum term {term!r} has {len(term)} letters but input {operand(names, shapes, i)} "
                f"has rank {len(shape)}"
            )
        for c, d in zip(term, shape):
            if c in sizes and sizes[c] != d:
                j = where[c]
                raise ModelError(
                    f"einsum letter {c!r} is {sizes[c]} in {operand(names, shapes, j)} but {d} in "
                    f"{operand(names, shapes, i)}"
                )
            sizes.setdefault(c, d)
            where.setdefault(c, i)
    return sizes


def _einsum_infer(shapes, dtypes, attrs, names=None):
    equation = attrs.get("equation")
    if equation is None:
        raise ModelError("einsum needs the attribute 'equation'")
    dtype = same_dtype("einsum", dtypes, names)
    need_numeric("einsum", dtypes, names)
    sizes = label_sizes(equation, shapes, names)
    _, out = parse_equation(equation, len(shapes))
    return tuple(sizes[c] for c in out), dtype


def _einsum_flops(in_shapes, out_shape, attrs):
    terms = math.prod(label_sizes(attrs["equation"], in_shapes).values())
    n = len(in_shapes)
    return terms if n == 1 else 2 * (n - 1) * terms


def _einsum_reference(arrays, attrs):
    # optimize=True contracts through BLAS (tensordot) instead of einsum's naive loops
    return np.einsum(attrs["equation"].replace(" ", ""), *[np.asarray(a) for a in arrays], optimize=True)


EINSUM = OpDef("einsum", "matmul", 1, None, (("equation", REQUIRED),), _einsum_infer, _einsum_flops, _einsum_reference)
