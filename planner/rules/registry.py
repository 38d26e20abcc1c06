"""The one registry of operator sharding rules: op name -> rule function, in alphabetical order.

A rule function takes ``(in_shapes, out_shape, attrs)`` with the catalogue's
canonical attributes (:mod:`graphs.ops`) and returns an
:class:`~planner.rules.factors.OpShardingRule`. Each op's definition names its
rule (:attr:`OpDef.rule <graphs.ops.opdef.OpDef.rule>`, ``"matmul.matmul"``: the
function ``matmul`` of :mod:`planner.rules.matmul`), and :data:`RULES` is built
from the catalogue. :data:`NO_RULE` lists the ops left
without one (none today). :func:`rule_for` is the public entry; it fills in
default attributes, canonicalises them, checks the shapes and caches the answer.

>>> str(rule_for("matmul", [(8, 32), (32, 16)], (8, 16), {}))
'([i,k],[k,j])->([i,j]) {i=8,j=16,k=32} reduction={k}'
>>> str(rule_for("sum", [(4, 8)], (4,), {"axes": [-1]}))
'([i,j])->([i]) {i=4,j=8} reduction={j}'
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

from graphs.ops.opdef import OpDef
from graphs.ops.registry import OPS, get_op
from planner.caches import memoize
from planner.errors import InternalError, RuleError, ShardplanError
from planner.rules import conv, gather, loss, matmul, normalization, pointwise, reductions, regions, shape_ops
from planner.rules.factors import RESULT, OpShardingRule

RuleFn = Callable[[Sequence[tuple[int, ...]], tuple[int, ...], Mapping[str, Any]], OpShardingRule]

#: The rule modules, one per op family, by the name an :attr:`OpDef.rule <graphs.ops.opdef.OpDef.rule>` gives.
_MODULES = {m.__name__.rsplit(".", 1)[1]: m
            for m in (conv, gather, loss, matmul, normalization, pointwise, reductions, regions, shape_ops)}


def _named_rule(op: OpDef) -> RuleFn:
    """The rule function ``op.rule`` names (``"matmul.matmul"``); InternalError for a name that resolves to none."""
    module, _, fn = op.rule.partition(".")
    rule = getattr(_MODULES.get(module), fn, None)
    if rule is None:
        raise InternalError(f"op {op.name!r} names the sharding rule {op.rule!r}, which is no function of "
                            f"planner.rules (rule modules: {', '.join(sorted(_MODULES))})")
    return rule


#: Ops of the catalogue that deliberately have no sharding rule (each gets :func:`no_rule_error`).
NO_RULE: frozenset[str] = frozenset()


def _rules() -> dict[str, RuleFn]:
    out = {}
    for name, op in OPS.items():
        if op.rule is not None:
            out[name] = _named_rule(op)
        elif name not in NO_RULE:
            raise InternalError(f"op {name!r} names no sharding rule: give its OpDef a rule, or list it in NO_RULE")
    return out


#: Op name -> rule function, alphabetically, as the catalogue names them.
RULES: Mapping[str, RuleFn] = MappingProxyType(_rules())


def no_rule_error(op: str) -> RuleError:
    """The one error for an op without a rule."""
    return RuleError(f"op {op!r} has no sharding rule; it can only run replicated")


def _frozen(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value


def rule_for(op: Any, in_shapes: Sequence[Sequence[int]], out_shape: Sequence[int],
             attrs: Mapping[str, Any] | None = None) -> OpShardingRule:
    """The rule of ``op`` (an :class:`~graphs.specs.OpSpec` or an op name) on these shapes.

    ``attrs`` defaults to the OpSpec's attributes. Raises :class:`RuleError` for
    an op without a rule, bad attributes, or shapes the rule does not produce.
    """
    name = op if isinstance(op, str) else op.op
    if attrs is None:
        attrs = {} if isinstance(op, str) else op.attrs_dict
    shapes = tuple(tuple(int(d) for d in s) for s in in_shapes)
    key = tuple(sorted((str(k), _frozen(v)) for k, v in attrs.items()))
    return _cached_rule(name, shapes, tuple(int(d) for d in out_shape), key)


@memoize("op sharding rules", maxsize=4096)
def _cached_rule(name: str, in_shapes: tuple[tuple[int, ...], ...], out_shape: tuple[int, ...],
                 attrs: tuple[tuple[str, Any], ...]) -> OpShardingRule:
    if name in NO_RULE:
        raise no_rule_error(name)
    fn = RULES.get(name)
    try:
        opdef = get_op(name)
        if fn is None:
            raise no_rule_error(name)
        canonical = opdef.canonical(in_shapes, opdef.with_defaults(dict(attrs)))
    except RuleError:
        raise
    except ShardplanError as e:
        raise RuleError(f"no sharding rule for {name}: {e.message}") from None
    rule = fn(in_shapes, out_shape, canonical)
    _check_shapes(name, rule, in_shapes, out_shape)
    return rule


def _check_shapes(name: str, rule: OpShardingRule, in_shapes, out_shape) -> None:
    if rule.num_operands != len(in_shapes):
        raise RuleError(f"{name} rule has {rule.num_operands} operands but the op has {len(in_shapes)}")
    for i, shape in enumerate(in_shapes):
        if rule.tensor_shape(i) != shape:
            raise RuleError(f"{name} rule gives operand {i} the shape {rule.tensor_shape(i)}, not {shape}")
    if rule.tensor_shape(RESULT) != out_shape:
        raise RuleError(f"{name} rule gives the result the shape {rule.tensor_shape(RESULT)}, not {out_shape}")
