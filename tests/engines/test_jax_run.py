"""``shardplan run MODEL --engine jax``: plans run on XLA and checked against the numpy reference (issue 14).

The end-to-end runs are subprocesses (JAX must start with 8 host devices; this process may already hold JAX
with one): three in all, on the two smallest configs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from planner.api import plan
from planner.cli.main import main

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
    r = shardplan("run", "configs/ffn.yaml")
    assert r.returncode == 0, r.stderr
    for text in ("the plan's collectives:", "XLA's collectives (compiled HLO):", "XLA / plan", "verdict: ",
                 "OK: outputs match the reference"):
        assert text in r.stdout


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
