"""``OpDef``: what the catalogue knows about one operator kind.

An ``OpDef`` holds plain functions, all taking the operands' shapes (tuples of
ints; ``()`` is a scalar) and the op's attributes as a mapping:

- ``infer(shapes, dtypes, attrs, names=None) -> (shape, dtype)`` checks the operands and
  gives the result; on a mismatch it raises :class:`~planner.errors.ModelError`
  whose message names the operands (``names``, default ``#0``, ``#1`` ...) with their
  shapes, e.g. ``matmul contracts 64 with 32: inputs x (64x64) and w (32x16)``.
- ``flops(in_shapes, out_shape, attrs) -> int`` under the convention documented in
  the family's module (a multiply-add is 2 FLOPs, elementwise work 1 per element).
- ``reference(arrays, attrs) -> np.ndarray`` computes the op on one device in numpy.
- ``canonical(shapes, attrs) -> dict`` (optional) rewrites attributes into the one
  form the rest of the planner reads (non-negative axes, pairs for ``stride``).

Missing attributes take the defaults listed in ``attrs``; the functions accept
either the raw or the canonical mapping.

>>> from graphs.ops.registry import get_op
>>> mm = get_op("matmul")
>>> mm.infer([(64, 64), (64, 16)], ["f32", "f32"], {})
((64, 16), 'f32')
>>> mm.flops([(64, 64), (64, 16)], (64, 16), {})
131072
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from planner.errors import ModelError, did_you_mean


class _Required:
    """Marks an attribute without a default."""

    def __repr__(self) -> str:
        return "REQUIRED"


#: The default of an attribute that must be given.
REQUIRED: Any = _Required()


def _identity_attrs(shapes: Sequence[tuple[int, ...]], attrs: Mapping[str, Any]) -> dict:
    return dict(attrs)


@dataclass(frozen=True, slots=True)
class OpDef:
    """One operator kind of the catalogue (see the module docstring)."""

    name: str
    family: str
    min_inputs: int
    max_inputs: int | None
    attrs: tuple[tuple[str, Any], ...]
    infer: Callable[..., tuple[tuple[int, ...], str]]
    flops: Callable[..., int]
    reference: Callable[..., Any]
    canonical: Callable[..., dict] = _identity_attrs

    @property
    def attr_names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.attrs)

    def arity_text(self) -> str:
        """``1 input``, ``2 or 3 inputs``, ``at least 1 input``."""
        lo, hi = self.min_inputs, self.max_inputs
        if hi is None:
            return f"at least {lo} input{'s' if lo != 1 else ''}"
        if lo == hi:
            return f"{lo} input{'s' if lo != 1 else ''}"
        if hi == lo + 1:
            return f"{lo} or {hi} inputs"
        return f"{lo} to {hi} inputs"

    def check_arity(self, n: int, names: Sequence[str] = ()) -> None:
        """Raise :class:`ModelError` unless ``n`` operands are allowed."""
        if n < self.min_inputs or (self.max_inputs is not None and n > self.max_inputs):
            given = f" ({', '.join(names)})" if names else ""
            raise ModelError(f"{self.name} takes {self.arity_text()}, got {n}{given}")

    def with_defaults(self, attrs: Mapping[str, Any]) -> dict:
        """``attrs`` with defaults filled in; unknown or missing attributes raise ModelError.

        >>> from graphs.ops.registry import get_op
        >>> get_op("softmax").with_defaults({})
        {'axis': -1}
        """
        allowed = dict(self.attrs)
        for key in attrs:
            if key not in allowed:
                known = ", ".join(self.attr_names) or "none"
                hint = did_you_mean(key, self.attr_names)
                raise ModelError(f"{self.name} has no attribute {key!r}{hint} (its attributes: {known})")
        out = {}
        for key, default in self.attrs:
            if key in attrs:
                out[key] = attrs[key]
            elif default is REQUIRED:
                raise ModelError(f"{self.name} needs the attribute {key!r}")
            else:
                out[key] = default
        return out
