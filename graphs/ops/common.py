"""Small helpers shared by the op families: shape text, operand names, axis checks."""

from __future__ import annotations

import math
from typing import Any, Sequence

from graphs.dtypes import is_float, is_int
from planner.errors import ModelError, quote

Shape = tuple[int, ...]


def shape_text(shape: Sequence[int]) -> str:
    """``64x64``; ``scalar`` for ``()``.

    >>> shape_text((64, 16)), shape_text(())
    ('64x16', 'scalar')
    """
    return "x".join(map(str, shape)) if len(shape) else "scalar"


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def operand(names: Sequence[str] | None, shapes: Sequence[Shape], i: int) -> str:
    """``x (64x64)``: operand ``i`` by name (``#i`` without names) and shape."""
    name = names[i] if names is not None and i < len(names) else f"#{i}"
    return f"{name} ({shape_text(shapes[i])})"


def operand_name(names: Sequence[str] | None, i: int) -> str:
    return names[i] if names is not None and i < len(names) else f"#{i}"


def check_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ModelError(f"{what} must be an integer, got {quote(value)}")
    return value


def check_bool(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise ModelError(f"{what} must be true or false, got {quote(value)}")
    return value


def check_int_list(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, (list, tuple)):
        raise ModelError(f"{what} must be a list of integers, got {quote(value)}")
    return tuple(check_int(v, what) for v in value)


def normalize_axis(axis: Any, rank: int, what: str) -> int:
    """``axis`` in ``[-rank, rank)`` made non-negative, else ModelError."""
    axis = check_int(axis, what)
    if not -rank <= axis < rank:
        raise ModelError(f"{what} {axis} is out of range for rank {rank} (valid: {-rank} to {rank - 1})")
    return axis % rank


def same_dtype(op: str, dtypes: Sequence[str], names: Sequence[str] | None) -> str:
    """The common dtype of all operands; mixing dtypes is an error (cast first)."""
    for i, d in enumerate(dtypes):
        if d != dtypes[0]:
            raise ModelError(
                f"{op} mixes dtypes {dtypes[0]} ({operand_name(names, 0)}) and {d} ({operand_name(names, i)}); "
                "insert a cast so they agree"
            )
    return dtypes[0]


def need_numeric(op: str, dtypes: Sequence[str], names: Sequence[str] | None) -> None:
    """Arithmetic ops take numbers: a bool operand is an error."""
    for i, d in enumerate(dtypes):
        if d == "bool":
            raise ModelError(f"{op} needs numeric inputs, but {operand_name(names, i)} is bool")


def need_float(op: str, dtype: str, names: Sequence[str] | None, i: int = 0) -> None:
    if not is_float(dtype):
        raise ModelError(f"{op} needs a floating-point input, but {operand_name(names, i)} is {dtype}")


def need_int(op: str, dtype: str, names: Sequence[str] | None, i: int, role: str) -> None:
    if not is_int(dtype):
        raise ModelError(f"{op} needs integer {role} (i32 or i64), but {operand_name(names, i)} is {dtype}")


def need_rank(op: str, shapes: Sequence[Shape], names: Sequence[str] | None, i: int, at_least: int, role: str = "") -> None:
    if len(shapes[i]) < at_least:
        what = f" as {role}" if role else ""
        raise ModelError(
            f"{op} needs an input of rank >= {at_least}{what}, got {operand(names, shapes, i)}"
        )


def pair(value: Any, what: str) -> tuple[int, int]:
    """An int or a pair of ints as ``(h, w)``."""
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise ModelError(f"{what} must be an integer or a pair [h, w], got {quote(list(value))}")
        return check_int(value[0], what), check_int(value[1], what)
    v = check_int(value, what)
    return v, v
