import json
from pathlib import Path

from planner.cli.main import main

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_plan_json_has_the_contract_keys(capsys):
    assert main(["plan", str(CONFIGS / "ffn.yaml"), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert {"model", "search", "meshes", "tensors", "ops", "redistributions", "totals"} <= set(d)
    assert set(d["tensors"]["h3"]) == {"shape", "dtype", "sharding", "source", "reason"}
    assert set(d["ops"][0]) == {"name", "op", "strategy", "operand_shardings", "result_sharding", "source",
                                "compute_time_s", "comm_time_s", "reason"}
    assert set(d["redistributions"][0]) == {"tensor", "producer", "consumer", "readers", "phase", "from", "to", "steps",
                                     "bytes_per_device", "time_s"}
    assert set(d["redistributions"][0]["steps"][0]) == {"kind", "axes", "dims", "bytes_per_device", "time_s"}
    assert set(d["totals"]) == {"comm_bytes_per_device", "comm_time_s", "compute_time_s", "memory_bytes_per_device",
                                "objective", "step_time_s", "overlap", "exposed_comm_time_s", "hidden_comm_time_s",
                                "overlap_gap", "phases", "step_overhead_s"}
    assert set(d["totals"]["phases"]) == {"forward", "backward", "gradient"}
    assert set(d["totals"]["phases"]["forward"]) == {"comm_time_s", "exposed_comm_time_s", "hidden_comm_time_s",
                                                     "compute_time_s"}
    t = d["totals"]
    assert abs(t["objective"] - (t["compute_time_s"] + t["comm_time_s"])) <= 1e-12 * max(t["objective"], 1)


def test_training_plan_json_has_gradient_syncs_and_phases(capsys):
    model = CONFIGS / "megatron_mlp.yaml"
    assert main(["plan", str(model), "--training", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert "gradient_syncs" in d
    assert all(r["phase"] in ("forward", "backward") for r in d["redistributions"])
    assert all(set(g) == {"param", "reader", "from", "to", "steps", "bytes_per_device", "time_s"}
               for g in d["gradient_syncs"])


def test_ilp_plan_reports_the_solver(capsys):
    assert main(["plan", str(CONFIGS / "ffn.yaml"), "--search", "ilp", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["solver"]) == {"name", "status", "optimal", "gap", "time_s", "variables"}
    assert d["solver"]["optimal"] is True and d["search"] == "ilp"


def test_plan_out_writes_the_file_and_csv_has_a_row_per_op(tmp_path, capsys):
    out = tmp_path / "plan.csv"
    assert main(["plan", str(CONFIGS / "ffn.yaml"), "--format", "csv", "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[0].startswith("name,op,strategy") and len(lines) == 6
    assert capsys.readouterr().out == ""


def test_same_model_gives_byte_identical_plans(capsys):
    main(["plan", str(CONFIGS / "transformer_block.yaml"), "--format", "json"])
    first = capsys.readouterr().out
    main(["plan", str(CONFIGS / "transformer_block.yaml"), "--format", "json"])
    assert capsys.readouterr().out == first


def test_explain_prints_the_chain_to_the_user_annotation(capsys):
    # breadth-first propagation's chain: each op decided from the one before, back to the annotation
    assert main(["explain", str(CONFIGS / "megatron_mlp.yaml"), "a", "--search", "bfs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == 'a: sharding<@mesh, [{"dp"}, {"tp"}]>'
    assert "op 'fc1'" in "\n".join(lines)
    assert lines[-1] == "  <- tensor 'x' laid out as [{\"dp\"}, {}]: user: annotation [{\"dp\"}, {}] on tensor 'x'"


def test_explain_unknown_tensor_exits_2(capsys):
    assert main(["explain", str(CONFIGS / "ffn.yaml"), "hh3"]) == 2
    assert "did you mean h3" in capsys.readouterr().err


def test_simulate_json_keys(capsys):
    assert main(["simulate", str(CONFIGS / "ffn.yaml"), "--format", "json", "--search", "bfs"]) == 0
    d = json.loads(capsys.readouterr().out)
    for key in ("ok", "max_abs_error", "max_rel_error", "devices", "measured_comm_bytes_per_device",
                "predicted_comm_bytes_per_device", "collectives", "time_s"):
        assert key in d
    assert d["ok"] is True and d["collectives"] == {"ReduceScatter": 1}


def test_plan_program_format(capsys):
    assert main(["plan", str(CONFIGS / "ffn.yaml"), "--format", "program", "--search", "bfs"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("// SPMD program on @mesh") and "ReduceScatter(%h4)" in out


def test_plans_are_byte_identical_across_processes():
    """Different hash seeds (set and dict orders) must not change a plan."""
    import os
    import subprocess
    import sys

    outs = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        run = subprocess.run([sys.executable, "-m", "planner", "plan", str(CONFIGS / "moe.yaml"), "--training",
                              "--format", "json"], capture_output=True, text=True, env=env)
        assert run.returncode == 0, run.stderr
        outs.add(run.stdout)
    assert len(outs) == 1


def test_ilp_json_on_stdout_is_json_whatever_the_solver_prints():
    # HiGHS 1.16 prints a banner on the process's own stdout (file descriptor 1, which capsys
    # does not see), so this runs the command in a process of its own
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "planner", "plan", str(CONFIGS / "ffn.yaml"), "--search", "ilp",
                          "--format", "json"], capture_output=True, text=True, check=True).stdout
    assert json.loads(out)["search"] == "ilp"


def test_overlap_none_reports_the_serial_sum_as_the_step(capsys):
    model = str(CONFIGS / "megatron_mlp.yaml")
    assert main(["plan", model, "--training", "--overlap", "none", "--format", "json"]) == 0
    t = json.loads(capsys.readouterr().out)["totals"]
    # serial: every collective adds its full time, so the step is the sum the objective is
    assert t["overlap"] == "none" and t["step_time_s"] == t["compute_time_s"] + t["comm_time_s"]
    assert t["hidden_comm_time_s"] == 0.0 and t["overlap_gap"] == 0.0


def test_overlap_async_is_the_default_and_the_table_shows_the_step(capsys):
    model = str(CONFIGS / "transformer_block.yaml")
    assert main(["plan", model, "--training", "--format", "json"]) == 0
    t = json.loads(capsys.readouterr().out)["totals"]
    assert t["overlap"] == "async" and t["step_time_s"] <= t["objective"]
    # the gap is what the schedule saved of the serial sum, as a share of it
    assert t["overlap_gap"] == (t["objective"] - t["step_time_s"]) / t["objective"]
    assert main(["plan", model, "--training"]) == 0
    out = capsys.readouterr().out
    assert "step time" in out and "(overlap async" in out and "per phase: forward compute" in out


def test_an_unknown_overlap_mode_exits_2_naming_the_choices(capsys):
    try:
        code = main(["plan", str(CONFIGS / "ffn.yaml"), "--overlap", "sync"])
    except SystemExit as e:
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    assert "argument --overlap: invalid choice: 'sync'" in err and "Traceback" not in err


def test_every_planning_command_takes_overlap(capsys):
    for command in ("plan", "explain", "simulate", "compare", "run", "export"):
        try:
            main([command, "--help"])
        except SystemExit:
            pass
        assert "--overlap {none,async}" in capsys.readouterr().out, command
