import inspect

import pytest

from graphs.builders import BUILDERS, builder_args, build, gpt, transformer
from planner.errors import ModelError


def test_builders_are_registered_alphabetically():
    assert list(BUILDERS) == ["conv", "gpt", "mlp", "moe", "transformer"]


def test_builder_args_come_from_the_signature():
    args = builder_args("transformer")
    assert list(args) == ["layers", "hidden", "heads", "seq", "batch", "ffn", "dtype", "norm_params"]
    assert args["norm_params"] is True
    assert args["layers"] is inspect.Parameter.empty and args["ffn"] is None


def test_unknown_builder_lists_the_builders():
    with pytest.raises(ModelError, match=r"unknown builder 'bert' \(builders: conv, gpt, mlp, moe, transformer\)"):
        build("bert")


def test_unknown_and_missing_arguments_are_named():
    with pytest.raises(ModelError, match="builder gpt has no argument 'n_layers'"):
        gpt(n_layers=2)
    with pytest.raises(ModelError, match="builder gpt needs argument vocab"):
        gpt(layers=1, hidden=8, heads=2, seq=4, batch=2)


def test_argument_values_are_checked():
    with pytest.raises(ModelError, match="argument hidden must be a positive integer, got 8.5"):
        transformer(layers=1, hidden=8.5, heads=2, seq=4, batch=2)
    with pytest.raises(ModelError, match="unknown dtype 'fp8'"):
        transformer(layers=1, hidden=8, heads=2, seq=4, batch=2, dtype="fp8")
    with pytest.raises(ModelError, match="hidden 10 must be divisible by heads 4"):
        transformer(layers=1, hidden=10, heads=4, seq=4, batch=2)


def test_python_builders_accept_mesh_name_and_pattern_annotations():
    g = transformer(layers=2, hidden=16, heads=2, seq=4, batch=2, mesh={"dp": 2, "tp": 2}, name="tb",
                    shardings={"layer*.mlp.w1": '[{}, {"tp"}]'}, strategies={"layer0.mlp.up": [[2, 1, 1], [1, 2]]})
    assert g.name == "tb" and g.mesh.axis_names == ("dp", "tp")
    assert g.tensor("layer1.mlp.w1").sharding.dims_text() == '[{}, {"tp"}]'
    assert g.op("layer0.mlp.up").strategy == ((2, 1, 1), (1, 2))


def test_boolean_builder_argument_must_be_a_bool():
    with pytest.raises(ModelError, match="argument norm_params must be true or false, got 1"):
        build("transformer", layers=1, hidden=8, heads=2, seq=2, batch=1, norm_params=1)
