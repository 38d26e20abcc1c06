"""The model's ``pipeline:`` mapping: every key optional and auto, pins read and written back, bad values
refused with their line."""

import pytest

from graphs.pipeline_spec import AUTO, PipelineSpec, read_pipeline
from graphs.yaml_dump import dump_model
from graphs.yaml_format import load_model_text
from planner.errors import ModelError

MODEL = """name: pp
mesh: {{pp: 2, tp: 2}}
{pipeline}
model: {{builder: gpt, layers: 4, hidden: 64, heads: 4, seq: 16, batch: 8, vocab: 97}}
"""


def test_a_model_without_pipeline_has_none_and_an_empty_mapping_is_all_auto():
    assert load_model_text(MODEL.format(pipeline="")).pipeline is None
    spec = load_model_text(MODEL.format(pipeline="pipeline: {}")).pipeline
    assert spec == PipelineSpec() and spec.pinned() == {}
    assert all(v == AUTO for k, v in spec.to_dict().items())


def test_pins_are_read_and_survive_a_dump_and_reload():
    text = MODEL.format(pipeline="pipeline: {axis: pp, stages: 2, microbatches: 8, schedule: interleaved, "
                                 "virtual_stages: 2, recompute: selective, zero: 3}")
    g = load_model_text(text)
    assert g.pipeline.pinned() == {"axis": "pp", "stages": 2, "microbatches": 8, "schedule": "interleaved",
                                   "virtual_stages": 2, "recompute": "selective", "zero": 3}
    assert load_model_text(dump_model(g)).pipeline == g.pipeline


@pytest.mark.parametrize("mapping,match,line", [
    ("pipeline: {stage: 2}", "unknown key 'stage'; did you mean stages", 3),
    ("pipeline: {schedule: 1f2b}", "gpipe, 1f1b, interleaved or auto.*did you mean 1f1b", 3),
    ("pipeline: {zero: 4}", "0, 1, 2 or 3", 3),
    ("pipeline: {zero: true}", "0, 1, 2 or 3", 3),
    ("pipeline: {microbatches: 0}", "whole number from 1", 3),
    ("pipeline: {stages: 2.5}", "whole number from 1", 3),
    ("pipeline: {virtual_stages: 2, schedule: 1f1b}", "needs `schedule: interleaved`", 3),
    ("pipeline:\n  recompute: some", "none, selective, full", 4),
    ("pipeline: [2]", "must be a mapping", 3),
])
def test_bad_pipeline_values_name_the_key_and_line(mapping, match, line):
    with pytest.raises(ModelError, match=match) as e:
        load_model_text(MODEL.format(pipeline=mapping), source="m.yaml")
    assert e.value.where == f"m.yaml:{line}"


def test_read_pipeline_accepts_auto_for_every_key():
    spec = read_pipeline({k: "auto" for k in ("axis", "stages", "microbatches", "schedule", "virtual_stages",
                                               "recompute", "zero")})
    assert spec == PipelineSpec()
