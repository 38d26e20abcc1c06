"""``shardplan compare``: propagate, bfs and ilp side by side, table and JSON."""

import json
from pathlib import Path

from planner.cli.main import main

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_compare_json_reports_each_search_against_the_ilp_optimum(capsys):
    assert main(["compare", str(CONFIGS / "megatron_mlp.yaml"), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [e["search"] for e in d["searches"]] == ["propagate", "bfs", "ilp"]
    by = {e["search"]: e for e in d["searches"]}
    assert set(by["bfs"]) == {"search", "objective", "step_time_s", "comm_bytes_per_device", "comm_time_s",
                              "compute_time_s", "memory_bytes_per_device", "collectives", "plan_s", "gap_to_ilp",
                              "warnings"}
    assert d["overlap"] == "async"
    # the ILP is optimal on this model, so its gap is 0 and nobody beats it
    assert d["ilp_optimum"] == by["ilp"]["objective"] and by["ilp"]["gap_to_ilp"] == 0.0
    for e in d["searches"]:
        assert e["objective"] >= d["ilp_optimum"] * (1 - 1e-12)
        assert abs(e["gap_to_ilp"] - (e["objective"] / d["ilp_optimum"] - 1)) <= 1e-12
        assert e["plan_s"] > 0


def test_compare_numbers_are_each_plans_own(capsys):
    # the propagate row is exactly what `shardplan plan --search propagate` reports
    assert main(["compare", str(CONFIGS / "ffn.yaml"), "--format", "json"]) == 0
    row = json.loads(capsys.readouterr().out)["searches"][0]
    assert main(["plan", str(CONFIGS / "ffn.yaml"), "--search", "propagate", "--format", "json"]) == 0
    totals = json.loads(capsys.readouterr().out)["totals"]
    assert row["comm_bytes_per_device"] == totals["comm_bytes_per_device"]
    assert row["objective"] == totals["objective"]
    assert row["step_time_s"] == totals["step_time_s"]


def test_compare_table_has_a_row_per_search(capsys):
    assert main(["compare", str(CONFIGS / "ffn.yaml"), "--training"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].endswith("training")
    assert [ln.split()[0] for ln in lines[3:6]] == ["propagate", "bfs", "ilp"]
    assert "step time" in lines[2]  # the scheduled step beside the objective the searches optimise


def test_compare_says_which_search_runs_in_every_stage_and_task():
    from planner.compare import COMPARED, compare
    from planner.progress import Progress

    class Recorder(Progress):
        def __init__(self):
            self.labels = []

        def stage(self, message):
            self.labels.append(message)

        def begin(self, label, total=None):
            self.labels.append(label)

    r = Recorder()
    compare(str(Path(__file__).resolve().parents[2] / "configs" / "ffn.yaml"), progress=r)
    prefixes = [f"{s} ({k + 1} of {len(COMPARED)}): " for k, s in enumerate(COMPARED)]
    heard = [next(p for p in prefixes if label.startswith(p)) for label in r.labels]  # StopIteration if unprefixed
    assert sorted(set(heard), key=heard.index) == prefixes  # each search in turn, in the order compare runs them
    assert heard == sorted(heard, key=prefixes.index)
