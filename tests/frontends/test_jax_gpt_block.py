"""The GPT block of examples/jax_gpt_block.py, written in plain jax.numpy: it traces into the catalogue's
ops, plans, exports, simulates exactly, and its plan's shardings go back to jax.jit."""

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")
from jax.sharding import PartitionSpec as P  # noqa: E402

from graphs.evaluate import run_reference  # noqa: E402
from planner.api import plan  # noqa: E402
from planner.frontends.jax import trace_function  # noqa: E402
from planner.simulation.run import simulate  # noqa: E402
from tests.jax_devices import run_on_eight_devices  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from examples.jax_gpt_block import FFN, HEADS, HIDDEN, gpt_block, example_args  # noqa: E402

COL, ROW = P(None, "tp"), P("tp", None)
MEGATRON = {"x": P("dp"), "params": {"wq": COL, "wk": COL, "wv": COL, "wo": ROW, "w1": COL, "w2": ROW}}
F32_RTOL = 1e-5  # float32 against a float64 reference on sums of at most 256 terms (256 * 6e-8 ~ 1.5e-5 worst case, 1e-5 is
# what random signs leave: the errors of a sum grow like its square root)


@pytest.fixture(scope="module")
def traced():
    return trace_function(gpt_block, *example_args(), mesh={"dp": 2, "tp": 4}, params=["params"], shardings=MEGATRON)


def test_gpt_block_traces_into_the_blocks_catalogue_ops(traced):
    # two layer norms; q, k, v, o, up and down projections and the two attention products; one softmax, one
    # gelu, two residual adds, the attention scale; heads split (reshape + transpose) three times, merged once
    assert Counter(op.op for op in traced.graph.ops) == Counter(
        {"layernorm": 2, "matmul": 8, "softmax": 1, "gelu": 1, "add": 2, "mul": 1, "reshape": 4, "transpose": 4})
    assert {t.name for t in traced.graph.tensors.values() if t.kind == "param"} == {
        f"params.{k}" for k in ("ln1_scale", "ln1_bias", "wq", "wk", "wv", "wo", "ln2_scale", "ln2_bias", "w1", "w2")}
    assert traced.graph.tensor("params.w1").shape == (HIDDEN, FFN)
    [scale] = [t for t in traced.graph.tensors.values() if t.kind == "const"]
    assert scale.value == pytest.approx(1 / np.sqrt(HIDDEN // HEADS))


def test_gpt_block_graph_computes_what_jax_computes(traced):
    args = example_args()
    feeds = {n: np.asarray(v, np.float64) for n, v in zip(traced.inputs, jax.tree_util.tree_leaves(args))}
    feeds.update({t.name: np.full(t.shape, t.value) for t in traced.graph.tensors.values() if t.kind == "const"})
    ours = run_reference(traced.graph, feeds)["out"]
    theirs = np.asarray(jax.jit(gpt_block)(*args), np.float64)
    np.testing.assert_allclose(ours, theirs, rtol=F32_RTOL, atol=F32_RTOL * np.abs(theirs).max())


@pytest.mark.parametrize("training", [False, True], ids=["forward", "training"])
def test_gpt_block_plan_simulates_exactly(traced, training):
    p = plan(traced.graph, search="bfs", training=training)
    result = simulate(p)
    assert result.ok
    assert result.measured_comm_bytes_per_device == result.predicted_comm_bytes_per_device
    assert p.tensors["params.w1"].sharding.dims_text() == '[{}, {"tp"}]'  # the user's Megatron annotation kept


def test_gpt_block_plan_exports_a_partition_spec_per_traced_tensor(traced):
    exported = plan(traced.graph, search="bfs").export("jax")
    assert set(exported["tensors"]) == set(traced.graph.tensors)
    assert exported["tensors"]["params.w2"]["partition_spec"] == "P('tp', None)"
    assert exported["tensors"]["x"]["partition_spec"].startswith("P('dp'")


APPLY = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np, jax
from jax.sharding import PartitionSpec as P
from examples.jax_gpt_block import gpt_block, example_args
from planner.api import plan
from planner.frontends.jax import shardings_for, trace
col, row = P(None, "tp"), P("tp", None)
args = example_args()
g = trace(gpt_block, *args, mesh={"dp": 2, "tp": 4}, params=["params"],
          shardings={"x": P("dp"), "params": {"wq": col, "wk": col, "wv": col, "wo": row, "w1": col, "w2": row}})
p = plan(g, search="bfs")
s = shardings_for(p, gpt_block, *args)
out = jax.jit(gpt_block, in_shardings=s.in_shardings, out_shardings=s.out_shardings)(*args)
ref = jax.jit(gpt_block)(*args)
placed = jax.device_put(args, s.in_shardings)
print(json.dumps({
    "max_abs_diff": float(np.max(np.abs(np.asarray(out) - np.asarray(ref)))),
    "out_spec": str(tuple(out.sharding.spec)), "w1_spec": str(tuple(placed[0]["w1"].sharding.spec)),
    "x_spec": str(tuple(placed[1].sharding.spec)), "devices": len(s.mesh.devices.flat),
    "export_out": p.export("jax")["tensors"]["out"]["partition_spec"],
}))
"""


@pytest.mark.slow
def test_shardings_for_gives_jax_jit_the_plans_shardings():
    got = run_on_eight_devices(APPLY)
    assert got["devices"] == 8
    assert got["w1_spec"] == str((None, "tp")) and got["x_spec"].startswith("('dp'")
    # the same program on the same float32 inputs, summed in another order: |out| < 8 and sums of at most 256
    # terms, 256 * 2**-24 * 8 ~ 1.2e-4
    assert got["max_abs_diff"] < 1.2e-4
    assert "P" + got["out_spec"] == got["export_out"]  # the result delivered as the plan's PartitionSpec
