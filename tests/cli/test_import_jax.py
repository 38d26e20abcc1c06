"""``shardplan import-jax``: a JAX function to a model file that loads and plans; clear errors, exit 2."""

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from planner.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "jax_gpt_block.py"
MEGATRON = ["--mesh", "dp=2,tp=4", "--shardings", 'x=[{"dp"}, {}, {}]', "--shardings", 'params.w1=[{}, {"tp"}]',
            "--shardings", 'params.w2=[{"tp"}, {}]']


def _without_lines(g):
    return ({k: replace(v, line=None) for k, v in g.tensors.items()}, [replace(o, line=None) for o in g.ops],
            g.outputs, dict(g.meshes))


def test_import_jax_round_trip_plans_from_the_written_yaml(tmp_path, capsys):
    pytest.importorskip("jax")
    from graphs import load_model
    from planner.frontends.jax import trace

    sys.path.insert(0, str(ROOT))
    from examples.jax_gpt_block import example_args, gpt_block

    out = tmp_path / "block.yaml"
    assert main(["import-jax", f"{EXAMPLE}:gpt_block", *MEGATRON, "--out", str(out)]) == 0
    text = out.read_text()
    assert "# examples/jax_gpt_block.py:" in text or f"# {EXAMPLE}:" in text  # each op says where it was written
    traced = trace(gpt_block, *example_args(), mesh={"dp": 2, "tp": 4}, params=["params"],
                   shardings={"x": '[{"dp"}, {}, {}]', "params.w1": '[{}, {"tp"}]', "params.w2": '[{"tp"}, {}]'})
    assert _without_lines(load_model(out)) == _without_lines(traced)
    assert main(["plan", str(out)]) == 0
    assert "totals: communication" in capsys.readouterr().out


def test_import_jax_is_deterministic(tmp_path, capsys):
    pytest.importorskip("jax")
    assert main(["import-jax", f"{EXAMPLE}:gpt_block", *MEGATRON]) == 0
    first = capsys.readouterr().out
    assert main(["import-jax", f"{EXAMPLE}:gpt_block", *MEGATRON]) == 0
    assert capsys.readouterr().out == first


@pytest.fixture
def module(tmp_path, monkeypatch):
    (tmp_path / "usermod.py").write_text(
        "import jax.numpy as jnp\n"
        "def f(x, w):\n"
        "    h = x @ w\n"
        "    return jnp.arctan(h)\n"
        "def g(x):\n"
        "    return -x\n")
    monkeypatch.chdir(tmp_path)
    yield "usermod"
    sys.modules.pop("usermod", None)


@pytest.mark.parametrize("argv, message", [
    (["nosuchmodule:f"], "cannot import module 'nosuchmodule'"),
    (["usermod:gg", "--args", "f32[4]"], "module 'usermod' has no function 'gg'; did you mean g? (its functions: f, g)"),
    (["usermod:g", "--args", "f32[4,x]"], "cannot parse --args entry 'f32[4,x]'"),
    (["usermod:g"], "no example arguments for g: give their shapes with --args"),
    (["usermod:f", "--args", "f32[4,8]", "f32[8,2]"], "usermod.py:4:11 (f): JAX primitive 'atan' has no op"),
    (["usermod:g", "--args", "f32[4]", "--shardings", "y=[{}]", "--mesh", "d=2"], "names 'y', which is no argument"),
])
def test_import_jax_errors_exit_2_with_a_clear_message(module, argv, message, capsys):
    pytest.importorskip("jax")
    assert main(["import-jax", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_import_jax_without_jax_says_how_to_install_it(module, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "jax", None)  # import jax now raises ImportError
    assert main(["import-jax", "usermod:g", "--args", "f32[4]"]) == 2
    err = capsys.readouterr().err
    assert 'pip install -e ".[jax]"' in err and "Traceback" not in err


def test_import_jax_with_args_shapes_writes_the_traced_model(module, capsys):
    pytest.importorskip("jax")
    from graphs import load_model_text

    assert main(["import-jax", "usermod:g", "--args", "f32[4,6]", "--mesh", "d=2", "--shardings", 'x=[{"d"}, {}]',
                 "--name", "negate"]) == 0
    g = load_model_text(capsys.readouterr().out)
    assert g.name == "negate" and [op.op for op in g.ops] == ["neg"] and g.outputs == ("out",)
    assert g.tensor("x").shape == (4, 6) and g.tensor("x").sharding.dims_text() == '[{"d"}, {}]'
