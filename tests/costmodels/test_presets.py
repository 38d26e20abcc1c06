"""The shipped presets: they load, they carry the documented figures, every number cites a source."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest
import yaml

from costmodels.cluster import Link
from costmodels.loader import load_cluster
from costmodels.presets import PRESETS_DIR, preset_names
from planner.ir.axis import AxisRef
from planner.ir.mesh import Mesh


def test_the_documented_presets_ship():
    assert preset_names() == ("a100", "a100-node", "default", "h100", "h100-measured", "h200", "h200-measured",
                              "ib-cluster", "nvlink-node", "tpu-v4", "tpu-v5p")


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_a_measured_preset_keeps_its_base_node_and_memory(gpu):
    # with --only compute, memory and node size come from the base preset, not from JAX's allocator limit
    measured, base = load_cluster(f"{gpu}-measured"), load_cluster(gpu)
    assert (measured.device_memory_bytes, measured.devices_per_node) == (base.device_memory_bytes,
                                                                        base.devices_per_node)
    assert (measured.intra_node, measured.inter_node) == (base.intra_node, base.inter_node)
    assert measured.roofline != base.roofline


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_loads_under_its_own_name(name):
    cluster = load_cluster(name)
    assert cluster.name == name
    # GPU presets are 8-GPU nodes; a TPU preset's "node" is its ICI domain (a pod slice)
    assert cluster.devices_per_node == (8 if not name.startswith("tpu") else {"tpu-v4": 4096, "tpu-v5p": 6144}[name])


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_has_every_compute_key(name):
    roofline = load_cluster(name).roofline
    assert roofline.vector_flops is not None
    assert math.isfinite(roofline.memory_bandwidth_bytes_per_s)
    assert roofline.kernel_overhead_s > 0
    assert len(roofline.matmul_efficiency) > 1


@pytest.mark.parametrize("name", preset_names())
def test_no_preset_curve_makes_a_larger_matmul_faster_than_a_smaller_one(name):
    # time(f) = f / (peak * efficiency(f)) must not decrease: check on a fine grid of FLOPs
    roofline = load_cluster(name).roofline
    flops = [10 ** (k / 20) for k in range(100, 300)]
    times = [f / roofline.efficiency(f) for f in flops]
    assert all(b >= a for a, b in zip(times, times[1:]))


def test_the_gpu_names_are_the_node_presets():
    assert load_cluster("h100") == dataclasses.replace(load_cluster("nvlink-node"), name="h100")
    assert load_cluster("a100") == dataclasses.replace(load_cluster("a100-node"), name="a100")


def test_compute_figures_from_the_datasheets():
    h100, h200, a100 = load_cluster("nvlink-node"), load_cluster("h200"), load_cluster("a100-node")
    assert dict(h100.roofline.peak_flops_by_dtype) == {"bf16": 989e12, "f16": 989e12, "f32": 494e12}
    assert h100.roofline.memory_bandwidth_bytes_per_s == 3.35e12
    assert h200.roofline.peak_flops_by_dtype == h100.roofline.peak_flops_by_dtype  # the same compute
    assert h200.roofline.memory_bandwidth_bytes_per_s == 4.8e12 and h200.device_memory_bytes == 141 * 10**9
    assert a100.roofline.memory_bandwidth_bytes_per_s == 2039e9
    assert dict(a100.roofline.peak_flops_by_dtype)["f32"] == 156e12  # TF32 dense
    v4, v5p = load_cluster("tpu-v4"), load_cluster("tpu-v5p")
    assert (v4.device_peak_flops, v4.roofline.memory_bandwidth_bytes_per_s, v4.device_memory_bytes) == \
        (275e12, 1200e9, 32 * 2**30)
    assert (v5p.device_peak_flops, v5p.roofline.memory_bandwidth_bytes_per_s, v5p.device_memory_bytes) == \
        (459e12, 2765e9, 95 * 2**30)
    assert v5p.intra_node.bandwidth_bytes_per_s == 600e9  # 1200 GB/s bidirectional ICI per chip


@pytest.mark.parametrize("name", preset_names())
def test_every_number_in_a_preset_has_a_comment(name):
    text = (PRESETS_DIR / f"{name}.yaml").read_text()
    for line in text.splitlines():
        body = line.split("#", 1)[0]
        if re.search(r":\s*\d", body):
            assert "#" in line, f"{name}.yaml: a number without a comment citing its source: {line!r}"
    assert yaml.safe_load(text)  # valid YAML


def test_default_is_one_uniform_generic_network():
    cluster = load_cluster("default")
    assert cluster.intra_node == cluster.inter_node == Link(100e9, 5e-6, 2e-6)
    assert cluster.device_peak_flops == 100e12
    assert cluster.device_memory_bytes == 80 * 2**30


def test_nvlink_node_has_h100_sxm_figures():
    cluster = load_cluster("nvlink-node")
    assert cluster.device_peak_flops == 989e12
    assert cluster.device_memory_bytes == 80 * 10**9
    assert cluster.intra_node.bandwidth_bytes_per_s == 450e9
    assert 1e-6 <= cluster.intra_node.latency_s < 1e-5


def test_ib_cluster_has_ndr_between_nodes_and_nvlink_inside():
    cluster = load_cluster("ib-cluster")
    assert cluster.inter_node.bandwidth_bytes_per_s == 50e9  # 400 Gb/s NDR per GPU
    assert cluster.inter_node.latency_s > cluster.intra_node.latency_s
    assert cluster.intra_node == load_cluster("nvlink-node").intra_node


def test_outer_axis_of_a_four_by_eight_mesh_on_ib_cluster_is_inter_node():
    cluster = load_cluster("ib-cluster")
    mesh = Mesh.from_sizes("mesh", {"dp": 4, "tp": 8})
    assert cluster.link_for(mesh, [AxisRef("dp")]) == cluster.inter_node
    assert cluster.link_for(mesh, [AxisRef("tp")]) == cluster.intra_node


def test_a100_node_is_slower_than_the_h100_node():
    a100, h100 = load_cluster("a100-node"), load_cluster("nvlink-node")
    assert a100.device_peak_flops == 312e12
    assert a100.intra_node.bandwidth_bytes_per_s == 300e9
    assert a100.inter_node.bandwidth_bytes_per_s == 25e9
    assert a100.device_peak_flops < h100.device_peak_flops
