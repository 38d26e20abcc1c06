"""Lowering a decided plan to one SPMD program, in the spirit of seed 002's IR listing.

:func:`lower` is the one walk over a decided model: every number a plan reports,
the ``--format program`` listing, the simulator and the CI gate read the
:class:`Program` it returns. Every device runs the same instructions on its own
blocks, in execution order:

* ``Load``: a graph input, parameter or constant arrives in the layout it is stored in;
* ``Redistribute``: the collectives (from the redistribution engine) that take a
  tensor from where it lives to a layout some op reads — made once per
  (tensor, layout) and shared by every reader of that layout — or, after its
  producer, to the layout a graph output is delivered in;
* ``Compute``: the op's local instance on local blocks (local shapes, strategy),
  with its compute time (forward, plus backward with training) and the backward's
  part of it;
* with training, the forward program transposed (seed 004): per op in reverse
  order, ``Redistribute`` s in phase ``backward`` that take its result's cotangent
  home through the transposes of its copies' redistributions
  (:func:`planner.redistribution.transpose.transpose_plan`), then ``Backprop``,
  its local VJP, which sends its operands' cotangents out (pending where the op
  pbroadcast them); a parameter's cotangents go home in phase ``gradient`` (its
  gradient reduction) as soon as its first reader's backward ran.

Every value has a device-variance type (:mod:`planner.partitioning.typecheck`) and
:func:`lower` type-checks the program it makes.

The redistributions are exactly the moves the search priced
(:func:`planner.model.build.link_moves` and ``node_moves``), so
``compute + communication`` of the program equals the search's objective.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from costmodels.units import format_bytes
from graphs.ops.collectives import is_collective
from planner.ir.sharding import PENDING_SUM, TensorSharding
from planner.model.moves import Transfer, link_moves, move_plan, node_moves
from planner.model.nodes import Model, OpNode
from planner.model.tables import local_op_time_s, operand_gradients
from planner.model.manual import manual_types, manual_variance
from planner.model.op_collectives import OpCollective, op_collectives
from planner.redistribution import ReshardPlan
from planner.partitioning.typecheck import (
    check_backprop,
    check_compute,
    check_step,
    pbroadcasts,
    step_primitive,
    type_text,
    variance_text,
)
from planner.redistribution.transpose import cotangent_layout


@dataclass(frozen=True)
class Load:
    """A source tensor arrives on every device in ``layout``."""

    tensor: str
    layout: TensorSharding
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class Redistribute:
    """The collectives of ``plan`` applied to ``tensor`` (or its gradient) in ``phase``.

    Forward: ``producer`` is the op that made the tensor (None for a source) and
    ``readers`` the ops that read the new layout (empty for a graph output's
    delivery). Backward and gradient: the transpose of such a redistribution,
    carrying the summed cotangents of ``readers`` (empty: the seeded cotangent of a
    graph output) home to ``producer`` (None: a parameter, whose gradient it
    reduces); ``plan.source`` is where those cotangents were added up. ``route`` (the ``xla`` policy's
    completions, :func:`~planner.model.moves.split_cotangents`): the one reader whose pending cotangent this
    completes where it lies; the result joins the other readers' cotangents at ``plan.destination``, not home.
    """

    tensor: str
    producer: str | None
    readers: tuple[str, ...]
    phase: str
    plan: ReshardPlan
    route: str | None = None
    # under the ``xla`` policy, the reading dot's device groups (:meth:`~planner.model.nodes.OpNode.regroup`) this
    # move goes through, or the forward move's it transposes; () otherwise
    regroup: tuple = ()

    @property
    def source(self) -> TensorSharding:
        return self.plan.source

    @property
    def destination(self) -> TensorSharding:
        return self.plan.destination

    @property
    def steps(self):
        return self.plan.steps

    @property
    def bytes_per_device(self) -> int:
        return self.plan.bytes_per_device

    @property
    def time_s(self) -> float:
        return self.plan.time_s


@dataclass(frozen=True)
class Compute:
    """Op ``op`` (a graphs.specs.OpSpec) under ``strategy`` on local blocks.

    In a manual region: ``manual`` is ``(per operand, result)`` the manual axes each
    varies over besides its layout (:func:`planner.model.manual.manual_types`).
    ``collectives`` are the collectives the op communicates itself in its forward
    (:mod:`planner.model.op_collectives`: a manual region's collective; empty for
    an op that communicates only through redistributions).

    ``compute_time_s`` is the op's whole compute time: its forward and, with
    training, its :class:`Backprop`'s (one forward's worth per operand gradient).
    ``backward_time_s`` is the Backprop's part of it (0 without training), so
    that the step's schedule (:mod:`planner.partitioning.schedule`) runs each part
    where the program runs it while the program's compute total stays the sum
    the search optimised.
    """

    op: object
    rule: object
    strategy: object  # planner.enumeration.Strategy
    in_shapes: tuple[tuple[int, ...], ...]
    out_shape: tuple[int, ...]
    dtype: str
    compute_time_s: float
    collectives: tuple[OpCollective, ...] = ()
    manual: tuple | None = None
    backward_time_s: float = 0.0
    #: the operands' dtypes (``dtype`` is the result's)
    in_dtypes: tuple[str, ...] = ()

    @property
    def forward_time_s(self) -> float:
        """The forward's part of ``compute_time_s``."""
        return self.compute_time_s - self.backward_time_s


@dataclass(frozen=True)
class Backprop:
    """The transpose of a :class:`Compute`: op ``op``'s local VJP under ``strategy``.

    It reads the result's cotangent whole (``cotangent_layout(strategy.result)``)
    and gives the cotangent of each operand in ``wrt`` laid out as
    ``cotangents[j]``: the operand's layout, pending over the axes the op varies
    on but the operand does not (the psum that transposes the pbroadcast the
    device-variance types insert there, :func:`~planner.training.gradients.operand_gradient`).
    Its compute time is counted on the forward :class:`Compute` (its ``backward_time_s``).
    """

    op: object
    rule: object
    strategy: object
    in_shapes: tuple[tuple[int, ...], ...]
    out_shape: tuple[int, ...]
    dtype: str
    wrt: tuple[int, ...]
    cotangents: tuple[TensorSharding, ...]
    collectives: tuple[OpCollective, ...] = ()  # the op's own backward collectives (a body collective's transpose)
    manual: tuple | None = None  # as Compute's
    # per ``wrt``: whether a :class:`Redistribute` routed to this op completes that cotangent by itself
    routed: tuple[bool, ...] = ()


def cotangent_key(ins: Backprop, j: int) -> tuple:
    """Where operand ``ins.wrt[j]``'s cotangent waits for the redistribution that takes it on:
    ``(tensor, layout, route)``, the readers' cotangents of one key added up (:func:`transposed_key`)."""
    layout = ins.cotangents[j]
    routed = bool(ins.routed) and ins.routed[j]
    return (ins.op.inputs[ins.wrt[j]], cotangent_layout(layout.with_unreduced(()), layout.unreduced),
            ins.op.name if routed else None)


def transposed_key(ins: Redistribute) -> tuple:
    """The :func:`cotangent_key` of the cotangents backward redistribution ``ins`` takes on."""
    return (ins.tensor, ins.plan.source, ins.route)


def completed_key(ins: Redistribute) -> tuple | None:
    """Where a completion (``ins.route``) leaves its result, to be added to the other readers' cotangents; None
    for any other redistribution (its result goes home)."""
    return (ins.tensor, ins.plan.destination, None) if ins.route else None


Instruction = Union[Load, Redistribute, Compute, Backprop]


@dataclass(frozen=True)
class Program:
    """The instructions in execution order (forward, then backward), and where outputs end."""

    mesh: object
    instructions: tuple[Instruction, ...]
    outputs: dict  # output tensor -> the layout it is delivered in
    training: bool

    def redistributions(self, phase: str | None = None) -> tuple[Redistribute, ...]:
        return tuple(i for i in self.instructions if isinstance(i, Redistribute) and (phase is None or i.phase == phase))

    def computes(self) -> tuple[Compute, ...]:
        return tuple(i for i in self.instructions if isinstance(i, Compute))

    def op_collectives(self, phase: str | None = None) -> tuple[OpCollective, ...]:
        """The collectives ops communicate themselves (forward: a Compute's; backward: a Backprop's),
        in program order."""
        out: list[OpCollective] = []
        for i in self.instructions:
            if isinstance(i, Compute) and phase in (None, "forward"):
                out += i.collectives
            elif isinstance(i, Backprop) and phase in (None, "backward"):
                out += i.collectives
        return tuple(out)

    def collective_counts(self) -> dict[str, int]:
        """Collectives over every redistribution, gradient reduction and op's own collective, by kind
        (alphabetical; ``Slice``, which is local, not counted; kinds absent when zero): what the CI gate and
        ``compare`` report."""
        counts: dict[str, int] = {}
        for r in self.redistributions():
            for step in r.plan.steps:
                if step.kind != "Slice":
                    counts[step.kind] = counts.get(step.kind, 0) + 1
        for c in self.op_collectives():
            counts[c.kind] = counts.get(c.kind, 0) + 1
        return {kind: counts[kind] for kind in sorted(counts)}

    def comm_bytes_per_device(self, phase: str | None = None) -> int:
        return sum(r.bytes_per_device for r in self.redistributions(phase)) + \
            sum(c.bytes_per_device for c in self.op_collectives(phase))

    def comm_time_s(self, phase: str | None = None) -> float:
        return sum(r.time_s for r in self.redistributions(phase)) + sum(c.time_s for c in self.op_collectives(phase))

    def compute_time_s(self) -> float:
        return sum(c.compute_time_s for c in self.computes())


def lower(m: Model, choice) -> Program:
    """The program of ``choice`` on model ``m`` (see the module docstring)."""
    graph = m.graph
    before: dict[str, list[Redistribute]] = {op.name: [] for op in graph.ops}  # forward, by first reader
    after: dict[str, list[Redistribute]] = {op.name: [] for op in graph.ops}  # output delivery
    position = {op.name: p for p, op in enumerate(graph.ops)}
    back_of: dict[str, list[Redistribute]] = {}  # tensor -> the transposes bringing its cotangent home
    own_grads: dict[str, list[Redistribute]] = {op.name: [] for op in graph.ops}

    def name(i: int) -> str | None:
        node = m.nodes[i]
        return node.name if isinstance(node, OpNode) else None

    xla = m.options.reshard_policy == "xla"

    for k, link in enumerate(m.flows):
        for move in link_moves(m, k, choice):
            plan = move_plan(m, move)
            readers = (move.reader,) if move.reader else \
                tuple(m.nodes[v].name for v, ks in zip(link.readers, link.operands)
                      if any(_reads(m.nodes[v], m.nodes[v].strategies[choice[v]], j, move, xla) for j in ks))
            r = Redistribute(move.tensor, name(link.producer), readers, move.phase, plan, move.reader, move.regroup)
            if move.phase == "forward":
                if plan.steps:
                    before[min(readers, key=position.get)].append(r)
            else:
                back_of.setdefault(move.tensor, []).append(r)
    for i, node in enumerate(m.nodes):
        for move in node_moves(m, i, choice):
            plan = move_plan(m, move)
            if move.phase == "forward":
                if plan.steps:
                    after[node.name].append(Redistribute(move.tensor, node.name, (), "forward", plan))
            elif move.phase == "gradient":  # a parameter only this op reads
                own_grads[node.name].append(Redistribute(move.tensor, None, (node.name,), "gradient", plan))
            else:  # the seeded cotangent of a graph output
                back_of.setdefault(move.tensor, []).append(Redistribute(move.tensor, node.name, (), "backward", plan))

    instructions: list[Instruction] = []
    for name_, spec in graph.tensors.items():
        if spec.kind != "activation" and graph.consumers(name_):
            instructions.append(Load(name_, m.layout(name_, choice), spec.shape, spec.dtype))
    outputs = {}
    graph_outputs = frozenset(graph.outputs)
    variance = manual_variance(graph) if graph.manual_regions else {}
    for op in graph.ops:
        i = m.op_index[op.name]
        node = m.nodes[i]
        s = node.strategies[choice[i]]
        instructions += before[op.name]
        out = graph.tensor(op.output)
        # the roofline once: the forward, and one forward's worth per operand gradient (op_compute_time_s)
        forward_s = local_op_time_s(graph, op, s, m.cluster)
        total_s = forward_s * (1 + operand_gradients(op, m.options.training, m.needs_grad))
        instructions.append(Compute(op, node.rule, s, tuple(graph.tensor(t).shape for t in op.inputs), out.shape,
                                    out.dtype, total_s, op_collectives(graph, op, s, m.cluster, rule=node.rule),
                                    manual_types(graph, op, variance), max(0.0, total_s - forward_s),
                                    tuple(graph.tensor(t).dtype for t in op.inputs)))
        instructions += after[op.name]
        if op.output in graph_outputs:
            outputs[op.output] = m.final_layout(op.name, s)
    if m.options.training:
        instructions += _backward(m, choice, back_of, own_grads)
    program = Program(m.mesh, tuple(instructions), outputs, m.options.training)
    typecheck(program)
    return program


def typecheck(program: Program) -> None:
    """Check every instruction's device-variance type rule (:mod:`planner.partitioning.typecheck`)."""
    for n, ins in enumerate(program.instructions):
        if isinstance(ins, Redistribute):
            what = "redistribution of" if ins.phase == "forward" else "transposed redistribution of"
            for j, step in enumerate(ins.plan.steps):
                check_step(step, f"instruction {n} ({ins.phase} {what} {ins.tensor!r}, step {j + 1} {step.kind})")
        elif isinstance(ins, Compute):
            check_compute(ins, f"instruction {n} (op {ins.op.name!r}, {ins.op.op})")
        elif isinstance(ins, Backprop):
            check_backprop(ins, f"instruction {n} (backward of op {ins.op.name!r}, {ins.op.op})")


def _reads(node: OpNode, s, j: int, move: Transfer, xla: bool = False) -> bool:
    """Whether operand ``j`` of ``node`` under ``s`` is what ``move`` (forward, or its transpose) concerns (under
    the ``xla`` policy a transpose carries every reader's cotangent of its layout, the pending ones completed; there
    a move, forward or transposed, is the one of the reading dot's device groups,
    :meth:`~planner.model.nodes.OpNode.regroup`)."""
    if s.operands[j] != move.destination:
        return False
    if xla:
        return node.regroup(s, j) == move.regroup
    return move.phase == "forward" or node.operand_gradient(s, j).unreduced == move.pending


def _backward(m: Model, choice, back_of, own_grads) -> list[Instruction]:
    """The forward program transposed (seed 004): per op in reverse order, its result's cotangent
    comes home through the transposes of its copies' redistributions (and of its delivery as a graph
    output), then the op's local VJP sends its operands' cotangents out; a parameter's gradient is
    reduced as soon as its first reader is done."""
    graph = m.graph
    variance = manual_variance(graph) if graph.manual_regions else {}
    first_reader: dict[str, str] = {}
    for op in graph.ops:
        for t in op.inputs:
            first_reader.setdefault(t, op.name)
    sources_after: dict[str, list[str]] = {}
    for t, op_name in first_reader.items():
        if graph.producer(t) is None and m.needs_grad.get(t, False):
            sources_after.setdefault(op_name, []).append(t)
    routed = {(r.tensor, r.route) for rs in back_of.values() for r in rs if r.route}
    out: list[Instruction] = []
    for op in reversed(graph.ops):
        if not m.needs_grad.get(op.output, False):
            continue
        out += back_of.get(op.output, [])
        i = m.op_index[op.name]
        node = m.nodes[i]
        s = node.strategies[choice[i]]
        wrt = tuple(k for k, t in enumerate(op.inputs) if m.needs_grad.get(t, False))
        cotangents = tuple(node.operand_gradient(s, k) for k in wrt)
        out.append(Backprop(op, node.rule, s, tuple(graph.tensor(t).shape for t in op.inputs),
                            graph.tensor(op.output).shape, graph.tensor(op.output).dtype, wrt, cotangents,
                            op_collectives(graph, op, s, m.cluster, transposed=True, wrt=wrt, rule=node.rule),
                            manual_types(graph, op, variance),
                            tuple(bool(c.unreduced) and (op.inputs[k], op.name) in routed
                                  for k, c in zip(wrt, cotangents))))
        out += own_grads[op.name]
        for t in sources_after.get(op.name, []):
            out += back_of.get(t, [])
    return out


# -- the listing ---------------------------------------------------------------------------------

def render(program: Program) -> str:
    """A readable listing: per instruction the local types (seed 004's ``f32[4,8]{"dp"}``),
    the strategy, and each collective with the seed-004 primitive it is."""
    lines = [f"// SPMD program on {program.mesh} ({program.mesh.size} devices); local types per device, "
             "{axes} = the axes a value varies over"]
    phase = "forward"
    for ins in program.instructions:
        if phase == "forward" and (isinstance(ins, Backprop) or (isinstance(ins, Redistribute) and ins.phase != "forward")):
            phase = "backward"
            lines.append("// backward: the forward program transposed (seed 004); d<x> is the cotangent of x")
        if isinstance(ins, Load):
            lines.append(f"%{ins.tensor} = Load() {{layout: {ins.layout.dims_text()}}} : "
                         f"{type_text(ins.dtype, ins.shape, ins.layout)}")
        elif isinstance(ins, Compute):
            op = ins.op
            s = ins.strategy
            man_in, man_out = ins.manual if ins.manual is not None else (((),) * len(s.operands), ())
            ins_types = ", ".join(type_text(ins.dtype, shape, lay, m)
                                  for lay, shape, m in zip(s.operands, ins.in_shapes, man_in))
            args = ", ".join(f"%{t}" for t in op.inputs)
            casts = [f"%{t} over {variance_text(b, s.result.mesh)}" for t, b in zip(op.inputs, pbroadcasts(s)) if b]
            if ins.manual is not None and op.op not in ("manual_enter", "manual_exit"):
                every = frozenset().union(man_out, *man_in)
                casts += [f"%{t} over {{{', '.join(repr(a).replace(chr(39), chr(34)) for a in sorted(every - m))}}}"
                          for t, m in zip(op.inputs, man_in) if every - m and not is_collective(op)]
            pb = f", pbroadcast {'; '.join(casts)}" if casts else ""
            comm = ""
            if ins.collectives:
                comm = "   // " + "; ".join(f"{c.kind} over {', '.join(c.axis_names())} (group of {c.group_size}), "
                                         f"{format_bytes(c.bytes_per_device)} per device" for c in ins.collectives)
            lines.append(f"%{op.output} = {op.op}({args}) {{name: {op.name}, strategy: {s.text()}{pb}}} : "
                         f"({ins_types}) -> {type_text(ins.dtype, ins.out_shape, s.result, man_out)}{comm}")
        elif isinstance(ins, Backprop):
            op = ins.op
            s = ins.strategy
            outs = ", ".join(f"%d{op.inputs[k]}" for k in ins.wrt)
            man_in, man_out = ins.manual if ins.manual is not None else (((),) * len(op.inputs), ())
            types = ", ".join(type_text(ins.dtype, ins.in_shapes[k], lay, man_in[k])
                              for k, lay in zip(ins.wrt, ins.cotangents))
            comm = ""
            if ins.collectives:
                comm = "   // " + "; ".join(f"transpose {c.primitive}: {c.kind} over {', '.join(c.axis_names())}, "
                                         f"{format_bytes(c.bytes_per_device)} per device" for c in ins.collectives)
            elif op.op == "pbroadcast":
                comm = "   // transpose psum: the cotangent goes home pending over its axes and is reduced there"
            elif is_collective(op):
                comm = "   // transpose pbroadcast: no communication"
            lines.append(f"{outs} = vjp({op.op})(%d{op.output}) {{name: {op.name}}} : "
                         f"{type_text(ins.dtype, ins.out_shape, cotangent_layout(s.result), man_out)} -> ({types})"
                         f"{comm}")
        else:
            p = ins.plan
            value = ins.tensor if ins.phase == "forward" else f"d{ins.tensor}"
            if ins.phase == "forward":
                where = f"for {', '.join(ins.readers)}" if ins.readers else "as graph output"
            elif ins.phase == "gradient":
                where = f"gradient reduction of {ins.tensor}"
            elif ins.readers:
                where = f"cotangent from {', '.join(ins.readers)} home to {ins.producer or ins.tensor}"
            else:
                where = "seeded cotangent of the graph output"
            for st in p.steps:
                axes = ", ".join(map(str, st.axes))
                dims = f", dims: {list(st.dims)}" if st.dims else ""
                prim = step_primitive(st)
                if st.kind == "AllReduce" and st.before.reduction != PENDING_SUM:  # a pending maximum: pmax
                    dims += f", reduction: {st.before.reduction}"
                    prim = "p" + st.before.reduction
                lines.append(
                    f"%{value} = {st.kind}(%{value}) {{{('axes: ' + axes + dims) if axes else dims[2:]}}}"
                    f" : {type_text(p.dtype, p.shape, st.before)} -> {type_text(p.dtype, p.shape, st.after)}"
                    f"   // {prim}, {where}, {format_bytes(st.bytes_per_device)} per device")
    return "\n".join(lines) + "\n"
