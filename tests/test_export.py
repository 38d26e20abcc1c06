"""``Plan.export``: each notation, read back, puts every element on the devices the plan puts it
(device index ranges compared with :func:`planner.ir.device_index_ranges`); JAX itself checks the
``jax`` export where it is installed."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from planner.api import plan
from planner.errors import NotExpressibleError
from planner.ir import Mesh, device_index_ranges, parse_sharding
from planner.ir.axis import AxisRef
from planner.ir.sharding import TensorSharding
from planner.notations.dtensor import from_placements
from planner.notations.jax import from_partition_spec
from planner.notations.mindspore import from_tensor_layout

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.fixture(scope="module")
def ffn():
    return plan(CONFIGS / "ffn.yaml", search="bfs")  # seed 002's plan: the sub-axes "d":(1)2 and "d":(2)4 of d=8


def _ranges(sharding, shape):
    return device_index_ranges(sharding.layout_only().with_unreduced(()), shape)


def test_jax_export_splits_the_mesh_where_sub_axes_are_used(ffn):
    d = ffn.export("jax")
    assert d["mesh"]["axis_names"] == ["d_0", "d_1"] and d["mesh"]["shape"] == [2, 4]
    assert d["mesh"]["split_axes"] == {"d": ["d_0", "d_1"]}
    assert d["tensors"]["x"]["partition_spec"] == "P('d_0', None)"
    # the pending sum of dense2.matmul's result is over "d":(2)4, i.e. d_1
    assert d["ops"]["dense2.matmul"]["result"]["unreduced"] == ["d_1"]


@pytest.mark.parametrize("config", ["ffn.yaml", "megatron_mlp.yaml", "transformer_block.yaml"])
def test_jax_and_dtensor_exports_place_every_tensor_where_the_plan_does(config):
    p = plan(CONFIGS / config)
    for fmt, read in (("jax", lambda e, m, r: from_partition_spec(e["partition_spec"], m, r)),
                      ("dtensor", lambda e, m, r: from_placements(e["placements"], m, r))):
        d = p.export(fmt)
        names = d["mesh"]["axis_names"] if fmt == "jax" else d["mesh"]["dim_names"]
        mesh = Mesh.from_sizes(p.mesh.name, list(zip(names, d["mesh"]["shape"])), d["mesh"]["device_ids"])
        for name, t in p.tensors.items():
            back = read(d["tensors"][name], mesh, len(t.shape))
            assert np.array_equal(_ranges(back, t.shape), _ranges(t.sharding, t.shape)), (fmt, name)


def _from_entries(entries, mesh):
    """A sharding from ``partition_spec_entries``: null, an axis name or a list of them per dimension."""
    dims = [[] if e is None else [e] if isinstance(e, str) else list(e) for e in entries]
    return TensorSharding.build(mesh, [[AxisRef(a) for a in d] for d in dims])


def _from_objects(objects, mesh, rank):
    """A sharding from ``placement_objects``: each mesh dim's Shard / Replicate / Partial, in mesh order."""
    dims = [[] for _ in range(rank)]
    unreduced = []
    for axis, p in zip(mesh.axes, objects):
        if p["type"] == "Shard":
            dims[p["dim"]].append(AxisRef(axis.name))
        elif p["type"] == "Partial":
            assert p["reduce_op"] == "sum"
            unreduced.append(AxisRef(axis.name))
    return TensorSharding.build(mesh, dims, unreduced=unreduced)


@pytest.mark.parametrize("config", ["ffn.yaml", "megatron_mlp.yaml"])
def test_data_forms_of_the_exports_place_every_tensor_as_their_text_does(config):
    p = plan(CONFIGS / config, training=True)
    for fmt in ("jax", "dtensor"):
        d = p.export(fmt)
        names = d["mesh"]["axis_names"] if fmt == "jax" else d["mesh"]["dim_names"]
        mesh = Mesh.from_sizes(p.mesh.name, list(zip(names, d["mesh"]["shape"])), d["mesh"]["device_ids"])
        for name, t in p.tensors.items():
            e = d["tensors"][name]
            if fmt == "jax":
                text, data = from_partition_spec(e["partition_spec"], mesh, len(t.shape)), \
                    _from_entries(e["partition_spec_entries"], mesh)
            else:
                text, data = from_placements(e["placements"], mesh, len(t.shape)), \
                    _from_objects(e["placement_objects"], mesh, len(t.shape))
            assert data == text, (fmt, name)
            assert np.array_equal(_ranges(data, t.shape), _ranges(t.sharding, t.shape)), (fmt, name)


def test_shardy_export_is_the_plans_own_text(ffn):
    d = ffn.export("shardy")
    assert d["meshes"] == ['sdy.mesh @mesh = <["d"=8]>']
    for name, t in ffn.tensors.items():
        text = d["tensors"][name]["sharding"]
        assert text.startswith("#sdy.sharding<@mesh, ")
        assert parse_sharding(text[len("#sdy."):], ffn.mesh) == t.sharding.layout_only()


def test_mindspore_export_gives_each_ops_strategy_and_each_tensors_layout(ffn):
    d = ffn.export("mindspore")
    assert d["ops"]["dense1.matmul"]["strategy"] == [[2, 1], [1, 4]]  # seed 002's configured MatMul
    h4 = d["tensors"]["h4"]  # dense2.matmul's result: partial sums over "d":(2)4 before the AllReduce
    assert h4["pending_sum_over"] == ['"d":(2)4']
    for name, t in ffn.tensors.items():
        e = d["tensors"][name]
        back = from_tensor_layout(e["device_matrix"], e["tensor_map"], ffn.mesh)
        assert np.array_equal(_ranges(back, t.shape), _ranges(t.sharding, t.shape)), name


def test_a_sharding_a_notation_cannot_express_is_refused_naming_the_tensor():
    # [{"y", "x"}] splits a dimension in the order opposite to the mesh's: DTensor cannot say that
    model = """
name: order
mesh: {x: 2, y: 2}
tensors:
  a: {shape: [8, 8], sharding: '[{"y", "x"}, {}]'}
ops:
  - {name: r, op: relu, inputs: [a], output: b}
"""
    with pytest.raises(NotExpressibleError, match="tensor 'a': dimension 0"):
        plan(model).export("dtensor")


JAX_CHECK = r"""
import json, sys
import numpy as np
import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
d = json.loads(sys.stdin.read())
m = d["mesh"]
devices = np.array(jax.devices())[m["device_ids"]].reshape(m["shape"])
mesh = Mesh(devices, tuple(m["axis_names"]))
out = {}
for name, t in d["tensors"].items():
    spec = P(*(tuple(e) if isinstance(e, list) else e for e in t["partition_spec_entries"]))  # no eval
    s = NamedSharding(mesh, spec)
    idx = s.devices_indices_map(tuple(t["shape"]))
    out[name] = {dev.id: [[sl.start or 0, sl.stop if sl.stop is not None else n] for sl, n in zip(ix, t["shape"])]
                 for dev, ix in idx.items()}
print(json.dumps(out))
"""


def test_jax_places_every_tensor_as_the_plan_does():
    pytest.importorskip("jax")
    p = plan(CONFIGS / "ffn.yaml")
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    r = subprocess.run([sys.executable, "-c", JAX_CHECK], input=json.dumps(p.export("jax")), text=True,
                       capture_output=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    for name, t in p.tensors.items():
        ours = _ranges(t.sharding, t.shape)
        for dev, ranges in got[name].items():
            assert ranges == ours[int(dev)].tolist(), (name, dev)


def test_jax_export_gives_each_output_as_the_plan_delivers_it():
    p = plan(CONFIGS / "megatron_mlp.yaml")  # y leaves fc2 as a pending sum over tp and is delivered reduced
    d = p.export("jax")
    mesh = Mesh.from_sizes(p.mesh.name, list(zip(d["mesh"]["axis_names"], d["mesh"]["shape"])), d["mesh"]["device_ids"])
    assert set(d["outputs"]) == set(p.program.outputs)
    for name, delivered in p.program.outputs.items():
        assert "unreduced" not in d["outputs"][name]
        back = from_partition_spec(d["outputs"][name]["partition_spec"], mesh, len(p.tensors[name].shape))
        assert np.array_equal(_ranges(back, p.tensors[name].shape), _ranges(delivered, p.tensors[name].shape))


def test_a_pipelined_plan_exports_to_jax_only_and_names_its_stages_as_the_model_does():
    from planner.api import export_pipeline

    model = CONFIGS.parent / "tests" / "cli" / "pipeline_mlp.yaml"  # four MLP layers, pp 2 x dp 2 x tp 2
    with pytest.raises(NotExpressibleError, match="exports to jax only"):
        export_pipeline(model, "dtensor")
    d = export_pipeline(model, "jax")
    names = [n for s in d["pipeline"]["stages"] for n in s["spmd"]["ops"]]
    assert names == [f"l{i}.{op}" for i in range(4) for op in ("up", "relu", "down")]  # the model's op order
