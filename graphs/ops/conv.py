"""``conv2d``: 2-D convolution, NCHW input and OIHW weight, no groups or dilation.

Inputs ``[x (N, C, H, W), w (O, C, KH, KW)]``; attributes ``stride`` and ``padding``
(an int or a pair ``[h, w]``; defaults 1 and 0, zero padding on both sides). The
result is ``(N, O, OH, OW)`` with ``OH = (H + 2·pad_h - KH) // stride_h + 1``. In a
graph both are stored as pairs.

FLOP convention: a multiply-add is **2 FLOPs**: ``2·N·O·OH·OW·C·KH·KW``.

Bytes accessed: the default (:func:`~graphs.ops.opdef.every_element_once`): every operand element
read once, every result element written once (a tiled kernel's ideal on-chip reuse). These ops run
on the matmul units (``matmul_units``).

VJP: one GEMM per kernel position ``(i, j)`` for each operand: the weight gets
``cot · patch_ij`` contracted over batch and output positions, the (padded) input
gets ``w_ij^T · cot`` added at the strided positions the patch came from; padding is
cut off at the end, and input rows or columns no window reached get zero.

>>> CONV2D.infer([(8, 3, 32, 32), (16, 3, 3, 3)], ["f32", "f32"], {"padding": 1})
((8, 16, 32, 32), 'f32')
>>> CONV2D.flops([(1, 2, 4, 4), (3, 2, 3, 3)], (1, 3, 2, 2), {})
432
"""

from __future__ import annotations

import numpy as np

from graphs.ops.common import need_float, numel, operand, pair, same_dtype
from graphs.ops.opdef import OpDef, check_wrt
from planner.errors import ModelError


def _params(attrs):
    stride = pair(attrs.get("stride", 1), "conv2d attribute stride")
    padding = pair(attrs.get("padding", 0), "conv2d attribute padding")
    if min(stride) < 1 or min(padding) < 0:
        raise ModelError(f"conv2d needs stride >= 1 and padding >= 0, got stride {list(stride)}, padding {list(padding)}")
    return stride, padding


def _conv_infer(shapes, dtypes, attrs, names=None):
    stride, padding = _params(attrs)
    dtype = same_dtype("conv2d", dtypes, names)
    need_float("conv2d", dtype, names)
    x, w = tuple(shapes[0]), tuple(shapes[1])
    if len(x) != 4 or len(w) != 4:
        raise ModelError(
            f"conv2d needs a rank-4 NCHW input and a rank-4 OIHW weight, got {operand(names, shapes, 0)} "
            f"and {operand(names, shapes, 1)}"
        )
    if x[1] != w[1]:
        raise ModelError(
            f"conv2d input {operand(names, shapes, 0)} has {x[1]} channels but weight "
            f"{operand(names, shapes, 1)} expects {w[1]}"
        )
    out_hw = []
    for k, axis in enumerate("HW"):
        size = x[2 + k] + 2 * padding[k] - w[2 + k]
        if size < 0:
            raise ModelError(
                f"conv2d kernel {axis}={w[2 + k]} is larger than the padded input {axis}="
                f"{x[2 + k] + 2 * padding[k]} ({operand(names, shapes, 0)})"
            )
        out_hw.append(size // stride[k] + 1)
    return (x[0], w[0], out_hw[0], out_hw[1]), dtype


def _conv_flops(in_shapes, out_shape, attrs):
    _, c, kh, kw = in_shapes[1]
    return 2 * numel(out_shape) * c * kh * kw


def _conv_reference(arrays, attrs):
    (sh, sw), (ph, pw) = _params(attrs)
    x, w = np.asarray(arrays[0]), np.asarray(arrays[1])
    x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - kh) // sh + 1, (wd - kw) // sw + 1
    out = np.zeros((n, o, oh, ow), dtype=np.result_type(x, w))
    for i in range(kh):
        for j in range(kw):
            patch = x[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j], optimize=True)
    return out


def _conv_canonical(shapes, attrs):
    stride, padding = _params(attrs)
    return {"stride": stride, "padding": padding}


def _conv_vjp(arrays, attrs, result, cotangent, wrt):
    check_wrt("conv2d", arrays, wrt, ("input", "weight"))
    (sh, sw), (ph, pw) = _params(attrs)
    x, w, cot = np.asarray(arrays[0]), np.asarray(arrays[1]), np.asarray(cotangent)
    dtype = cot.dtype
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = cot.shape[2], cot.shape[3]
    p = oh * ow
    out = {}
    if 1 in wrt:
        xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))) if ph or pw else x
        cot_t = np.ascontiguousarray(np.transpose(cot, (1, 0, 2, 3))).reshape(o, n * p)   # [O, N·P]
        dw = np.empty(w.shape, dtype=dtype)
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
                patch_t = np.transpose(patch, (1, 0, 2, 3)).reshape(c, n * p)              # [C, N·P]
                dw[:, :, i, j] = cot_t @ patch_t.T
        out[1] = dw
    if 0 in wrt:
        dxp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw), dtype=dtype)
        cot_r = cot.reshape(n, o, p)
        for i in range(kh):
            for j in range(kw):
                contrib = np.matmul(w[:, :, i, j].T, cot_r)                                # [N, C, P]
                dxp[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw] += contrib.reshape(n, c, oh, ow)
        out[0] = dxp[:, :, ph:ph + h, pw:pw + wd].copy() if ph or pw else dxp
    return tuple(np.asarray(out[i], dtype=dtype) for i in wrt)


def _conv_jax(jnp, lax, a, attrs):
    (sh, sw), (ph, pw) = attrs["stride"], attrs["padding"]
    return lax.conv_general_dilated(a[0], a[1], window_strides=(sh, sw), padding=((ph, ph), (pw, pw)),
                                    dimension_numbers=("NCHW", "OIHW", "NCHW"), precision=lax.Precision.HIGHEST)


# an output element sums the OIHW weight over its input channels and kernel window
CONV2D = OpDef("conv2d", "conv", 2, 2, (("stride", 1), ("padding", 0)), _conv_infer, _conv_flops,
               _conv_reference, _conv_canonical, vjp=_conv_vjp, multilinear=True, rule="conv.conv2d",
               fan_in_dims=((1, (1, 2, 3)),), jax_form=_conv_jax, matmul_units=True)
