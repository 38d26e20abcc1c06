"""``shardplan export``: JSON on stdout or in a file, the plan options honoured, bad formats refused."""

import json
from pathlib import Path

from planner.cli.main import main

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_export_writes_the_plan_in_the_asked_notation(tmp_path, capsys):
    out = tmp_path / "ffn.jax.json"
    assert main(["export", str(CONFIGS / "ffn.yaml"), "--to", "jax", "--out", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["format"] == "jax" and d["search"] == "auto"  # the default search
    assert set(d) >= {"mesh", "tensors", "ops"}


def test_export_follows_the_search_asked_for(capsys):
    assert main(["export", str(CONFIGS / "ffn.yaml"), "--to", "shardy", "--search", "propagate"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["search"] == "propagate"
    assert d["tensors"]["h4"]["sharding"] == '#sdy.sharding<@mesh, [{"d":(1)2}, {}]>'


def test_an_unknown_notation_is_a_user_error(capsys):
    try:
        code = main(["export", str(CONFIGS / "ffn.yaml"), "--to", "onnx"])
    except SystemExit as e:
        code = e.code
    assert code == 2
    assert "invalid choice: 'onnx'" in capsys.readouterr().err
