import pytest

from graphs.specs import OpSpec, TensorSpec
from planner.errors import ModelError


def test_tensor_spec_canonicalises_shape_and_reports_bytes():
    t = TensorSpec("w", [4, 8], "bf16", "param")
    assert t.shape == (4, 8) and t.nbytes == 64 and t.rank == 2 and t.type_text() == "bf16[4x8]"
    assert TensorSpec("s", []).numel == 1


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"shape": [4, 0]}, "shape must be a list of positive integers"),
        ({"shape": "4x4"}, "shape must be a list"),
        ({"shape": [4], "dtype": "float"}, "tensor 't': unknown dtype 'float'"),
        ({"shape": [4], "kind": "weight"}, "unknown kind 'weight'"),
        ({"shape": [4], "value": 1.0}, "only a const takes a value"),
    ],
)
def test_tensor_spec_errors_name_the_tensor(kwargs, fragment):
    with pytest.raises(ModelError) as e:
        TensorSpec("t", **kwargs)
    assert fragment in e.value.message


def test_const_value():
    assert TensorSpec("c", [], kind="const", value=0.125).value == 0.125


def test_op_spec_sorts_and_freezes_attributes():
    o = OpSpec("r", "reshape", "x", "y", {"shape": [2, 3]})
    assert o.inputs == ("x",) and o.attrs == (("shape", (2, 3)),)
    assert o.attr("shape") == (2, 3) and o.attr("missing", 7) == 7
    hash(o)


def test_op_spec_rejects_unknown_op_and_bad_strategy():
    with pytest.raises(ModelError, match="op 'r': unknown op 'relu6'"):
        OpSpec("r", "relu6", ["x"], "y")
    with pytest.raises(ModelError, match="strategy must be a list with one list of split counts per input"):
        OpSpec("m", "matmul", ["x", "w"], "y", strategy=[2, 1])
