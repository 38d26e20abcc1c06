"""Recognising the catalogue's composite ops in a traced program, and lowering what is left.

A jaxpr spells ``jnp.mean``, ``jax.nn.softmax``, a hand-written layer or RMS norm and ``jax.nn.gelu``
as several primitives. :func:`fuse` rewrites them, in this order, into one catalogue op each:

- ``mean``: ``sum(x, axes)`` (kept dims or not) divided by the constant number of reduced
  elements;
- ``softmax``: ``e / sum(e, a)`` (kept dims) with ``e = exp(z)``; when ``z = x - max(x, a)``
  (through ``stop_gradient`` and ``jax.nn.softmax``'s ``max(-inf, .)``) it is ``softmax(x, a)``,
  else ``softmax(z, a)`` (the same function);
- ``log_softmax``: ``z - log(sum(exp(z), a))`` (kept dims) is ``log(softmax(x, a))``, ``x`` as for softmax;
- ``layernorm``: ``(x - mean(x)) * rsqrt(mean((x - mean(x))**2) + eps)`` over the last axis (or
  divided by ``sqrt(...)``, or times ``1 / sqrt(...)``), then an optional ``* weight`` and
  ``+ bias`` of shape ``[x.shape[-1]]`` when the normalised value has no other reader;
  ``rmsnorm`` the same without the centring (``x * rsqrt(mean(x**2) + eps)``, optional ``* weight``);
- ``gelu``: ``x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))`` (``jax.nn.gelu``'s
  default tanh approximation, which is the catalogue's gelu; constants compared to 1e-6
  relative, as float32 rounds them).

The rewritten node recomputes from the pattern's input, so an intermediate another op still reads
stays (and is computed as before). Then every elementwise binary op reads a broadcast or
leading-ones reshape operand as the smaller array (the catalogue broadcasts the numpy way), and
what is left is lowered: ``integer_pow`` and ``square`` to ``mul`` (``div`` for negative
powers), a ``broadcast`` nobody absorbed to ``add`` of zeros of its shape; a ``slice`` of a ``pad`` that only
reads what the pad padded is folded into one ``pad`` (a shift). A ``sqrt``, ``rsqrt`` or ``stop_gradient``
outside these patterns is the catalogue's own (``jax.nn.logsumexp``'s stopped shift stays one: its maximum is
not differentiated, as in JAX).
"""

from __future__ import annotations

import math

from graphs.ops.pointwise import broadcast_shapes
from planner.errors import ModelError, ShardplanError
from planner.frontends.trace import Trace, TracedOp

GELU_TANH_SCALE = math.sqrt(2.0 / math.pi)
GELU_CUBIC = 0.044715
CONSTANT_RTOL = 1e-6
"""float32 rounds the constants JAX writes into a jaxpr; 1e-6 relative admits that (2**-24 ~ 6e-8), no more."""

_BINARY = ("add", "sub", "mul", "div", "maximum")
#: The elementwise ops that broadcast their operands the numpy way (and so absorb a broadcast operand).
_BROADCASTING = (*_BINARY, "minimum", "comparison", "select")
_FLOATS = ("f32", "bf16", "f16")


def fuse(p: Trace) -> None:
    """Rewrite ``p`` in place (see the module docstring). A value the program gives a sharding (or groups with
    ``shard_alike``) that a rewrite folds away is an error: the sharding would be lost."""
    p.prune()
    kept = {v: p.producer(v) for v in [*p.shardings, *(v for g in p.shard_as for v in g)] if p.producer(v)}
    for rewrite in (_means, _softmaxes, _log_softmaxes, _layernorms, _gelus, _absorb_broadcasts,
                    _lower, _absorb_broadcasts, _sliced_pads):
        rewrite(p)
        p.prune()
    for v, node in kept.items():
        if p.producer(v) is None:
            raise ModelError(f"the result of JAX primitive {node.primitive!r} has a sharding (an out_sharding, a "
                             "sharding constraint or shard_alike) but is folded into a larger op here (mean, softmax, "
                             "a norm, gelu or a broadcast); constrain the larger op's result instead", where=node.where)


# -- small readers ------------------------------------------------------------------------

def _is(p: Trace, name: str, op: str) -> TracedOp | None:
    n = p.producer(name)
    return n if n is not None and n.op == op else None


def _near(value: float | None, target: float) -> bool:
    return value is not None and abs(value - target) <= CONSTANT_RTOL * abs(target)


def _scalar_const(p: Trace, name: str) -> float | None:
    return p.const_value(name) if p.values[name].shape == () else None


def _kept(shape: tuple[int, ...], axes) -> tuple[int, ...]:
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def _factors(p: Trace, name: str, depth: int) -> list[str]:
    """The operands of a product tree of ``mul`` nodes rooted at ``name``, ``depth`` levels down."""
    n = _is(p, name, "mul")
    if n is None or depth == 0:
        return [name]
    return _factors(p, n.inputs[0], depth - 1) + _factors(p, n.inputs[1], depth - 1)


def _same(p: Trace, a: str, b: str, depth: int = 4) -> bool:
    """``a`` and ``b`` are one value, or computed alike from the same values (``x - x.mean()`` written twice),
    looking ``depth`` ops up."""
    if a == b:
        return True
    na, nb = p.producer(a), p.producer(b)
    if depth == 0 or na is None or nb is None or (na.op, na.attrs, len(na.inputs)) != (nb.op, nb.attrs, len(nb.inputs)):
        return False
    return all(_same(p, x, y, depth - 1) for x, y in zip(na.inputs, nb.inputs))


def _pairs(n: TracedOp):
    """``(a, b)`` and ``(b, a)`` for a commutative node's two operands."""
    return [(n.inputs[0], n.inputs[1]), (n.inputs[1], n.inputs[0])]


# -- mean ---------------------------------------------------------------------------------

def _means(p: Trace) -> None:
    for n in p.walk():
        if n.op != "div" or p.values[n.out].dtype not in _FLOATS:
            continue
        count = _scalar_const(p, n.inputs[1])
        reshape = _is(p, n.inputs[0], "reshape")
        total = _is(p, reshape.inputs[0] if reshape else n.inputs[0], "sum")
        if count is None or total is None:
            continue
        x, axes = total.inputs[0], tuple(total.attr("axes"))
        shape = p.values[x].shape
        if count != math.prod(shape[a] for a in axes):
            continue
        if reshape is not None and p.values[n.out].shape != _kept(shape, axes):
            continue
        p.replace(n, "mean", [x], axes=axes, keepdims=reshape is not None)


# -- softmax ------------------------------------------------------------------------------

def _unwrap_max(p: Trace, name: str) -> str:
    """Through ``stop_gradient``, ``maximum(., -inf)`` and reshapes (which keep row-major order)."""
    while True:
        n = p.producer(name)
        if n is None:
            return name
        if n.op in ("stop_gradient", "reshape"):
            name = n.inputs[0]
        elif n.op == "maximum" and any(_scalar_const(p, a) == -math.inf for a in n.inputs):
            name = next(a for a in n.inputs if _scalar_const(p, a) != -math.inf)
        else:
            return name


def _softmaxes(p: Trace) -> None:
    for n in p.walk():
        if n.op != "div":
            continue
        e, denominator = n.inputs
        exp, reshape = _is(p, e, "exp"), _is(p, denominator, "reshape")
        total = _is(p, reshape.inputs[0], "sum") if reshape else None
        if exp is None or total is None or not _same(p, total.inputs[0], e) or len(total.attr("axes")) != 1:
            continue
        axis = total.attr("axes")[0]
        if p.values[denominator].shape != _kept(p.values[e].shape, (axis,)):
            continue
        p.replace(n, "softmax", [_unshifted(p, exp.inputs[0], axis)], axis=axis)


def _unshifted(p: Trace, z: str, axis: int) -> str:
    """``x`` when ``z = x - max(x, axis)`` (kept dims, through :func:`_unwrap_max`), else ``z``: softmax and
    log-softmax of either are one function (they do not change when every element along ``axis`` shifts alike),
    so the shift and its ``stop_gradient`` are the composite op's own."""
    shifted = _is(p, z, "sub")
    if shifted is not None:
        top = _is(p, _unwrap_max(p, shifted.inputs[1]), "max")
        if (top is not None and _same(p, top.inputs[0], shifted.inputs[0]) and tuple(top.attr("axes")) == (axis,)
                and p.values[shifted.inputs[1]].shape == _kept(p.values[shifted.inputs[0]].shape, (axis,))):
            return shifted.inputs[0]
    return z


def _log_softmaxes(p: Trace) -> None:
    """``z - log(sum(exp(z), a))`` (kept dims: ``jax.nn.log_softmax``) is ``log(softmax(x, a))``, ``x`` as for
    softmax; the catalogue has softmax and log, not their composition."""
    for n in p.walk():
        if n.op != "sub":
            continue
        z, k = n.inputs
        log = _is(p, k, "log")
        reshape = _is(p, log.inputs[0], "reshape") if log is not None else None
        total = _is(p, reshape.inputs[0] if reshape else log.inputs[0], "sum") if log is not None else None
        exp = _is(p, total.inputs[0], "exp") if total is not None else None
        if exp is None or not _same(p, exp.inputs[0], z) or len(total.attr("axes")) != 1:
            continue
        axis = total.attr("axes")[0]
        if p.values[k].shape != _kept(p.values[z].shape, (axis,)):
            continue
        out = p.values[n.out]
        probabilities = p.insert_before(n, "softmax", [_unshifted(p, z, axis)], out.shape, out.dtype, axis=axis)
        p.replace(n, "log", [probabilities])


# -- layernorm ----------------------------------------------------------------------------

def _last_mean(p: Trace, name: str) -> TracedOp | None:
    """The ``mean`` over the last axis with kept dims that computes ``name``, if one does."""
    m = _is(p, name, "mean")
    if m is None or not m.attr("keepdims"):
        return None
    return m if tuple(m.attr("axes")) == (len(p.values[m.inputs[0]].shape) - 1,) else None


def _root_of(p: Trace, n: TracedOp) -> tuple[str, str] | None:
    """``(centred, variance + eps)`` when ``n`` divides by its root or multiplies by its reciprocal root."""
    if n.op == "div":
        root = _is(p, n.inputs[1], "sqrt")
        return (n.inputs[0], root.inputs[0]) if root else None
    if n.op != "mul":
        return None
    for centred, r in _pairs(n):
        rsqrt = _is(p, r, "rsqrt")
        if rsqrt is not None:
            return centred, rsqrt.inputs[0]
        inv = _is(p, r, "div")
        root = _is(p, inv.inputs[1], "sqrt") if inv is not None and _scalar_const(p, inv.inputs[0]) == 1.0 else None
        if root is not None:
            return centred, root.inputs[0]
    return None


def _normalised(p: Trace, n: TracedOp) -> tuple[str, str, float] | None:
    """``("layernorm", x, eps)`` when ``n`` is ``(x - mean(x)) / sqrt(mean((x - mean(x))**2) + eps)`` over the
    last axis, ``("rmsnorm", x, eps)`` when it is ``x / sqrt(mean(x**2) + eps)``."""
    found = _root_of(p, n)
    if found is None:
        return None
    centred, shifted = found
    plus = _is(p, shifted, "add")
    if plus is None:
        return None
    for v, c in _pairs(plus):
        eps, var = _scalar_const(p, c), _last_mean(p, v)
        if eps is None or var is None:
            continue
        sq = p.producer(var.inputs[0])
        squares = sq is not None and (
            (sq.op == "mul" and all(_same(p, a, centred) for a in sq.inputs))
            or (sq.op in ("square", "integer_pow") and sq.attr("y", 2) == 2 and _same(p, sq.inputs[0], centred)))
        if not squares:
            continue
        sub = _is(p, centred, "sub")
        mu = _last_mean(p, sub.inputs[1]) if sub is not None else None
        if mu is not None and _same(p, mu.inputs[0], sub.inputs[0]):
            # XLA reduces every mean as written: a variance centred on a mean of its own (jnp.var's) is one
            # reduction more than a layernorm's two statistics, so that form stays op by op
            if not all(a == centred or _centred_on(p, a, sub.inputs[1]) for a in sq.inputs):
                return None
            return "layernorm", sub.inputs[0], eps
        return "rmsnorm", centred, eps
    return None


def _centred_on(p: Trace, name: str, mean: str) -> bool:
    """Whether ``name`` is ``x - mean`` for that very ``mean`` value."""
    sub = _is(p, name, "sub")
    return sub is not None and sub.inputs[1] == mean


def _vector(p: Trace, name: str, size: int) -> str | None:
    """``name`` as a ``[size]`` tensor: itself, or what a leading-ones reshape of it reads."""
    if p.values[name].shape == (size,):
        return name
    r = _is(p, name, "reshape")
    if r is not None and p.values[r.inputs[0]].shape == (size,) and p.values[name].shape[-1:] == (size,) \
            and math.prod(p.values[name].shape) == size:
        return r.inputs[0]
    return None


def _affine(p: Trace, n: TracedOp, op: str, size: int) -> tuple[TracedOp, str] | None:
    """The single reader of ``n`` when it is ``op`` (mul or add) with a ``[size]`` vector, and that vector."""
    readers = p.readers(n.out)
    if len(readers) != 1 or p.uses(n.out) != 1 or readers[0].op != op:
        return None
    r = readers[0]
    if p.values[r.out].shape != p.values[n.out].shape:
        return None
    for a, b in _pairs(r):
        vec = _vector(p, b, size) if a == n.out else None
        if vec is not None:
            return r, vec
    return None


def _layernorms(p: Trace) -> None:
    for n in p.walk():
        found = _normalised(p, n)
        if found is None:
            continue
        op, x, eps = found
        size = p.values[x].shape[-1]
        last, params = n, []
        scaled = _affine(p, n, "mul", size)
        if scaled is not None:
            last, params = scaled[0], [scaled[1]]
            shifted = _affine(p, last, "add", size) if op == "layernorm" else None  # rmsnorm has no bias
            if shifted is not None:
                last, params = shifted[0], params + [shifted[1]]
        p.replace(last, op, [x, *params], eps=eps)


# -- gelu ---------------------------------------------------------------------------------

def _cube_of(p: Trace, name: str) -> str | None:
    power = _is(p, name, "integer_pow")
    if power is not None and power.attr("y") == 3:
        return power.inputs[0]
    fs = _factors(p, name, 2)
    return fs[0] if len(fs) == 3 and len(set(fs)) == 1 else None


def _gelu_input(p: Trace, n: TracedOp) -> str | None:
    fs = _factors(p, n.out, 2)
    if len(fs) != 3:
        return None
    half = [f for f in fs if _near(_scalar_const(p, f), 0.5)]
    if len(half) != 1:
        return None
    rest = [f for f in fs if f != half[0]]
    for x, t in (rest, rest[::-1]):
        one_plus = _is(p, t, "add")
        if one_plus is None:
            continue
        for one, th in _pairs(one_plus):
            tanh = _is(p, th, "tanh")
            if not _near(_scalar_const(p, one), 1.0) or tanh is None:
                continue
            arg = _factors(p, tanh.inputs[0], 1)
            scale = [f for f in arg if _near(_scalar_const(p, f), GELU_TANH_SCALE)]
            inner = _is(p, next((f for f in arg if f not in scale), ""), "add") if len(arg) == 2 and scale else None
            if inner is None:
                continue
            for a, cubic in _pairs(inner):
                cf = _factors(p, cubic, 1)
                c = [f for f in cf if _near(_scalar_const(p, f), GELU_CUBIC)]
                if a == x and len(cf) == 2 and c and _cube_of(p, next(f for f in cf if f not in c)) == x:
                    return x
    return None


def _gelus(p: Trace) -> None:
    for n in p.walk():
        if n.op != "mul":
            continue
        x = _gelu_input(p, n)
        if x is not None and p.values[x].shape == p.values[n.out].shape:
            p.replace(n, "gelu", [x])


# -- broadcasting and lowering ------------------------------------------------------------

def _smaller(p: Trace, name: str) -> str | None:
    """What an elementwise reader could read instead of ``name`` (numpy broadcasting), if anything."""
    if name in p.shardings:  # the program shards the broadcast value itself: it stays (lowered to an add of zeros)
        return None
    n = p.producer(name)
    if n is not None and n.op == "broadcast":
        return n.inputs[0]
    if n is not None and n.op == "reshape":
        src, dst = p.values[n.inputs[0]].shape, p.values[name].shape
        lead = len(dst) - len(src)
        if lead > 0 and dst == (1,) * lead + src:
            return n.inputs[0]
    value = p.const_value(name)
    if value is not None and p.values[name].shape != ():
        return p.const(value, (), p.values[name].dtype)
    return None


def _absorb_broadcasts(p: Trace) -> None:
    changed = True
    while changed:
        changed = False
        for n in p.walk():
            if n.op not in _BROADCASTING:
                continue
            for i in range(len(n.inputs)):
                small = _smaller(p, n.inputs[i])
                if small is None:
                    continue
                inputs = list(n.inputs)
                inputs[i] = small
                try:
                    fits = broadcast_shapes([p.values[x].shape for x in inputs]) == p.values[n.out].shape
                except ShardplanError:
                    fits = False
                if fits:
                    n = p.replace(n, n.op, inputs, **dict(n.attrs))
                    changed = True


def _lower(p: Trace) -> None:
    for n in p.walk():
        v = p.values[n.out]
        if n.op == "index_wrap":
            _unwrap_indices(p, n)
        elif n.op == "square":
            p.replace(n, "mul", [n.inputs[0], n.inputs[0]])
        elif n.op == "integer_pow":
            _power(p, n, n.inputs[0], n.attr("y"))
        elif n.op == "broadcast":
            if v.dtype == "bool":
                raise ModelError("broadcast of a bool array has no op in shardplan's catalogue", where=n.where)
            p.replace(n, "add", [n.inputs[0], p.const(0.0, v.shape, v.dtype)])


def _refused_reader(p: Trace, name: str, depth: int) -> TracedOp | None:
    """A ``refused`` node reading ``name``, or what is computed from it within ``depth`` ops."""
    for r in p.readers(name):
        if r.op == "refused":
            return r
        found = _refused_reader(p, r.out, depth - 1) if depth > 1 else None
        if found is not None:
            return found
    return None


def _unwrap_indices(p: Trace, n: TracedOp) -> None:
    """``t[i]``'s negative-index wrap ``(i, i < 0, i + n)`` is ``i`` where gathers (``gather``, ``take_along_axis``)
    read it as their indices (in range); elsewhere (a ``dynamic_update_slice``'s start) it is what JAX computes, a
    ``select`` of ``i + n`` where ``i < 0``."""
    readers = p.readers(n.out)
    refused = _refused_reader(p, n.out, depth=4)
    if refused is not None:  # the gather reading it has no op (not whole rows): that is the error to report
        raise ModelError(refused.attr("message"), where=refused.where or None)
    index, negative, shifted = n.inputs
    gathers = [r for r in readers if r.op in _INDEXING and r.inputs[0] != n.out]
    for r in gathers:
        p.replace(r, r.op, [r.inputs[0], index], **dict(r.attrs))
    if n.out in p.outputs or len(gathers) < len(readers):
        p.replace(n, "select", [negative, shifted, index])


_INDEXING = ("gather", "take_along_axis")
"""The ops whose second operand indexes their first (in range: JAX's negative-index wrap is the identity there)."""


def _sliced_pads(p: Trace) -> None:
    """A ``slice`` of a ``pad`` (its only reader, no sharding stated on the pad) that cuts only dimensions the
    pad pads is one ``pad`` with those counts lowered (cropping where they go negative): ``x[:, :-1]`` of a pad
    by one in front is a shift, which XLA's simplifier makes one halo exchange of too."""
    for n in p.walk():
        if n.op != "slice":
            continue
        pad = p.producer(n.inputs[0])
        if pad is None or pad.op != "pad" or p.uses(pad.out) != 1 or pad.out in p.shardings:
            continue
        shape = p.values[pad.out].shape
        low, high = list(pad.attr("low")), list(pad.attr("high"))
        starts, stops = n.attr("starts"), n.attr("stops")
        if any((a, b) != (0, size) and not (low[d] or high[d])
               for d, (a, b, size) in enumerate(zip(starts, stops, shape))):
            continue
        low = [lo - a for lo, a in zip(low, starts)]
        high = [hi - (size - b) for hi, b, size in zip(high, stops, shape)]
        p.replace(n, "pad", [pad.inputs[0]], low=tuple(low), high=tuple(high), value=pad.attr("value"))


def _power(p: Trace, n: TracedOp, x: str, y: int) -> None:
    """``x ** y`` as a chain of ``mul`` (``1 / x ** -y`` for negative ``y``), ending in ``n``'s result."""
    v = p.values[n.out]
    if y == 0 or (y < 0 and v.dtype not in _FLOATS):
        raise ModelError(f"integer_pow with exponent {y} of a {v.dtype} array has no op in shardplan's catalogue",
                         where=n.where)
    acc = x
    for _ in range(abs(y) - 2 if y > 0 else abs(y) - 1):
        acc = p.insert_before(n, "mul", [acc, x], v.shape, v.dtype)
    if y == 1:
        p.replace(n, "mul", [x, p.const(1.0, (), v.dtype)])
    elif y > 1:
        p.replace(n, "mul", [acc, x])
    else:
        p.replace(n, "div", [p.const(1.0, (), v.dtype), acc])
