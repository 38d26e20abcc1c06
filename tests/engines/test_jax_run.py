"""``shardplan run MODEL --engine jax``: plans run on XLA and checked against the numpy reference (issue 14).

The end-to-end runs are subprocesses (JAX must start with 8 host devices; this process may already hold JAX
with one): five in all, on the two smallest configs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from types import SimpleNamespace

from planner.api import plan
from planner.cli.main import main
from planner.engines.jax_run import predicted_step_time_s
from planner.errors import EngineError

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"


def shardplan(*argv):
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    return subprocess.run([sys.executable, "-m", "planner", *argv], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600)


@pytest.mark.parametrize("config", ["megatron_mlp.yaml", "moe.yaml"])
def test_the_plans_collectives_are_its_programs_steps(config):
    from collections import Counter

    from planner.engines.jax_run import planned_collectives

    p = plan(CONFIGS / config, training=True)
    planned = planned_collectives(p)
    # the same collectives and bytes the plan reports (Program.collective_counts, totals)
    assert dict(sorted(Counter(c.kind for c in planned).items())) == p.program.collective_counts()
    assert sum(c.bytes_per_device for c in planned) == p.totals.comm_bytes_per_device
    for c in planned:  # groups partition the 8 devices (a permute's pairs name a source and a target)
        if c.kind != "CollectivePermute":
            assert sorted(d for g in c.replica_groups for d in g) == list(range(8))


def test_without_jax_run_says_how_to_install_it(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "jax", None)  # what an environment without jax looks like to import
    assert main(["run", str(CONFIGS / "ffn.yaml")]) == 2
    err = capsys.readouterr().err
    assert 'pip install -e ".[jax]"' in err and 'pip install "shardplan[jax]"' in err
    assert "Traceback" not in err


def test_devices_other_than_the_mesh_size_are_refused(capsys):
    pytest.importorskip("jax")
    assert main(["run", str(CONFIGS / "ffn.yaml"), "--devices", "4"]) == 2
    assert "--devices 4 does not match the plan's mesh of 8 devices" in capsys.readouterr().err


def test_jax_initialised_with_too_few_devices_is_refused():
    jax = pytest.importorskip("jax")
    from planner.engines.jax_env import ensure_devices
    from planner.errors import EngineError

    need = len(jax.devices()) + 1  # one more than this process's JAX already has
    with pytest.raises(EngineError, match="already initialised"):
        ensure_devices(need, need)


def test_ffn_forward_runs_on_xla_and_reports_both_sides_collectives():
    pytest.importorskip("jax")
    r = shardplan("run", "configs/ffn.yaml", "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["ok"] and d["outputs"]["y"]["ok"] and d["devices"] == 8
    assert {"ok", "outputs", "predicted_comm_bytes_per_device", "xla_comm_bytes_per_device",
            "xla_collectives"} <= set(d)
    # the plan's ReduceScatter of h4 over "d":(2)4 (devices 0-3 and 4-7)
    assert d["predicted_comm_bytes_per_device"] == plan(CONFIGS / "ffn.yaml").totals.comm_bytes_per_device
    assert [c["replica_groups"] for c in d["predicted_collectives"]] == [[[0, 1, 2, 3], [4, 5, 6, 7]]]
    for c in d["xla_collectives"]:
        assert set(c) >= {"kind", "replica_groups", "bytes_per_device"}
    assert d["xla_comm_bytes_per_device"] == sum(c["bytes_per_device"] for c in d["xla_collectives"])


def test_ffn_table_sets_xla_beside_the_plan():
    pytest.importorskip("jax")
    from costmodels.units import format_seconds

    r = shardplan("run", "configs/ffn.yaml", "--repeat", "3")
    assert r.returncode == 0, r.stderr
    for text in ("the plan's collectives:", "XLA's collectives (compiled HLO):", "XLA / plan", "verdict: ",
                 "OK: outputs match the reference"):
        assert text in r.stdout
    # the prediction is the plan's own figure, printed the way every report prints seconds
    predicted = format_seconds(predicted_step_time_s(plan(CONFIGS / "ffn.yaml")))
    line = next(x for x in r.stdout.splitlines() if x.startswith("step time: "))
    assert line.startswith(f"step time: predicted {predicted}, measured ") and "(median of 3), ratio " in line


def test_run_times_the_step_repeat_times_and_reports_the_median_against_the_prediction():
    pytest.importorskip("jax")
    r = shardplan("run", "configs/ffn.yaml", "--repeat", "2", "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    times = d["step_times_s"]
    assert len(times) == 2 and all(t > 0 for t in times)
    # the median of two runs is their mean
    assert d["measured_step_time_s"] == pytest.approx((times[0] + times[1]) / 2)
    # ffn's totals have no scheduled step time yet: the prediction is the report's objective
    p = plan(CONFIGS / "ffn.yaml")
    assert d["predicted_step_time_s"] == pytest.approx(predicted_step_time_s(p)) and d["predicted_step_time_s"] > 0
    assert d["prediction_ratio"] == pytest.approx(d["measured_step_time_s"] / d["predicted_step_time_s"])
    # a step is milliseconds at most on host devices; the whole command (with compiling) took longer than two steps
    assert sum(times) < d["time_s"]


def test_a_repeat_below_one_is_a_usage_error(capsys):
    assert main(["run", str(CONFIGS / "ffn.yaml"), "--repeat", "0"]) == 2
    err = capsys.readouterr().err
    assert "--repeat 0 is out of range" in err and "Traceback" not in err
    assert main(["run", str(CONFIGS / "ffn.yaml"), "--repeat", "two"]) == 2
    assert "'two' is not a number of runs" in capsys.readouterr().err


def test_run_on_jax_refuses_no_timed_run_before_starting_jax():
    from planner.engines.jax_run import run_on_jax

    p = plan(CONFIGS / "ffn.yaml")
    for kwargs in ({"repeat": 0}, {"warmup": 0}):
        with pytest.raises(EngineError, match="give both >= 1"):
            run_on_jax(p, **kwargs)


def test_the_cli_default_repeat_is_the_engines():
    from planner.cli.run import REPEAT as CLI_REPEAT
    from planner.engines.jax_run import REPEAT

    assert CLI_REPEAT == REPEAT


class _Clock:
    """A stand-in compiled step whose n-th call (from 0) takes n + 1 ticks of a fake clock."""

    def __init__(self):
        self.now = 0.0
        self.calls = []

    def perf_counter(self):
        return self.now

    def step(self, *args):
        self.calls.append(args)
        self.now += len(self.calls)
        return {"y": len(self.calls)}


def test_time_step_times_repeat_runs_after_the_warmup_each_until_ready(monkeypatch):
    from planner.engines import jax_run

    clock = _Clock()
    ready = []
    monkeypatch.setattr(jax_run.time, "perf_counter", clock.perf_counter)
    fake_jax = SimpleNamespace(block_until_ready=lambda x: ready.append(x["y"]) or x)
    times = jax_run.time_step(fake_jax, clock.step, ("a", "b"), warmup=2, repeat=3)
    # calls 1-2 are warm-ups; calls 3, 4, 5 take 3, 4, 5 ticks: only those are timed
    assert times == (3.0, 4.0, 5.0)
    assert clock.calls == [("a", "b")] * 5 and ready == [1, 2, 3, 4, 5]


def _result(step_times, predicted):
    from planner.engines.jax_run import JaxRunResult

    return JaxRunResult(ok=True, devices=8, platform="cpu", training=False, outputs={}, gradients={}, planned=(),
                        xla=(), predicted_comm_bytes_per_device=0, step_times_s=step_times,
                        predicted_step_time_s=predicted)


def test_the_measured_step_time_is_the_median_and_the_ratio_measured_over_predicted():
    r = _result((0.5, 0.1, 0.3), 0.2)
    assert r.measured_step_time_s == 0.3  # sorted: 0.1, 0.3, 0.5
    assert r.prediction_ratio == pytest.approx(0.3 / 0.2)
    d = r.to_dict()
    assert d["step_times_s"] == [0.5, 0.1, 0.3] and d["measured_step_time_s"] == 0.3
    assert d["predicted_step_time_s"] == 0.2 and d["prediction_ratio"] == pytest.approx(1.5)
    assert _result((0.1,), 0.0).prediction_ratio is None  # nothing to divide by
    assert _result((), 0.2).measured_step_time_s is None


@pytest.mark.parametrize("overlap", ["none", "async"])
def test_the_prediction_is_the_scheduled_step_time(overlap):
    p = plan(CONFIGS / "transformer_block.yaml", training=True, overlap=overlap)
    assert predicted_step_time_s(p) == p.totals.step_time_s


def test_training_runs_jax_grad_against_the_reference_gradients():
    pytest.importorskip("jax")
    p = plan(CONFIGS / "constraints.yaml", training=True)
    r = shardplan("run", "configs/constraints.yaml", "--training", "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    params = {n for n, t in p.tensors.items() if p.graph.tensor(n).kind == "param"}
    assert d["ok"] and set(d["gradients"]) == params and all(g["ok"] for g in d["gradients"].values())
    assert d["predicted_comm_bytes_per_device"] == p.totals.comm_bytes_per_device
    assert {c["phase"] for c in d["predicted_collectives"]} <= {"forward", "backward", "gradient"}


# -- legal models run as the simulator runs them -----------------------------------------------------------------

def _matmul_model(outputs: str, tensors: str = "", ops: str = "", dtype: str = "f32") -> str:
    """y = x @ w on a mesh of 2, split by rows (w's gradient is reduced over the batch)."""
    return (f"name: m\nmesh: {{x: 2}}\ntensors:\n  x: {{shape: [8, 4], kind: input, dtype: {dtype}}}\n"
            f"  w: {{shape: [4, 4], kind: param, dtype: {dtype}}}\n{tensors}"
            "ops:\n  - {name: mm, op: matmul, inputs: [x, w], output: y, strategy: [[2, 1], [1, 1]]}\n"
            f"{ops}outputs: {outputs}\n")


#: name -> (model text, extra flags, expected exit status, words of the one-line error or keys of the JSON report)
_UNEVEN = ("name: m\nmesh: {x: 2}\ntensors:\n  a: {shape: [7, 15], kind: input, sharding: '[{\"x\"}, {}]'}\n"
           "  w: {shape: [15, 15], kind: param}\nops:\n  - {name: mm, op: matmul, inputs: [a, w], output: o}\n"
           "outputs: [o]\n")

#: x[:, -1] of a sequence split over x, squeezed and projected: under propagate the slice's size-1 dimension stays
#: split over x (the first device holding the position), which no NamedSharding can say
_ONE_POSITION = ("name: m\nmesh: {x: 2}\ntensors:\n  h: {shape: [8, 4, 32], kind: param}\n"
                 "  w: {shape: [32, 16], kind: param}\nops:\n"
                 "  - {name: pick, op: slice, inputs: [h], output: s, starts: [0, 3, 0], stops: [8, 4, 32]}\n"
                 "  - {name: squeeze, op: reshape, inputs: [s], output: r, shape: [8, 32]}\n"
                 "  - {name: proj, op: matmul, inputs: [r, w], output: y}\n"
                 "shardings:\n  h: '[{}, {\"x\"}, {}]'\noutputs: [y]\n")

LEGAL_MODELS = {
    "unread_param": (_matmul_model("[y]", "  u: {shape: [4], kind: param}\n"), ["--training"], 0, ("u",)),
    "param_output": (_matmul_model("[y, w]"), ["--training"], 0, ("w",)),
    "param_output_constraints": (_matmul_model("[y, w]"), ["--training", "--lowering", "constraints"], 0, ("w",)),
    "sources_as_outputs": (_matmul_model("[y, x, c]", "  c: {shape: [4], kind: const, value: 2.0}\n"),
                           ["--lowering", "constraints"], 0, ("x", "c")),
    "unused_input_constraints": (_matmul_model("[y]", "  z: {shape: [3], kind: input}\n"),
                                 ["--training", "--lowering", "constraints"], 0, ()),
    "integer_and_bool_outputs": (_matmul_model("[y, yi, yb]", ops="  - {name: ci, op: cast, inputs: [y], output: yi, "
                                               "dtype: i32}\n  - {name: cb, op: cast, inputs: [y], output: yb, "
                                               "dtype: bool}\n"), ["--training"], 0, ("yi", "yb")),
    "no_float_output": (_matmul_model("[]"), ["--training"], 2, ("no float output to differentiate",)),
    "nan_const": (_matmul_model("[o]", "  c: {shape: [8, 4], kind: const, value: .nan}\n",
                                "  - {name: a, op: add, inputs: [y, c], output: o}\n"), [], 2,
                  ("m.yaml:6:", "values are not finite", "const 'c', which holds nan")),
    # |y| is about 1, q = 300 y, and q^2 exceeds f16's largest value, 65,504, wherever |y| > 0.86 (f64 holds it)
    "f16_overflow": (_matmul_model("[z]", "  c: {shape: [8, 4], kind: const, value: 300.0, dtype: f16}\n",
                                   "  - {name: s, op: mul, inputs: [y, c], output: q}\n"
                                   "  - {name: sq, op: mul, inputs: [q, q], output: z}\n", dtype="f16"), [], 2,
                     ("m.yaml:10:", "on XLA, the output 'z' (f16) holds inf where the float64 reference is finite")),
    # padded blocks: the shard_map holds them; NamedShardings (--lowering constraints) cannot
    "uneven": (_UNEVEN, ["--training"], 0, ("o", "w")),
    # a size-1 dimension split past its size: left to XLA under constraints (the default here: shard_map does not
    # run a slice along a split dimension), which places it as Shardy does
    "one_position": (_ONE_POSITION, ["--training", "--search", "propagate"], 0, ("y", "h", "w")),
    "uneven_constraints": (_UNEVEN, ["--lowering", "constraints"], 2,
                           ("tensor 'a'", 'dimension 0 of size 7 does not divide into the 2 shards of mesh axes "x"',
                            "a NamedSharding splits only evenly")),
}

_RUN_ALL = """
import contextlib, io, json, sys
from planner.cli.main import main
results = {}
for name, argv in json.loads(sys.argv[1]).items():
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    results[name] = [status, out.getvalue(), err.getvalue()]
print(json.dumps(results))
"""


@pytest.mark.slow
def test_legal_models_run_or_are_refused_in_one_line(tmp_path):
    """One JAX process (8 host devices) runs every case: an unread parameter's gradient is zero, a parameter listed
    as an output gets its seeded cotangent, inputs and constants listed as outputs are their values, integer and
    bool outputs take no cotangent; values that are not finite (in the reference, or only in XLA's f16) and uneven
    layouts are user errors (exit 2), never a KeyError or a mismatch (exit 3)."""
    pytest.importorskip("jax")
    argvs = {}
    for name, (text, flags, _, _) in LEGAL_MODELS.items():
        (tmp_path / name).mkdir()
        model = tmp_path / name / "m.yaml"
        model.write_text(text)
        argvs[name] = ["run", str(model), "--repeat", "1", "--format", "json", "--quiet", *flags]
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", _RUN_ALL, json.dumps(argvs)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.splitlines()[-1])
    for name, (_, flags, status, words) in LEGAL_MODELS.items():
        got, out, err = results[name]
        assert got == status, (name, err)
        assert "Traceback" not in err, (name, err)
        if status == 2:
            assert out == "" and len(err.splitlines()) == 1, (name, err)
            assert all(w in err for w in words), (name, err)
            continue
        d = json.loads(out)
        assert d["ok"] and all(o["ok"] for o in d["outputs"].values()), (name, d)
        assert set(words) <= set(d["outputs"]) | set(d.get("gradients", {})), (name, d)
        if "--training" in flags:
            assert all(g["ok"] for g in d["gradients"].values()), (name, d)
    assert results["unread_param"][1] and json.loads(results["unread_param"][1])["gradients"]["u"]["max_abs_error"] == 0
    one = json.loads(results["one_position"][1])
    assert one["lowering"] == "constraints" and "pick result (s)" in one["unconstrained"]
    # the position all-reduced over x by XLA as by the plan: its f32[8, 1, 32] block, 2 * 1/2 * 1024 B
    assert one["by_kind"]["AllReduce"]["xla_bytes_per_device"] >= 1024


_GROUPED_DOT = ("name: grouped\nmesh: {a: 2, b: 2, c: 2}\ntensors:\n  x: {shape: [8, 16], dtype: f32}\n"
                "  w: {shape: [16, 8], dtype: f32, kind: param}\n"
                "ops:\n  - {name: mm, op: matmul, inputs: [x, w], output: y}\n"
                "shardings:\n  x: '[{\"a\"}, {}]'\n  w: '[{}, {\"a\"}]'\n")


@pytest.mark.slow
def test_a_dot_grouping_the_devices_runs_the_plans_moves_under_constraints(tmp_path):
    """Under propagate the dot's weight goes through the device groups of the result's ``a`` (a CollectivePermute
    onto b and c, then an AllGather there), as XLA's dot partitioner moves it. The constraints lowering pins the
    operand's layout, which XLA would reach by its general route (an AllGather over a alone); constrained first to
    the layout the permute makes, XLA moves the plan's collectives, forward and transposed, kind by kind."""
    pytest.importorskip("jax")
    model = tmp_path / "grouped.yaml"
    model.write_text(_GROUPED_DOT)
    from planner.partitioning.program import Redistribute

    p = plan(model, search="propagate", training=True)
    [move] = [i for i in p.program.instructions if isinstance(i, Redistribute) and i.phase == "forward"]
    assert move.tensor == "w" and [s.kind for s in move.steps] == ["CollectivePermute", "AllGather"] and move.regroup
    r = shardplan("run", str(model), "--search", "propagate", "--training", "--lowering", "constraints",
                  "--repeat", "1", "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["ok"] and all(g["ok"] for g in d["gradients"].values())
    assert d["by_kind"]["CollectivePermute"]["predicted_count"] > 0
    for kind, k in d["by_kind"].items():
        assert (k["xla_count"], k["xla_bytes_per_device"]) == (k["predicted_count"], k["predicted_bytes_per_device"]), \
            (kind, d["verdict"])
