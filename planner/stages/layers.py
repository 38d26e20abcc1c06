"""A model as a chain of layers: the units pipeline stages are cut from.

A *layer* is a maximal run of ops, in the graph's topological order, whose names share
the part before the first dot (``embed.lookup``, ``embed.add_pos`` → layer ``embed``;
``layer3.attn.q_proj`` → ``layer3``; an op without a dot is a layer of its own). So the
embedding, every transformer block, the final norm, the LM head and the loss of the
``gpt`` builder are layers, and stages are contiguous runs of them.

Two layers are *alike* when they are the same ops on the same shapes with the same
annotations, their tensors named apart from the prefix (:attr:`Layer.signature`): alike
layers cost the same on the same mesh, so a run of them is priced once
(:func:`representatives`).

:func:`microbatched` rebuilds a model for one microbatch: dimension 0 is the batch, so
every ``input`` tensor whose dimension 0 is the batch is cut to the microbatch, and so is
dimension 0 of a ``reshape``'s target shape that restates the batch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from graphs.graph import ComputationGraph
from graphs.specs import OpSpec
from planner.errors import ModelError, PlanningError, quote

__all__ = ["Layer", "batch_size", "layers_of", "microbatched", "representatives"]


@dataclass(frozen=True)
class Layer:
    """One layer: its ``name`` (the ops' prefix), its ``ops`` in order, the ``params`` only it reads, the
    activations it ``receives`` from earlier layers, the ones it ``sends`` to later layers or the outputs, and its
    ``signature`` (equal for alike layers)."""

    name: str
    ops: tuple[str, ...]
    params: tuple[str, ...]
    receives: tuple[str, ...]
    sends: tuple[str, ...]
    signature: tuple


def _prefix(name: str) -> str:
    return name.split(".", 1)[0]


def layers_of(graph: ComputationGraph) -> tuple[Layer, ...]:
    """The model's layers in order (module docstring). A parameter read by two layers ties them: they are
    merged with every layer between them (stages may not split a shared parameter's readers)."""
    runs: list[list[OpSpec]] = []
    for op in graph.ops:
        if runs and _prefix(runs[-1][-1].name) == _prefix(op.name):
            runs[-1].append(op)
        else:
            runs.append([op])
    readers: dict[str, set[int]] = {}
    for i, run in enumerate(runs):
        for op in run:
            for t in op.inputs:
                if graph.tensor(t).kind == "param":
                    readers.setdefault(t, set()).add(i)
    # merge the runs a shared parameter spans
    groups: list[list[OpSpec]] = []
    end = -1
    for i, run in enumerate(runs):
        last = max((max(readers[t]) for op in run for t in op.inputs if t in readers), default=i)
        if i <= end:
            groups[-1].extend(run)
        else:
            groups.append(list(run))
        end = max(end, last)
    names: dict[str, int] = {}
    out = []
    made: dict[str, int] = {}
    for k, ops in enumerate(groups):
        for op in ops:
            made[op.output] = k
    for k, ops in enumerate(groups):
        base = _prefix(ops[0].name)
        names[base] = names.get(base, 0) + 1
        name = base if names[base] == 1 else f"{base}#{names[base]}"
        own = {op.output for op in ops}
        receives = tuple(dict.fromkeys(t for op in ops for t in op.inputs
                                       if graph.tensor(t).kind == "activation" and t not in own))
        sends = tuple(t for t in (op.output for op in ops)
                      if t in graph.outputs or any(made.get(c_out, k) != k
                                                   for c, _ in graph.consumers(t)
                                                   for c_out in (graph.op(c).output,)))
        params = tuple(dict.fromkeys(t for op in ops for t in op.inputs if graph.tensor(t).kind == "param"))
        out.append(Layer(name, tuple(op.name for op in ops), params, receives, sends, _signature(graph, ops, base)))
    return tuple(out)


def _signature(graph: ComputationGraph, ops: list[OpSpec], prefix: str) -> tuple:
    """The layer's structure with its own names taken out: alike layers have equal signatures."""
    local = {op.output: j for j, op in enumerate(ops)}
    outside: dict[str, int] = {}
    sig = []
    for op in ops:
        refs = []
        for t in op.inputs:
            spec = graph.tensor(t)
            if t in local:
                refs.append(("op", local[t]))
            elif spec.kind == "activation":
                refs.append(("received", outside.setdefault(t, len(outside)), spec.shape, spec.dtype))
            elif t.startswith(prefix + "."):
                refs.append((spec.kind, t[len(prefix):], spec.shape, spec.dtype, _text(spec.sharding)))
            else:  # a tensor of the model's (tokens, labels): the same one for every alike layer
                refs.append((spec.kind, t))
        sig.append((op.op, op.name[len(prefix):], op.attrs, tuple(refs), op.strategy, _text(op.out_sharding)))
    return tuple(sig)


def _text(sharding) -> str | None:
    return None if sharding is None else sharding.dims_text()


def representatives(layers: tuple[Layer, ...]) -> tuple[int, ...]:
    """For each layer, the index of the first layer of its run of consecutive alike layers."""
    out: list[int] = []
    for i, layer in enumerate(layers):
        out.append(out[-1] if i and layer.signature == layers[i - 1].signature else i)
    return tuple(out)


def batch_size(graph: ComputationGraph) -> int:
    """The batch: dimension 0 of the model's ``input`` tensors, which must agree (PlanningError otherwise)."""
    sizes = {t.name: t.shape[0] for t in graph.tensors.values() if t.kind == "input" and t.shape}
    if not sizes:
        raise PlanningError(f"model {quote(graph.name)} has no input tensor with a batch dimension: a pipeline cuts "
                            f"dimension 0 of the inputs into microbatches")
    batch = max(sizes.values())
    odd = [n for n, s in sizes.items() if s != batch]
    if odd:
        raise PlanningError(f"a pipeline cuts dimension 0 of every input into microbatches, but the inputs of model "
                            f"{quote(graph.name)} disagree on it: {quote(odd[0])} has {sizes[odd[0]]}, others "
                            f"{batch}; give every input the batch as dimension 0")
    return batch


def microbatched(graph: ComputationGraph, size: int) -> ComputationGraph:
    """``graph`` for a microbatch of ``size`` (module docstring): PlanningError when it does not divide the batch
    or a shape cannot follow."""
    batch = batch_size(graph)
    if size == batch:
        return graph
    if size < 1 or batch % size:
        raise PlanningError(f"a microbatch of {size} does not divide model {quote(graph.name)}'s batch of {batch}")
    tensors = [replace(t, shape=(size,) + tuple(t.shape[1:])) if t.kind == "input" and t.shape else t
               for t in graph.tensors.values() if t.kind != "activation"]
    ops = []
    for op in graph.ops:
        target = op.attr("shape")  # a target shape (reshape, broadcast) that restates the batch
        if isinstance(target, tuple) and target and target[0] == batch \
                and graph.tensor(op.inputs[0]).shape[:1] == (batch,):
            attrs = dict(op.attrs)
            attrs["shape"] = (size,) + tuple(target[1:])
            op = replace(op, attrs=attrs)
        ops.append(op)
    try:
        return ComputationGraph(graph.name, dict(graph.meshes), tensors, ops, graph.outputs, graph.shard_as,
                                shard_like=graph.shard_like, axis_regions=graph.axis_regions,
                                manual_regions=graph.manual_regions, cluster=graph.cluster,
                                outputs_layout=graph.outputs_layout, source=graph.source)
    except ModelError as e:
        raise PlanningError(f"model {quote(graph.name)} cannot be cut into microbatches of {size} (dimension 0 of "
                            f"every input): {e.message}; pin pipeline.microbatches: 1") from None

