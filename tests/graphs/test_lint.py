"""graphs/lint.py: the warnings a legal model earns (unused tensors, dead ops, no ops)."""

from pathlib import Path

import pytest

from graphs import load_model, load_model_text
from graphs.lint import model_warnings

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_the_shipped_configs_earn_no_warning(path):
    assert model_warnings(load_model(str(path))) == ()


def test_without_outputs_every_unread_result_is_an_output_so_no_op_is_dead():
    g = load_model_text("""
name: fork
mesh: {x: 2}
tensors:
  a: {shape: [4], kind: input}
ops:
  - {name: one, op: relu, inputs: [a], output: h}
  - {name: two, op: neg, inputs: [a], output: s}
""")
    assert model_warnings(g) == ()


def test_a_chain_feeding_only_a_dead_op_is_dead_too():
    g = load_model_text("""
name: chain
mesh: {x: 2}
tensors:
  a: {shape: [4], kind: input}
ops:
  - {name: keep, op: relu, inputs: [a], output: y}
  - {name: d1, op: neg, inputs: [a], output: t1}
  - {name: d2, op: exp, inputs: [t1], output: t2}
outputs: [y]
""")
    (message,) = model_warnings(g)
    # d1 feeds only d2 and d2 feeds nothing: both are dead, listed in op order with their lines
    assert message.startswith("ops 'd1' (<string>:8), 'd2' (<string>:9) compute results that reach no output "
                              "(outputs: y)")


def test_many_unused_tensors_are_listed_five_then_counted():
    names = [f"t{i}" for i in range(7)]
    tensors = "".join(f"  {n}: {{shape: [4], kind: param}}\n" for n in names)
    g = load_model_text("name: many\nmesh: {x: 2}\ntensors:\n  a: {shape: [4], kind: input}\n" + tensors
                        + "ops:\n  - {name: act, op: relu, inputs: [a], output: y}\n")
    (message,) = model_warnings(g)
    assert message.startswith("tensors 't0' (<string>:5), ") and "'t4' (<string>:9) and 2 more are declared" in message
