"""dump_model writes model files that load back into the same graph."""

from dataclasses import replace
from pathlib import Path

import pytest

from graphs import load_model, load_model_text
from graphs.yaml_dump import dump_model

CONFIGS = sorted((Path(__file__).parents[2] / "configs").glob("*.yaml"))


def _without_lines(g):
    """Everything a graph holds except source lines (a written file has its own)."""
    return ({k: replace(v, line=None) for k, v in g.tensors.items()}, [replace(o, line=None) for o in g.ops],
            g.outputs, dict(g.meshes), g.shard_as, g.shard_like, [replace(r, line=None) for r in g.axis_regions],
            g.cluster, g.outputs_layout)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_every_config_written_loads_back_into_the_same_graph(config):
    g = load_model(config)
    text = dump_model(g)
    again = load_model_text(text)
    assert _without_lines(again) == _without_lines(g)
    assert dump_model(again) == text  # a fixed point: writing is deterministic


def test_mesh_with_device_order_and_types_is_written_in_full():
    g = load_model_text("""
name: typed
mesh: {axes: {X: 2, Y: 2}, device_ids: [3, 2, 1, 0], axis_types: {X: Explicit}}
tensors:
  a: {shape: [4, 4], sharding: '[{"X"}, {}]'}
ops:
  - {name: r, op: relu, inputs: [a], output: b}
""")
    text = dump_model(g)
    assert "mesh: {axes: {X: 2, Y: 2}, device_ids: [3, 2, 1, 0], axis_types: {X: Explicit}}" in text
    assert dict(load_model_text(text).meshes) == dict(g.meshes)
