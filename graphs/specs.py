"""The value types of a model: :class:`TensorSpec` (a tensor) and :class:`OpSpec` (an op instance).

Both are frozen, slotted dataclasses that canonicalise their inputs (lists become
tuples, attributes a sorted tuple of pairs) and check what they can check alone.
Their errors name the tensor or op; :class:`~graphs.graph.ComputationGraph` adds the
file and line. Change them with :func:`dataclasses.replace`.

>>> t = TensorSpec("w1", [64, 16], kind="param")
>>> t.shape, t.nbytes
((64, 16), 4096)
>>> o = OpSpec("dense1", "matmul", ["x", "w1"], "h1", {"transpose_b": False}, strategy=[[2, 1], [1, 4]])
>>> o.attr("transpose_b"), o.strategy
(False, ((2, 1), (1, 4)))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from graphs.dtypes import check_dtype, dtype_itemsize
from graphs.ops.common import numel, shape_text
from graphs.ops.registry import get_op
from planner.errors import LimitError, ModelError, quote
from planner.limits import check_tensor_elements
from planner.ir import TensorSharding

#: The kinds of tensor: data fed in, trained parameters, constants, and op results.
TENSOR_KINDS: tuple[str, ...] = ("input", "param", "const", "activation")


def _frozen(value: Any) -> Any:
    """Lists (also nested) as tuples, so attribute values are hashable."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value


def _shape(name: str, shape: Any) -> tuple[int, ...]:
    if not isinstance(shape, (list, tuple)) or any(
        isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in shape
    ):
        raise ModelError(f"tensor {quote(name)}: shape must be a list of positive integers ([] for a scalar), got {quote(shape)}")
    try:
        check_tensor_elements(shape, f"tensor {quote(name)}")
    except LimitError as e:
        raise ModelError(e.message) from None
    return tuple(shape)


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """One tensor: name, shape, dtype, kind, the user's sharding (if any) and source line.

    ``value`` is an optional fill value for a ``const`` (every element equals it, e.g.
    an attention scale); without it the simulator draws data like for an input. For
    an activation, ``sharding`` is its producer's ``out_sharding``.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str = "f32"
    kind: str = "input"
    sharding: TensorSharding | None = None
    line: int | None = None
    value: float | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ModelError(f"tensor names must be non-empty strings, got {quote(self.name)}")
        object.__setattr__(self, "shape", _shape(self.name, self.shape))
        try:
            check_dtype(self.dtype)
        except ModelError as e:
            raise ModelError(f"tensor {quote(self.name)}: {e.message}") from None
        if self.kind not in TENSOR_KINDS:
            raise ModelError(f"tensor {quote(self.name)}: unknown kind {quote(self.kind)} (kinds: {', '.join(TENSOR_KINDS)})")
        if self.value is not None and (
            self.kind != "const" or isinstance(self.value, bool) or not isinstance(self.value, (int, float))
        ):
            raise ModelError(f"tensor {quote(self.name)}: only a const takes a value, and it must be a number")
        if self.sharding is not None:
            if not isinstance(self.sharding, TensorSharding):
                raise ModelError(f"tensor {quote(self.name)}: sharding must be a TensorSharding, got {quote(self.sharding)}")
            if self.sharding.rank != len(self.shape):
                raise ModelError(
                    f"tensor {quote(self.name)} has rank {len(self.shape)} (shape {shape_text(self.shape)}) but its "
                    f"sharding {self.sharding.dims_text()} has {self.sharding.rank} dimension shardings; "
                    "give one {...} per dimension"
                )

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return numel(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * dtype_itemsize(self.dtype)

    def type_text(self) -> str:
        """``f32[64x64]``."""
        return f"{self.dtype}[{shape_text(self.shape)}]"


def _strategy(name: str, strategy: Any) -> tuple[tuple[int, ...], ...] | None:
    if strategy is None:
        return None
    ok = isinstance(strategy, (list, tuple)) and all(isinstance(s, (list, tuple)) for s in strategy)
    if not ok:
        raise ModelError(
            f"op {quote(name)}: strategy must be a list with one list of split counts per input, "
            f"like [[2, 1], [1, 4]]; got {quote(strategy)}"
        )
    for i, split in enumerate(strategy):
        for j, n in enumerate(split):
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ModelError(
                    f"op {quote(name)}: strategy entry for input {i} dimension {j} is {quote(n)}; "
                    "split counts are positive integers"
                )
    return tuple(tuple(s) for s in strategy)


@dataclass(frozen=True, slots=True)
class OpSpec:
    """One op instance: its name, op kind, operand and result tensors, attributes and annotations.

    ``attrs`` is a sorted tuple of ``(name, value)`` pairs; in a built graph it holds
    every attribute of the op, defaults filled in and canonicalised (see
    :class:`~graphs.ops.opdef.OpDef`). ``strategy`` is MindSpore's form: per operand,
    a split count per dimension. ``out_sharding`` fixes the result's sharding.
    """

    name: str
    op: str
    inputs: tuple[str, ...]
    output: str
    attrs: tuple[tuple[str, Any], ...] = ()
    strategy: tuple[tuple[int, ...], ...] | None = None
    out_sharding: TensorSharding | None = None
    line: int | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ModelError(f"op names must be non-empty strings, got {quote(self.name)}")
        try:
            get_op(self.op)
        except ModelError as e:
            raise ModelError(f"op {quote(self.name)}: {e.message}") from None
        inputs = (self.inputs,) if isinstance(self.inputs, str) else self.inputs
        if not isinstance(inputs, Iterable) or not all(isinstance(t, str) for t in inputs):
            raise ModelError(f"op {quote(self.name)}: inputs must be a list of tensor names, got {quote(self.inputs)}")
        object.__setattr__(self, "inputs", tuple(inputs))
        if not isinstance(self.output, str) or not self.output:
            raise ModelError(f"op {quote(self.name)}: output must be a tensor name, got {quote(self.output)}")
        attrs = self.attrs.items() if isinstance(self.attrs, Mapping) else self.attrs
        object.__setattr__(self, "attrs", tuple(sorted((str(k), _frozen(v)) for k, v in attrs)))
        object.__setattr__(self, "strategy", _strategy(self.name, self.strategy))
        if self.out_sharding is not None and not isinstance(self.out_sharding, TensorSharding):
            raise ModelError(f"op {quote(self.name)}: out_sharding must be a TensorSharding, got {quote(self.out_sharding)}")

    @property
    def attrs_dict(self) -> dict[str, Any]:
        return dict(self.attrs)

    def attr(self, name: str, default: Any = None) -> Any:
        for key, value in self.attrs:
            if key == name:
                return value
        return default
