"""What a legal model probably did not mean: declared tensors nobody reads, ops whose result is never needed.

These are not errors (a model under construction has them, and planning it is still
well defined) but each is worth a word: :func:`model_warnings` says them, and
:func:`planner.api.plan` and ``shardplan graph`` issue them as
:class:`~planner.errors.ModelWarning` (printed on stderr unless ``--quiet``).

* an **unused tensor**: declared under ``tensors`` (an input, a parameter, a constant),
  read by no op and named in no ``outputs``;
* a **dead op**: an op whose result reaches no graph output (only possible when the
  model lists ``outputs``; without them every result nobody reads is an output);
* a model with **no ops** at all.

>>> from graphs import load_model_text
>>> g = load_model_text('''
... name: tiny
... mesh: {x: 2}
... tensors:
...   a: {shape: [4], kind: input}
...   spare: {shape: [4], kind: param}
... ops:
...   - {name: act, op: relu, inputs: [a], output: h}
...   - {name: side, op: neg, inputs: [a], output: s}
... outputs: [h]
... ''')
>>> for message in model_warnings(g):
...     print(message)
tensor 'spare' (<string>:6) is declared but no op reads it and no output names it; remove it, or read it in an op
op 'side' (<string>:9) computes 's', which reaches no output (outputs: h): its work is never used; remove it, or add 's' to outputs
"""

from __future__ import annotations

__all__ = ["model_warnings"]

_LISTED = 5
"""At most this many names in one warning; the rest are counted."""


def model_warnings(graph) -> tuple[str, ...]:
    """The warnings about ``graph`` (a :class:`~graphs.graph.ComputationGraph`), in model order."""
    if not graph.ops:
        return (f"model {graph.name!r} has no ops: there is nothing to plan; add ops under 'ops:' or use a "
                "'model:' builder",)
    out = []
    unused = [t for t in graph.tensors.values()
              if t.kind != "activation" and not graph.consumers(t.name) and t.name not in graph.outputs]
    if unused:
        out.append(_joined("tensor", [f"{t.name!r}{_at(graph, t.line)}" for t in unused])
                   + (" is" if len(unused) == 1 else " are") + " declared but no op reads "
                   + ("it" if len(unused) == 1 else "them") + " and no output names "
                   + ("it; remove it, or read it in an op" if len(unused) == 1 else "them; remove them, or read them"))
    live = _live_ops(graph)
    dead = [op for op in graph.ops if op.name not in live]
    if len(dead) == 1:
        op = dead[0]
        out.append(f"op {op.name!r}{_at(graph, op.line)} computes {op.output!r}, which reaches no output "
                   f"(outputs: {_names(graph.outputs)}): its work is never used; remove it, or add "
                   f"{op.output!r} to outputs")
    elif dead:
        out.append(_joined("op", [f"{op.name!r}{_at(graph, op.line)}" for op in dead])
                   + f" compute results that reach no output (outputs: {_names(graph.outputs)}): their work is "
                   "never used; remove them, or add their results to outputs")
    return tuple(out)


def _live_ops(graph) -> set[str]:
    """The ops some graph output depends on (a walk back from the outputs)."""
    live: set[str] = set()
    stack = list(graph.outputs)
    seen: set[str] = set()
    while stack:
        t = stack.pop()
        if t in seen:
            continue
        seen.add(t)
        producer = graph.producer(t)
        if producer is not None and producer not in live:
            live.add(producer)
            stack.extend(graph.op(producer).inputs)
    return live


def _at(graph, line: int | None) -> str:
    return f" ({graph.source or '<string>'}:{line})" if line else ""


def _names(names) -> str:
    names = list(names)
    shown = ", ".join(names[:_LISTED])
    return shown + (f" and {len(names) - _LISTED} more" if len(names) > _LISTED else "")


def _joined(kind: str, items: list[str]) -> str:
    if len(items) == 1:
        return f"{kind} {items[0]}"
    shown = ", ".join(items[:_LISTED]) + (f" and {len(items) - _LISTED} more" if len(items) > _LISTED else "")
    return f"{kind}s {shown}"
