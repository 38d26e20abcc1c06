import numpy as np
import pytest

from graphs.ops.gather import GATHER
from planner.errors import ModelError


def test_gather_shape_is_indices_then_row_shape():
    assert GATHER.infer([(100, 4, 8), (2, 3)], ["bf16", "i64"], {}) == ((2, 3, 4, 8), "bf16")


def test_gather_needs_integer_indices():
    with pytest.raises(ModelError, match="gather needs integer indices .* but ids is f32"):
        GATHER.infer([(100, 8), (2, 3)], ["f32", "f32"], {}, names=["table", "ids"])


def test_gather_reference_picks_rows():
    table = np.arange(20.0).reshape(5, 4)
    idx = np.array([[4, 0], [2, 2]])
    np.testing.assert_array_equal(GATHER.reference([table, idx], {}), table[idx])
    with pytest.raises(ModelError, match=r"indices hold 5 to 5 .* outside the table's rows \[0, 5\)"):
        GATHER.reference([table, np.array([5])], {})  # one past the last of 5 rows
    assert GATHER.flops([(5, 4), (2, 2)], (2, 2, 4), {}) == 0


def test_gather_bytes_are_the_indices_the_picked_rows_and_the_result():
    # a 50257 x 768 f32 table, 8 x 128 i32 indices: 1024 rows of 768 floats read, 1024 x 768 written;
    # the rest of the table is never read
    indices, rows = 8 * 128, 8 * 128 * 768
    assert GATHER.bytes_accessed([(50257, 768), (8, 128)], (8, 128, 768), (4, 4, 4), {}) == \
        indices * 4 + rows * 4 + rows * 4
    # a bf16 table and i64 indices: each part in its own itemsize
    assert GATHER.bytes_accessed([(100, 16), (10,)], (10, 16), (2, 8, 2), {}) == 10 * 8 + 160 * 2 + 160 * 2
