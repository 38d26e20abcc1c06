"""Loading clusters from presets, YAML files and inline mappings, and the errors users see."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest

import costmodels.presets
from costmodels.cluster import Cluster, Link
from costmodels.roofline import Roofline
from costmodels.loader import load_cluster
from planner.errors import ClusterError
from planner.limits import MAX_CLUSTER_NUMBER, MAX_CLUSTER_SECONDS, MAX_DEVICES_PER_NODE, MIN_CLUSTER_RATE

FULL = {
    "name": "lab",
    "device_peak_flops": "100TFLOP/s",
    "device_memory_bytes": "16GiB",
    "devices_per_node": 4,
    "intra_node": {"bandwidth_bytes_per_s": "200GB/s", "latency_s": "2us"},
    "inter_node": {"bandwidth_bytes_per_s": "100Gb/s", "latency_s": "15us"},
}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_no_spec_loads_the_default_preset():
    cluster = load_cluster()
    assert cluster.name == "default"
    assert cluster == load_cluster("default")


def test_a_cluster_is_returned_as_is():
    cluster = load_cluster("nvlink-node")
    assert load_cluster(cluster) is cluster


def test_inline_mapping_with_units():
    cluster = load_cluster(FULL)
    assert cluster == Cluster(
        "lab", 100e12, 16 * 2**30, 4, Link(200e9, 2e-6), Link(12.5e9, 15e-6)
    )


def test_inline_mapping_with_plain_numbers():
    cluster = load_cluster(
        {
            "name": "plain",
            "device_peak_flops": 1e14,
            "device_memory_bytes": 17179869184,
            "devices_per_node": 4,
            "intra_node": {"bandwidth_bytes_per_s": 2e11, "latency_s": 2.0e-6},
            "inter_node": {"bandwidth_bytes_per_s": 1.25e10, "latency_s": 1.5e-5},
        }
    )
    assert cluster == Cluster("plain", 100e12, 16 * 2**30, 4, Link(200e9, 2e-6), Link(12.5e9, 15e-6))


def test_yaml_file_relative_to_base_dir(tmp_path):
    write(
        tmp_path,
        "lab.yaml",
        """\
        device_peak_flops: 100TFLOP/s
        device_memory_bytes: 16GiB
        devices_per_node: 4
        intra_node: {bandwidth_bytes_per_s: 200GB/s, latency_s: 2us}
        inter_node: {bandwidth_bytes_per_s: 12.5e9, latency_s: 15e-6}
        axes:
          pp: {bandwidth_bytes_per_s: 1GB/s, latency_s: 50us}
        """,
    )
    cluster = load_cluster("lab.yaml", base_dir=tmp_path)
    assert cluster.name == "lab"  # the file's stem
    assert cluster.inter_node == Link(12.5e9, 15e-6)  # PyYAML reads 15e-6 as a string
    assert cluster.axis_links == (("pp", Link(1e9, 50e-6)),)
    assert load_cluster(tmp_path / "lab.yaml") == cluster


def test_preset_overrides_replace_single_values():
    cluster = load_cluster({"preset": "nvlink-node", "inter_node": {"latency_s": "20us"}, "devices_per_node": 4})
    base = load_cluster("nvlink-node")
    assert cluster.name == "nvlink-node"
    assert cluster.devices_per_node == 4
    assert cluster.inter_node == Link(base.inter_node.bandwidth_bytes_per_s, 20e-6, base.inter_node.overhead_s)
    assert cluster.intra_node == base.intra_node


def test_file_based_on_a_preset_is_named_after_the_file(tmp_path):
    write(tmp_path, "my-dgx.yaml", "preset: ib-cluster\naxes: {pp: {bandwidth_bytes_per_s: 25GB/s, latency_s: 20us}}\n")
    cluster = load_cluster("my-dgx.yaml", base_dir=tmp_path)
    assert cluster.name == "my-dgx"
    assert cluster.axis_links == (("pp", Link(25e9, 20e-6)),)
    assert cluster.device_peak_flops == load_cluster("ib-cluster").device_peak_flops


def test_inline_mapping_without_name_or_preset_is_called_custom():
    assert load_cluster({k: v for k, v in FULL.items() if k != "name"}).name == "custom"


def test_unknown_preset_lists_the_presets():
    with pytest.raises(ClusterError) as info:
        load_cluster("dgx", where="model.yaml:3")
    assert str(info.value) == (
        "model.yaml:3: unknown cluster preset 'dgx'; the presets are a100, a100-node, default, h100, h100-measured, h200, "
        "h200-measured, ib-cluster, nvlink-node, tpu-v4, tpu-v5p (or give the path of a cluster YAML file)"
    )


def test_unknown_base_preset_points_at_the_preset_line(tmp_path):
    write(tmp_path, "c.yaml", "name: c\npreset: h800\n")
    with pytest.raises(ClusterError, match=r"c.yaml:2: unknown cluster preset 'h800'; the presets are a100, a100-node"):
        load_cluster("c.yaml", base_dir=tmp_path)


def test_unknown_key_is_named_with_its_line_and_a_suggestion(tmp_path):
    path = write(
        tmp_path,
        "c.yaml",
        """\
        preset: default
        intra_node:
          bandwith_bytes_per_s: 10GB/s
        """,
    )
    with pytest.raises(ClusterError) as info:
        load_cluster(path)
    assert str(info.value) == (
        f"{path}:3: unknown key 'bandwith_bytes_per_s' in intra_node; did you mean 'bandwidth_bytes_per_s'? "
        "the keys are bandwidth_bytes_per_s, latency_s, overhead_s"
    )


def test_unknown_top_level_key_lists_the_keys():
    with pytest.raises(ClusterError, match="unknown key 'gpus'; the keys are name, preset, device_peak_flops"):
        load_cluster({"preset": "default", "gpus": 8})


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("device_peak_flops", 0, "device_peak_flops is 0; it must be a finite number > 0"),
        ("device_peak_flops", "-5TFLOP/s", "device_peak_flops is '-5TFLOP/s'; it must be a finite number > 0"),
        ("device_memory_bytes", "0GB", "device_memory_bytes is '0GB'; it must be a finite number > 0"),
        ("device_memory_bytes", 1.5, "device_memory_bytes is 1.5; it must be a whole number of bytes"),
        ("devices_per_node", 0, "devices_per_node is 0; it must be an integer >= 1"),
        ("devices_per_node", "8", "devices_per_node is '8'; it must be an integer >= 1"),
        ("devices_per_node", 2.0, "devices_per_node is 2.0; it must be an integer >= 1"),
        ("intra_node", {"bandwidth_bytes_per_s": 0}, "intra_node.bandwidth_bytes_per_s is 0; it must be a finite"),
        ("inter_node", {"latency_s": -1e-6}, "inter_node.latency_s is -1e-06; it must be a finite number >= 0"),
        ("inter_node", {"latency_s": float("inf")}, "inter_node.latency_s is inf"),
        ("intra_node", {"latency_s": "5GB/s"}, "intra_node.latency_s: '5GB/s' is not a quantity in s"),
        ("intra_node", "fast", "intra_node must be a mapping with keys bandwidth_bytes_per_s, latency_s, overhead_s; got str"),
        ("axes", ["tp"], "axes maps mesh axis names to links; got list"),
        ("name", 7, "name must be a non-empty string, got 7"),
    ],
)
def test_bad_values_say_what_to_write(key, value, message):
    with pytest.raises(ClusterError) as info:
        load_cluster({"preset": "default", key: value})
    assert message in str(info.value)


def test_zero_latency_is_allowed_for_idealised_links():
    assert load_cluster({"preset": "default", "intra_node": {"latency_s": 0}}).intra_node.latency_s == 0.0


def test_error_in_a_file_names_the_file_and_line(tmp_path):
    path = write(tmp_path, "c.yaml", "preset: default\ndevices_per_node: 8\ninter_node:\n  latency_s: -3us\n")
    with pytest.raises(ClusterError, match=r"c.yaml:4: inter_node.latency_s is '-3us'"):
        load_cluster(path, where="model.yaml:9")
    with pytest.raises(ClusterError) as info:
        load_cluster(path, where="model.yaml:9")
    assert str(info.value).startswith(f"model.yaml:9: {path}:4: ")


def test_missing_values_without_a_preset_suggest_one():
    with pytest.raises(ClusterError) as info:
        load_cluster({"name": "x", "devices_per_node": 8}, where="model.yaml:5")
    assert str(info.value) == (
        "model.yaml:5: the cluster description lacks device_peak_flops, device_memory_bytes, intra_node, "
        "inter_node; give them, or name a base preset to start from "
        "(preset: one of a100, a100-node, default, h100, h100-measured, h200, h200-measured, ib-cluster, nvlink-node, tpu-v4, tpu-v5p)"
    )


def test_link_missing_a_value_without_a_preset_is_named():
    spec = dict(FULL, intra_node={"bandwidth_bytes_per_s": "1GB/s"})
    with pytest.raises(ClusterError, match="intra_node lacks latency_s"):
        load_cluster(spec)


def test_new_axis_override_needs_both_values():
    with pytest.raises(ClusterError, match="axes.tp lacks bandwidth_bytes_per_s"):
        load_cluster({"preset": "default", "axes": {"tp": {"latency_s": "1us"}}})


def test_missing_file_is_reported(tmp_path):
    with pytest.raises(ClusterError, match="cannot read cluster file .*nope.yaml"):
        load_cluster("nope.yaml", base_dir=tmp_path)


def test_invalid_yaml_names_the_line(tmp_path):
    path = write(tmp_path, "bad.yaml", "name: x\nintra_node: {bandwidth_bytes_per_s: 1GB/s\n")
    with pytest.raises(ClusterError, match=r"bad.yaml:\d+: not valid YAML"):
        load_cluster(path)


def test_empty_file_is_not_a_cluster(tmp_path):
    path = write(tmp_path, "empty.yaml", "")
    with pytest.raises(ClusterError, match="a cluster description is a mapping .*; got nothing"):
        load_cluster(path)


def test_spec_of_another_type_is_rejected():
    with pytest.raises(ClusterError, match="not int 8"):
        load_cluster(8)


def test_presets_that_refer_to_each_other_in_a_loop_are_reported(tmp_path, monkeypatch):
    write(tmp_path, "a.yaml", "preset: b\n")
    write(tmp_path, "b.yaml", "preset: a\n")
    monkeypatch.setattr(costmodels.presets, "PRESETS_DIR", tmp_path)
    with pytest.raises(ClusterError, match="presets refer to each other in a loop: a -> b -> a"):
        load_cluster("a")


def test_overhead_is_read_and_defaults_to_zero():
    c = load_cluster({"preset": "default", "intra_node": {"bandwidth_bytes_per_s": "100GB/s", "latency_s": "1us",
                                                          "overhead_s": "2us"}})
    assert c.intra_node.overhead_s == 2e-6
    # a link given in part keeps the rest of its base preset's link, overhead included
    assert load_cluster({"preset": "default", "inter_node": {"latency_s": 0}}).inter_node.overhead_s == 2e-6
    plain = {"name": "plain", "device_peak_flops": 1e12, "device_memory_bytes": 10**9, "devices_per_node": 8,
             "intra_node": {"bandwidth_bytes_per_s": 1e9, "latency_s": 0},
             "inter_node": {"bandwidth_bytes_per_s": 1e9, "latency_s": 0}}
    assert load_cluster(plain).inter_node.overhead_s == 0.0


# -- the compute keys (costmodels.roofline) -------------------------------------------------------

COMPUTE = """\
preset: default
peak_flops_by_dtype:
  bf16: 989TFLOP/s
  f32: 494TFLOP/s
vector_flops: 67TFLOP/s
memory_bandwidth_bytes_per_s: 3.35TB/s
kernel_overhead_s: 3us
matmul_efficiency:
  - [1MFLOP, 0.05]
  - [1GFLOP, 0.40]
  - [1e12, 0.80]
"""


def test_compute_keys_are_read_with_units(tmp_path):
    roofline = load_cluster(write(tmp_path, "c.yaml", COMPUTE)).roofline
    assert roofline == Roofline({"bf16": 989e12, "f32": 494e12}, 67e12, 3.35e12, 3e-6,
                                [(1e6, 0.05), (1e9, 0.40), (1e12, 0.80)])


def test_a_cluster_without_compute_keys_or_preset_has_the_first_models_roofline():
    assert load_cluster(FULL).roofline == Roofline()


def test_inf_bandwidth_and_a_constant_efficiency_are_accepted():
    roofline = load_cluster({"preset": "default", "memory_bandwidth_bytes_per_s": "inf",
                             "matmul_efficiency": 0.5}).roofline
    assert roofline.memory_bandwidth_bytes_per_s == math.inf
    assert roofline.matmul_efficiency == ((1.0, 0.5),)
    assert load_cluster({"preset": "default", "memory_bandwidth_bytes_per_s": float("inf")}).roofline \
        .memory_bandwidth_bytes_per_s == math.inf  # YAML's .inf


def test_peak_flops_by_dtype_merges_over_the_base_preset_dtype_by_dtype():
    roofline = load_cluster({"preset": "nvlink-node", "peak_flops_by_dtype": {"f32": "67TFLOP/s"}}).roofline
    assert dict(roofline.peak_flops_by_dtype) == {"bf16": 989e12, "f16": 989e12, "f32": 67e12}
    # the rest of the preset's compute keys stay
    assert roofline.memory_bandwidth_bytes_per_s == load_cluster("nvlink-node").roofline.memory_bandwidth_bytes_per_s


# Each refusal names the file, the line of the offending key (or point) and the key.
@pytest.mark.parametrize(
    "text, line, message",
    [
        ("memory_bandwidth_bytes_per_s: 0\n", 2, "memory_bandwidth_bytes_per_s is 0; it must be a finite number > 0"),
        ("memory_bandwidth_bytes_per_s: -2TB/s\n", 2, "memory_bandwidth_bytes_per_s is '-2TB/s'"),
        ("vector_flops: 0TFLOP/s\n", 2, "vector_flops is '0TFLOP/s'; it must be a finite number > 0"),
        ("peak_flops_by_dtype:\n  f16: 1TFLOP/s\n  bf16: -1\n", 4, "peak_flops_by_dtype.bf16 is -1"),
        ("peak_flops_by_dtype:\n  fp16: 1TFLOP/s\n", 3,
         "unknown key 'fp16' in peak_flops_by_dtype; did you mean 'f16'? the keys are f32, bf16, f16"),
        ("kernel_overhead_s: -1us\n", 2, "kernel_overhead_s is '-1us'; it must be a finite number >= 0"),
        ("matmul_efficiency: 0\n", 2, "matmul_efficiency has efficiency 0; an efficiency is a fraction of the peak, in (0, 1]"),
        ("matmul_efficiency: 1.5\n", 2, "matmul_efficiency has efficiency 1.5"),
        ("matmul_efficiency:\n  - [1MFLOP, 0.1]\n  - [2MFLOP, 1.2]\n", 4,
         "matmul_efficiency: point 2 has efficiency 1.2; an efficiency is a fraction of the peak, in (0, 1]"),
        ("matmul_efficiency:\n  - [1GFLOP, 0.1]\n  - [1GFLOP, 0.2]\n", 4,
         "matmul_efficiency: point 2 has flops 1e+09, not more than the 1e+09 before it; flops must be strictly increasing"),
        ("matmul_efficiency:\n  - [1MFLOP, 0.5]\n  - [1GFLOP, 0.6]\n  - [1TFLOP, 0.4]\n", 5,
         "matmul_efficiency: point 3 has efficiency 0.4, less than the 0.6 before it; the curve is non-monotone"),
        ("matmul_efficiency:\n  - [1MFLOP, 0.5]\n  - [1GFLOP]\n", 4,
         "matmul_efficiency: point 2 is ['1GFLOP']; a point is [flops, efficiency]"),
        ("matmul_efficiency:\n  - [1MFLOP/s, 0.5]\n", 3,
         "matmul_efficiency: point 1's flops: '1MFLOP/s' is not a quantity in FLOP"),
        ("matmul_efficiency:\n  - [0, 0.5]\n", 3, "matmul_efficiency: point 1's flops is 0; it must be a finite number > 0"),
        ("matmul_efficiency:\n  - [1MFLOP, fast]\n", 3, "matmul_efficiency: point 1 is (1000000.0, 'fast')"),
        ("matmul_efficiency: []\n", 2, "matmul_efficiency is []; give a number in (0, 1] or a list of [flops, efficiency]"),
        ("matmul_efficiency: high\n", 2, "matmul_efficiency is 'high'; give a number in (0, 1]"),
    ],
)
def test_bad_compute_keys_are_refused_with_file_line_and_key(tmp_path, text, line, message):
    path = write(tmp_path, "c.yaml", "preset: default\n" + text)
    with pytest.raises(ClusterError) as info:
        load_cluster(path)
    assert str(info.value).startswith(f"{path}:{line}: "), str(info.value)
    assert message in str(info.value)


def test_yaml_1_1_integer_spellings_in_a_cluster_file(tmp_path):
    # 0x8 = 8 devices per node; 0x400000000 = 4 * 16^8 = 2^34 bytes = 16 GiB; 1_000 = 1000 bytes/s
    write(tmp_path, "hex.yaml", """\
        preset: nvlink-node
        devices_per_node: 0x8
        device_memory_bytes: 0x400000000
        intra_node: {bandwidth_bytes_per_s: 1_000}
        """)
    cluster = load_cluster(tmp_path / "hex.yaml")
    assert cluster.devices_per_node == 8 and cluster.device_memory_bytes == 16 * 2**30
    assert cluster.intra_node.bandwidth_bytes_per_s == 1000


@pytest.mark.parametrize("text, line, message", [
    # node ids are computed in int64: 10^30 overflowed; the largest mesh's device count is the bound
    (f"devices_per_node: {10**30}\n", 2, f"more than shardplan's limit of {MAX_DEVICES_PER_NODE:,}"),
    (f"devices_per_node: {MAX_DEVICES_PER_NODE + 1}\n", 2, f"write {MAX_DEVICES_PER_NODE}"),
    ("device_memory_bytes: 1e31\n", 2, "device_memory_bytes is '1e31', more than shardplan's limit of 1e+30 bytes"),
    ("device_peak_flops: 1e308\n", 2, "limit of 1e+30 FLOP/s"),
    ("matmul_efficiency:\n  - [1e31, 0.5]\n", 3, "point 1's flops is '1e31', more than"),
    # a latency of 1e12 s made HiGHS run for minutes, 1e30 s made CBC find no plan: times end at 1e6 s
    ("intra_node:\n  latency_s: 1e300\n", 3, "intra_node.latency_s is '1e300', more than shardplan's limit of 1e+06 s"),
    ("kernel_overhead_s: 2e6s\n", 2, "kernel_overhead_s is '2e6s', more than"),
    # and rates start at 1,000 per second (1e-300 bytes/s made every cost inf)
    ("inter_node:\n  bandwidth_bytes_per_s: 1e-300\n", 3, "less than shardplan's limit of 1000 bytes/s"),
    ("memory_bandwidth_bytes_per_s: 999\n", 2, "less than shardplan's limit of 1000 bytes/s"),
    ("vector_flops: 1e-310\n", 2, "less than shardplan's limit of 1000 FLOP/s"),
])
def test_cluster_numbers_are_bounded_with_file_line_and_key(tmp_path, text, line, message):
    path = write(tmp_path, "c.yaml", "preset: default\n" + text)
    with pytest.raises(ClusterError) as info:
        load_cluster(path)
    assert str(info.value).startswith(f"{path}:{line}: "), str(info.value)
    assert message in str(info.value)


def test_cluster_numbers_at_their_bounds_load(tmp_path):
    path = write(tmp_path, "c.yaml", f"""\
        preset: default
        devices_per_node: {MAX_DEVICES_PER_NODE}
        device_peak_flops: {MAX_CLUSTER_NUMBER:.0e}
        intra_node: {{bandwidth_bytes_per_s: {MIN_CLUSTER_RATE}, latency_s: {MAX_CLUSTER_SECONDS:.0e}}}
        """)
    cluster = load_cluster(path)
    assert cluster.devices_per_node == MAX_DEVICES_PER_NODE and cluster.device_peak_flops == MAX_CLUSTER_NUMBER
    assert (cluster.intra_node.bandwidth_bytes_per_s, cluster.intra_node.latency_s) == (MIN_CLUSTER_RATE,
                                                                                        MAX_CLUSTER_SECONDS)
