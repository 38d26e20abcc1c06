"""Warnings on stderr (issue 15, point 4): said once, hidden by --quiet, never changing the exit status."""

import json
from pathlib import Path

import pytest

from costmodels.units import format_bytes
from planner.api import PlanWarning, plan
from planner.cli.main import main

CONFIGS = Path(__file__).resolve().parents[2] / "configs"

UNUSED = """\
name: loose
mesh: {x: 2}
tensors:
  a: {shape: [8, 4], kind: input}
  spare: {shape: [4], kind: param}
ops:
  - {name: act, op: relu, inputs: [a], output: h}
  - {name: side, op: neg, inputs: [a], output: s}
outputs: [h]
"""


def write(tmp_path: Path, text: str, name: str = "model.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("command", ["plan", "graph"])
def test_unused_tensors_and_dead_ops_are_warned_about_with_their_lines(tmp_path, capsys, command):
    path = write(tmp_path, UNUSED)
    assert main([command, path]) == 0  # a warning never changes the exit status
    err = capsys.readouterr().err
    # lines counted in UNUSED above: 'spare' is declared on line 5, op 'side' on line 8
    assert f"shardplan {command}: warning: tensor 'spare' ({path}:5) is declared but no op reads it" in err
    assert f"shardplan {command}: warning: op 'side' ({path}:8) computes 's', which reaches no output" in err


def test_quiet_hides_warnings_and_keeps_the_output(tmp_path, capsys):
    path = write(tmp_path, UNUSED)
    assert main(["plan", path, "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "totals:" in captured.out


def test_the_json_plan_lists_the_warnings(tmp_path, capsys):
    path = write(tmp_path, UNUSED)
    assert main(["plan", path, "--format", "json", "--quiet"]) == 0
    warnings = json.loads(capsys.readouterr().out)["warnings"]
    assert any("'spare'" in w for w in warnings) and any("'side'" in w for w in warnings)


def test_a_plan_above_the_device_memory_is_warned_about(tmp_path, capsys):
    small = """\
name: small
mesh: {x: 2}
cluster: {preset: nvlink-node, device_memory_bytes: 16}
tensors:
  a: {shape: [8, 4], kind: input}
ops:
  - {name: act, op: relu, inputs: [a], output: h}
"""
    path = write(tmp_path, small)
    with pytest.warns(PlanWarning, match="it would not fit"):
        need = plan(path, search="bfs").totals.memory_bytes_per_device
    assert need > 16  # the 8x4 f32 input alone is 128 B, 64 B per device at best on x=2
    assert main(["plan", path]) == 0
    err = capsys.readouterr().err
    assert (f"warning: the plan needs {format_bytes(need)} per device (parameters, optimizer state and live "
            f"activations) but a device of cluster 'nvlink-node' has {format_bytes(16)}") in err


def test_a_plan_that_fits_in_memory_has_no_memory_warning(capsys):
    assert main(["plan", str(CONFIGS / "megatron_mlp.yaml")]) == 0
    assert "per device (parameters" not in capsys.readouterr().err


def test_mesh_that_renames_the_models_axes_is_refused(capsys):
    assert main(["plan", str(CONFIGS / "megatron_mlp.yaml"), "--mesh", "a=2,b=4"]) == 2
    err = capsys.readouterr().err
    assert 'has no axes "dp", "tp", which the model\'s annotations use' in err
    assert "megatron_mlp.yaml:8" in err and "--mesh dp=2,tp=4" in err and "Traceback" not in err


def test_mesh_with_the_models_axis_names_keeps_them_by_name(capsys):
    assert main(["plan", str(CONFIGS / "megatron_mlp.yaml"), "--mesh", "tp=4,dp=2", "--format", "json"]) == 0
    tensors = json.loads(capsys.readouterr().out)["tensors"]
    # by name, x stays batch-sharded on "dp" and w1 column-sharded on "tp", as configs/megatron_mlp.yaml writes
    # (by position the first axis of size 2, "dp", would have become a piece of "tp")
    assert tensors["x"]["sharding"].endswith('[{"dp"}, {}]>')
    assert tensors["w1"]["sharding"].endswith('[{}, {"tp"}]>')


def test_explicit_search_says_it_ignores_a_given_strategy(tmp_path, capsys):
    path = write(tmp_path, """\
name: pinned
mesh: {x: 2}
tensors:
  a: {shape: [8, 4], kind: input, sharding: '[{"x"}, {}]'}
  w: {shape: [4, 4], kind: param}
ops:
  - {name: mm, op: matmul, inputs: [a, w], output: h, strategy: [[2, 1], [1, 1]]}
""")
    assert main(["plan", path, "--search", "explicit"]) == 0
    err = capsys.readouterr().err
    assert f"warning: --search explicit ignores the strategy given for op 'mm' ({path}:7)" in err
    assert main(["plan", path, "--search", "bfs"]) == 0
    assert "ignores" not in capsys.readouterr().err  # bfs honours it


#: Two pointwise ops in a shard_like group: only propagate reads the group.
SOFT = """\
name: soft
mesh: {x: 2}
tensors:
  a: {shape: [8, 4], kind: input, sharding: '[{"x"}, {}]'}
ops:
  - {name: act, op: relu, inputs: [a], output: h}
  - {name: act2, op: neg, inputs: [h], output: y}
shard_like: [[h, y]]
"""


def test_searches_other_than_propagate_say_they_ignore_shard_like(tmp_path, capsys):
    path = write(tmp_path, SOFT)
    assert main(["plan", path, "--search", "ilp"]) == 0
    assert "warning: --search ilp ignores the shard_like group [h, y]" in capsys.readouterr().err
    assert main(["plan", path, "--search", "propagate"]) == 0
    assert "shard_like" not in capsys.readouterr().err


def test_check_names_the_model_in_each_warning(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, UNUSED, "loose.yaml")
    assert main(["check", "loose.yaml", "--baseline", "b.json", "--update"]) == 0
    assert "shardplan check: warning: loose.yaml: tensor 'spare'" in capsys.readouterr().err


def test_compare_prints_each_searchs_warnings_on_stderr_and_quiet_hides_them(tmp_path, capsys):
    path = write(tmp_path, SOFT)
    assert main(["compare", path]) == 0
    captured = capsys.readouterr()
    assert "shardplan compare: warning: ilp: --search ilp ignores the shard_like group [h, y]" in captured.err
    assert "warning" not in captured.out  # the table is data; warnings are stderr's
    assert main(["compare", path, "--quiet"]) == 0
    assert capsys.readouterr().err == ""
