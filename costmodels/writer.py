"""Writing a cluster file (the format of ``docs/clusters.md``) from numbers in base units.

:class:`ClusterFile` holds what a file says; :meth:`ClusterFile.text` writes it the same way every time:
a header comment, then the keys in a fixed order (those left out are not written), each number with
four significant digits and its unit, so that :func:`costmodels.load_cluster` reads it back and a
person reads it at a glance.

>>> from costmodels.cluster import Link
>>> print(ClusterFile("lab", 8, 80 * 10**9, header=("measured by hand",), device_peak_flops=989.4e12,
...                   link=Link(450e9, 3e-6, 2e-6)).text(), end="")
# measured by hand
name: lab
device_peak_flops: 989.4TFLOP/s
device_memory_bytes: 80GB
devices_per_node: 8
intra_node:
  bandwidth_bytes_per_s: 450GB/s
  latency_s: 3us
  overhead_s: 2us
inter_node:
  bandwidth_bytes_per_s: 450GB/s
  latency_s: 3us
  overhead_s: 2us
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodels.cluster import Link
from planner.errors import CostModelError

__all__ = ["ClusterFile", "format_number"]

_DECIMAL = (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))
_TIME = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9))


def format_number(value: float, unit: str, digits: int = 4) -> str:
    """``value`` (in the base unit) with ``digits`` significant digits and a prefixed ``unit``:
    ``FLOP/s``, ``FLOP``, ``B/s`` or ``s``.

    >>> format_number(13.75e9, "FLOP/s"), format_number(2.5e-7, "s"), format_number(1048576, "FLOP")
    ('13.75GFLOP/s', '250ns', '1.049MFLOP')
    >>> format_number(0.0, "s"), format_number(512.0, "B/s")
    ('0s', '512B/s')
    """
    if unit == "s":
        for name, size in _TIME:
            if value == 0 or abs(value) >= size or name == "ns":
                return f"{value / size:.{digits}g}{name}"
    for prefix, size in _DECIMAL:
        if abs(value) >= size:
            return f"{value / size:.{digits}g}{prefix}{unit}"
    return f"{value:.{digits}g}{unit}"


def _memory(count: int, digits: int = 4) -> str:
    """A whole number of bytes to ``digits`` significant digits, written so that it reads back whole:
    an integer of GB or MB, else of bytes (the loader refuses a fraction of a byte, and ``2.931GB`` is
    not exact in floats).

    >>> _memory(2_931_534_567), _memory(80 * 10**9), _memory(12_345), _memory(1_234_567)
    ('2932MB', '80GB', '12350', '1235000')
    """
    dropped = max(0, len(str(count)) - digits)
    step = 10**dropped
    kept = (count + step // 2) // step * step
    for prefix, size in (("G", 10**9), ("M", 10**6)):
        if kept % size == 0:
            return f"{kept // size}{prefix}B"
    return str(kept)


@dataclass(frozen=True, slots=True)
class ClusterFile:
    """A cluster file's contents in base units; ``None`` or empty leaves a key out.

    ``link`` is written as both ``intra_node`` and ``inter_node`` (one node; ``devices_per_node`` None leaves
    the node size to the preset, as when only the compute was measured); ``preset`` names the base
    preset the loader takes every missing key from; ``header`` lines become the comment on top.
    """

    name: str
    devices_per_node: int | None
    device_memory_bytes: int
    header: tuple[str, ...] = ()
    preset: str | None = None
    device_peak_flops: float | None = None
    peak_flops_by_dtype: tuple[tuple[str, float], ...] = ()
    vector_flops: float | None = None
    memory_bandwidth_bytes_per_s: float | None = None
    kernel_overhead_s: float | None = None
    step_overhead_s: float | None = None
    matmul_efficiency: tuple[tuple[float, float], ...] = ()
    link: Link | None = None

    def __post_init__(self):
        if self.preset is None and (self.device_peak_flops is None or self.link is None):
            raise CostModelError("a cluster file without a base preset needs device_peak_flops and a link")

    def text(self) -> str:
        lines = [f"# {line}" if line else "#" for line in self.header]
        lines.append(f"name: {self.name}")
        if self.preset is not None:
            lines.append(f"preset: {self.preset}")
        if self.device_peak_flops is not None:
            lines.append(f"device_peak_flops: {format_number(self.device_peak_flops, 'FLOP/s')}")
        if self.peak_flops_by_dtype:
            lines.append("peak_flops_by_dtype:")
            lines += [f"  {dtype}: {format_number(peak, 'FLOP/s')}" for dtype, peak in sorted(self.peak_flops_by_dtype)]
        if self.vector_flops is not None:
            lines.append(f"vector_flops: {format_number(self.vector_flops, 'FLOP/s')}")
        if self.memory_bandwidth_bytes_per_s is not None:
            lines.append(f"memory_bandwidth_bytes_per_s: {format_number(self.memory_bandwidth_bytes_per_s, 'B/s')}")
        if self.kernel_overhead_s is not None:
            lines.append(f"kernel_overhead_s: {format_number(self.kernel_overhead_s, 's')}")
        if self.step_overhead_s is not None:
            lines.append(f"step_overhead_s: {format_number(self.step_overhead_s, 's')}")
        if self.matmul_efficiency:
            lines.append("matmul_efficiency:")
            lines += [f"  - [{format_number(flops, 'FLOP')}, {efficiency:.4g}]"
                      for flops, efficiency in self.matmul_efficiency]
        lines.append(f"device_memory_bytes: {_memory(self.device_memory_bytes)}")
        if self.devices_per_node is not None:
            lines.append(f"devices_per_node: {self.devices_per_node}")
        if self.link is not None:
            for key in ("intra_node", "inter_node"):
                lines += [f"{key}:",
                          f"  bandwidth_bytes_per_s: {format_number(self.link.bandwidth_bytes_per_s, 'B/s')}",
                          f"  latency_s: {format_number(self.link.latency_s, 's')}",
                          f"  overhead_s: {format_number(self.link.overhead_s, 's')}"]
        return "\n".join(lines) + "\n"
