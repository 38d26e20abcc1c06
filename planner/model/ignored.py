"""Which of the model's annotations a search does not read, said as warnings (never silently dropped).

Each search honours most annotations (shardings, ``out_sharding``, ``shard_as``,
priorities), but not all:

* ``explicit`` (seed 001's typed mode) gives every op the one strategy that computes
  its operands' types, so a ``strategy`` given in the model is not read;
* ``shard_like`` groups (soft) and ``propagation_barrier`` ops steer rule-based
  propagation only: ``bfs``, ``ilp`` and ``explicit`` do not read them (a barrier is an
  identity there).

:func:`ignored_annotations` says so, one message per kind, naming the ops or groups
and where they are; :func:`planner.api.plan` issues them as
:class:`~planner.errors.PlanWarning`.

>>> from graphs import load_model_text
>>> g = load_model_text('''
... name: tiny
... mesh: {x: 2}
... tensors:
...   a: {shape: [8, 4], kind: input}
...   w: {shape: [4, 4], kind: param}
... ops:
...   - {name: mm, op: matmul, inputs: [a, w], output: h, strategy: [[2, 1], [1, 1]]}
... ''')
>>> ignored_annotations(g, "explicit")
("--search explicit ignores the strategy given for op 'mm' (<string>:8): seed 001's consensus rule gives each op the strategy that computes its operands' types; to honour a strategy use --search bfs, ilp or propagate, or pin the shardings it implies with sharding and out_sharding",)
>>> ignored_annotations(g, "bfs")
()
"""

from __future__ import annotations

__all__ = ["ignored_annotations"]

_LISTED = 5


def ignored_annotations(graph, search: str) -> tuple[str, ...]:
    """A message for each kind of annotation in ``graph`` that ``search`` does not read."""
    out = []
    if search == "explicit":
        given = [op for op in graph.ops if op.strategy is not None]
        if given:
            out.append(f"--search explicit ignores the strategy given for {_ops(graph, given)}: seed 001's consensus "
                       "rule gives each op the strategy that computes its operands' types; to honour a strategy use "
                       "--search bfs, ilp or propagate, or pin the shardings it implies with sharding and out_sharding")
    if search != "propagate":
        if graph.shard_like:
            groups = ", ".join("[" + ", ".join(g) + "]" for g in graph.shard_like[:_LISTED])
            more = f" and {len(graph.shard_like) - _LISTED} more" if len(graph.shard_like) > _LISTED else ""
            out.append(f"--search {search} ignores the shard_like group{'s' if len(graph.shard_like) > 1 else ''} "
                       f"{groups}{more}: soft groups steer rule-based propagation only (--search propagate); use "
                       "shard_as for a group every search keeps alike")
        barriers = [op for op in graph.ops if op.op == "propagation_barrier"]
        if barriers:
            out.append(f"--search {search} ignores the propagation_barrier of {_ops(graph, barriers)}: barriers steer "
                       "rule-based propagation only (--search propagate); here they are identities")
    return tuple(out)


def _ops(graph, ops) -> str:
    def at(op):
        return f" ({graph.source or '<string>'}:{op.line})" if op.line else ""

    shown = ", ".join(f"{op.name!r}{at(op)}" for op in ops[:_LISTED])
    more = f" and {len(ops) - _LISTED} more" if len(ops) > _LISTED else ""
    return f"op{'s' if len(ops) > 1 else ''} {shown}{more}"
