"""Single-device reference execution of a whole graph, and deterministic example inputs.

:func:`run_reference` evaluates every op in topological order with the catalogue's
numpy ``reference`` functions; :func:`example_inputs` draws data for every input,
parameter and constant. Floats are drawn in float64 by default so that comparisons
with sharded executions are tight; integer tensors an op indexes with (``gather``'s
indices, ``cross_entropy``'s labels: :attr:`~graphs.ops.opdef.OpDef.indexes`) are
drawn inside the range their consumer accepts.

>>> from graphs.builders import mlp
>>> g = mlp(batch=4, hidden=8, layers=2)
>>> values = run_reference(g, example_inputs(g, seed=0))
>>> values["loss"].shape, bool(values["loss"] > 0)
((), True)
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from graphs.dtypes import is_float, numpy_dtype
from graphs.graph import ComputationGraph
from graphs.manual_regions import grouped, per_coordinate
from graphs.ops.collectives import is_collective
from graphs.ops.registry import get_op
from planner.errors import ModelError, quote

_INT_HIGH_DEFAULT = 10


def _int_high(graph: ComputationGraph, tensor: str) -> int:
    """The exclusive upper bound of valid values of an integer tensor, from the consumers that index with it
    (:attr:`~graphs.ops.opdef.OpDef.indexes`), also through ops that only move values (the ``shape`` family: a
    reshape adding take_along_axis's trailing dimension)."""
    return min(_index_bounds(graph, tensor), default=_INT_HIGH_DEFAULT)


def _index_bounds(graph: ComputationGraph, tensor: str) -> list[int]:
    bounds = []
    for op_name, i in graph.consumers(tensor):
        op = graph.op(op_name)
        opdef = graph.op_def(op_name)
        for k, j, d in opdef.indexed(op.attrs_dict):
            if k == i:
                bounds.append(graph.tensors[op.inputs[j]].shape[d])
        if opdef.family == "shape":
            bounds += _index_bounds(graph, op.output)
    return bounds


def _fan_in(graph: ComputationGraph, t) -> int:
    """How many inputs each output of a weight sums over (1 for tables, vectors and scalars): over the
    dimensions its first consumer that says so names (:attr:`~graphs.ops.opdef.OpDef.fan_in_dims`), else
    every dimension but the last (``[..., in, out]``)."""
    if len(t.shape) < 2:
        return 1
    for op_name, i in graph.consumers(t.name):
        dims = dict(graph.op_def(op_name).fan_in_dims).get(i)
        if dims is not None:
            return math.prod(t.shape[d] for d in dims)
    return math.prod(t.shape[:-1])


def example_inputs(graph: ComputationGraph, seed: int = 0, float_dtype=np.float64) -> dict[str, np.ndarray]:
    """Deterministic data for every non-activation tensor (a const with a value is filled with it)."""
    rng = np.random.default_rng(seed)
    out = {}
    for t in graph.tensors.values():
        if t.kind == "activation":
            continue
        if t.value is not None:
            out[t.name] = np.full(t.shape, t.value, dtype=float_dtype if is_float(t.dtype) else numpy_dtype(t.dtype))
        elif is_float(t.dtype):
            x = rng.standard_normal(t.shape)
            if t.kind == "param":
                x *= 1.0 / math.sqrt(_fan_in(graph, t))  # LeCun: activations keep their scale
            out[t.name] = x.astype(float_dtype, copy=False)
        elif t.dtype == "bool":
            out[t.name] = rng.integers(0, 2, t.shape).astype(bool)
        else:
            out[t.name] = rng.integers(0, _int_high(graph, t.name), t.shape).astype(numpy_dtype(t.dtype))
    return out


def checked_feeds(graph: ComputationGraph, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The value of every input, parameter and constant, each checked against its declared shape."""
    values: dict[str, np.ndarray] = {}
    for t in graph.tensors.values():
        if t.kind == "activation":
            continue
        if t.name not in feeds:
            raise ModelError(f"no value given for {t.kind} {quote(t.name)} of model {quote(graph.name)}")
        value = np.asarray(feeds[t.name])
        if value.shape != t.shape:
            raise ModelError(f"value for {quote(t.name)} has shape {value.shape}, but the tensor is {t.type_text()}")
        values[t.name] = value
    return values


def _body(graph: ComputationGraph, op):
    """``(region, manual sizes)`` of a body op (not enter or exit), else None."""
    region = graph.region_of_op(op.name) if graph.manual_regions else None
    if region is None or region.role(op.name) != "body":
        return None
    return region, region.manual_sizes(graph.mesh)


def op_reference(graph: ComputationGraph, op, arrays) -> np.ndarray:
    """Op ``op``'s value from its operands' values (:func:`_op_reference`); a :class:`ModelError` for values the
    op does not accept (a computed gather index out of range) is located at the op's line."""
    try:
        return _op_reference(graph, op, arrays)
    except ModelError as e:
        line = f":{op.line}" if op.line else ""
        raise ModelError(f"op {quote(op.name)}: {e.message}", where=f"{graph.source or '<string>'}{line}") from None


def _op_reference(graph: ComputationGraph, op, arrays) -> np.ndarray:
    """Op ``op``'s value from its operands' values.

    Outside manual regions: the catalogue's ``reference``. A body tensor of a
    manual region holds **one array per manual coordinate**, stacked
    ``[*manual sizes, *local shape]`` (the region's ``manual_axes`` order): a body op
    runs once per coordinate, a collective once per group of coordinates
    (:func:`graphs.manual_regions.grouped`), ``manual_enter`` cuts the blocks of the
    global operand and ``manual_exit`` assembles them.
    """
    opdef = get_op(op.op)
    attrs = op.attrs_dict
    body = _body(graph, op)
    if body is None:
        return np.asarray(opdef.reference(arrays, attrs))
    region, sizes = body
    if is_collective(op):
        stacked = arrays[0] if arrays else np.zeros(tuple(sizes))
        fn = (lambda g: opdef.reference([g], attrs)) if arrays else (lambda g: opdef.reference([], attrs))
        return grouped(fn, stacked, region.manual_axes, sizes, attrs["axes"])
    blocks = per_coordinate(lambda a: np.asarray(opdef.reference(a, attrs)), arrays, sizes)
    return np.stack(blocks).reshape(tuple(sizes) + blocks[0].shape)


def op_vjp(graph: ComputationGraph, op, vjp, arrays, result, cotangent, wrt) -> tuple:
    """``vjp`` (the catalogue's, or its in-place form outside regions) of ``op`` on values as
    :func:`op_reference` holds them: per coordinate in a region's body, per group for a collective."""
    attrs = op.attrs_dict
    body = _body(graph, op)
    if body is None:
        return vjp(arrays, attrs, result, cotangent, wrt)
    opdef = get_op(op.op)
    region, sizes = body
    if is_collective(op):
        if not wrt:
            return ()
        return (grouped(lambda c: opdef.vjp([shape_like(c, arrays[0])], attrs, None, c, (0,))[0], cotangent,
                        region.manual_axes, sizes, attrs["axes"]),)
    grads = [opdef.vjp([a[c] for a in arrays], attrs, None if result is None else result[c], cotangent[c], wrt)
             for c in np.ndindex(*sizes)]
    return tuple(np.stack([g[i] for g in grads]).reshape(tuple(sizes) + grads[0][i].shape) for i in range(len(wrt)))


def shape_like(block: np.ndarray, operand: np.ndarray) -> np.ndarray:
    """A stand-in with ``block``'s shape and ``operand``'s dtype (a collective's VJP reads only those)."""
    return np.broadcast_to(np.zeros((), np.asarray(operand).dtype), block.shape)


def run_reference(graph: ComputationGraph, feeds: Mapping[str, np.ndarray], keep=None) -> dict[str, np.ndarray]:
    """Every tensor's value: ``feeds`` for inputs, parameters and constants, computed for the rest.

    With ``keep`` (a collection of tensor names) only those are returned, and every
    other value is dropped after its last reader (what a long model needs to fit).
    Non-finite values (a ``-inf`` mask, a division by zero) are computed as IEEE says,
    without numpy's warnings: :func:`non_finite` reports them where they matter.
    """
    with np.errstate(all="ignore"):
        return _run_reference(graph, feeds, keep)


def _run_reference(graph: ComputationGraph, feeds: Mapping[str, np.ndarray], keep) -> dict[str, np.ndarray]:
    values = checked_feeds(graph, feeds)
    last: dict[str, int] = {}
    if keep is not None:
        keep = set(keep)
        for i, op in enumerate(graph.ops):
            for t in op.inputs:
                last[t] = i
    for i, op in enumerate(graph.ops):
        values[op.output] = op_reference(graph, op, [values[t] for t in op.inputs])
        if keep is not None:
            for t in set(op.inputs):
                if last[t] == i and t not in keep:
                    del values[t]
    if keep is not None:
        return {t: values[t] for t in keep}
    return values


def non_finite(value: np.ndarray) -> str | None:
    """Which non-finite values ``value`` holds (``"nan"``, ``"inf"``, ``"-inf"``, joined by "and"), None when every
    element is finite (integers and bools always are)."""
    value = np.asarray(value)
    if value.dtype.kind not in "fc" or bool(np.isfinite(value).all()):
        return None
    kinds = [("nan", np.isnan), ("inf", np.isposinf), ("-inf", np.isneginf)]
    return " and ".join(name for name, test in kinds if bool(test(value).any()))


def non_finite_origin(graph: ComputationGraph, feeds: Mapping[str, np.ndarray], tensor: str) -> tuple[str, str | None]:
    """Where the non-finite values of ``tensor`` first appear in the reference: among ``tensor`` and the values it
    is computed from, the first (inputs, parameters and constants, then ops in topological order) that holds a nan
    or an infinity. Returns ``(what, where)``: e.g. ``("const 'c', which holds nan", "m.yaml:5")`` or
    ``("op 'd' (div), whose result 'y' holds inf", "m.yaml:7")``; ``where`` is None for a model without a file.
    Recomputes only ``tensor``'s ancestors, freeing each value after its last reader among them."""
    ancestors, todo = set(), [tensor]
    while todo:
        t = todo.pop()
        if t in ancestors:
            continue
        ancestors.add(t)
        producer = graph.producer(t)
        if producer is not None:
            todo += graph.op(producer).inputs

    def located(line):
        return None if line is None else f"{graph.source or '<string>'}:{line}"

    for t in graph.tensors.values():
        if t.kind != "activation" and t.name in ancestors:
            bad = non_finite(feeds[t.name])
            if bad:
                return f"{t.kind} {quote(t.name)}, which holds {bad}", located(t.line)
    ops = [op for op in graph.ops if op.output in ancestors]
    last = {t: i for i, op in enumerate(ops) for t in op.inputs}
    values = {t: np.asarray(feeds[t]) for t in ancestors if graph.producer(t) is None}
    with np.errstate(all="ignore"):
        for i, op in enumerate(ops):
            values[op.output] = op_reference(graph, op, [values[t] for t in op.inputs])
            bad = non_finite(values[op.output])
            if bad:
                return f"op {quote(op.name)} ({op.op}), whose result {quote(op.output)} holds {bad}", located(op.line)
            for t in set(op.inputs):
                if last[t] == i:
                    del values[t]
    return f"{quote(tensor)}", None
