import numpy as np
import pytest

from graphs.ops.shape_ops import CONCAT, DYNAMIC_SLICE, DYNAMIC_UPDATE_SLICE, RESHAPE, SLICE, TRANSPOSE
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


def test_dynamic_update_slice_writes_the_update_at_clamped_starts():
    op = DYNAMIC_UPDATE_SLICE
    x, u = np.zeros((5, 4)), np.ones((2, 4))
    # a computed row start (an input) and a constant column start; 7 is clamped to 5 - 2 = 3, -1 to 0
    attrs = op.canonical([(5, 4), (2, 4), ()], {"starts": [None, 0]})
    assert op.infer([(5, 4), (2, 4), ()], ["f32", "f32", "i32"], attrs) == ((5, 4), "f32")
    assert op.reference([x, u, np.int32(7)], attrs)[:, 0].tolist() == [0, 0, 0, 1, 1]
    assert op.reference([x, u, np.int32(-1)], attrs)[:, 0].tolist() == [1, 1, 0, 0, 0]
    # the cotangent 0..19 by rows of 4: the operand's keeps it outside the window (rows 1-2), the update's is it
    g_x, g_u = op.vjp([x, u, np.int32(1)], attrs, None, np.arange(20.0).reshape(5, 4), (0, 1))
    assert g_x[:, 0].tolist() == [0, 0, 0, 12, 16] and g_u[:, 0].tolist() == [4, 8]


def test_dynamic_update_slice_needs_a_start_per_dimension_and_a_fitting_update():
    op = DYNAMIC_UPDATE_SLICE
    with pytest.raises(ModelError, match="needs the operand, the update and 2 start indices"):
        op.infer([(5, 4), (2, 4), ()], ["f32", "f32", "i32"], {})
    with pytest.raises(ModelError, match="no dimension larger than the operand's"):
        op.infer([(5, 4), (6, 4)], ["f32", "f32"], {"starts": [0, 0]})
    with pytest.raises(ModelError, match="one entry per dimension"):
        op.infer([(5, 4), (2, 4)], ["f32", "f32"], {"starts": [0]})
    with pytest.raises(ModelError, match="must be a rank-0 integer"):
        op.infer([(5, 4), (2, 4), (1,)], ["f32", "f32", "i32"], {"starts": [None, 0]})
    with pytest.raises(ModelError, match="integer"):
        op.infer([(5, 4), (2, 4), ()], ["f32", "f32", "f32"], {"starts": [None, 0]})
    with pytest.raises(ModelError, match="no gradient with respect to its start index"):
        op.vjp([np.zeros((5, 4)), np.ones((2, 4)), np.int32(1)], {"starts": (None, 0)}, None, np.zeros((5, 4)), (2,))


def test_dynamic_slice_reads_the_window_at_clamped_starts():
    op = DYNAMIC_SLICE
    x = np.arange(20.0).reshape(5, 4)  # x[r, c] = 4 r + c
    attrs = op.canonical([(5, 4), ()], {"sizes": [2, 3], "starts": [None, 1]})
    assert op.infer([(5, 4), ()], ["f32", "i32"], attrs) == ((2, 3), "f32")
    # row start 9 clamps to 5 - 2 = 3 (rows 3-4), -2 to 0; columns 1-3
    assert op.reference([x, np.int32(9)], attrs)[:, 0].tolist() == [13, 17]
    assert op.reference([x, np.int32(-2)], attrs)[:, 0].tolist() == [1, 5]
    # the cotangent lands at the window (rows 3-4, columns 1-3), zeros elsewhere
    [g] = op.vjp([x, np.int32(3)], attrs, None, np.ones((2, 3)), (0,))
    assert g.sum() == 6 and g[3:, 1:].tolist() == [[1, 1, 1], [1, 1, 1]]


def test_dynamic_slice_needs_sizes_that_fit_and_a_start_per_dimension():
    op = DYNAMIC_SLICE
    with pytest.raises(ModelError, match="at most the dimension's size"):
        op.infer([(5, 4), (), ()], ["f32", "i32", "i32"], {"sizes": [6, 1]})
    with pytest.raises(ModelError, match="needs the operand and 2 start indices"):
        op.infer([(5, 4), ()], ["f32", "i32"], {"sizes": [2, 2]})
    with pytest.raises(ModelError, match="must be a rank-0 integer"):
        op.infer([(5, 4), (2,)], ["f32", "i32"], {"sizes": [2, 2], "starts": [None, 0]})
