"""The shipped presets: they load, they carry the documented figures, every number cites a source."""

from __future__ import annotations

import re

import pytest
import yaml

from costmodels.cluster import Link
from costmodels.loader import load_cluster
from costmodels.presets import PRESETS_DIR, preset_names
from planner.ir.axis import AxisRef
from planner.ir.mesh import Mesh


def test_the_documented_presets_ship():
    assert preset_names() == ("a100-node", "default", "ib-cluster", "nvlink-node")


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_loads_under_its_own_name(name):
    cluster = load_cluster(name)
    assert cluster.name == name
    assert cluster.devices_per_node == 8


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
