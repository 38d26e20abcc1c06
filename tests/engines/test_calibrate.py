"""``shardplan calibrate``: the calibration's residuals and file, the command's errors, and one quick run.

The measurements here are synthetic (made from known parameters by the cost model's formulas), except the one
end-to-end run on JAX host devices: a subprocess (JAX starts with 8 host devices there) marked slow.
"""

import itertools
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from costmodels import load_cluster
from costmodels.cluster import Link
from costmodels.fit import (
    CollectiveSample,
    MatmulSample,
    RateSample,
    collective_shapes,
    collective_time_s,
    fit_matmul,
    matmul_time_s,
)
from costmodels.units import parse_quantity
from planner.cli.main import main
from planner.engines.calibrate import MATMUL, MEASURED_KINDS, Calibration, meshes

ROOT = Path(__file__).resolve().parents[2]

PEAKS = {"bf16": 2e12, "f32": 1e12}


def _efficiency(flops):
    """A monotone curve: 5% at 1 MFLOP rising linearly in log10(flops) to 100% at 1 TFLOP."""
    return min(1.0, max(0.05, 0.05 + 0.95 * (math.log10(flops) - 6) / 6))


def _matmul_samples(overhead_s):
    samples = []
    for dtype, n in itertools.product(sorted(PEAKS), (64, 128, 256, 512, 1024, 2048, 4096, 5040)):
        flops = 2 * n**3
        samples.append(MatmulSample(dtype, n, n, n, 2 if dtype == "bf16" else 4,
                                    flops / (PEAKS[dtype] * _efficiency(flops)) + overhead_s))
    return samples


def _collective_samples(link):
    out = []
    for kind, p, size in itertools.product(MEASURED_KINDS, (2, 4, 8), (4096, 2**16, 2**20, 2**24)):
        operand, result = collective_shapes(kind, size // 4, p)
        s = CollectiveSample(kind, p, operand, result, 4, 0.0)
        out.append(CollectiveSample(kind, p, operand, result, 4, collective_time_s(s, link)))
    return out


def test_meshes_give_every_axis_size():
    assert meshes(8) == ((8,), (2, 4))
    assert meshes(6) == ((6,), (2, 3))
    assert meshes(2) == ((2,),)


# -- the file -------------------------------------------------------------------------------------------------------

def _calibration(**over):
    """A Calibration whose samples are exactly what its fitted numbers predict."""
    overhead, bandwidth, vector = 2e-6, 1e9, 5e9
    mm = _matmul_samples(overhead)
    fit = fit_matmul(mm, overhead).rounded()
    link = Link(1.5e9, 3e-6, 40e-6)
    coll = _collective_samples(link)
    values = dict(jax_version="0.10.2", platform="cpu", device_kind="cpu", devices=8,
                  measured_at="2026-01-01 00:00 UTC", quick=False, only=None, device_memory_bytes=2_931_534_567,
                  memory_source="the host's memory / 8 devices", dispatch_s=2e-4, kernel_overhead_s=overhead,
                  meshes=((8,), (2, 4)),
                  matmul=tuple(MatmulSample(s.dtype, s.m, s.k, s.n, s.itemsize,
                                            matmul_time_s(s, fit, bandwidth, overhead)) for s in mm),
                  bandwidth=(RateSample("y", 2.0 * 2**25, 2.0 * 2**25 / bandwidth + overhead),),
                  vector=((RateSample("v", 2.0 * 64 * 2**18, 2.0 * 64 * 2**18 / vector + overhead), 8 * 2**18),),
                  collectives=tuple(coll), matmul_fit=fit, memory_bandwidth_bytes_per_s=bandwidth,
                  vector_flops=vector, link=link)
    values.update(over)
    return Calibration(**values)


def test_residuals_of_samples_made_from_the_fit_are_zero():
    c = _calibration()
    families = {r.family for r in c.residuals()}
    assert families == {MATMUL, "memory", "vector", *MEASURED_KINDS}
    assert max(abs(r.relative_error) for r in c.residuals()) < 1e-9


def test_the_file_has_a_fixed_layout_and_numbers_with_units():
    text = _calibration().cluster_file("host").text()
    assert text == _calibration().cluster_file("host").text()
    keys = [line.split(":")[0] for line in text.splitlines() if line and not line.startswith((" ", "#"))]
    assert keys == ["name", "device_peak_flops", "peak_flops_by_dtype", "vector_flops",
                    "memory_bandwidth_bytes_per_s", "kernel_overhead_s", "step_overhead_s", "matmul_efficiency",
                    "device_memory_bytes", "devices_per_node", "intra_node", "inter_node"]
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert "jax 0.10.2, platform cpu, device kind cpu, 8 devices" in header[1]
    raw = yaml.safe_load(text)
    assert raw["intra_node"] == raw["inter_node"] and raw["devices_per_node"] == 8
    assert raw["device_memory_bytes"] == "2932MB"  # 2,931,534,567 to 4 significant digits, whole MB
    assert parse_quantity(raw["memory_bandwidth_bytes_per_s"], "bytes/s") == pytest.approx(1e9)
    assert parse_quantity(raw["intra_node"]["overhead_s"], "s") == pytest.approx(40e-6)
    assert parse_quantity(raw["step_overhead_s"], "s") == pytest.approx(2e-4)  # the measured dispatch


def test_a_links_only_file_loads_over_its_preset(tmp_path):
    c = _calibration(only="links", matmul=(), bandwidth=(), vector=(), matmul_fit=None,
                     memory_bandwidth_bytes_per_s=None, vector_flops=None)
    path = tmp_path / "links.yaml"
    path.write_text(c.cluster_file("links", "nvlink-node").text())
    cluster = load_cluster(path)
    assert cluster.intra_node == cluster.inter_node == Link(1.5e9, 3e-6, 40e-6)
    assert cluster.devices_per_node == 8 and cluster.device_memory_bytes == 2_932_000_000
    assert cluster.device_peak_flops == load_cluster("nvlink-node").device_peak_flops


def test_the_full_file_loads(tmp_path):
    c = _calibration()
    path = tmp_path / "host.yaml"
    path.write_text(c.cluster_file("host").text())
    cluster = load_cluster(path)
    assert cluster.name == "host" and cluster.intra_node == c.link
    assert cluster.device_peak_flops == pytest.approx(max(p for _, p in c.matmul_fit.peak_flops_by_dtype))
    r = cluster.roofline  # every fitted number comes back, to the file's 4 significant digits
    assert dict(r.peak_flops_by_dtype) == pytest.approx(dict(c.matmul_fit.peak_flops_by_dtype), rel=1e-3)
    assert r.vector_flops == pytest.approx(c.vector_flops, rel=1e-3)
    assert r.memory_bandwidth_bytes_per_s == pytest.approx(c.memory_bandwidth_bytes_per_s, rel=1e-3)
    assert r.kernel_overhead_s == pytest.approx(c.kernel_overhead_s, rel=1e-3)
    assert r.step_overhead_s == pytest.approx(c.dispatch_s, rel=1e-3)
    assert [e for _, e in r.matmul_efficiency] == pytest.approx([e for _, e in c.matmul_fit.curve], rel=1e-3)


def test_a_compute_only_file_takes_the_node_from_its_preset(tmp_path):
    c = _calibration(only="compute")
    path = tmp_path / "gpu.yaml"
    text = c.cluster_file("gpu", "h100").text()
    assert "devices_per_node" not in text and "as one node" not in text
    path.write_text(text)
    cluster, h100 = load_cluster(path), load_cluster("h100")
    assert (cluster.devices_per_node, cluster.intra_node) == (h100.devices_per_node, h100.intra_node)


def test_the_report_lists_each_family_and_the_median_error():
    from planner.cli.calibrate import render

    c = _calibration()
    text = render(c, "host.yaml")
    for family in (MATMUL, "memory", "vector", *MEASURED_KINDS):
        assert f"\n{family} " in text
    # 16 matmuls, 1 bandwidth, 1 vector chain, 5 kinds x 3 group sizes x 4 message sizes
    assert len(c.residuals()) == 16 + 1 + 1 + 60
    assert text.rstrip().endswith("median |relative error| over 78 measurements: 0.0%")


# -- the command's errors (nothing measured, nothing written) ---------------------------------------------------------

def _calibrate(capsys, *argv):
    code = main(["calibrate", *argv])
    return code, capsys.readouterr().err


def test_fewer_than_one_device_is_refused(tmp_path, capsys):
    code, err = _calibrate(capsys, "--devices", "0", "--out", str(tmp_path / "c.yaml"))
    assert code == 2 and "--devices 0: give a number of devices >= 1" in err
    assert not (tmp_path / "c.yaml").exists()


def test_one_device_needs_only_compute(tmp_path, capsys):
    code, err = _calibrate(capsys, "--devices", "1", "--out", str(tmp_path / "c.yaml"))
    assert code == 2 and "collectives need >= 2 devices" in err and "--only compute" in err
    assert "Traceback" not in err and not (tmp_path / "c.yaml").exists()


def test_an_output_in_a_missing_folder_is_refused(tmp_path, capsys):
    out = tmp_path / "no-such-folder" / "c.yaml"
    code, err = _calibrate(capsys, "--out", str(out))
    assert code == 2 and f"{out}: the folder {os.path.realpath(out.parent)} does not exist" in err
    assert not out.parent.exists()


def test_an_output_that_is_a_folder_is_refused(tmp_path, capsys):
    code, err = _calibrate(capsys, "--out", str(tmp_path))
    assert code == 2 and "this is a folder" in err


def test_an_unknown_preset_is_refused(tmp_path, capsys):
    code, err = _calibrate(capsys, "--only", "compute", "--preset", "no-such", "--out", str(tmp_path / "c.yaml"))
    assert code == 2 and "no-such" in err and "nvlink-node" in err


def test_without_jax_calibrate_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "jax", None)  # what an environment without jax looks like to import
    code, err = _calibrate(capsys, "--out", str(tmp_path / "c.yaml"))
    assert code == 2 and 'pip install "shardplan[jax]"' in err and "Traceback" not in err
    assert not (tmp_path / "c.yaml").exists()


def test_more_devices_than_a_mesh_holds_is_refused_before_jax_starts(tmp_path, capsys):
    from planner.limits import MAX_MESH_DEVICES

    code, err = _calibrate(capsys, "--devices", str(MAX_MESH_DEVICES + 1), "--out", str(tmp_path / "c.yaml"))
    assert code == 2 and f"a mesh holds at most {MAX_MESH_DEVICES:,} devices" in err
    assert not (tmp_path / "c.yaml").exists()


def test_more_devices_than_jax_holds_is_refused(tmp_path, capsys):
    jax = pytest.importorskip("jax")
    n = len(jax.devices())  # this process's JAX is already initialised: its host devices cannot change
    code, err = _calibrate(capsys, "--devices", str(n + 1), "--out", str(tmp_path / "c.yaml"))
    assert code == 2 and f"--devices {n + 1} is more than the devices present: JAX sees {n}" in err
    assert "start a fresh one" in err or f"--devices {n} or fewer" in err
    assert not (tmp_path / "c.yaml").exists()


# -- one quick run on host devices ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_quick_calibration_on_host_devices_writes_a_cluster_file(tmp_path):
    pytest.importorskip("jax")
    out = tmp_path / "host.yaml"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    run = subprocess.run([sys.executable, "-m", "planner", "calibrate", "--quick", "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT, env=dict(env, JAX_PLATFORMS="cpu"), timeout=300)
    assert run.returncode == 0, run.stderr
    assert "median |relative error|" in run.stdout and "AllToAll" in run.stdout
    raw = yaml.safe_load(out.read_text())
    assert list(raw) == ["name", "device_peak_flops", "peak_flops_by_dtype", "vector_flops",
                         "memory_bandwidth_bytes_per_s", "kernel_overhead_s", "step_overhead_s", "matmul_efficiency",
                         "device_memory_bytes", "devices_per_node", "intra_node", "inter_node"]
    assert raw["name"] == "host" and raw["devices_per_node"] == 8
    assert sorted(raw["peak_flops_by_dtype"]) == ["bf16", "f32"]
    assert raw["intra_node"] == raw["inter_node"]
    flops = [parse_quantity(f[:-len("FLOP")] + "FLOP/s", "FLOP/s") for f, _ in raw["matmul_efficiency"]]
    effs = [e for _, e in raw["matmul_efficiency"]]
    assert all(a < b for a, b in zip(flops, flops[1:])) and all(a <= b for a, b in zip(effs, effs[1:]))
    assert all(0 < e <= 1 for e in effs)
    # the links part loads as the planner reads it
    links = {k: raw[k] for k in ("name", "device_memory_bytes", "devices_per_node", "intra_node", "inter_node")}
    cluster = load_cluster({**links, "preset": "default"})
    assert cluster.intra_node.bandwidth_bytes_per_s > 0
    assert out.read_text().startswith("# Measured by shardplan calibrate --quick on ")
