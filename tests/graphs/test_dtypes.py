import numpy as np
import pytest

from graphs.dtypes import DTYPES, check_dtype, dtype_itemsize, is_float, is_int, numpy_dtype
from planner.errors import ModelError


def test_itemsizes():
    assert [dtype_itemsize(d) for d in DTYPES] == [4, 2, 2, 4, 8, 1]


def test_bf16_is_simulated_as_float32():
    assert numpy_dtype("bf16") == np.float32 and numpy_dtype("i64") == np.int64


def test_unknown_dtype_lists_known_ones():
    with pytest.raises(ModelError, match="dtypes are f32, bf16, f16, i32, i64, bool"):
        check_dtype("float32")


def test_kinds():
    assert is_float("bf16") and not is_float("i32") and is_int("i32") and not is_int("bool")
