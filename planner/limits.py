"""Size limits on what shardplan reads and builds, checked before anything is allocated.

Each limit is a named constant, far above any real model or cluster, so that a typo
or a hostile file (a dimension of 10^30, a mesh of 10^8 devices, a YAML "billion
laughs" alias bomb, 20,000 nested ``[``) is refused at once with a clear message
instead of hanging, exhausting memory or overflowing a C integer deep in numpy.
The checks raise :class:`~planner.errors.LimitError` (exit status 2) naming the
value, the limit and what to do.

>>> check_tensor_elements((1024, 1024), "tensor 'x'")
1048576
>>> check_tensor_elements((10**30,), "tensor 'x'")
Traceback (most recent call last):
...
planner.errors.LimitError: tensor 'x' has 10^30 elements (shape 1000000000000000000000000000000), more than shardplan's limit of 2^48 = 281,474,976,710,656 elements per tensor; check the shape
"""

from __future__ import annotations

import math
import os
from typing import Iterable

from planner.errors import LimitError

#: Elements of one tensor (2^48: 1 PiB of f32). Byte counts of such a tensor stay exact in a float64.
MAX_TENSOR_ELEMENTS = 2**48
#: Devices of one mesh (2^14 = 16,384). Some of the redistribution search's work grows with the
#: square of the device count, so a much larger mesh would take gigabytes to plan.
MAX_MESH_DEVICES = 2**14
#: Axes of one mesh (a mesh of 2^14 devices has at most 14 axes of size >= 2).
MAX_MESH_AXES = 32
#: Bytes of one input file (model, cluster or baseline).
MAX_INPUT_FILE_BYTES = 64 * 2**20
#: Nesting depth of a YAML document, counted through aliases (a model file nests about 5 levels).
MAX_YAML_DEPTH = 100
#: Nodes of a YAML document once every alias is expanded (the largest config here has about 6,000).
MAX_YAML_NODES = 1_000_000
#: Digits of one integer in a file or flag (Python refuses to read more than 4,300).
MAX_INT_DIGITS = 100
#: FLOPs of one op (10^30, a hundred thousand times the largest training run to date): at the slowest rate a cluster
#: may give (:data:`MIN_CLUSTER_RATE`) its time is still a finite float.
MAX_OP_FLOPS = 10**30
#: Devices of one node of a cluster: a node of more devices than the largest mesh is, for any mesh, one node.
MAX_DEVICES_PER_NODE = MAX_MESH_DEVICES
#: The largest rate (FLOP/s, bytes/s) or size (bytes, FLOP) a cluster may give: far above any device.
MAX_CLUSTER_NUMBER = 1e30
#: The smallest rate (FLOP/s, bytes/s) and the largest time (latency, overhead: seconds) a cluster may give:
#: a thousand per second and a million seconds, both far from any device, keep the costs the searches compare
#: in the range their solvers handle (a latency of 1e12 s made HiGHS run for minutes, one of 1e30 s made CBC
#: find no plan and an op's time overflow a float).
MIN_CLUSTER_RATE = 1e3
MAX_CLUSTER_SECONDS = 1e6
#: Bytes the numpy device simulator may hold (``simulate``, ``reshard --verify``) before it starts.
MAX_SIMULATION_BYTES = 16 * 2**30


def _power(n: int) -> str:
    """``1,000,000``; from 10^15 on ``10^30`` or ``about 10^24.9``."""
    if n < 10**15:
        return f"{n:,}"
    e = math.log10(n)
    return f"10^{round(e)}" if 10 ** round(e) == n else f"about 10^{e:.1f}"


def _shape_text(shape: Iterable[int]) -> str:
    text = "x".join(map(str, shape))
    return text if len(text) <= 80 else text[:77] + "..."


def check_int_digits(text: str, what: str) -> None:
    """:class:`LimitError` when the integer written ``text`` has more than :data:`MAX_INT_DIGITS` digits.

    Signs, underscores and YAML 1.1's sexagesimal colons are not digits; a base prefix (``0x``) counts.

    >>> check_int_digits("1_000", "a size")
    >>> check_int_digits("9" * 101, "a size")
    Traceback (most recent call last):
    ...
    planner.errors.LimitError: a size has 101 digits, more than shardplan reads (100); check the number
    """
    digits = text.strip().lstrip("+-").replace("_", "").replace(":", "")
    if len(digits) > MAX_INT_DIGITS:
        raise LimitError(f"{what} has {len(digits):,} digits, more than shardplan reads ({MAX_INT_DIGITS}); "
                         "check the number")


def read_int(text: str, what: str) -> int:
    """``int(text)`` for a string of decimal digits, or :class:`LimitError` past :data:`MAX_INT_DIGITS`.

    >>> read_int("64", "a size")
    64
    """
    check_int_digits(text, what)
    return int(text)


def check_tensor_elements(shape: Iterable[int], what: str) -> int:
    """The number of elements of ``shape``; :class:`LimitError` past :data:`MAX_TENSOR_ELEMENTS`."""
    shape = tuple(shape)
    n = math.prod(shape)
    if n > MAX_TENSOR_ELEMENTS:
        raise LimitError(
            f"{what} has {_power(n)} elements (shape {_shape_text(shape)}), more than shardplan's limit of "
            f"2^{MAX_TENSOR_ELEMENTS.bit_length() - 1} = {MAX_TENSOR_ELEMENTS:,} elements per tensor; check the shape"
        )
    return n


def check_op_flops(flops: int, what: str) -> None:
    """:class:`LimitError` when one op computes more than :data:`MAX_OP_FLOPS` FLOPs.

    >>> check_op_flops(2 * 64**3, "op 'mm'")
    >>> check_op_flops(2**1200, "op 'e'")
    Traceback (most recent call last):
    ...
    planner.errors.LimitError: op 'e' computes about 10^361.2 FLOPs, more than shardplan's limit of 10^30 FLOPs per op; check its operands' shapes and its attributes
    """
    if flops > MAX_OP_FLOPS:
        count = _power(flops) if isinstance(flops, int) else f"{flops:.3g}"
        raise LimitError(f"{what} computes {count} FLOPs, more than shardplan's limit of "
                         f"{_power(MAX_OP_FLOPS)} FLOPs per op; check its operands' shapes and its attributes")


def check_mesh_size(name: str, sizes: Iterable[int]) -> int:
    """The number of devices of a mesh; :class:`LimitError` past :data:`MAX_MESH_DEVICES` or :data:`MAX_MESH_AXES`."""
    sizes = tuple(sizes)
    if len(sizes) > MAX_MESH_AXES:
        raise LimitError(f"mesh @{name} has {len(sizes)} axes, more than shardplan's limit of {MAX_MESH_AXES}; "
                         "merge axes that are always used together")
    n = math.prod(sizes)
    if n > MAX_MESH_DEVICES:
        raise LimitError(f"mesh @{name} has {_power(n)} devices, more than shardplan's limit of "
                         f"2^{MAX_MESH_DEVICES.bit_length() - 1} = {MAX_MESH_DEVICES:,} devices per mesh; check the axis sizes")
    return n


def check_simulation_bytes(needed: int, what: str, hint: str) -> None:
    """:class:`LimitError` when the simulator would need more than :data:`MAX_SIMULATION_BYTES`;
    ``hint`` says what to do instead."""
    if needed > MAX_SIMULATION_BYTES:
        raise LimitError(f"{what} needs at least {format_bytes(needed)} of memory, more than the simulator's "
                         f"limit of {format_bytes(MAX_SIMULATION_BYTES)}; {hint}")


def check_simulation_memory(estimate, what: str, hint: str) -> None:
    """:class:`LimitError` when ``estimate`` (an upper bound of a simulation's peak: its ``total`` bytes and a
    ``text()`` of its parts) exceeds :data:`MAX_SIMULATION_BYTES`; ``hint`` says what to do instead."""
    if estimate.total > MAX_SIMULATION_BYTES:
        raise LimitError(f"{what} needs up to {format_bytes(estimate.total)} of memory ({estimate.text()}), more "
                         f"than the simulator's limit of {format_bytes(MAX_SIMULATION_BYTES)}; {hint}")


def machine_memory_bytes() -> int:
    """The memory this process may use: the machine's physical memory, or the cgroup's limit (a container's)
    where that is lower; 0 where neither can be read (then nothing is refused)."""
    total = 0
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < (total or int(text) + 1):
            total = int(text)
    return max(total, 0)


def check_run_bytes(needed: int, what: str, hint: str) -> None:
    """:class:`LimitError` when running a plan on a real engine (``shardplan run``) would need more memory than
    this machine has (:func:`machine_memory_bytes`); ``hint`` says what to do instead."""
    have = machine_memory_bytes()
    if have and needed > have:
        raise LimitError(f"{what} needs up to {format_bytes(needed)} of memory, more than this machine's "
                         f"{format_bytes(have)}; {hint}")


def format_bytes(n: int) -> str:
    """Binary units, three significant digits.

    >>> format_bytes(16 * 2**30), format_bytes(7 * 2**40 + 1), format_bytes(1536)
    ('16 GiB', '7 TiB', '1.5 KiB')
    """
    for unit, scale in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:,} B"
