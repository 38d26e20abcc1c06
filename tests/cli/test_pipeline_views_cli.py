"""``shardplan plan --devices N --format html`` (the pipelined plan's page) and ``shardplan explain --devices N`` (why
each knob took its value), table and JSON; bad requests exit 2 with the rule and the fix."""

import json
from pathlib import Path

import pytest

from planner.cli.main import main
from planner.stages.search import KNOBS
from tests.views.pictures import by_class, inline_svgs

TINY = Path(__file__).resolve().parents[1] / "stages" / "tiny_gpt.yaml"


def model(tmp_path, pipeline: str, mesh: str = "{n: 4}") -> str:
    path = tmp_path / "m.yaml"
    path.write_text(f"name: m\nmesh: {mesh}\ncluster: a100\n{pipeline}\n"
                    "model: {builder: gpt, layers: 2, hidden: 32, heads: 4, seq: 8, batch: 4, vocab: 64}\n")
    return str(path)


def test_html_is_written_to_out_with_the_timeline_of_the_plans_schedule(tmp_path, capsys):
    path = model(tmp_path, "pipeline: {stages: 2, microbatches: 4, schedule: 1f1b}")
    out = tmp_path / "page.html"
    assert main(["plan", path, "--format", "html", "--out", str(out)]) == 0
    assert capsys.readouterr().out == ""
    page = out.read_text(encoding="utf-8")
    timeline = inline_svgs(page)["timeline"]
    # 2 stages x 4 microbatches, a forward and a backward each, on 2 rows
    assert len(by_class(timeline, "g", "box")) == 2 * 2 * 4
    assert [r.get("data-group") for r in by_class(timeline, "g", "row")] == ["0", "1"]
    assert main(["plan", path, "--format", "json"]) == 0
    p = json.loads(capsys.readouterr().out)["pipeline"]
    assert f"bubble <b>{p['bubble_fraction']:.1%}</b>" in page
    assert page.count("<tr>") == 1 + len(p["stages"])  # the stage table


@pytest.mark.parametrize("flags", [["--devices", "4"], ["--pipeline", "auto"]])
def test_html_of_a_searched_pipeline_prints_the_same_bytes_each_time(flags, capsys):
    pages = []
    for _ in range(2):
        assert main(["plan", str(TINY), *flags, "--format", "html"]) == 0
        pages.append(capsys.readouterr().out)
    assert pages[0] == pages[1] and pages[0].startswith("<!DOCTYPE html>") and "svg" in pages[0]


def test_explain_json_gives_each_knob_its_chosen_value_and_alternatives(tmp_path, capsys):
    assert main(["plan", str(TINY), "--devices", "4", "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)["pipeline"]
    assert main(["explain", str(TINY), "--devices", "4", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["command"] == "explain" and data["step_time_s"] == plan["step_time_s"]
    chosen = {c["knob"]: c["chosen"] for c in data["choices"]}
    assert list(chosen) == list(KNOBS)
    assert (chosen["pp"], chosen["microbatches"], chosen["recompute"], chosen["zero"]) == \
        (str(plan["degree"]), str(plan["microbatches"]), plan["recompute"], str(plan["zero_stage"]))
    # the plan's next best per knob is explain's "slower" alternative, at the same step time
    for nb in plan["next_best"]:
        (slower,) = [a for c in data["choices"] if c["knob"] == nb["knob"] for a in c["alternatives"]
                     if a["outcome"] == "slower"]
        assert (slower["value"], slower["step_time_s"]) == (nb["value"], nb["step_time_s"])
    for c in data["choices"]:
        for a in c["alternatives"]:
            assert a["value"] != c["chosen"]
            if a["outcome"] == "no_faster":
                assert a["step_time_bound_s"] >= data["step_time_s"]


def test_explain_table_says_why_each_knob_and_names_a_pinned_one(tmp_path, capsys):
    path = model(tmp_path, "pipeline: {stages: 2, recompute: full}")
    assert main(["explain", path]) == 0
    out = capsys.readouterr().out
    assert "why each choice" in out and "why not" in out
    for knob in KNOBS:
        assert f"\n{knob} " in out
    assert "pinned by pipeline.stages" in out and "pinned by pipeline.recompute" in out


@pytest.mark.parametrize("argv,message", [
    (["explain", str(TINY), "tokens", "--devices", "4"], "drop 'tokens'"),
    (["explain", str(TINY)], "explain needs a TENSOR"),
    (["plan", str(TINY), "--devices", "4", "--format", "csv"], "prints as table, json or html"),
    (["explain", str(TINY), "--devices", "0"], "--devices must be from 1"),
])
def test_bad_requests_exit_2_with_the_rule_and_the_fix(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_explain_of_an_impossible_pipeline_exits_2_with_the_rule(tmp_path, capsys):
    assert main(["explain", model(tmp_path, "pipeline: {stages: 3}"), "--devices", "4"]) == 2
    err = capsys.readouterr().err
    assert "pipeline.stages is 3, which does not divide the 4 devices" in err and "Traceback" not in err
