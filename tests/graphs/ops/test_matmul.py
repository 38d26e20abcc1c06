import numpy as np
import pytest

from graphs.ops.matmul import EINSUM, MATMUL, label_sizes, parse_equation
from planner.errors import ModelError


def test_matmul_shape_mismatch_names_both_inputs():
    with pytest.raises(ModelError) as e:
        MATMUL.infer([(64, 64), (32, 16)], ["f32", "f32"], {}, names=["x", "w"])
    assert e.value.message.startswith("matmul contracts 64 with 32: inputs x (64x64) and w (32x16)")


def test_matmul_mismatch_mentions_transpose_flags():
    with pytest.raises(ModelError, match=r"contracts 64 with 16 \(after transpose_b\)"):
        MATMUL.infer([(8, 64), (64, 16)], ["f32", "f32"], {"transpose_b": True})


def test_matmul_batch_dimensions_broadcast():
    assert MATMUL.infer([(8, 512, 1024), (1024, 4096)], ["bf16", "bf16"], {}) == ((8, 512, 4096), "bf16")
    assert MATMUL.infer([(2, 1, 3, 4), (5, 4, 6)], ["f32", "f32"], {}) == ((2, 5, 3, 6), "f32")


def test_matmul_needs_rank_two():
    with pytest.raises(ModelError, match="rank >= 2"):
        MATMUL.infer([(4,), (4, 2)], ["f32", "f32"], {})


def test_matmul_flops_count_a_multiply_add_as_two():
    assert MATMUL.flops([(64, 64), (64, 64)], (64, 64), {}) == 2 * 64 * 64 * 64
    assert MATMUL.flops([(2, 3, 8), (8, 5)], (2, 3, 5), {}) == 2 * 2 * 3 * 5 * 8
    assert MATMUL.flops([(8, 3), (8, 5)], (3, 5), {"transpose_a": True}) == 2 * 3 * 5 * 8


def test_matmul_reference_applies_transposes():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((5, 3)), rng.standard_normal((4, 5))
    out = MATMUL.reference([a, b], {"transpose_a": True, "transpose_b": True})
    np.testing.assert_allclose(out, a.T @ b.T)


def test_einsum_infers_output_from_labels():
    assert EINSUM.infer([(2, 4, 8, 16), (2, 4, 8, 16)], ["f32", "f32"], {"equation": "bnqd,bnkd->bnqk"}) == (
        (2, 4, 8, 8), "f32")


def test_einsum_label_size_conflict_names_operands():
    with pytest.raises(ModelError) as e:
        label_sizes("bsh,hf->bsf", [(2, 3, 4), (5, 6)], ["x", "w"])
    assert "letter 'h' is 4 in x (2x3x4) but 5 in w (5x6)" in e.value.message


@pytest.mark.parametrize(
    "equation, fragment",
    [
        ("ij,jk", "explicit '->'"),
        ("ij,jk->il", "output letter 'l' appears in no input term"),
        ("ii,ik->ik", "letter 'i' repeats"),
        ("i1,jk->ik", "'1' is not a letter"),
        ("...j,jk->k", "'...' is not supported"),
        ("ij->ij", "1 input terms but the op has 2 inputs"),
    ],
)
def test_einsum_bad_equations_are_explained(equation, fragment):
    with pytest.raises(ModelError, match=None) as e:
        parse_equation(equation, 2)
    assert fragment in e.value.message


def test_einsum_rank_mismatch_names_term_and_input():
    with pytest.raises(ModelError, match="term 'bsh' has 3 letters but input x \\(2x3\\) has rank 2"):
        EINSUM.infer([(2, 3), (3, 4)], ["f32", "f32"], {"equation": "bsh,hf->bsf"}, names=["x", "w"])


def test_einsum_flops_and_reference():
    shapes = [(2, 3, 4), (4, 5)]
    assert EINSUM.flops(shapes, (2, 3, 5), {"equation": "bsh,hf->bsf"}) == 2 * 2 * 3 * 4 * 5
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])
    np.testing.assert_allclose(EINSUM.reference([a, b], {"equation": "bsh,hf->bsf"}), a @ b)


def test_single_operand_einsum_counts_one_flop_per_term():
    assert EINSUM.flops([(3, 4)], (4,), {"equation": "ij->j"}) == 12
