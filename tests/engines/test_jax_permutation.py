"""Concat and slice along a sharded dimension, planned with ``--search propagate`` for training and run on XLA
(JAX 0.10.2, 8 host devices, the plan given as constraints so that XLA partitions the ops itself): outputs and
gradients equal the reference, and XLA's collectives move the plan's bytes, kind by kind (its AllToAlls for a
concat, its halo exchange for a slice, the slices and pads of their backward)."""

import json

import pytest

from tests.jax_devices import run_on_eight_devices

D = '[{}, {"d"}]'


def _model(mesh: str, tensors, ops, output: str) -> str:
    params = "".join(f"\n  {n}: {{shape: {list(s)}, kind: param, sharding: '{sh}'}}" for n, s, sh in tensors)
    return f"name: m\nmesh: {mesh}\ntensors:{params}\nops:" + "".join(f"\n  - {op}" for op in ops) + \
        f"\noutputs: [{output}]\n"


def _then_tanh(sharding: str) -> str:
    return f"{{name: t, op: tanh, inputs: [z], output: o, out_sharding: '{sharding}'}}"


CASES = {
    "concat rows 2d": _model("{a: 2, b: 4}", [("x", (8, 32), '[{"a"}, {}]'), ("y", (8, 32), '[{"a"}, {}]')],
                             ["{name: c, op: concat, inputs: [x, y], output: z, axis: 0}",
                              _then_tanh('[{"a"}, {}]')], "o"),
    "concat both 2d": _model("{a: 2, b: 4}", [("x", (16, 16), '[{"a"}, {"b"}]'), ("y", (16, 16), '[{"a"}, {"b"}]')],
                             ["{name: c, op: concat, inputs: [x, y], output: z, axis: 1}",
                              _then_tanh('[{"a"}, {"b"}]')], "o"),
    "concat three": _model("{d: 8}", [("x", (16, 16), D), ("y", (16, 8), D), ("w", (16, 24), D)],
                           ["{name: c, op: concat, inputs: [x, y, w], output: z, axis: 1}", _then_tanh(D)], "o"),
    # 6 rows take no 8-way split: the operands are gathered
    "concat gathered": _model("{d: 8}", [("x", (6, 16), D), ("y", (6, 8), D)],
                              ["{name: c, op: concat, inputs: [x, y], output: z, axis: 1}", _then_tanh(D)], "o"),
    "slice rows 2d": _model("{a: 2, b: 4}", [("x", (16, 32), '[{"a"}, {"b"}]')],
                            ["{name: s, op: slice, inputs: [x], output: z, starts: [4, 0], stops: [12, 32]}",
                             _then_tanh('[{"a"}, {"b"}]')], "o"),
    "slice cols 2d": _model("{a: 2, b: 4}", [("x", (16, 32), '[{"a"}, {"b"}]')],
                            ["{name: s, op: slice, inputs: [x], output: z, starts: [0, 4], stops: [16, 28]}",
                             _then_tanh('[{"a"}, {"b"}]')], "o"),
    # the backward's pad: XLA gathers the cotangent
    "slice gathered back": _model("{d: 4, e: 2}", [("x", (3, 12), D)],
                                  ["{name: s, op: slice, inputs: [x], output: z, starts: [0, 0], stops: [3, 4]}",
                                   _then_tanh(D)], "o"),
    # rotary embedding's rotation: both halves sliced, the negated upper one concatenated before the lower
    "rope": _model("{d: 8}", [("x", (4, 32), D), ("c", (4, 32), D), ("s", (4, 32), D)],
                   ["{name: lower, op: slice, inputs: [x], output: a, starts: [0, 0], stops: [4, 16]}",
                    "{name: upper, op: slice, inputs: [x], output: b, starts: [0, 16], stops: [4, 32]}",
                    "{name: negate, op: neg, inputs: [b], output: nb}",
                    "{name: rotate, op: concat, inputs: [nb, a], output: r, axis: 1}",
                    "{name: cos, op: mul, inputs: [x, c], output: xc}", "{name: sin, op: mul, inputs: [r, s], output: rs}",
                    "{name: sum, op: add, inputs: [xc, rs], output: out}"], "out"),
}

SCRIPT = """
import collections, json, sys
from planner.api import plan
from planner.engines.jax_run import run_on_jax
out = {}
for name, text in json.loads(sys.stdin.read()).items():
    r = run_on_jax(plan(text, search="propagate", training=True), repeat=1, warmup=1)
    planned, xla = collections.Counter(), collections.Counter()
    for c in r.planned:
        planned[c.kind] += c.bytes_per_device
    for c in r.xla:
        xla[c.our_kind] += c.bytes_per_device
    out[name] = {"ok": r.ok, "lowering": r.lowering, "plan": dict(planned), "xla": dict(xla)}
print(json.dumps(out))
"""


@pytest.mark.slow
def test_xla_moves_the_plans_bytes_for_concat_and_slice_forward_and_backward():
    pytest.importorskip("jax")
    runs = run_on_eight_devices(SCRIPT, stdin=json.dumps(CASES), timeout=900)
    assert {name: r["ok"] for name, r in runs.items()} == {name: True for name in CASES}
    assert {name for name, r in runs.items() if r["lowering"] == "constraints"} == set(CASES)
    assert {name: (r["plan"], r["xla"]) for name, r in runs.items() if r["plan"] != r["xla"]} == {}
    assert sum(bool(r["plan"]) for r in runs.values()) == len(CASES) - 1  # the 2-D row slice moves nothing
