"""``shardplan check``: the communication-cost gate as CI runs it."""

import json
import re
import shutil
from pathlib import Path

import pytest

from costmodels.units import format_seconds
from planner.cli.main import main
from planner.gate import measure

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"
CHECKED_IN = str(CONFIGS / "baselines.json")


def pin_output_replicated(path: Path) -> None:
    """Make the FFN's output replicated: its plan must then all-gather instead of reduce-scatter."""
    text = path.read_text()
    assert "output: y}" in text
    path.write_text(text.replace("output: y}", "output: y, out_sharding: '[{}, {}]'}"))


def cells(out: str) -> list[list[str]]:
    """The printed lines split into table cells (columns are separated by two or more spaces)."""
    return [re.split(r" {2,}", line.strip()) for line in out.splitlines()]


@pytest.fixture
def repo(tmp_path, monkeypatch, capsys):
    """A user's checkout: two models and a baseline written by ``check --update``; the tests run from it."""
    (tmp_path / "models").mkdir()
    for name in ("ffn", "megatron_mlp"):
        shutil.copy(CONFIGS / f"{name}.yaml", tmp_path / "models" / f"{name}.yaml")
    monkeypatch.chdir(tmp_path)
    assert main(["check", "models/ffn.yaml", "models/megatron_mlp.yaml", "--baseline", "baselines.json", "--update",
                 "--search", "bfs"]) == 0
    capsys.readouterr()
    return tmp_path


def test_checked_in_baselines_hold_for_ffn_and_megatron(capsys):
    code = main(["check", str(CONFIGS / "ffn.yaml"), str(CONFIGS / "megatron_mlp.yaml"), "--baseline", CHECKED_IN])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[-1] == "communication-cost gate: OK (2 models)"
    assert "WORSE" not in out


def test_checked_in_baseline_holds_for_gpt2_small(capsys):  # the one test that plans gpt2_small (~2 s)
    code = main(["check", str(CONFIGS / "gpt2_small.yaml"), "--baseline", CHECKED_IN])
    out = capsys.readouterr().out
    assert code == 0, out
    rows = [c[1:] for c in cells(out) if c[0].endswith("configs/gpt2_small.yaml")]
    assert [r[0] for r in rows] == ["comm_bytes_per_device", "comm_time_s", "collectives"]
    stored = json.loads(open(CHECKED_IN).read())["models"]["gpt2_small.yaml"]["collectives"]
    total = str(sum(stored.values()))
    assert all(r[-1] == "0%" for r in rows) and rows[2] == ["collectives", total, total, "0%"]


def test_update_creates_the_baseline_with_relative_paths(repo):
    raw = json.loads((repo / "baselines.json").read_text())
    assert (raw["search"], raw["training"]) == ("bfs", False)
    assert list(raw["models"]) == ["models/ffn.yaml", "models/megatron_mlp.yaml"]
    assert raw["models"]["models/ffn.yaml"]["collectives"] == {"ReduceScatter": 1}


def test_check_plans_with_the_baselines_search_and_a_new_baseline_with_the_default(repo, capsys):
    # the fixture's baseline was measured with bfs: a check without --search uses bfs, not the default
    assert main(["check", "models/ffn.yaml", "--baseline", "baselines.json"]) == 0
    assert "search bfs," in capsys.readouterr().out.splitlines()[0]
    assert main(["check", "models/ffn.yaml", "--baseline", "new.json", "--update"]) == 0
    assert json.loads((repo / "new.json").read_text())["search"] == "auto"


def test_no_model_arguments_checks_every_model_in_the_baseline(repo, capsys):
    assert main(["check", "--baseline", "baselines.json"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ("communication-cost gate: 2 models, search bfs, baseline baselines.json, "
                                   "tolerance 0%")
    assert ["models/ffn.yaml", "comm_bytes_per_device", "6,144 B", "6,144 B", "0%"] in cells(out)
    assert out.splitlines()[-1] == "communication-cost gate: OK (2 models)"


def test_a_plan_that_communicates_more_fails_the_gate_and_prints_the_diff(repo, capsys):
    pin_output_replicated(repo / "models" / "ffn.yaml")
    assert main(["check", "--baseline", "baselines.json"]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert ["models/ffn.yaml", "comm_bytes_per_device", "6,144 B", "14,336 B", "+133.3%", "WORSE"] in cells(out)
    assert ["models/ffn.yaml", "collectives", "1", "2", "+100.0%", "WORSE"] in cells(out)
    # times in the reports' unit style: the baseline's stored seconds, and the changed model measured again
    old_s = json.loads((repo / "baselines.json").read_text())["models"]["models/ffn.yaml"]["comm_time_s"]
    new_s = measure("models/ffn.yaml")["comm_time_s"]
    change = f"{(new_s - old_s) / old_s * 100:+.1f}%"
    assert ["models/ffn.yaml", "comm_time_s", format_seconds(old_s), format_seconds(new_s), change, "WORSE"] in cells(out)
    assert ["models/megatron_mlp.yaml", "collectives", "1", "1", "0%"] in cells(out)
    assert "  models/ffn.yaml: AllGather 0 -> 2, ReduceScatter 1 -> 0" in lines
    assert "--update" in lines[-2]
    assert lines[-1] == ("communication-cost gate: FAILED: 1 of 2 models got worse than the baseline: "
                         "models/ffn.yaml")


def test_json_output_of_a_failed_gate(repo, capsys):
    pin_output_replicated(repo / "models" / "ffn.yaml")
    assert main(["check", "models/ffn.yaml", "--baseline", "baselines.json", "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "failed" and data["worse"] == ["models/ffn.yaml"]
    assert set(data) == {"schema_version", "command", "baseline", "search", "training", "tolerance", "status", "models", "rows", "collectives",
                         "worse", "better", "added", "removed"}
    assert data["rows"][0] == {"model": "models/ffn.yaml", "metric": "comm_bytes_per_device", "old": 6144,
                               "new": 14336, "change": pytest.approx(8192 / 6144), "worse": True}
    assert data["collectives"]["models/ffn.yaml"] == {"old": {"ReduceScatter": 1}, "new": {"AllGather": 2}}


def _lower_baseline(path: Path, model: str, factor: float) -> None:
    """Pretend the baseline was measured when ``model`` communicated ``factor`` times as much."""
    raw = json.loads(path.read_text())
    entry = raw["models"][model]
    entry["comm_bytes_per_device"] = int(entry["comm_bytes_per_device"] * factor)
    entry["comm_time_s"] *= factor
    path.write_text(json.dumps(raw, indent=2) + "\n")


def test_tolerance_lets_a_small_regression_pass(repo, capsys):
    _lower_baseline(repo / "baselines.json", "models/megatron_mlp.yaml", 0.97)  # now ~3.1% worse
    assert main(["check", "--baseline", "baselines.json"]) == 1
    assert "FAILED: 1 of 2 models" in capsys.readouterr().out
    assert main(["check", "--baseline", "baselines.json", "--tolerance", "0.05"]) == 0
    out = capsys.readouterr().out
    assert ["models/megatron_mlp.yaml", "comm_bytes_per_device", "762,839 B", "786,432 B", "+3.1%",
            "within tolerance"] in cells(out)
    assert out.splitlines()[-1] == "communication-cost gate: OK (2 models)"


def test_update_writes_the_new_values_and_then_the_gate_passes(repo, capsys):
    pin_output_replicated(repo / "models" / "ffn.yaml")
    assert main(["check", "--baseline", "baselines.json", "--update"]) == 0
    out = capsys.readouterr().out
    assert ["models/ffn.yaml", "comm_bytes_per_device", "6,144 B", "14,336 B", "+133.3%", "WORSE"] in cells(out)
    assert out.splitlines()[-1] == ("baseline baselines.json updated (1 changed, 0 added); models/ffn.yaml got "
                                    "worse: say why in the commit message")
    assert json.loads((repo / "baselines.json").read_text())["models"]["models/ffn.yaml"]["collectives"] == {"AllGather": 2}
    assert main(["check", "--baseline", "baselines.json"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "communication-cost gate: OK (2 models)"


def test_update_adds_a_model_and_keeps_the_others(repo, capsys):
    shutil.copy(CONFIGS / "conv_net.yaml", repo / "models" / "conv_net.yaml")
    assert main(["check", "models/conv_net.yaml", "--baseline", "baselines.json"]) == 2
    assert "models/conv_net.yaml is not in the baseline; run with --update to add it" in capsys.readouterr().err
    assert main(["check", "models/conv_net.yaml", "--baseline", "baselines.json", "--update"]) == 0
    assert ["models/conv_net.yaml", "collectives", "-", "1", "added"] in cells(capsys.readouterr().out)
    assert sorted(json.loads((repo / "baselines.json").read_text())["models"]) == [
        "models/conv_net.yaml", "models/ffn.yaml", "models/megatron_mlp.yaml"]


def test_the_baseline_is_never_written_without_update(repo, capsys):
    path = repo / "baselines.json"
    before, mtime = path.read_bytes(), path.stat().st_mtime_ns
    assert main(["check", "--baseline", "baselines.json"]) == 0
    pin_output_replicated(repo / "models" / "ffn.yaml")
    assert main(["check", "--baseline", "baselines.json"]) == 1
    assert main(["check", "--baseline", "baselines.json", "--format", "json"]) == 1
    assert path.read_bytes() == before and path.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in repo.iterdir()) == ["baselines.json", "models"]


def test_update_with_nothing_changed_leaves_the_file_alone(repo, capsys):
    path = repo / "baselines.json"
    mtime = path.stat().st_mtime_ns
    assert main(["check", "--baseline", "baselines.json", "--update"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "baseline baselines.json unchanged (2 models)"
    assert path.stat().st_mtime_ns == mtime


def test_missing_baseline_exits_2_with_the_advice(repo, capsys):
    assert main(["check", "models/ffn.yaml", "--baseline", "nope.json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("shardplan check: error: nope.json: the baseline file does not exist")
    assert "--update` to create it" in err
    assert not (repo / "nope.json").exists()


def test_invalid_baseline_exits_2_even_with_update_and_is_kept(repo, capsys):
    (repo / "baselines.json").write_text("<<<<<<< HEAD\n")
    assert main(["check", "--baseline", "baselines.json", "--update"]) == 2
    assert "baselines.json: line 1 column 1: not valid JSON" in capsys.readouterr().err
    assert (repo / "baselines.json").read_text() == "<<<<<<< HEAD\n"


def test_unknown_model_file_exits_2(repo, capsys):
    assert main(["check", "models/nope.yaml", "--baseline", "baselines.json"]) == 2
    assert "model file models/nope.yaml does not exist" in capsys.readouterr().err


def test_a_deleted_model_is_an_error_until_update_drops_it(repo, capsys):
    (repo / "models" / "megatron_mlp.yaml").unlink()
    assert main(["check", "--baseline", "baselines.json"]) == 2
    assert "lists models/megatron_mlp.yaml, which does not exist" in capsys.readouterr().err
    assert main(["check", "--baseline", "baselines.json", "--update"]) == 0
    assert "removed models/megatron_mlp.yaml from the baseline" in capsys.readouterr().out
    assert list(json.loads((repo / "baselines.json").read_text())["models"]) == ["models/ffn.yaml"]


def test_another_search_than_the_baselines_exits_2_and_says_which(repo, capsys):
    assert main(["check", "--baseline", "baselines.json", "--search", "ilp"]) == 2
    assert "the baseline was measured with --search bfs, not ilp" in capsys.readouterr().err
    assert main(["check", "--baseline", "baselines.json", "--training"]) == 2
    assert "measured without --training" in capsys.readouterr().err
    assert main(["check", "models/ffn.yaml", "--baseline", "baselines.json", "--search", "explicit", "--update"]) == 2
    assert "update every model it lists" in capsys.readouterr().err


def test_negative_tolerance_exits_2(repo, capsys):
    assert main(["check", "--baseline", "baselines.json", "--tolerance", "-0.1"]) == 2
    assert "tolerance must be a relative growth >= 0" in capsys.readouterr().err


def test_the_baseline_works_from_another_directory(repo, capsys, monkeypatch):
    monkeypatch.chdir(repo / "models")
    assert main(["check", "ffn.yaml", "--baseline", "../baselines.json"]) == 0
    out = capsys.readouterr().out
    assert ["ffn.yaml", "comm_bytes_per_device", "6,144 B", "6,144 B", "0%"] in cells(out)


def test_output_is_deterministic(repo, capsys):
    pin_output_replicated(repo / "models" / "ffn.yaml")
    outputs = []
    for _ in range(2):
        for fmt in ("table", "json"):
            assert main(["check", "--baseline", "baselines.json", "--format", fmt]) == 1
            outputs.append(capsys.readouterr().out)
    assert outputs[:2] == outputs[2:]


# -- docs/ci-gate.md stays true ---------------------------------------------------------------------------------

DOC = (ROOT / "docs" / "ci-gate.md").read_text()


def test_every_documented_command_parses():
    import shlex

    from planner.cli.main import build_parser

    commands = [line.strip() for line in DOC.splitlines()
                if line.strip().startswith("shardplan check ") and "[" not in line]  # not the synopsis
    assert len(commands) >= 8
    for command in commands:
        args = build_parser().parse_args(shlex.split(command.split(">")[0])[1:])
        assert args.command == "check", command


def test_the_documented_failure_is_the_real_output(repo, capsys):
    documented = DOC.split("all-gathers instead of reduce-scattering):\n\n```\n", 1)[1].split("```", 1)[0]
    (repo / "ci").mkdir()
    assert main(["check", "models/ffn.yaml", "models/megatron_mlp.yaml", "--baseline", "ci/comm-baseline.json",
                 "--update", "--search", "bfs"]) == 0  # the page's example is a bfs baseline
    pin_output_replicated(repo / "models" / "ffn.yaml")
    capsys.readouterr()
    assert main(["check", "--baseline", "ci/comm-baseline.json"]) == 1
    assert capsys.readouterr().out == documented


def test_the_python_example_runs(monkeypatch):
    monkeypatch.chdir(ROOT)
    for block in re.findall(r"```python\n(.*?)```", DOC, re.S):
        exec(block, {})


def test_dash_checks_the_model_on_standard_input_under_the_name_dash(repo, capsys, monkeypatch):
    """``check -`` reads the model from stdin; the baseline knows it as ``-``, with what the same model
    measures when read from its file."""
    import io
    import sys

    def stdin(path: Path):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes())))

    stdin(repo / "models" / "ffn.yaml")
    assert main(["check", "-", "--baseline", "baselines.json", "--update"]) == 0
    capsys.readouterr()
    stored = json.loads((repo / "baselines.json").read_text())["models"]
    assert stored["-"] == stored["models/ffn.yaml"] == measure(repo / "models" / "ffn.yaml", search="bfs")
    stdin(repo / "models" / "ffn.yaml")
    assert main(["check", "-", "--baseline", "baselines.json"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "communication-cost gate: OK (1 model)"
    pin_output_replicated(repo / "models" / "ffn.yaml")  # the same name, a model that communicates more
    stdin(repo / "models" / "ffn.yaml")
    assert main(["check", "-", "--baseline", "baselines.json"]) == 1
    assert capsys.readouterr().out.splitlines()[-1].endswith("1 of 1 models got worse than the baseline: -")
