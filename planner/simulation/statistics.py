"""A normalisation over a sharded axis, run as the decomposition the plan prices
(:func:`planner.model.op_collectives.statistic_collectives`).

Each device reduces its own block to partial statistics (the block with the normalised
dimension of size 1), ring AllReduces across the groups of the factor's mesh axes complete
them (bytes counted on the phase's :class:`~planner.simulation.collectives.Network`), and each
device finishes its own block. The AllReduces are the op's ``OpDef.statistics``, in order;
several statistics of one AllReduce travel stacked. The backward reuses the forward's statistics
(kept per device, as XLA keeps them as residuals) and AllReduces only its own.

An op that reduces its statistic axis away (``argmax``, ``argmin``: ``OpDef.gathered_statistics``) takes each
block's extreme and its global index instead; ring AllGathers bring every member of a group all of them, and
each device picks the first extreme, in block order (its lowest global index), by the op's own reference.
"""

from __future__ import annotations

import numpy as np

from graphs.dtypes import dtype_itemsize
from graphs.ops import get_op
from graphs.ops.normalization import DEFAULT_EPS, LAYERNORM, SOFTMAX
from planner.collectives import ring_all_gather, ring_all_reduce
from planner.errors import SimulationMismatch
from planner.model.op_collectives import statistic_axes
from planner.rules.factors import FactorKind
from planner.simulation.collectives import COMBINE, groups
from planner.simulation.local_ops import LocalContext, zero_padding


def sharded_statistic(rule, strategy) -> bool:
    """Whether ``strategy`` shards a ``STATISTIC`` factor of ``rule``."""
    return bool(statistic_axes(rule, strategy))


class _Reducer:
    """The op's AllReduces of one phase, in order, each across every group of the statistic's axes."""

    def __init__(self, net, strategy, rule, entries, dtype: str):
        self.net, self.entries, self.next = net, list(entries), 0
        self.itemsize = dtype_itemsize(dtype)  # bytes counted per element: the declared dtype's
        self.groups = groups(strategy.result, statistic_axes(rule, strategy))

    def __call__(self, partials: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        """``partials[d]``: device ``d``'s partial statistics of the next AllReduce; the completed ones."""
        if self.next >= len(self.entries):
            raise SimulationMismatch("a normalisation ran more AllReduces than its OpDef.statistics")
        reductions = self.entries[self.next]
        self.next += 1
        if len(partials[0]) != len(reductions):
            raise SimulationMismatch(f"an AllReduce of {len(reductions)} statistics got {len(partials[0])}")
        combine = COMBINE[reductions[0]]
        out: list = [None] * len(partials)
        saved, self.net.itemsize = self.net.itemsize, self.itemsize
        self.net.begin_step()
        for members in self.groups:
            stacked = [np.stack(partials[int(m)]) for m in members]
            done = ring_all_reduce(self.net, members, stacked, combine)
            for r, m in enumerate(members):
                out[int(m)] = list(done[r])
        self.net.itemsize = saved
        return out

    def finish(self) -> None:
        if self.next != len(self.entries):
            raise SimulationMismatch(f"a normalisation ran {self.next} of its {len(self.entries)} AllReduces")


def _axis(ins) -> int:
    """The normalised dimension of the op's result."""
    rule = ins.rule
    [f] = rule.factors_of_kind(FactorKind.STATISTIC)
    return next(d for d, factors in enumerate(rule.result) if f in factors)


def _contexts(ins, n):
    s = ins.strategy
    return [LocalContext.for_device(s.operands, ins.in_shapes, s.result, ins.out_shape, d) for d in range(n)]


def _gathered(ins, operands, net) -> list[np.ndarray]:
    """Every device's result block of an op that gathers its statistics (argmax, argmin over a sharded axis)."""
    op, s = ins.op, ins.strategy
    opdef = get_op(op.op)
    attrs = op.attrs_dict
    axis = attrs["axis"]
    n = s.result.mesh.size
    ctxs = _contexts(ins, n)
    picks, values = [], []
    for d in range(n):
        block = zero_padding(np.asarray(operands[0].blocks[d]), ctxs[d].operands[0])
        local = np.asarray(opdef.reference([block], attrs))
        values.append(np.take_along_axis(block, np.expand_dims(local.astype(np.int64), axis), axis)[
            (slice(None),) * axis + (0,)])
        picks.append(local + ctxs[d].operands[0].ranges[axis][0])
    gathered = {}
    statistic = {"operand": values, "result": picks}  # OpDef.gathered_statistics names them
    for source in opdef.gathered_statistics:
        items = statistic[source]
        # bytes counted per element of the declared dtype: the operand's for its extremes, the result's for indices
        saved, net.itemsize = net.itemsize, dtype_itemsize(ins.in_dtypes[0] if source == "operand" else ins.dtype)
        net.begin_step()
        for members in groups(s.result, statistic_axes(ins.rule, s)):
            got = ring_all_gather(net, members, [(r, items[int(m)]) for r, m in enumerate(members)])
            for r, m in enumerate(members):
                gathered[(source, int(m))] = np.stack([data for _, data in got[r]], axis=axis)
        net.itemsize = saved
    out = []
    for d in range(n):
        first = np.asarray(opdef.reference([gathered[("operand", d)]], attrs)).astype(np.int64)
        index = np.take_along_axis(gathered[("result", d)], np.expand_dims(first, axis), axis)
        out.append(index[(slice(None),) * axis + (0,)].astype(picks[d].dtype))
    return out


def forward(ins, operands, net) -> tuple[list[np.ndarray], list[dict]]:
    """Every device's result block of normalisation ``ins`` (a Compute) and what its backward keeps; of an op
    that gathers its statistics (argmax), its result blocks and nothing kept."""
    op, s = ins.op, ins.strategy
    n = s.result.mesh.size
    if get_op(op.op).gathered_statistics:
        return _gathered(ins, operands, net), [{} for _ in range(n)]
    ctxs = _contexts(ins, n)
    xs = [[zero_padding(np.asarray(a.blocks[d]), ctxs[d].operands[k]) for k, a in enumerate(operands)]
          for d in range(n)]
    reduce = _Reducer(net, s, ins.rule, get_op(op.op).statistics[0], ins.dtype)
    ax = _axis(ins)
    size = ins.out_shape[ax]
    eps = op.attr("eps", DEFAULT_EPS)
    opdef = get_op(op.op)
    if opdef is SOFTMAX:
        m = reduce([[np.max(x[0], axis=ax)] for x in xs])
        e = [np.exp(x[0] - np.expand_dims(mm[0], ax)) for x, mm in zip(xs, m)]
        t = reduce([[np.sum(v, axis=ax)] for v in e])
        ys = [v / np.expand_dims(tt[0], ax) for v, tt in zip(e, t)]
        kept = [{"y": y} for y in ys]
    elif opdef is LAYERNORM:
        mean = reduce([[np.sum(x[0], axis=ax) / size] for x in xs])
        d = [x[0] - np.expand_dims(mm[0], ax) for x, mm in zip(xs, mean)]
        var = reduce([[np.sum(v * v, axis=ax) / size] for v in d])
        r = [1.0 / np.sqrt(np.expand_dims(vv[0], ax) + eps) for vv in var]
        xhat = [v * rr for v, rr in zip(d, r)]
        ys = []
        for x, xh in zip(xs, xhat):
            y = xh * x[1] if len(x) > 1 else xh
            ys.append(y + x[2] if len(x) > 2 else y)
        kept = [{"xhat": xh, "r": rr, "w": x[1] if len(x) > 1 else None} for x, xh, rr in zip(xs, xhat, r)]
    else:  # rmsnorm
        ms = reduce([[np.sum(x[0] * x[0], axis=ax) / size] for x in xs])
        r = [1.0 / np.sqrt(np.expand_dims(v[0], ax) + eps) for v in ms]
        ys = [x[0] * rr * x[1] if len(x) > 1 else x[0] * rr for x, rr in zip(xs, r)]
        kept = [{"xhat": x[0] * rr, "r": rr, "w": x[1] if len(x) > 1 else None} for x, rr in zip(xs, r)]
    reduce.finish()
    dtype = np.asarray(operands[0].blocks[0]).dtype
    return [np.asarray(y, dtype=dtype) for y in ys], kept


def backward(ins, cotangent, kept, net) -> list[list[np.ndarray]]:
    """Every device's cotangents of the operands in ``ins.wrt`` (a Backprop of a normalisation), laid out as
    the operands: the normalised input's from the AllReduced backward statistics; a weight's and a bias's the
    device's partial sums over the leading dimensions (pending over the axes that split them)."""
    op, s = ins.op, ins.strategy
    n = s.result.mesh.size
    ax = _axis(ins)
    size = ins.out_shape[ax]
    reduce = _Reducer(net, s, ins.rule, get_op(op.op).statistics[1] if 0 in ins.wrt else (), ins.dtype)
    dys = [np.asarray(cotangent.blocks[d]) for d in range(n)]
    lead = tuple(i for i in range(len(ins.out_shape)) if i != ax)
    ws = [k.get("w") for k in kept]
    dx: list = [None] * n
    opdef = get_op(op.op)
    if 0 in ins.wrt:
        if opdef is SOFTMAX:
            y = [k["y"] for k in kept]
            t = reduce([[np.sum(dy * yy, axis=ax)] for dy, yy in zip(dys, y)])
            dx = [yy * (dy - np.expand_dims(tt[0], ax)) for dy, yy, tt in zip(dys, y, t)]
        else:
            g = [dy * w if w is not None else dy for dy, w in zip(dys, ws)]
            xh = [k["xhat"] for k in kept]
            if opdef is LAYERNORM:
                st = reduce([[np.sum(gg, axis=ax) / size, np.sum(gg * x, axis=ax) / size] for gg, x in zip(g, xh)])
                dx = [k["r"] * (gg - np.expand_dims(a[0], ax) - x * np.expand_dims(a[1], ax))
                      for k, gg, x, a in zip(kept, g, xh, st)]
            else:
                st = reduce([[np.sum(gg * x, axis=ax) / size] for gg, x in zip(g, xh)])
                dx = [k["r"] * (gg - x * np.expand_dims(a[0], ax)) for k, gg, x, a in zip(kept, g, xh, st)]
    reduce.finish()
    out = []
    for d in range(n):
        grads = []
        for k in ins.wrt:
            if k == 0:
                grads.append(dx[d])
            elif k == 1:
                grads.append(np.sum(dys[d] * kept[d]["xhat"], axis=lead))
            else:
                grads.append(np.sum(dys[d], axis=lead))
        dtype = dys[d].dtype
        out.append([np.asarray(g, dtype=dtype) for g in grads])
    return out


__all__ = ["backward", "forward", "sharded_statistic"]
