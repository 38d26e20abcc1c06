"""Contractions: ``matmul`` (with ``transpose_a`` / ``transpose_b``) and ``einsum``.

FLOP convention: a multiply-add is **2 FLOPs**. ``matmul`` of ``[..., m, k]`` by
``[..., k, n]`` costs ``2·m·k·n`` per batch element. An ``einsum`` with two or
more operands costs ``2·(operands-1)`` FLOPs per term, i.e. ``2·(operands-1)``
times the product of the sizes of all its labels; with one operand it costs 1
FLOP per term (an addition).

Bytes accessed: the default (:func:`~graphs.ops.opdef.every_element_once`): every operand element
read once, every result element written once (a tiled kernel's ideal on-chip reuse). These ops run
on the matmul units (``matmul_units``).

``matmul`` takes operands of rank >= 2; their leading (batch) dimensions broadcast
the numpy way, so ``[b, s, h] @ [h, f] -> [b, s, f]``. ``transpose_a`` swaps the
last two dimensions of the first operand before multiplying, ``transpose_b`` those
of the second.

``einsum`` takes an explicit equation ``"bsh,hf->bsf"``: one letter per dimension,
one term per operand, every output letter present in some operand, a letter's
size the same everywhere; no ``...`` and no letter repeated inside one term.

Both run on BLAS: a two-operand einsum is translated to one batched ``matmul``
(:func:`contract`), which is also how the VJPs are computed. The gradient of a
matmul operand that was broadcast over batch dimensions is summed over them; the
gradient of einsum operand ``i`` is the einsum of the cotangent with the other
operands into term ``i``, broadcast along letters only that operand has.

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
from graphs.ops.opdef import REQUIRED, OpDef, check_wrt
from graphs.ops.pointwise import broadcast_shapes, fresh, unbroadcast
from planner.errors import ModelError, quote


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


def _rows(x: np.ndarray) -> np.ndarray:
    """``x [..., m, k]`` as ``[prod(...)·m, k]`` (a view when ``x`` is C-contiguous)."""
    return x.reshape(-1, x.shape[-1])


def _matmul_vjp(arrays, attrs, result, cotangent, wrt):
    check_wrt("matmul", arrays, wrt)
    a, b = np.asarray(arrays[0]), np.asarray(arrays[1])
    cot = np.asarray(cotangent)
    ta, tb = attrs.get("transpose_a", False), attrs.get("transpose_b", False)
    A = np.swapaxes(a, -1, -2) if ta else a     # [..., m, k]
    B = np.swapaxes(b, -1, -2) if tb else b     # [..., k, n]
    out = []
    for i in wrt:
        x, other = (a, B) if i == 0 else (b, A)
        nb = cot.ndim - 2
        if x.ndim == 2 and nb and other.shape[:-2] == cot.shape[:-2]:
            # a 2-D operand against batched ones: contract the batch in the same GEMM
            if i == 1 and not ta and a.flags.c_contiguous:
                ar, cr = _rows(a), _rows(cot)          # [B·m, k], [B·m, n]
                g = cr.T @ ar if tb else ar.T @ cr
            else:
                bat = list(range(nb))
                if i == 0:   # dA' [m, k] = sum_batch cot [.., m, n] B [.., k, n]
                    g = np.tensordot(cot, B, axes=(bat + [nb + 1], bat + [nb + 1]))
                else:        # dB' [k, n] = sum_batch A [.., m, k] cot [.., m, n]
                    g = np.tensordot(A, cot, axes=(bat + [nb], bat + [nb]))
                if (ta if i == 0 else tb):
                    g = g.T
        elif i == 0:
            g = unbroadcast(np.matmul(B, np.swapaxes(cot, -1, -2)) if ta else np.matmul(cot, np.swapaxes(B, -1, -2)),
                            a.shape)
        else:
            g = unbroadcast(np.matmul(np.swapaxes(cot, -1, -2), A) if tb else np.matmul(np.swapaxes(A, -1, -2), cot),
                            b.shape)
        out.append(fresh(g, cot.dtype, a, b, cot, *out))
    return tuple(out)


def _matmul_jax(jnp, lax, a, attrs):
    x, y = a
    if attrs.get("transpose_a", False):
        x = jnp.swapaxes(x, -1, -2)
    if attrs.get("transpose_b", False):
        y = jnp.swapaxes(y, -1, -2)
    return jnp.matmul(x, y, precision=lax.Precision.HIGHEST)


MATMUL = OpDef(
    "matmul", "matmul", 2, 2, (("transpose_a", False), ("transpose_b", False)),
    _matmul_infer, _matmul_flops, _matmul_reference, vjp=_matmul_vjp, multilinear=True,
    rule="matmul.matmul", jax_form=_matmul_jax, matmul_units=True, reduces_cotangents_by_dimension=True,
    xla_groups_operands=True,
)


# -- einsum ----------------------------------------------------------------------

def parse_equation(equation: object, n_inputs: int) -> tuple[tuple[str, ...], str]:
    """Split ``"bsh,hf->bsf"`` into input terms and the output term, checking its form.

    >>> parse_equation("bsh,hf->bsf", 2)
    (('bsh', 'hf'), 'bsf')
    """
    if not isinstance(equation, str):
        raise ModelError(f"einsum equation must be a string like 'ij,jk->ik', got {quote(equation)}")
    eq = equation.replace(" ", "")
    if "->" not in eq:
        raise ModelError(f"einsum equation {quote(equation)} needs an explicit '->' and output term")
    if "." in eq:
        raise ModelError(f"einsum equation {quote(equation)}: '...' is not supported; name every dimension")
    lhs, out = eq.split("->", 1)
    terms = tuple(lhs.split(","))
    for term in terms + (out,):
        bad = [c for c in term if not c.isalpha()]
        if bad:
            raise ModelError(f"einsum equation {quote(equation)}: {quote(bad[0])} is not a letter; use one letter per dimension")
        for c in term:
            if term.count(c) > 1:
                raise ModelError(f"einsum equation {quote(equation)}: letter {quote(c)} repeats in term {quote(term)}")
    if len(terms) != n_inputs:
        raise ModelError(f"einsum equation {quote(equation)} has {len(terms)} input terms but the op has {n_inputs} inputs")
    for c in out:
        if not any(c in t for t in terms):
            raise ModelError(f"einsum equation {quote(equation)}: output letter {quote(c)} appears in no input term")
    return terms, out


def label_sizes(equation: str, shapes: Sequence[Shape], names: Sequence[str] | None = None) -> dict[str, int]:
    """The size of every letter of ``equation``, checked against ``shapes``."""
    terms, _ = parse_equation(equation, len(shapes))
    sizes: dict[str, int] = {}
    where: dict[str, int] = {}
    for i, (term, shape) in enumerate(zip(terms, shapes)):
        if len(term) != len(shape):
            raise ModelError(
                f"einsum term {quote(term)} has {len(term)} letters but input {operand(names, shapes, i)} "
                f"has rank {len(shape)}"
            )
        for c, d in zip(term, shape):
            if c in sizes and sizes[c] != d:
                j = where[c]
                raise ModelError(
                    f"einsum letter {quote(c)} is {sizes[c]} in {operand(names, shapes, j)} but {d} in "
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


def _as_matrices(x: np.ndarray, term: str, batch, rows, cols, size) -> np.ndarray:
    """``x`` as ``[*batch sizes, prod(rows), prod(cols)]``: a strided view whenever the row and
    column letters each merge without a copy (numpy's matmul hands strided and transposed
    matrices straight to BLAS), else a copy."""
    t = np.transpose(x, [term.index(c) for c in batch + rows + cols])
    return t.reshape([size[c] for c in batch] + [math.prod(size[c] for c in rows), math.prod(size[c] for c in cols)])


def _contract2(ta: str, tb: str, out: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``einsum(f"{ta},{tb}->{out}", a, b)`` as one batched matmul."""
    # letters in one operand only and not in the output are summed out first
    drop = tuple(k for k, c in enumerate(ta) if c not in tb and c not in out)
    if drop:
        a, ta = a.sum(axis=drop), "".join(c for k, c in enumerate(ta) if k not in drop)
    drop = tuple(k for k, c in enumerate(tb) if c not in ta and c not in out)
    if drop:
        b, tb = b.sum(axis=drop), "".join(c for k, c in enumerate(tb) if k not in drop)
    batch = [c for c in ta if c in tb and c in out]
    summed = [c for c in ta if c in tb and c not in out]
    free_a = [c for c in ta if c not in tb]
    free_b = [c for c in tb if c not in ta]
    size = dict(zip(ta, a.shape)) | dict(zip(tb, b.shape))
    am = _as_matrices(a, ta, batch, free_a, summed, size)
    bm = _as_matrices(b, tb, batch, summed, free_b, size)
    r = np.matmul(am, bm).reshape([size[c] for c in batch + free_a + free_b])
    have = batch + free_a + free_b
    return np.transpose(r, [have.index(c) for c in out])


def contract(terms: Sequence[str], out: str, arrays: Sequence[np.ndarray]) -> np.ndarray:
    """``np.einsum`` of ``terms`` into ``out``: two operands through one batched matmul (BLAS),
    other counts through ``np.einsum(..., optimize=True)``.

    >>> a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 2, 2)
    >>> bool(np.allclose(contract(["ij", "jkl"], "lki", [a, b]), np.einsum("ij,jkl->lki", a, b)))
    True
    """
    arrays = [np.asarray(x) for x in arrays]
    if len(arrays) == 2:
        return _contract2(terms[0], terms[1], out, arrays[0], arrays[1])
    return np.einsum(",".join(terms) + "->" + out, *arrays, optimize=len(arrays) > 2)


def _einsum_reference(arrays, attrs):
    terms, out = parse_equation(attrs["equation"], len(arrays))
    return contract(terms, out, arrays)


def _einsum_vjp(arrays, attrs, result, cotangent, wrt):
    check_wrt("einsum", arrays, wrt)
    terms, out = parse_equation(attrs["equation"], len(arrays))
    cot = np.asarray(cotangent)
    grads = []
    for i in wrt:
        others = [k for k in range(len(arrays)) if k != i]
        seen = set(out).union(*(terms[k] for k in others))
        target = "".join(c for c in terms[i] if c in seen)
        g = contract([out] + [terms[k] for k in others], target, [cot] + [arrays[k] for k in others])
        shape = np.shape(arrays[i])
        if target != terms[i]:
            # letters only operand i has were summed in the forward: broadcast along them
            full = np.empty(shape, dtype=np.result_type(g, cot))
            full[...] = g.reshape([d if c in seen else 1 for c, d in zip(terms[i], shape)])
            g = full
        grads.append(fresh(g, cot.dtype, *arrays, cot, *grads))
    return tuple(grads)


def _einsum_jax(jnp, lax, a, attrs):
    return jnp.einsum(attrs["equation"].replace(" ", ""), *a, precision=lax.Precision.HIGHEST)


EINSUM = OpDef("einsum", "matmul", 1, None, (("equation", REQUIRED),), _einsum_infer, _einsum_flops, _einsum_reference,
               vjp=_einsum_vjp, multilinear=True, rule="matmul.einsum", jax_form=_einsum_jax,
               matmul_units=True, reduces_by_dimension=True, reduces_cotangents_by_dimension=True,
               xla_groups_operands=True)
