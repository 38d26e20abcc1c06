"""``--search explicit`` plans (seed 001's typed mode) are real plans: strategies, costs, a program that simulates.

Bytes expected here are derived from the ring collectives, per device, for a tensor whose
block on one device is ``block`` bytes, over a mesh axis of ``p`` devices:

* AllGather: each device receives the other ``p - 1`` blocks: ``(p - 1) * block``, i.e.
  ``(p - 1) / p`` of the gathered tensor;
* AllReduce (ring: reduce-scatter then all-gather): ``2 * (p - 1) / p * block``.
"""

import glob
import os
import re

import pytest
import yaml

from costmodels.units import format_bytes

from graphs import load_model, load_model_text
from planner.api import load, plan
from planner.cli.main import main
from planner.errors import PlanningError, RuleError
from planner.model.explicit_types import explicit_shardings
from planner.simulation.run import simulate

from .conftest import BANDWIDTH_BOUND

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "configs")
ADVICE = "Pass an explicit out_sharding to op {!r} to choose how its result is sharded"

# relu computes on a's rows (sharded over x, 4 devices); out_sharding asks for h replicated.
GATHERED_OUT = """
name: gathered
mesh: {x: 4}
tensors:
  a: {shape: [64, 64], kind: input, sharding: '[{"x"}, {}]'}
ops:
  - {name: act, op: relu, inputs: [a], output: h, out_sharding: '[{}, {}]'}
  - {name: act2, op: exp, inputs: [h], output: y}
"""


def contracting(read_after: bool, both_sides: bool = True) -> str:
    """a[8@x,16@y] @ w[16@y,4] with out_sharding f32[8@x,4]: the contracting factor is sharded over y on both
    sides (JAX asks for that out_sharding), so mm computes a pending sum, reduced by an AllReduce (JAX's psum).
    With ``both_sides=False`` w is replicated: JAX types h f32[8@x,4] without an out_sharding, and mm still
    sums over y (w is read sliced, which moves nothing)."""
    relu = "  - {name: r, op: relu, inputs: [h], output: y}\n" if read_after else ""
    w = ", sharding: '[{\"y\"}, {}]'" if both_sides else ""
    out = ", out_sharding: '[{\"x\"}, {}]'" if both_sides else ""
    return f"""
name: contracting
mesh: {{x: 2, y: 4}}
tensors:
  a: {{shape: [8, 16], kind: input, sharding: '[{{"x"}}, {{"y"}}]'}}
  w: {{shape: [16, 4], kind: param{w}}}
ops:
  - {{name: mm, op: matmul, inputs: [a, w], output: h{out}}}
{relu}"""


def data_parallel(cluster: str = BANDWIDTH_BOUND) -> str:
    """A batch-sharded matmul reading a replicated weight."""
    return f"""
name: dp
mesh: {{x: 4}}
cluster: {cluster}
tensors:
  a: {{shape: [64, 64], kind: input, sharding: '[{{"x"}}, {{}}]'}}
  w: {{shape: [64, 64], kind: param}}
ops:
  - {{name: mm, op: matmul, inputs: [a, w], output: h}}
"""


SEED001_ADD = """
name: seed001
mesh: {X: 2, Y: 4}
tensors:
  a: {shape: [4, 4], dtype: i32, kind: input, sharding: '[{"X"}, {}]'}
  b: {shape: [4, 4], dtype: i32, kind: input, sharding: '[{}, {"X"}]'}
ops:
  - {name: add, op: add, inputs: [a, b], output: c}
"""
SEED001_ERROR = "add operation with inputs: i32[4@X,4], i32[4,4@X] produces an illegally sharded result: i32[4@X,4@X]"


def write(tmp_path, text: str, name: str = "model.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def steps(p):
    """(tensor, phase, [step kinds], bytes per device) of every redistribution that moves data."""
    return [(r.tensor, r.phase, [s.kind for s in r.steps], r.bytes_per_device) for r in p.redistributions
            if r.bytes_per_device]


def assert_simulates_exactly(p):
    r = simulate(p)
    assert r.ok, (r.outputs, r.gradients)
    for phase in r.phases.values():
        assert phase["measured_comm_bytes_per_device"] == phase["predicted_comm_bytes_per_device"]
    return r


def assert_every_tensor_has_its_type(p, graph):
    types = explicit_shardings(graph)
    for name, t in p.tensors.items():
        assert t.sharding == types.sharding(name).layout_only(), (name, str(t.sharding), types.type_text(name))


# -- out_sharding: the redistribution it forces is in the plan, priced, and simulated ---------------

def test_out_sharding_that_differs_from_the_computed_result_reports_the_all_gather_it_forces():
    p = plan(GATHERED_OUT, search="explicit")
    full = 64 * 64 * 4  # f32
    gathered = (4 - 1) * full // 4  # AllGather over x (p = 4): (p - 1) / p of the tensor = 12,288 B
    assert p.op("act").result_sharding.dims_text() == '[{"x"}, {}]'  # relu computes on a's rows as they are
    assert steps(p) == [("h", "forward", ["AllGather"], gathered)]
    assert p.totals.comm_bytes_per_device == gathered > 0
    assert p.totals.comm_time_s > 0
    assert p.tensors["h"].sharding.dims_text() == "[{}, {}]"  # h's type is its out_sharding
    r = assert_simulates_exactly(p)
    assert r.measured_comm_bytes_per_device == gathered and r.collectives == {"AllGather": 1}


def test_out_sharding_costs_what_bfs_pays_on_the_same_model():
    assert plan(GATHERED_OUT, search="explicit").totals.comm_bytes_per_device == \
        plan(GATHERED_OUT, search="bfs").totals.comm_bytes_per_device == 12288


def test_out_sharding_on_a_graph_output_is_delivered_and_measured():
    text = GATHERED_OUT.replace("  - {name: act2, op: exp, inputs: [h], output: y}\n", "")
    p = plan(text, search="explicit")
    assert str(p.program.outputs["h"].dims_text()) == "[{}, {}]"
    assert steps(p) == [("h", "forward", ["AllGather"], 3 * 64 * 64 * 4 // 4)]
    assert_simulates_exactly(p)


def test_seed001_out_sharding_escape_hatch_moves_the_disagreeing_operand_and_simulates():
    p = plan(SEED001_ADD.replace("output: c}", "output: c, out_sharding: '[{\"X\"}, {}]'}"), search="explicit")
    assert p.op("add").operand_shardings[1].dims_text() == '[{"X"}, {}]'
    (move,) = steps(p)
    assert move[:3] == ("b", "forward", ["AllToAll"]) and move[3] > 0
    assert p.tensors["b"].sharding.dims_text() == '[{}, {"X"}]'  # b still lives in its type
    assert_simulates_exactly(p)


# -- a sharded contracting factor: the AllReduce explicit mode inserts --------------------------------

@pytest.mark.parametrize("read_after", [True, False], ids=["read-by-an-op", "graph-output"])
def test_sharded_contracting_factor_is_all_reduced_in_the_plan_and_simulates(read_after):
    p = plan(contracting(read_after), search="explicit")
    block = (8 // 2) * 4 * 4  # h's block on one device: rows split over x (2), f32
    assert p.op("mm").result_sharding.unreduced  # the op computes a pending sum over y ...
    # ... which is reduced in place, as JAX's psum, never reduce-scattered: h's type is f32[8@x,4]
    assert steps(p) == [("h", "forward", ["AllReduce"], 2 * (4 - 1) * block // 4)]
    assert str(p.redistributions[0].steps[0].axes[0]) == '"y"'
    assert p.tensors["h"].sharding.dims_text() == '[{"x"}, {}]' and not p.tensors["h"].sharding.unreduced
    r = assert_simulates_exactly(p)
    assert r.collectives == {"AllReduce": 1} and r.measured_comm_bytes_per_device == 96


def test_replicated_outputs_layout_is_still_honoured():
    p = plan(contracting(False, both_sides=False), search="explicit", outputs_layout="replicated")
    assert p.program.outputs["h"].dims_text() == "[{}, {}]"
    assert [k for _, _, k, _ in steps(p)] == [["AllReduce", "AllGather"]]
    assert_simulates_exactly(p)


def megatron(out_sharding: str = "out_sharding: '[{\"dp\"}, {}]'") -> str:
    """configs/megatron_mlp.yaml written explicitly: fc2's out_sharding types its all-reduced result (JAX
    refuses the row-parallel matmul without one: its contracting dimension is sharded on both sides)."""
    with open(os.path.join(CONFIGS, "megatron_mlp.yaml")) as f:
        text = f.read()
    return text.replace("output: y}", f"output: y, {out_sharding}}}")


def test_megatron_config_needs_an_out_sharding_on_its_row_parallel_matmul():
    with pytest.raises(RuleError, match="shards its contracting dimension over tp in both inputs"):
        plan(os.path.join(CONFIGS, "megatron_mlp.yaml"), search="explicit")


def test_megatron_row_parallel_output_is_all_reduced_to_its_type():
    p = plan(megatron(), search="explicit")
    block = (512 // 2) * 1024 * 4  # y's block: rows over dp (2), f32
    assert steps(p) == [("y", "forward", ["AllReduce"], 2 * (4 - 1) * block // 4)]  # over tp (4)
    assert_simulates_exactly(p)


# -- --cluster ------------------------------------------------------------------------------------

def test_cluster_changes_the_reported_time_not_the_bytes():
    fast = yaml.safe_load(BANDWIDTH_BOUND)
    slow = dict(fast, intra_node=dict(fast["intra_node"], bandwidth_bytes_per_s=10e9),
                inter_node=dict(fast["inter_node"], bandwidth_bytes_per_s=10e9))
    a = plan(GATHERED_OUT, search="explicit", cluster=fast)
    b = plan(GATHERED_OUT, search="explicit", cluster=slow)
    moved = a.totals.comm_bytes_per_device
    assert moved == b.totals.comm_bytes_per_device == 12288
    # same latencies: the slower links cost exactly the bytes over the lost bandwidth
    assert b.totals.comm_time_s - a.totals.comm_time_s == pytest.approx(moved * (1 / 10e9 - 1 / 100e9), rel=1e-6)


def test_cli_cluster_file_changes_the_reported_time(tmp_path, capsys):
    import json

    model = write(tmp_path, GATHERED_OUT)
    fast = yaml.safe_load(BANDWIDTH_BOUND)
    slow = dict(fast, intra_node=dict(fast["intra_node"], bandwidth_bytes_per_s=1e9),
                inter_node=dict(fast["inter_node"], bandwidth_bytes_per_s=1e9))
    times = []
    for name, cluster in (("fast.yaml", fast), ("slow.yaml", slow)):
        path = write(tmp_path, yaml.safe_dump(cluster), name)
        assert main(["plan", model, "--search", "explicit", "--cluster", path, "--format", "json"]) == 0
        totals = json.loads(capsys.readouterr().out)["totals"]
        assert totals["comm_bytes_per_device"] == 12288
        times.append(totals["comm_time_s"])
    assert times[1] > times[0]


# -- --training -----------------------------------------------------------------------------------

def test_training_reduces_the_gradient_of_a_replicated_weight_read_by_a_batch_sharded_matmul():
    p = plan(data_parallel(), search="explicit", training=True)
    assert p.training
    (sync,) = p.gradient_syncs
    assert sync.tensor == "w" and [s.kind for s in sync.steps] == ["AllReduce"]
    assert sync.bytes_per_device == 2 * (4 - 1) * (64 * 64 * 4) // 4  # the whole f32 gradient, over x (4)
    assert p.totals.comm_bytes_per_device == sync.bytes_per_device
    r = assert_simulates_exactly(p)  # forward and backward: the gradient's AllReduce really runs
    assert r.training and all(g["ok"] for g in r.gradients.values()) and set(r.gradients) == {"w"}
    assert r.phases["forward"]["measured_comm_bytes_per_device"] == 0
    assert r.phases["gradient"]["measured_comm_bytes_per_device"] == sync.bytes_per_device
    assert r.phases["gradient"]["collectives"] == {"AllReduce": 1}


def test_without_training_there_is_no_gradient_to_reduce():
    p = plan(data_parallel(), search="explicit")
    assert not p.training and p.gradient_syncs == () and p.totals.comm_bytes_per_device == 0


def test_training_gives_megatron_its_backward_all_reduce():
    text = f"""
name: mlp
mesh: {{y: 4}}
cluster: {BANDWIDTH_BOUND}
tensors:
  x: {{shape: [16, 32], kind: input}}
  w0: {{shape: [32, 32], kind: param}}
  w1: {{shape: [32, 64], kind: param, sharding: '[{{}}, {{"y"}}]'}}
  w2: {{shape: [64, 32], kind: param, sharding: '[{{"y"}}, {{}}]'}}
ops:
  - {{name: mm0, op: matmul, inputs: [x, w0], output: h0}}
  - {{name: mm1, op: matmul, inputs: [h0, w1], output: h1}}
  - {{name: mm2, op: matmul, inputs: [h1, w2], output: y, out_sharding: '[{{}}, {{}}]'}}
"""
    block = 16 * 32 * 4  # h0 and y: f32, replicated
    all_reduce = 2 * (4 - 1) * block // 4
    p = plan(text, search="explicit", training=True)
    # forward: the row-parallel matmul's psum; backward: h0's gradient, a pending sum over y from the
    # column-parallel matmul (Megatron's f operator). w0 is read replicated by a replicated op: no sync.
    assert sorted(steps(p)) == [("h0", "backward", ["AllReduce"], all_reduce),
                                ("y", "forward", ["AllReduce"], all_reduce)]
    assert p.totals.comm_bytes_per_device == 2 * all_reduce
    inference = plan(text, search="explicit")
    assert steps(inference) == [("y", "forward", ["AllReduce"], all_reduce)]
    assert_simulates_exactly(p)


def test_training_megatron_config_reduces_its_tensor_parallel_weights_over_the_batch_axis():
    p = plan(megatron(), search="explicit", training=True)
    block = 1024 * 4096 // 4 * 4  # each weight's f32 block: 4096 split over tp (4)
    syncs = sorted((g.tensor, [s.kind for s in g.steps], [str(a) for s in g.steps for a in s.axes], g.bytes_per_device)
                   for g in p.gradient_syncs)
    # x is batch-sharded over dp (2): each device holds a partial weight gradient, summed over dp
    assert syncs == [(w, ["AllReduce"], ['"dp"'], 2 * (2 - 1) * block // 2) for w in ("w1", "w2")]


# -- --memory-budget --------------------------------------------------------------------------------

def test_memory_budget_the_explicit_plan_fits_in_gives_the_same_plan():
    free = plan(data_parallel(), search="explicit", training=True)
    needed = free.totals.memory_bytes_per_device
    assert needed > 0
    p = plan(data_parallel(), search="explicit", training=True, memory_budget=needed)
    assert p.table() == free.table() and p.totals == free.totals


def test_memory_budget_below_what_the_explicit_plan_needs_is_refused_naming_the_budget():
    needed = plan(data_parallel(), search="explicit", training=True).totals.memory_bytes_per_device
    budget = needed // 2
    with pytest.raises(PlanningError) as err:
        plan(data_parallel(), search="explicit", training=True, memory_budget=budget)
    assert f"memory budget of {format_bytes(budget)}" in str(err.value)
    assert f"needs {format_bytes(needed)} per device" in str(err.value)
    assert "--search ilp" not in str(err.value)  # nothing to search: the types decide the plan


def test_cli_memory_budget_below_the_explicit_plan_exits_2_without_a_traceback(tmp_path, capsys):
    model = write(tmp_path, GATHERED_OUT)
    assert main(["plan", model, "--search", "explicit", "--memory-budget", "1000"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("shardplan plan: error: the explicit plan needs ")
    assert f"memory budget of {format_bytes(1000)}" in err and "Traceback" not in err


# -- --mesh -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("mesh", ["x=2,y=2", "a=4"])
def test_another_mesh_is_refused_saying_explicit_types_live_on_the_models_mesh(mesh):
    with pytest.raises(PlanningError) as err:
        plan(GATHERED_OUT, search="explicit", mesh=mesh)
    assert "explicit mode types tensors on the model's mesh @mesh" in str(err.value)
    assert "cannot be used with --search explicit" in str(err.value)


def test_the_models_own_mesh_may_be_named():
    assert plan(GATHERED_OUT, search="explicit", mesh="x=4").totals.comm_bytes_per_device == 12288


def test_cli_another_mesh_exits_2_saying_why(tmp_path, capsys):
    model = write(tmp_path, GATHERED_OUT)
    assert main(["plan", model, "--search", "explicit", "--mesh", "x=2,y=2"]) == 2
    err = capsys.readouterr().err
    assert "explicit mode types tensors on the model's mesh @mesh (x=4)" in err
    assert "--mesh x=2,y=2 cannot be used with --search explicit" in err and "Traceback" not in err
    assert main(["simulate", model, "--search", "explicit", "--mesh", "x=2,y=2"]) == 2


# -- seed 001's errors --------------------------------------------------------------------------------

def test_seed001_error_surfaces_unchanged_through_plan():
    with pytest.raises(RuleError) as err:
        plan(SEED001_ADD, search="explicit")
    assert err.value.message == f"{SEED001_ERROR}. {ADVICE.format('add')}"
    assert str(err.value) == f"<string>:8: {err.value.message}"  # located on the op's line


def test_cli_seed001_error_exits_2_with_the_out_sharding_advice(tmp_path, capsys):
    model = write(tmp_path, SEED001_ADD)
    for command in ("plan", "simulate"):
        assert main([command, model, "--search", "explicit"]) == 2
        err = capsys.readouterr().err
        assert f"model.yaml:8: {SEED001_ERROR}. {ADVICE.format('add')}" in err
        assert err.startswith(f"shardplan {command}: error: ") and "Traceback" not in err


def test_shard_as_group_whose_types_differ_is_refused_naming_the_types():
    text = """
name: two
mesh: {x: 2}
tensors:
  a: {shape: [64, 64], kind: input, sharding: '[{"x"}, {}]'}
  b: {shape: [64, 64], kind: input, sharding: '[{}, {"x"}]'}
ops:
  - {name: fa, op: relu, inputs: [a], output: ra}
  - {name: fb, op: relu, inputs: [b], output: rb}
outputs: [ra, rb]
shard_as: [[ra, rb]]
"""
    with pytest.raises(PlanningError, match=r"shard_as group \[ra, rb\] cannot hold in explicit mode: the types are "
                                            r"ra f32\[64@x,64\], rb f32\[64,64@x\]"):
        plan(text, search="explicit")
    same = text.replace("output: rb}", "output: rb, out_sharding: '[{\"x\"}, {}]'}")
    assert_simulates_exactly(plan(same, search="explicit"))


PENDING_ADD = """
name: pending_add
mesh: {x: 2, y: 4}
tensors:
  a: {shape: [8, 16], kind: input, sharding: '[{"x"}, {"y"}]'}
  w: {shape: [16, 8], kind: param, sharding: '[{"y"}, {}]'}
  v: {shape: [16, 8], kind: param, sharding: '[{"y"}, {}]'}
ops:
  - {name: left, op: matmul, inputs: [a, w], output: c, out_sharding: '[{"x"}, {}], unreduced={"y"}'}
  - {name: right, op: matmul, inputs: [a, v], output: d, out_sharding: '[{"x"}, {}], unreduced={"y"}'}
  - {name: both, op: add, inputs: [c, d], output: e}
  - {name: turn, op: transpose, inputs: [e], output: t, perm: [1, 0]}
  - {name: done, op: sharding_constraint, inputs: [t], output: r, out_sharding: '[{}, {"x"}]'}
outputs: [r]
"""


@pytest.mark.parametrize("training", [False, True])
def test_a_sum_pending_through_linear_ops_is_typed_pending_and_its_plan_runs_exactly(training):
    # JAX types c + d, both pending over y, as pending over y, and its transpose too (the linear ops' unreduced
    # rules); every tensor is stored reduced, so the plan all-reduces c and d before the add: two AllReduces of
    # an f32[4, 8] block over y (p = 4), 2 (p - 1) / p * 128 B = 192 B each
    graph = load_model_text(PENDING_ADD)
    types = explicit_shardings(graph)
    assert types.type_text("e") == "f32[8@x,8]{unreduced:y}"
    assert types.type_text("t") == "f32[8,8@x]{unreduced:y}"
    assert types.type_text("r") == "f32[8,8@x]"
    p = plan(PENDING_ADD, search="explicit", training=training)
    assert [(t, kinds, b) for t, phase, kinds, b in steps(p) if phase == "forward"] == \
        [("c", ["AllReduce"], 192), ("d", ["AllReduce"], 192)]
    assert_simulates_exactly(p)


# -- every config ---------------------------------------------------------------------------------------

# Seed 001's consensus decides these configs; the others need an out_sharding somewhere.
EXPLICIT_ACCEPTS = {"constraints.yaml", "conv_net.yaml", "ffn.yaml", "moe.yaml"}
EXPLICIT_REFUSES = {  # config -> the op whose result the consensus cannot decide (the first, as JAX raises there)
    "embedding_head.yaml": "embed",  # a lookup in a vocabulary-sharded table (JAX's gather rule)
    "megatron_mlp.yaml": "fc2",
    "gpt2_small.yaml": "embed.lookup",  # a lookup by batch-sharded tokens (JAX's gather rule)
    "transformer_block.yaml": "layer0.attn.o_proj",
}
# Manual regions (issue 13): explicit mode refuses them, naming the regions (test below).
EXPLICIT_REFUSES_REGIONS = {"dp_training_step.yaml", "manual_free_axis.yaml", "megatron_by_hand.yaml",
                            "ring_matmul.yaml"}
ALL_CONFIGS = sorted(os.path.basename(f) for f in glob.glob(os.path.join(CONFIGS, "*.yaml")))


def test_every_config_is_either_accepted_or_refused_by_explicit_mode():
    assert set(ALL_CONFIGS) == EXPLICIT_ACCEPTS | set(EXPLICIT_REFUSES) | EXPLICIT_REFUSES_REGIONS
    assert not EXPLICIT_ACCEPTS & set(EXPLICIT_REFUSES)


@pytest.mark.parametrize("config", sorted(EXPLICIT_ACCEPTS))
def test_config_explicit_mode_accepts_simulates_with_measured_equal_to_predicted_bytes(config):
    path = os.path.join(CONFIGS, config)
    p = plan(path, search="explicit")
    r = assert_simulates_exactly(p)
    assert r.predicted_comm_bytes_per_device == p.totals.comm_bytes_per_device
    assert_every_tensor_has_its_type(p, load(path))


@pytest.mark.parametrize("config", sorted(EXPLICIT_REFUSES))
def test_config_explicit_mode_refuses_fails_with_the_seed001_rule_error(config):
    with pytest.raises(RuleError) as err:
        plan(os.path.join(CONFIGS, config), search="explicit")
    assert str(err.value).endswith(ADVICE.format(EXPLICIT_REFUSES[config]))


# -- every tensor's type --------------------------------------------------------------------------------

def _type_rows(out: str) -> dict[str, tuple[str, str]]:
    """The CLI table's tensor section: name -> (type, sharding)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"tensor\s+type\s+sharding\s+source$", line))
    rows = {}
    for line in lines[start + 1:]:
        if not line.strip():
            break
        name, typ, sharding, _source = re.split(r"\s{2,}", line.strip())
        rows[name] = (typ, sharding)
    return rows


MIXED = """
name: mixed
mesh: {x: 2, y: 4}
tensors:
  a: {shape: [8, 16], kind: input, sharding: '[{"x"}, {"y"}]'}
  w: {shape: [16, 4], kind: param, sharding: '[{"y"}, {}]'}
  c: {shape: [4, 4], kind: input}
ops:
  - {name: mm, op: matmul, inputs: [a, w], output: h, out_sharding: '[{"x"}, {}]'}
  - {name: r, op: relu, inputs: [h], output: g, out_sharding: '[{}, {}]'}
  - {name: cat, op: concat, inputs: [g, c], output: z, axis: 0, out_sharding: '[{}, {"y"}]'}
"""


@pytest.mark.parametrize("model", ["mixed", "megatron", "conv_net.yaml"])
def test_cli_explicit_table_lists_every_tensors_type(model, tmp_path, capsys):
    texts = {"mixed": MIXED, "megatron": megatron()}
    path = write(tmp_path, texts[model]) if model in texts else os.path.join(CONFIGS, model)
    assert main(["plan", path, "--search", "explicit"]) == 0
    rows = _type_rows(capsys.readouterr().out)
    graph = load(path)
    types = explicit_shardings(graph)
    read_or_made = {name for name, t in graph.tensors.items() if t.kind == "activation" or graph.consumers(name)}
    assert set(rows) == read_or_made
    for name, (typ, sharding) in rows.items():
        assert typ == types.type_text(name), name
        assert sharding == types.sharding(name).layout_only().dims_text(), name


def test_pending_sums_and_out_shardings_are_reported_as_their_types_and_still_simulate():
    p = plan(MIXED, search="explicit")
    assert_every_tensor_has_its_type(p, load_model_text(MIXED))
    # what the ops compute stays in the op table: mm a pending sum over y, r the rows over x
    assert p.op("mm").result_sharding.unreduced and p.op("r").result_sharding.dims_text() == '[{"x"}, {}]'
    # h's block is [4, 4] f32 (64 B): AllReduce over y (4); g's block is [4, 4]: AllGather over x (2);
    # z is computed replicated and sliced to its out_sharding (no bytes)
    assert steps(p) == [("h", "forward", ["AllReduce"], 2 * (4 - 1) * 64 // 4),
                        ("g", "forward", ["AllGather"], (2 - 1) * 64)]
    assert_simulates_exactly(p)


def test_an_unannotated_input_lives_replicated_even_when_its_reader_computes_in_another_layout():
    # The operands disagree, so the concat computes in its out_sharding's layout and reads c sliced.
    p = plan("""
name: cat3
mesh: {X: 2}
tensors:
  a: {shape: [4, 4], sharding: '[{"X"}, {}]'}
  b: {shape: [4, 4], sharding: '[{}, {"X"}]'}
  c: {shape: [4, 4]}
ops:
  - {name: cat, op: concat, inputs: [a, b, c], output: d, axis: 0, out_sharding: '[{}, {"X"}]'}
""", search="explicit")
    assert p.op("cat").operand_shardings[2].dims_text() == '[{}, {"X"}]'
    assert p.tensors["c"].sharding.dims_text() == "[{}, {}]"  # its type: every device holds all of c
    assert [(r.tensor, [s.kind for s in r.steps], r.bytes_per_device) for r in p.redistributions] == [
        ("a", ["AllToAll"], (2 - 1) * 32 // 2), ("c", ["Slice"], 0)]  # a's block [2, 4] f32 is 32 B
    assert "explicit mode: stored as its type f32[4,4]" in p.tensors["c"].reason
    assert_simulates_exactly(p)


@pytest.mark.parametrize("config", sorted(EXPLICIT_REFUSES_REGIONS))
def test_explicit_mode_types_region_boundaries_and_refuses_an_unannotated_input_the_region_shards(config):
    """Explicit mode types every axis: each region config reads an input or parameter that has no annotation
    (so its type is replicated) with an in-sharding that shards it on a manual axis; only an explicit reshard
    moves an Explicit axis, so the plan is refused naming the region and the seed-001 rule."""
    graph = load_model(os.path.join(CONFIGS, config))
    names = "|".join(r.name for r in graph.manual_regions)
    with pytest.raises(PlanningError, match=rf"region '({names})': the in-sharding .* disagrees with its type "
                                            r".*only an explicit reshard moves an Explicit axis"):
        plan(graph, search="explicit")


# -- auto_axes regions (seed 001's own escape hatch) ----------------------------------------------------

SEED001_AUTO_AXES = """
name: seed001_auto_axes
mesh: {axes: {X: 2, Y: 4}, axis_types: {X: Explicit, Y: Explicit}}
tensors:
  x: {shape: [4, 4], dtype: i32, sharding: '[{"X"}, {}]'}
  y: {shape: [4, 4], dtype: i32, sharding: '[{}, {"X"}]'}
ops:
  - {name: add, op: add, inputs: [x, y], output: z}
  - {name: neg, op: neg, inputs: [z], output: w}
outputs: [w]
auto_axes:
  - {name: g, axes: [X, Y], ops: [add], out_shardings: {z: '[{"X"}, {}]'}}
"""


def test_seed001_auto_axes_region_is_honoured_by_explicit_mode():
    # the seed: x + y is i32[4@X,4@X] in explicit mode (an error); inside auto_axes it is computed as the
    # compiler likes and comes back typed by out_shardings P("X", None): i32[4@X,4]
    without = SEED001_AUTO_AXES[:SEED001_AUTO_AXES.index("auto_axes:")]
    with pytest.raises(RuleError, match=re.escape("produces an illegally sharded result: i32[4@X,4@X]")):
        plan(without, search="explicit")
    p = plan(SEED001_AUTO_AXES, search="explicit")
    assert p.tensors["z"].sharding.dims_text() == '[{"X"}, {}]'
    assert p.tensors["w"].sharding.dims_text() == '[{"X"}, {}]'
    assert_simulates_exactly(p)


# -- ops JAX types over a sharded dimension -------------------------------------------------------------

@pytest.mark.parametrize("op", [
    "{name: o, op: softmax, inputs: [a], output: r, axis: 1}",
    "{name: o, op: layernorm, inputs: [a, g, g], output: r}",
    "{name: o, op: concat, inputs: [a, a], output: r, axis: 1}",
    "{name: o, op: slice, inputs: [a], output: r, starts: [0, 2], stops: [4, 6]}",
    "{name: o, op: max, inputs: [a], output: r, axes: [1]}",
    "{name: o, op: reshape, inputs: [a], output: r, shape: [32]}",
], ids=["softmax", "layernorm", "concat", "slice", "max", "reshape-merge"])
def test_ops_over_a_sharded_dimension_plan_their_jax_types_and_simulate(op):
    # a is f32[4@Y,8@X]: each op's result lives in the type JAX gives it (test_explicit_vs_jax.py), computed
    # by a strategy of its rule (a dimension the rule needs whole is computed whole and sliced to its type)
    text = f"""
name: t
mesh: {{X: 2, Y: 4}}
tensors:
  a: {{shape: [4, 8], sharding: '[{{"Y"}}, {{"X"}}]'}}
  g: {{shape: [8]}}
ops:
  - {op}
"""
    p = plan(text, search="explicit")
    graph = load_model_text(text)
    assert p.tensors["r"].sharding.dims_text() == explicit_shardings(graph).sharding("r").dims_text()
    assert_every_tensor_has_its_type(p, graph)
    assert_simulates_exactly(p)


def test_pending_sum_kept_by_out_sharding_is_reduce_scattered_into_the_constraint_that_reads_it():
    # fc2's out_sharding keeps its sum over y pending (JAX's unreduced); the constraint reads it into rows over
    # y, as JAX's reshard: one ReduceScatter, each device receiving (p - 1) of the p blocks of its [2, 16]
    # f32 result block: (4 - 1) * 2 * 16 * 4 = 384 B
    text = """
name: unreduced
mesh: {x: 2, y: 4}
tensors:
  g: {shape: [8, 32], sharding: '[{}, {"y"}]'}
  w2: {shape: [32, 16], kind: param, sharding: '[{"y"}, {}]'}
ops:
  - {name: fc2, op: matmul, inputs: [g, w2], output: y, out_sharding: '[{}, {}], unreduced={"y"}'}
  - {name: red, op: sharding_constraint, inputs: [y], output: r, out_sharding: '[{"y"}, {}]'}
  - {name: act, op: relu, inputs: [r], output: z}
"""
    p = plan(text, search="explicit")
    assert p.tensors["y"].sharding.unreduced and p.tensors["r"].sharding.dims_text() == '[{"y"}, {}]'
    assert steps(p) == [("y", "forward", ["ReduceScatter"], (4 - 1) * 2 * 16 * 4)]
    assert_simulates_exactly(p)
