"""``shardplan export --to jax`` of a pipelined plan: the whole mesh, the stage assignment, the schedule and each
stage's layouts; ``run`` and ``export --to jax-module`` of one refused with exit 2 and what to do instead."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from graphs import load_model
from planner.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
MLP = ROOT / "tests" / "cli" / "pipeline_mlp.yaml"  # four MLP layers, mesh pp 2 x dp 2 x tp 2, 1F1B, 2 microbatches
TINY = ROOT / "tests" / "stages" / "tiny_gpt.yaml"


def export(capsys, *argv) -> dict:
    assert main(["export", *map(str, argv)]) == 0
    return json.loads(capsys.readouterr().out)


def refused(capsys, *argv) -> str:
    """The one line a refused command prints (exit 2, no traceback)."""
    try:
        code = main(list(map(str, argv)))
    except SystemExit as e:
        code = e.code
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def model(tmp_path, pipeline: str) -> Path:
    """pipeline_mlp.yaml with another ``pipeline:`` mapping."""
    text = MLP.read_text().replace("pipeline: {microbatches: 2, schedule: 1f1b}", pipeline)
    path = tmp_path / "m.yaml"
    path.write_text(text)
    return path


def test_the_mesh_holds_every_device_and_each_group_is_one_pipeline_position(capsys):
    d = export(capsys, MLP, "--to", "jax")
    mesh = d["mesh"]
    # the model's mesh is pp 2 x dp 2 x tp 2: the export keeps the pipeline and data-parallel axes outermost
    assert (mesh["axis_names"], mesh["shape"]) == (["pp", "dp", "tp"], [2, 2, 2])
    assert sorted(mesh["device_ids"]) == list(range(8)) == list(range(d["devices"]))
    grid = np.array(mesh["device_ids"]).reshape(mesh["shape"])
    groups = d["pipeline"]["device_groups"]
    assert [g["index"] for g in groups] == [0, 1]
    for g in groups:  # group d is the devices at pp index d, dp major
        assert g["devices"] == grid[g["index"]].reshape(-1).tolist()


def test_stages_cover_every_layer_and_op_once_in_order_and_pass_activations_along(capsys):
    d = export(capsys, MLP, "--to", "jax")
    p = d["pipeline"]
    graph = load_model(MLP)
    stages = p["stages"]
    assert [name for s in stages for name in s["layers"]] == ["l0", "l1", "l2", "l3"]  # the ops' name prefixes
    assert [op for s in stages for op in s["ops"]] == [op.name for op in graph.ops]
    assert len(stages) == p["degree"] * p["virtual_stages"]
    assert [s["device_group"] for s in stages] == [s["index"] % p["degree"] for s in stages]
    # a chain of layers: each stage receives exactly what the one before it sends (its last layer's output)
    assert stages[0]["receives"] == [] and stages[-1]["sends"] == []
    for before, after in zip(stages, stages[1:]):
        assert before["sends"] == after["receives"] == [f"{before['layers'][-1]}.y"]


def test_the_schedule_runs_each_microbatch_forward_then_backward_on_each_stage_without_deadlock(capsys):
    p = export(capsys, MLP, "--to", "jax")["pipeline"]
    m, pp, stages = p["microbatches"], p["degree"], len(p["stages"])
    orders = [[(a["kind"], a["microbatch"], a["stage"]) for a in g["actions"]] for g in p["device_groups"]]
    for d, order in enumerate(orders):
        mine = [k for k in range(stages) if k % pp == d]
        assert sorted(order) == sorted((kind, j, k) for kind in ("forward", "backward") for j in range(m) for k in mine)
        # 1F1B: at most pp - d microbatches in flight on group d (forwards run, backwards not yet)
        held = [sum(+1 if a[0] == "forward" else -1 for a in order[:i + 1]) for i in range(len(order))]
        assert max(held) <= pp - d
    # replay: an action runs once the one it depends on has (forward from the stage before, backward from the
    # stage after, the last stage's backward after its own forward); every group's order must finish
    done, at = set(), [0] * pp
    while any(at[d] < len(o) for d, o in enumerate(orders)):
        progressed = False
        for d, o in enumerate(orders):
            while at[d] < len(o):
                kind, j, k = o[at[d]]
                need = (("forward", j, k - 1) if k else None) if kind == "forward" else \
                    ("backward", j, k + 1) if k < stages - 1 else ("forward", j, k)
                if need is not None and need not in done:
                    break
                done.add(o[at[d]])
                at[d] += 1
                progressed = True
        assert progressed, f"the schedule deadlocks at {[o[i] for o, i in zip(orders, at) if i < len(o)]}"


def test_stage_layouts_are_the_priced_plans_under_each_stages_own_names(capsys):
    d = export(capsys, MLP, "--to", "jax")
    p = d["pipeline"]
    spmd = {k: v for s in p["stages"] for k, v in s["spmd"]["ops"].items()}
    tensors = {k: v for s in p["stages"] for k, v in s["spmd"]["tensors"].items()}
    for i in range(4):  # the model pins every layer's first weight's columns and second weight's rows to tp
        assert tensors[f"l{i}.w1"]["partition_spec_entries"] == [None, "tp"]
        assert tensors[f"l{i}.w2"]["partition_spec_entries"] == ["tp", None]
    # l0 reads the model's input, l1..l3 their predecessor's output: l2 and l3 are alike l1 and take its layouts
    for i in (2, 3):
        for op in ("up", "relu", "down"):
            assert spmd[f"l{i}.{op}"] == spmd[f"l1.{op}"]
    # one microbatch's shapes: the batch of 8 over dp 2 replicas and 2 microbatches each
    size = 8 // (p["data_parallel"] * p["microbatches"])
    assert p["microbatch_size"] == size and tensors["x"]["shape"] == [size, 16]
    assert all(s["spmd"]["mesh"]["axis_names"] == ["tp"] for s in p["stages"])
    assert list(p["stages"][-1]["spmd"]["outputs"]) == ["l3.y"]


def test_the_export_carries_the_plan_that_plan_prints(capsys):
    d = export(capsys, TINY, "--to", "jax", "--devices", "4")
    assert main(["plan", str(TINY), "--devices", "4", "--format", "json"]) == 0
    planned = json.loads(capsys.readouterr().out)["pipeline"]
    p = d["pipeline"]
    for key in ("degree", "data_parallel", "schedule", "microbatches", "microbatch_size", "virtual_stages",
                "recompute", "zero_stage", "step_time_s", "memory_bytes_per_device"):
        assert p[key] == planned[key], key
    assert [s["layers"] for s in p["stages"]] == [s["layers"] for s in planned["stages"]]
    assert d["mesh"]["shape"] == [planned["degree"], planned["data_parallel"], *planned["stage_mesh"].values()]


def test_pins_of_schedule_recomputation_zero_and_chunks_are_exported(tmp_path, capsys):
    path = model(tmp_path, "pipeline: {stages: 2, microbatches: 2, schedule: interleaved, virtual_stages: 2, "
                           "recompute: full, zero: 2}")
    p = export(capsys, path, "--to", "jax")["pipeline"]
    assert (p["degree"], p["schedule"], p["virtual_stages"], p["recompute"], p["zero_stage"]) == \
        (2, "interleaved", 2, "full", 2)
    assert p["zero_sharded"] == ["optimizer_state", "gradients"]  # ZeRO 2: stage 1's state and the gradients
    # four stages of one layer each on two groups: stage k runs on group k % 2 as its chunk k // 2
    assert [(s["layers"], s["device_group"], s["chunk"]) for s in p["stages"]] == \
        [(["l0"], 0, 0), (["l1"], 1, 0), (["l2"], 0, 1), (["l3"], 1, 1)]
    assert [g["stages"] for g in p["device_groups"]] == [[0, 2], [1, 3]]
    assert all(a["chunk"] == a["stage"] // 2 for g in p["device_groups"] for a in g["actions"])
    gpipe = export(capsys, model(tmp_path, "pipeline: {stages: 2, microbatches: 2, schedule: gpipe}"), "--to", "jax")
    for g in gpipe["pipeline"]["device_groups"]:  # GPipe: every forward, then every backward
        kinds = [a["kind"] for a in g["actions"]]
        assert kinds == ["forward"] * 2 + ["backward"] * 2


def test_the_same_request_gives_the_same_bytes(tmp_path):
    outs = [tmp_path / f"{i}.json" for i in range(2)]
    for out in outs:
        assert main(["export", str(MLP), "--to", "jax", "--out", str(out)]) == 0
    assert outs[0].read_bytes() == outs[1].read_bytes()


def test_run_and_the_jax_module_refuse_a_pipelined_plan_and_say_what_to_do(capsys):
    for argv in (["export", MLP, "--to", "jax-module"], ["run", MLP], ["run", TINY, "--pipeline", "auto"],
                 ["export", TINY, "--to", "jax-module", "--devices", "4"]):
        line = refused(capsys, *argv)
        assert "do not support pipelined plans" in line and "export MODEL --to jax" in line, argv


def test_other_notations_and_impossible_pipelines_are_user_errors(tmp_path, capsys):
    assert "exports to jax only, not shardy" in refused(capsys, "export", MLP, "--to", "shardy")
    assert "pipeline.stages is 3, which does not divide the 4 devices" in \
        refused(capsys, "export", model(tmp_path, "pipeline: {stages: 3}"), "--to", "jax", "--devices", "4")


_FORWARD = """
    import json, sys
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    d = json.loads(sys.stdin.read())
    p = d["pipeline"]
    devices = {dev.id: dev for dev in jax.devices()}
    rng = np.random.default_rng(0)
    params = {f"l{i}.w{k}": (rng.standard_normal((16, 32) if k == 1 else (32, 16)) / (4 if k == 1 else 5.6)
                             ).astype(np.float32) for i in range(4) for k in (1, 2)}  # unit-scale activations
    x = rng.standard_normal((8, 16)).astype(np.float32)
    want = x.astype(np.float64)
    for i in range(4):  # the single-device reference, the whole batch, in float64
        want = np.maximum(want @ params[f"l{i}.w1"], 0) @ params[f"l{i}.w2"]
    # every stage's parameters placed by its own layouts on its group's stage mesh (each dp replica's devices)
    full = np.array(d["mesh"]["device_ids"]).reshape(d["mesh"]["shape"])
    def stage_mesh(k, r):
        sm = p["stages"][k]["spmd"]["mesh"]
        ids = full[p["stages"][k]["device_group"], r].reshape(-1)[sm["device_ids"]]
        return Mesh(np.array([devices[i] for i in ids]).reshape(sm["shape"]), sm["axis_names"])
    size, m = p["microbatch_size"], p["microbatches"]
    out = np.zeros(want.shape)
    for r in range(p["data_parallel"]):
        for j in range(m):  # microbatch j of replica r, through the stages in order, sent from mesh to mesh
            rows = slice((r * m + j) * size, (r * m + j + 1) * size)
            h = x[rows]
            for k, s in enumerate(p["stages"]):
                mesh = stage_mesh(k, r)
                put = lambda v, spec: jax.device_put(v, NamedSharding(mesh, P(*[tuple(e) if isinstance(e, list)
                                                                                 else e for e in spec])))
                h = put(h, s["spmd"]["tensors"][s["receives"][0]]["partition_spec_entries"] if s["receives"]
                        else s["spmd"]["tensors"]["x"]["partition_spec_entries"])
                for layer in s["layers"]:
                    w1, w2 = (put(params[f"{layer}.w{k_}"], s["spmd"]["tensors"][f"{layer}.w{k_}"]
                                  ["partition_spec_entries"]) for k_ in (1, 2))
                    assert {dev.id for dev in w1.devices()} <= set(full[s["device_group"], r].reshape(-1).tolist())
                    h = jnp.maximum(h @ w1, 0) @ w2
            out[rows] = np.asarray(h)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())  # f32 against f64
    print("ok")
"""


def test_jax_lays_the_step_out_from_the_export_alone_and_computes_the_reference(capsys):
    pytest.importorskip("jax")
    text = json.dumps(export(capsys, MLP, "--to", "jax"))
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(_FORWARD)], input=text, capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
