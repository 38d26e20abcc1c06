"""``shardplan plan --search propagate``: --propagation, --phases (table and JSON), explain's origins."""

import json
from pathlib import Path

from planner.cli.main import main

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
FFN = str(CONFIGS / "ffn.yaml")


def test_phases_json_has_every_tensor_after_every_phase(capsys):
    assert main(["plan", FFN, "--search", "propagate", "--phases", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert len(d["phases"]) == 5  # user-priority with one priority: five op-priority levels
    assert all(set(ph["tensors"]) >= set(d["tensors"]) for ph in d["phases"])
    # the last phase is what the plan reports for every tensor
    assert all(d["phases"][-1]["tensors"][t] == v["sharding"] for t, v in d["tensors"].items())


def test_phases_table_lists_the_phases(capsys):
    assert main(["plan", FFN, "--search", "propagate", "--propagation", "basic", "--phases"]) == 0
    out = capsys.readouterr().out
    assert "phases (every tensor's sharding after each phase):" in out
    assert "  1: basic (" in out


def test_phases_without_propagate_is_a_user_error(capsys):
    assert main(["plan", FFN, "--phases"]) == 2
    assert "use it with --search propagate" in capsys.readouterr().err


def test_explain_says_which_phase_and_op_gave_each_axis(capsys):
    assert main(["explain", FFN, "h4", "--search", "propagate"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == 'h4: sharding<@mesh, [{"d":(1)2, ?}, {?}]>'
    # dense2.matmul's rows factor comes from its operand h3, decided by dense1's strategy, at the level
    # where the matmul's pass-through factors move (level 3)
    assert out[1] == '  dimension 0: "d":(1)2 from op dense2.matmul (p0 level 3: pass-through factors of every op)'
