"""Single-device reference training step: forward and backward of a whole graph in numpy.

The objective differentiated is the scalar ``L = sum_o <cotangent_o, output_o>`` over
the graph outputs that have a cotangent (:func:`output_cotangents`: 1 for a scalar
float output such as a loss, fixed random values for other float outputs, none for
integer outputs). :func:`reference_gradients` runs the catalogue's ``reference``
functions forward, then every op's ``vjp`` in reverse order, and returns the
outputs and ``dL/dp`` for every parameter ``p`` that :func:`requires_grad`.

Memory is kept to what the backward needs: a forward value survives its last
forward reader only if a VJP reads it (per the ops' ``vjp_reads_inputs`` /
``vjp_reads_result`` flags) or it is an output, and it is dropped once the last
such VJP ran; each cotangent is dropped once its producer's VJP used it.

>>> from graphs.builders import mlp
>>> from graphs.evaluate import example_inputs, run_reference
>>> g = mlp(batch=4, hidden=8, layers=2)
>>> feeds = example_inputs(g, seed=0)
>>> outputs, grads = reference_gradients(g, feeds)
>>> sorted(grads), grads["layer1.w"].shape, outputs["loss"].shape
(['layer0.w', 'layer1.w'], (8, 8), ())
>>> def loss(delta):  # L (here the loss) with layer1.w[0, 1] moved by delta
...     w = feeds["layer1.w"].copy()
...     w[0, 1] += delta
...     return run_reference(g, dict(feeds, **{"layer1.w": w}))["loss"]
>>> bool(np.isclose((loss(1e-6) - loss(-1e-6)) / 2e-6, grads["layer1.w"][0, 1], rtol=1e-6))
True
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from graphs.dtypes import is_float
from graphs.evaluate import checked_feeds, op_reference, op_vjp
from graphs.graph import ComputationGraph
from graphs.ops.opdef import shape_stand_in
from graphs.ops.registry import get_op
from planner.errors import ModelError, quote

__all__ = ["check_differentiable", "output_cotangents", "reference_gradients", "requires_grad"]


def output_cotangents(graph: ComputationGraph, seed: int = 0, float_dtype=np.float64) -> dict[str, np.ndarray]:
    """The cotangent seeded on each graph output; together they define ``L = sum_o <cotangent_o, output_o>``.

    A scalar float output gets 1.0 (so a loss output is ``L`` itself); a non-scalar float
    output gets standard-normal values from ``np.random.default_rng(seed + 1)``, drawn in
    ``graph.outputs`` order; integer and bool outputs get none.
    """
    rng = np.random.default_rng(seed + 1)
    out: dict[str, np.ndarray] = {}
    for name in graph.outputs:
        t = graph.tensors[name]
        if not is_float(t.dtype) or name in out:
            continue
        if t.shape == ():
            out[name] = np.ones((), dtype=float_dtype)
        else:
            out[name] = rng.standard_normal(t.shape).astype(float_dtype, copy=False)
    return out


def requires_grad(graph: ComputationGraph) -> dict[str, bool]:
    """Tensor name -> whether it needs a gradient: float parameters and every float tensor
    computed from one (integer and bool tensors never do, e.g. the result of a cast to i32), except
    where gradients are stopped: the result of an op that blocks them (``stop_gradient``,
    ``OpDef.blocks_gradient``) is a constant, and so is a tensor whose every way to the outputs
    passes through such an op (``jax.nn.logsumexp``'s maximum: JAX never differentiates it).

    >>> from graphs.graph_builder import GraphBuilder
    >>> b = GraphBuilder("shifted")
    >>> x, w = b.tensor("x", (4, 8)), b.param("w", (8, 8))
    >>> h = b.op("matmul", [x, w], "h")
    >>> top = b.op("max", [h], "top", axes=[1], keepdims=True)
    >>> z = b.op("sub", [h, b.op("stop_gradient", [top], "shift")], "z")
    >>> loss = b.op("sum", [z], "loss")
    >>> flags = requires_grad(b.build())
    >>> flags["w"], flags["h"], flags["top"], flags["shift"], flags["z"]
    (True, True, False, False, True)
    """
    flags: dict[str, bool] = {}
    for t in graph.tensors.values():
        if t.kind != "activation":
            flags[t.name] = t.kind == "param" and is_float(t.dtype)
    blocked = False
    for op in graph.ops:
        stops = get_op(op.op).blocks_gradient
        blocked |= stops
        flags[op.output] = not stops and is_float(graph.tensors[op.output].dtype) and any(flags[t] for t in op.inputs)
    if blocked:
        # walking back from the outputs: which tensors reach them at all, and which through differentiated ops;
        # one that reaches them only through a stopped gradient needs none (one that does not reach them keeps
        # its flag: what is not on the way to an output is left as it was)
        reach, live = set(graph.outputs), {o for o in graph.outputs if flags[o]}
        for op in reversed(graph.ops):
            if op.output in reach:
                reach.update(op.inputs)
            if op.output in live:
                live.update(t for t in op.inputs if flags[t])
        for op in graph.ops:
            if op.output in reach and op.output not in live:
                flags[op.output] = False
    return {name: flags[name] for name in graph.tensors}


def _where(graph: ComputationGraph, line: int | None) -> str | None:
    return None if line is None else f"{graph.source or '<string>'}:{line}"


def check_differentiable(graph: ComputationGraph) -> None:
    """ModelError naming the first op whose result needs a gradient but whose kind has no VJP, or saying that
    there is nothing to differentiate: parameters that need a gradient, but no float output to seed a cotangent
    on (``outputs: []``, or integer and bool outputs only), so ``L`` would be the empty sum."""
    flags = requires_grad(graph)
    trained = [t.name for t in graph.tensors_of_kind("param") if flags[t.name]]
    if trained and not any(is_float(graph.tensors[o].dtype) for o in graph.outputs):
        outputs = ", ".join(f"{quote(o)} ({graph.tensors[o].dtype})" for o in graph.outputs) or "none"
        raise ModelError(
            f"model {quote(graph.name)} has no float output to differentiate (outputs: {outputs}), so its parameters "
            f"({_some(trained)}) get no gradient: training differentiates the sum of its float outputs weighted by "
            f"their cotangents; add the loss to outputs, or plan without --training",
            where=graph.source,
        )
    for op in graph.ops:
        if flags[op.output] and get_op(op.op).vjp is None:
            raise ModelError(
                f"op {quote(op.name)} ({op.op}) of model {quote(graph.name)} has no gradient, but its result depends on "
                f"parameters: it cannot be trained; remove it from the path to the loss or plan without --training",
                where=_where(graph, op.line),
            )


def _some(names: list[str], most: int = 3) -> str:
    """Up to ``most`` quoted names, then how many more."""
    shown = ", ".join(quote(n) for n in names[:most])
    return shown + (f" and {len(names) - most:,} more" if len(names) > most else "")


def _float_dtype(graph: ComputationGraph, values: Mapping[str, np.ndarray]) -> np.dtype:
    dtypes = [v.dtype for name, v in values.items() if is_float(graph.tensors[name].dtype)]
    return np.result_type(*dtypes) if dtypes else np.dtype(np.float64)


def backward_schedule(graph: ComputationGraph, seeds) -> tuple[dict[int, tuple[int, ...]], dict[str, int], dict[str, int]]:
    """How the reference's backward walks ``graph`` from cotangents seeded at ``seeds`` (tensor names):
    ``(backward, residual_until, last_read)`` where ``backward`` maps the index of each op whose VJP runs to the
    operands it differentiates, ``residual_until`` each forward value a VJP reads to the smallest index of such
    an op (it is kept until then), and ``last_read`` each tensor to the index of its last forward reader.
    :func:`reference_gradients` frees values by it, and ``planner.engines.run_memory`` replays it on byte counts."""
    flags = requires_grad(graph)
    ops = graph.ops
    # which results a cotangent reaches, walking back from the seeds through differentiable operands
    live = {name for name in seeds if flags[name]}
    backward: dict[int, tuple[int, ...]] = {}
    for k in range(len(ops) - 1, -1, -1):
        op = ops[k]
        if op.output in live:
            wrt = tuple(i for i, t in enumerate(op.inputs) if flags[t])
            if wrt:
                backward[k] = wrt
                live.update(op.inputs[i] for i in wrt)
    residual_until: dict[str, int] = {}
    for k, wrt in backward.items():
        opdef = get_op(ops[k].op)
        read = [ops[k].inputs[i] for i in opdef.vjp_inputs(wrt, len(ops[k].inputs))]
        if opdef.vjp_reads_result:
            read.append(ops[k].output)
        for t in read:
            residual_until[t] = min(k, residual_until.get(t, k))
    last_read: dict[str, int] = {}
    for k, op in enumerate(ops):
        for t in op.inputs:
            last_read[t] = k
    return backward, residual_until, last_read


def reference_gradients(
    graph: ComputationGraph,
    feeds: Mapping[str, np.ndarray],
    cotangents: Mapping[str, np.ndarray] | None = None,
    float_dtype=None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``(outputs, grads)``: every graph output's value and ``dL/dp`` for every parameter
    ``p`` that requires a gradient (zeros for one ``L`` does not depend on).

    ``feeds`` gives every input, parameter and constant (used as given: float64 in tests);
    ``cotangents`` (tensor -> cotangent of its value) defaults to :func:`output_cotangents`
    in ``float_dtype``, which defaults to the float feeds' common dtype. Gradients are in
    the cotangents' dtype. Raises ModelError (before any work) if an op on the path from
    a parameter has no VJP (:func:`check_differentiable`). Non-finite values are computed
    as IEEE says, without numpy's warnings (as :func:`~graphs.evaluate.run_reference`).
    """
    check_differentiable(graph)
    with np.errstate(all="ignore"):
        return _reference_gradients(graph, feeds, cotangents, float_dtype)


def _reference_gradients(graph, feeds, cotangents, float_dtype):
    values = checked_feeds(graph, feeds)
    if float_dtype is None:
        float_dtype = _float_dtype(graph, values)
    if cotangents is None:
        cotangents = output_cotangents(graph, float_dtype=float_dtype)
    seeds: dict[str, np.ndarray] = {}
    for name, cot in cotangents.items():
        spec = graph.tensor(name)
        cot = np.asarray(cot)
        if cot.shape != spec.shape:
            raise ModelError(f"cotangent for {quote(name)} has shape {cot.shape}, but the tensor is {spec.type_text()}")
        seeds[name] = cot

    flags = requires_grad(graph)
    ops = graph.ops
    backward, residual_until, last_read = backward_schedule(graph, seeds)
    keep = set(residual_until) | set(graph.outputs)

    # -- forward ------------------------------------------------------------------------
    stand_ins: dict[int, list[np.ndarray]] = {}
    for k, op in enumerate(ops):
        opdef = get_op(op.op)
        ins = [values[t] for t in op.inputs]
        values[op.output] = op_reference(graph, op, ins)
        if k in backward:
            reads = opdef.vjp_inputs(backward[k], len(ins))
            stand_ins[k] = [None if i in reads else shape_stand_in(a.shape, a.dtype) for i, a in enumerate(ins)]
        del ins
        for t in set(op.inputs) | {op.output}:
            if last_read.get(t, -1) <= k and t not in keep:
                values.pop(t, None)
    outputs = {name: values[name] for name in graph.outputs}

    # -- backward -----------------------------------------------------------------------
    cots: dict[str, np.ndarray] = dict(seeds)
    owned: set[str] = set()  # cotangents this function allocated, safe to accumulate into in place

    def accumulate(name: str, g: np.ndarray) -> None:
        if name not in cots:
            cots[name] = g
            owned.add(name)
        elif name in owned and cots[name].flags.writeable and cots[name].dtype == np.result_type(cots[name], g):
            cots[name] += g
        else:
            cots[name] = cots[name] + g
            owned.add(name)

    releases: dict[int, list[str]] = {}
    for t, k in residual_until.items():
        releases.setdefault(k, []).append(t)
    for k in sorted(backward, reverse=True):
        op = ops[k]
        opdef = get_op(op.op)
        cot = cots.pop(op.output, None)
        was_owned = op.output in owned  # allocated here: its buffer may take the VJP's result
        owned.discard(op.output)
        if cot is not None:
            arrays = [values[t] if a is None else a for t, a in zip(op.inputs, stand_ins.pop(k))]
            result = values[op.output] if opdef.vjp_reads_result else None
            mine = was_owned and cot.flags.writeable and len(backward[k]) == 1
            vjp = opdef.vjp_in_place if mine and opdef.vjp_in_place is not None else opdef.vjp
            grads = op_vjp(graph, op, vjp, arrays, result, cot, backward[k])
            del arrays, result, cot
            for i, g in zip(backward[k], grads):
                accumulate(op.inputs[i], g)
            del grads
        stand_ins.pop(k, None)  # its operands got no cotangent from this op
        for t in releases.get(k, ()):
            if t not in graph.outputs:
                values.pop(t, None)

    grads = {}
    for t in graph.tensors_of_kind("param"):
        if flags[t.name]:
            g = cots.get(t.name)
            if g is None:
                g = np.zeros(t.shape, dtype=float_dtype)
            elif t.name not in owned:  # a seeded cotangent passed straight through: not the caller's array
                g = np.array(g)
            grads[t.name] = g
    return outputs, grads
