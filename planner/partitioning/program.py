"""Lowering a plan to one SPMD program (SPEC §7), in the spirit of seed 002's IR listing.

Every device runs the same instructions on its own blocks, in execution order:

* ``Load``: a graph input, parameter or constant arrives in its planned layout;
* ``Redistribute``: the collectives (from the redistribution engine) that take a
  tensor from its producer's layout to the layout one reader needs — pending sums
  included — or, after the last op, to the layout a graph output ends in;
* ``Compute``: the op's local instance on local blocks (local shapes, strategy).

Each reader redistributes for itself, exactly as the cost model counts it; the
simulator executes this program, so measured bytes equal predicted bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from planner.ir.sharding import TensorSharding
from planner.redistribution import ReshardPlan, reshard_for_planning


@dataclass(frozen=True)
class Load:
    tensor: str
    layout: TensorSharding
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class Redistribute:
    tensor: str
    reader: str | None  # the op that reads the result, None for a graph output
    plan: ReshardPlan


@dataclass(frozen=True)
class Compute:
    op: object  # graphs.specs.OpSpec
    rule: object
    strategy: object  # planner.enumeration.Strategy
    in_shapes: tuple[tuple[int, ...], ...]
    out_shape: tuple[int, ...]
    dtype: str


Instruction = Union[Load, Redistribute, Compute]


@dataclass(frozen=True)
class Program:
    """The instructions, and where every tensor's value lives."""

    mesh: object
    instructions: tuple[Instruction, ...]
    outputs: dict  # output tensor -> its final layout
    training: bool


def lower(plan) -> Program:
    """The program of a searched plan (``bfs`` or ``ilp``); explicit-mode plans have no strategies."""
    from planner.errors import PlanningError
    from planner.propagation.build import OpNode, output_layout

    if plan._internal is None:
        raise PlanningError(f"the {plan.search} search gives shardings but no per-op strategies to lower or simulate; plan with --search bfs or ilp")
    m, choice, _ = plan._internal
    graph, clu = m.graph, m.cluster
    layout: dict[str, TensorSharding] = {}
    instructions: list[Instruction] = []
    for name, spec in graph.tensors.items():
        if spec.kind == "activation" or not graph.consumers(name):
            continue
        if f"tensor:{name}" in m.index:
            i = m.index[f"tensor:{name}"]
            lay = m.nodes[i].layouts[choice[i]]
        else:
            op_name, k = m.private_sources[name][0]
            i = m.index[op_name]
            lay = m.nodes[i].strategies[choice[i]].operands[k]
        layout[name] = lay
        instructions.append(Load(name, lay, spec.shape, spec.dtype))
    outputs = {}
    for op in graph.ops:
        i = m.index[op.name]
        node = m.nodes[i]
        assert isinstance(node, OpNode)
        s = node.strategies[choice[i]]
        done = set()
        for k, t in enumerate(op.inputs):
            need = s.operands[k]
            if (t, need) in done:
                continue
            done.add((t, need))
            spec = graph.tensor(t)
            p = reshard_for_planning(spec.shape, spec.dtype, layout[t], need, clu)
            if p.steps:
                instructions.append(Redistribute(t, op.name, p))
        out = graph.tensor(op.output)
        instructions.append(Compute(op, node.rule, s, tuple(graph.tensor(t).shape for t in op.inputs), out.shape,
                                    out.dtype))
        layout[op.output] = s.result
        if op.output in graph.outputs:
            keep = m.options.training and out.rank == 0
            final = s.result if keep else output_layout(s.result, m.annotations.get(op.output))
            outputs[op.output] = final
            p = reshard_for_planning(out.shape, out.dtype, s.result, final, clu)
            if p.steps:
                instructions.append(Redistribute(op.output, None, p))
    return Program(m.mesh, tuple(instructions), outputs, m.options.training)


def _type(dtype: str, shape) -> str:
    return f"{dtype}[{','.join(map(str, shape))}]"


def render(program: Program) -> str:
    """A readable listing: per instruction the local shapes, the strategy and the collectives."""
    lines = [f"// SPMD program on {program.mesh} ({program.mesh.size} devices); local shapes per device"]
    for ins in program.instructions:
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
            where = f"for {ins.reader}" if ins.reader else "as graph output"
            for st in p.steps:
                axes = ", ".join(map(str, st.axes))
                dims = f", dims: {list(st.dims)}" if st.dims else ""
                lines.append(
                    f"%{ins.tensor} = {st.kind}(%{ins.tensor}) {{{('axes: ' + axes + dims) if axes else dims[2:]}}}"
                    f" : {_type(p.dtype, st.before.local_shape(p.shape))} -> {_type(p.dtype, st.after.local_shape(p.shape))}"
                    f"   // {where}, {st.bytes_per_device} B per device")
    return "\n".join(lines) + "\n"
