"""Element types of model tensors: their names, sizes in bytes and numpy simulation types.

The dtypes are ``f32`` (the default), ``bf16``, ``f16``, ``i32``, ``i64`` and ``bool``.
numpy has no bfloat16, so the simulator holds ``bf16`` values as float32
(:func:`numpy_dtype`); byte counts still use the real size (:func:`dtype_itemsize`),
so communication volumes are those of the real type.

>>> dtype_itemsize("bf16"), numpy_dtype("bf16")
(2, dtype('float32'))
>>> is_float("f16"), is_int("i64")
(True, True)
"""

from __future__ import annotations

import difflib

import numpy as np

from planner.errors import QUOTE_CHARS, ModelError, quote

#: Every dtype name, in the order the documentation lists them.
DTYPES: tuple[str, ...] = ("f32", "bf16", "f16", "i32", "i64", "bool")

_ITEMSIZE = {"f32": 4, "bf16": 2, "f16": 2, "i32": 4, "i64": 8, "bool": 1}
_NUMPY = {"f32": "float32", "bf16": "float32", "f16": "float16", "i32": "int32", "i64": "int64", "bool": "bool"}
_JAX = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "i32": "int32", "i64": "int64", "bool": "bool"}
_FLOATS = ("f32", "bf16", "f16")
# Spellings from other frameworks, used only to suggest the right name in errors.
_ALIASES = {
    "float": ["f32"], "float32": ["f32"], "fp32": ["f32"], "f64": ["f32"], "float64": ["f32"],
    "bfloat16": ["bf16"], "float16": ["f16"], "fp16": ["f16"], "half": ["f16"],
    "int": ["i32"], "int32": ["i32"], "int64": ["i64"], "long": ["i64"], "bool_": ["bool"],
}
_INTS = ("i32", "i64")


def check_dtype(name: object) -> str:
    """Return ``name`` if it is a known dtype, else raise :class:`ModelError` listing them."""
    if isinstance(name, str) and name in _ITEMSIZE:
        return name
    lower = str(name)[:QUOTE_CHARS].lower()  # names are lower case: F32 means f32
    close = ([lower] if lower in _ITEMSIZE else _ALIASES.get(lower)) or difflib.get_close_matches(lower, DTYPES, n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    if lower in _ITEMSIZE:
        hint = f": dtype names are lower case{hint}"
    raise ModelError(f"unknown dtype {quote(name)}{hint} (dtypes are {', '.join(DTYPES)})")


def dtype_itemsize(name: str) -> int:
    """Bytes per element of ``name`` (``bf16`` is 2)."""
    return _ITEMSIZE[check_dtype(name)]


def numpy_dtype(name: str) -> np.dtype:
    """The numpy type the simulator uses for ``name`` (``bf16`` is simulated as float32)."""
    return np.dtype(_NUMPY[check_dtype(name)])


def jax_dtype_name(name: str) -> str:
    """The name JAX gives ``name`` (``bf16`` is ``bfloat16``: JAX has the type numpy lacks).

    >>> jax_dtype_name("bf16"), jax_dtype_name("i64")
    ('bfloat16', 'int64')
    """
    return _JAX[name]


def is_float(name: str) -> bool:
    return name in _FLOATS


def is_int(name: str) -> bool:
    return name in _INTS
