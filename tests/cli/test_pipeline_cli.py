"""``shardplan plan --devices N`` / ``--pipeline auto`` / a model's ``pipeline:``: a pipelined plan, and bad pipeline
requests refused with exit 2, the rule and the fix."""

import json
from pathlib import Path

import pytest

from planner.cli.main import main

TINY = Path(__file__).resolve().parents[1] / "stages" / "tiny_gpt.yaml"


def model(tmp_path, pipeline: str = "", shardings: str = "", mesh: str = "{dp: 2, tp: 2}") -> str:
    path = tmp_path / "m.yaml"
    path.write_text(f"name: m\nmesh: {mesh}\ncluster: a100\n{pipeline}\n"
                    "model: {builder: gpt, layers: 2, hidden: 32, heads: 4, seq: 8, batch: 4, vocab: 64}\n"
                    + shardings)
    return str(path)


def test_devices_plans_a_pipeline_whose_stages_cover_every_layer_once(capsys):
    assert main(["plan", str(TINY), "--devices", "4", "--format", "json"]) == 0
    p = json.loads(capsys.readouterr().out)["pipeline"]
    layers = [name for s in p["stages"] for name in s["layers"]]
    assert layers == ["embed", "layer0", "layer1", "final", "lm_head", "loss"]  # the gpt builder's layers, in order
    assert p["degree"] * p["data_parallel"] * p["stage_mesh"]["tp"] == 4
    assert p["microbatches"] * p["microbatch_size"] * p["data_parallel"] == 4  # the batch
    assert len(p["stages"]) == p["degree"] * p["virtual_stages"]


def test_a_models_pipeline_mapping_pins_what_it_names(tmp_path, capsys):
    path = model(tmp_path, "pipeline: {stages: 2, schedule: 1f1b, recompute: full, zero: 0}", mesh="{n: 4}")
    assert main(["plan", path, "--format", "json"]) == 0
    p = json.loads(capsys.readouterr().out)["pipeline"]
    assert (p["degree"], p["schedule"], p["recompute"], p["zero_stage"]) == (2, "1f1b", "full", 0)
    assert all(s["recompute"] == "full" for s in p["stages"])


def test_the_table_names_the_choices_and_the_next_best(capsys):
    assert main(["plan", str(TINY), "--pipeline", "auto"]) == 0
    out = capsys.readouterr().out
    assert "pipeline plan on 4 devices" in out and "next best per choice" in out and "MFU" in out


def test_the_same_request_gives_the_same_bytes(capsys):
    outs = []
    for _ in range(2):
        assert main(["plan", str(TINY), "--devices", "4", "--format", "json"]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1]


@pytest.mark.parametrize("pipeline,flags,message", [
    ("pipeline: {stages: 8}", ["--devices", "8"], "8 pipeline stages need at least 8 layers, but the model has 6"),
    ("pipeline: {microbatches: 3}", ["--devices", "4"], "no pipeline configuration"),
    ("pipeline: {stages: 3}", ["--devices", "4"], "pipeline.stages is 3, which does not divide the 4 devices"),
    ("", ["--devices", "4", "--format", "program"], "prints as table, json or html"),
])
def test_impossible_pipelines_exit_2_with_the_rule_and_the_fix(tmp_path, capsys, pipeline, flags, message):
    assert main(["plan", model(tmp_path, pipeline), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_pipeline_axis_named_in_a_sharding_is_refused_with_its_line(tmp_path, capsys):
    path = model(tmp_path, "pipeline: {stages: 2}", "shardings:\n  tokens: '[{\"pp\"}, {}]'\n", mesh="{pp: 2, tp: 2}")
    assert main(["plan", path]) == 2
    err = capsys.readouterr().err
    assert "sharded over 'pp', the pipeline axis" in err and "drop 'pp'" in err
