import numpy as np
import pytest

from graphs.ops.shape_ops import CONCAT, RESHAPE, SLICE, TRANSPOSE
from planner.errors import ModelError


def test_reshape_infers_minus_one_and_canonicalises():
    assert RESHAPE.infer([(8, 6)], ["f32"], {"shape": [-1, 4]}) == ((12, 4), "f32")
    assert RESHAPE.canonical([(8, 6)], {"shape": [-1, 4]}) == {"shape": (12, 4)}


def test_reshape_element_count_mismatch_is_explained():
    with pytest.raises(ModelError, match=r"x \(8x6\) has 48 but 5x10 has 50"):
        RESHAPE.infer([(8, 6)], ["f32"], {"shape": [5, 10]}, names=["x"])


def test_transpose_perm_must_be_a_permutation():
    assert TRANSPOSE.infer([(2, 3, 4)], ["f32"], {"perm": [2, 0, 1]}) == ((4, 2, 3), "f32")
    with pytest.raises(ModelError, match=r"perm \[0, 0, 1\] is not a permutation of 0..2"):
        TRANSPOSE.infer([(2, 3, 4)], ["f32"], {"perm": [0, 0, 1]})


def test_concat_adds_sizes_along_axis_and_checks_the_rest():
    assert CONCAT.infer([(2, 3), (2, 5)], ["f32", "f32"], {"axis": -1}) == ((2, 8), "f32")
    with pytest.raises(ModelError, match="concat along axis 1 needs equal other dimensions"):
        CONCAT.infer([(2, 3), (4, 5)], ["f32", "f32"], {"axis": 1})


def test_slice_bounds():
    assert SLICE.infer([(8, 6)], ["f32"], {"starts": [2, 0], "stops": [6, 6]}) == ((4, 6), "f32")
    with pytest.raises(ModelError, match=r"slice of dimension 1 keeps \[4, 9\)"):
        SLICE.infer([(8, 6)], ["f32"], {"starts": [0, 4], "stops": [8, 9]})
    with pytest.raises(ModelError, match="starts has 1 entries"):
        SLICE.infer([(8, 6)], ["f32"], {"starts": [0], "stops": [8, 6]})


def test_shape_op_references_and_zero_flops():
    x = np.arange(24).reshape(4, 6)
    np.testing.assert_array_equal(RESHAPE.reference([x], {"shape": [2, -1]}), x.reshape(2, 12))
    np.testing.assert_array_equal(TRANSPOSE.reference([x], {"perm": [1, 0]}), x.T)
    np.testing.assert_array_equal(CONCAT.reference([x, x], {"axis": 1}), np.concatenate([x, x], 1))
    np.testing.assert_array_equal(SLICE.reference([x], {"starts": [1, 2], "stops": [3, 5]}), x[1:3, 2:5])
    assert RESHAPE.flops([(4, 6)], (24,), {}) == 0


def test_reshape_is_a_view_and_touches_no_memory():
    assert RESHAPE.bytes_accessed([(8, 6)], (2, 8, 3), (4, 4), {"shape": [2, 8, 3]}) == 0


def test_transpose_and_concat_copy_every_element_once():
    assert TRANSPOSE.bytes_accessed([(8, 6)], (6, 8), (2, 2), {"perm": [1, 0]}) == 2 * 48 * 2
    # two 4x6 and one 2x6 f32 operands read, a 10x6 result written
    assert CONCAT.bytes_accessed([(4, 6), (4, 6), (2, 6)], (10, 6), (4, 4, 4, 4), {"axis": 0}) == (24 + 24 + 12 + 60) * 4


def test_slice_reads_only_the_elements_it_keeps():
    # of an 8x6 f32 operand, the 4x4 block kept is read once and written once
    assert SLICE.bytes_accessed([(8, 6)], (4, 4), (4, 4), {"starts": [0, 2], "stops": [4, 6]}) == 2 * 16 * 4
