"""costmodels/writer.py: the numbers a cluster file is written with read back, and the file loads."""

import pytest

from costmodels import load_cluster
from costmodels.cluster import Link
from costmodels.fit import significant
from costmodels.units import parse_quantity
from costmodels.writer import ClusterFile, format_number
from planner.errors import CostModelError


@pytest.mark.parametrize("value,unit,base", [(13.75e9, "FLOP/s", "FLOP/s"), (1.234e-6, "s", "s"),
                                             (987.6e6, "B/s", "bytes/s"), (3.2e-10, "s", "s"), (0.0, "s", "s")])
def test_numbers_read_back_to_four_significant_digits(value, unit, base):
    assert parse_quantity(format_number(value, unit), base) == pytest.approx(significant(value), rel=1e-12)


def test_a_file_without_a_preset_loads_back_as_written(tmp_path):
    f = ClusterFile("lab", 4, 1_234_567_890, header=("hand-made",), device_peak_flops=12.34e9,
                    link=Link(5.678e9, 1.5e-6, 20e-6))
    path = tmp_path / "lab.yaml"
    path.write_text(f.text())
    cluster = load_cluster(path)
    assert cluster.device_memory_bytes == 1_235_000_000  # 4 significant digits, whole MB
    assert cluster.device_peak_flops == pytest.approx(12.34e9)
    assert cluster.intra_node == cluster.inter_node
    assert cluster.intra_node.bandwidth_bytes_per_s == pytest.approx(5.678e9)
    assert cluster.intra_node.overhead_s == pytest.approx(20e-6)
    assert path.read_text().startswith("# hand-made\nname: lab\n")


def test_a_file_needs_a_peak_and_a_link_or_a_preset():
    with pytest.raises(CostModelError, match="needs device_peak_flops and a link"):
        ClusterFile("lab", 4, 10**9, link=Link(1e9, 0.0))
    assert "preset: default" in ClusterFile("lab", 4, 10**9, preset="default").text()
