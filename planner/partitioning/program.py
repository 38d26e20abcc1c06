"""Lowering a decided plan to one SPMD program (SPEC §7), in the spirit of seed 002's IR listing.

:func:`lower` is the one walk over a decided model: every number a plan reports,
the ``--format program`` listing, the simulator and the CI gate read the
:class:`Program` it returns. Every device runs the same instructions on its own
blocks, in execution order:

* ``Load``: a graph input, parameter or constant arrives in the layout it is stored in;
* ``Redistribute``: the collectives (from the redistribution engine) that take a
  tensor from where it lives to a layout some op reads — made once per
  (tensor, layout) and shared by every reader of that layout — or, after its
  producer, to the layout a graph output is delivered in; with training, the
  backward redistributions of gradients and the gradient reductions of parameters;
* ``Compute``: the op's local instance on local blocks (local shapes, strategy),
  with its compute time (forward, plus backward with training).

The redistributions are exactly the moves the search priced
(:func:`planner.propagation.build.link_moves` and ``node_moves``), so
``compute + communication`` of the program equals the search's objective.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from planner.ir.sharding import TensorSharding
from planner.propagation.build import (
    Model,
    Move,
    OpNode,
    link_moves,
    node_moves,
    op_compute_time_s,
)
from planner.redistribution import ReshardPlan, reshard_for_planning


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
    delivery). Backward and gradient: ``producer`` is the op whose backward made the
    gradient (None for a summed gradient) and ``readers`` the op it flows back to
    (empty for a parameter).
    """

    tensor: str
    producer: str | None
    readers: tuple[str, ...]
    phase: str
    plan: ReshardPlan

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
    """Op ``op`` (a graphs.specs.OpSpec) under ``strategy`` on local blocks."""

    op: object
    rule: object
    strategy: object  # planner.enumeration.Strategy
    in_shapes: tuple[tuple[int, ...], ...]
    out_shape: tuple[int, ...]
    dtype: str
    compute_time_s: float


Instruction = Union[Load, Redistribute, Compute]


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

    def comm_bytes_per_device(self, phase: str | None = None) -> int:
        return sum(r.bytes_per_device for r in self.redistributions(phase))

    def comm_time_s(self, phase: str | None = None) -> float:
        return sum(r.time_s for r in self.redistributions(phase))

    def compute_time_s(self) -> float:
        return sum(c.compute_time_s for c in self.computes())


def lower(m: Model, choice) -> Program:
    """The program of ``choice`` on model ``m`` (see the module docstring)."""
    graph = m.graph
    position = {op.name: p for p, op in enumerate(graph.ops)}
    before: dict[str, list[Redistribute]] = {op.name: [] for op in graph.ops}  # forward, by first reader
    after: dict[str, list[Redistribute]] = {op.name: [] for op in graph.ops}  # output delivery
    backward: list[tuple[float, int, Redistribute]] = []

    def plan_of(move: Move) -> ReshardPlan:
        spec = graph.tensor(move.tensor)
        return reshard_for_planning(spec.shape, spec.dtype, move.source, move.destination, m.cluster)

    def name(i: int) -> str | None:
        node = m.nodes[i]
        return node.name if isinstance(node, OpNode) else None

    def add_backward(key: float, r: Redistribute) -> None:
        backward.append((key, len(backward), r))

    moves = [(link, move) for k, link in enumerate(m.links) for move in link_moves(m, k, choice)]
    moves += [(i, move) for i in range(len(m.nodes)) for move in node_moves(m, i, choice)]
    for origin, move in moves:
        plan = plan_of(move)
        if not plan.steps:
            continue
        if isinstance(origin, int):  # an op's own move: its output's delivery or its parameters' gradients
            node = m.nodes[origin]
            if move.phase == "forward":
                after[node.name].append(Redistribute(move.tensor, node.name, (), "forward", plan))
            else:
                add_backward(-position[node.name] - 0.25, Redistribute(move.tensor, node.name, (), move.phase, plan))
            continue
        link = origin
        if move.phase == "forward":
            readers = tuple(m.nodes[v].name for v, ks in zip(link.readers, link.operands)
                            if any(m.nodes[v].strategies[choice[v]].operands[j] == move.destination for j in ks))
            before[min(readers, key=position.get)].append(
                Redistribute(move.tensor, name(link.producer), readers, "forward", plan))
        elif link.kind == "grad_out":
            last = min(position[n.name] for n in _readers_of(m, link.tensor))
            add_backward(-last + 0.5, Redistribute(move.tensor, None, _op_names(m, link.readers[0]), move.phase, plan))
        else:  # a reader's gradient: data link backward, or into the gradient node
            src = link.readers[0] if link.kind == "data" else link.producer
            dst = link.producer if link.kind == "data" else None
            add_backward(-position[m.nodes[src].name],
                         Redistribute(move.tensor, m.nodes[src].name, _op_names(m, dst), move.phase, plan))

    instructions: list[Instruction] = []
    for name_, spec in graph.tensors.items():
        if spec.kind != "activation" and graph.consumers(name_):
            instructions.append(Load(name_, m.layout(name_, choice), spec.shape, spec.dtype))
    outputs = {}
    for op in graph.ops:
        i = m.op_index[op.name]
        node = m.nodes[i]
        s = node.strategies[choice[i]]
        instructions += before[op.name]
        out = graph.tensor(op.output)
        instructions.append(Compute(op, node.rule, s, tuple(graph.tensor(t).shape for t in op.inputs), out.shape,
                                    out.dtype, op_compute_time_s(graph, op, s, m.cluster, m.options.training,
                                                                 m.needs_grad)))
        instructions += after[op.name]
        if op.output in graph.outputs:
            outputs[op.output] = m.final_layout(op.name, s)
    instructions += [r for _, _, r in sorted(backward, key=lambda x: (x[0], x[1]))]
    return Program(m.mesh, tuple(instructions), outputs, m.options.training)


def _readers_of(m: Model, tensor: str) -> list[OpNode]:
    return [m.nodes[m.op_index[op]] for op, _ in m.graph.consumers(tensor)]


def _op_names(m: Model, i: int | None) -> tuple[str, ...]:
    if i is None:
        return ()
    node = m.nodes[i]
    return (node.name,) if isinstance(node, OpNode) else ()


# -- the listing ---------------------------------------------------------------------------------

def _type(dtype: str, shape) -> str:
    return f"{dtype}[{','.join(map(str, shape))}]"


def render(program: Program) -> str:
    """A readable listing: per instruction the local shapes, the strategy and the collectives."""
    lines = [f"// SPMD program on {program.mesh} ({program.mesh.size} devices); local shapes per device"]
    phase = "forward"
    for ins in program.instructions:
        if isinstance(ins, Redistribute) and ins.phase != "forward" and phase == "forward":
            phase = "backward"
            lines.append("// backward: gradient redistributions and parameter gradient reductions")
        if isinstance(ins, Load):
            lines.append(f"%{ins.tensor} = Load() {{layout: {ins.layout.dims_text()}}} : "
                         f"{_type(ins.dtype, ins.layout.local_shape(ins.shape))}")
        elif isinstance(ins, Compute):
            op = ins.op
            s = ins.strategy
            ins_types = ", ".join(_type(ins.dtype, lay.local_shape(shape)) for lay, shape in zip(s.operands, ins.in_shapes))
            args = ", ".join(f"%{t}" for t in op.inputs)
            pending = f", pending sum over {{{', '.join(map(str, s.result.unreduced))}}}" if s.result.unreduced else ""
            lines.append(f"%{op.output} = {op.op}({args}) {{name: {op.name}, strategy: {s.text()}{pending}}} : "
                         f"({ins_types}) -> {_type(ins.dtype, s.result.local_shape(ins.out_shape))}")
        else:
            p = ins.plan
            value = ins.tensor if ins.phase == "forward" else f"d{ins.tensor}"
            if ins.phase == "forward":
                where = f"for {', '.join(ins.readers)}" if ins.readers else "as graph output"
            elif ins.phase == "gradient":
                where = f"gradient reduction of {ins.tensor}"
            else:
                where = f"gradient of {ins.tensor} back to {', '.join(ins.readers) or 'its sum'}"
            for st in p.steps:
                axes = ", ".join(map(str, st.axes))
                dims = f", dims: {list(st.dims)}" if st.dims else ""
                lines.append(
                    f"%{value} = {st.kind}(%{value}) {{{('axes: ' + axes + dims) if axes else dims[2:]}}}"
                    f" : {_type(p.dtype, st.before.local_shape(p.shape))} -> {_type(p.dtype, st.after.local_shape(p.shape))}"
                    f"   // {where}, {st.bytes_per_device} B per device")
    return "\n".join(lines) + "\n"
