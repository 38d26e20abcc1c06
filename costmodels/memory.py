"""Per-device memory: parameters, gradients, optimizer state and live activations.

Everything is counted per device from the *local* (sharded) sizes the caller
passes, in bytes, as integers.

Optimizer state is counted per parameter element (:data:`OPTIMIZER_STATE_BYTES_PER_ELEMENT`):

- ``"none"`` / ``"sgd"``: no state;
- ``"momentum"``: one f32 buffer (4 bytes per element);
- ``"adam"``: two f32 moments (8 bytes per element).

``master_weights=True`` adds an f32 copy of the parameters (4 bytes per element),
as mixed-precision training keeps beside bf16/f16 parameters.

>>> # 1M bf16 parameters on this device, trained with Adam and f32 master weights:
>>> parameter_bytes(1_000_000, 2, optimizer="adam", master_weights=True, gradients=True)
16000000
>>> activation_bytes([4096, 1024]) + parameter_bytes(1000, 4)
9120
"""

from __future__ import annotations

from typing import Iterable

from costmodels.cluster import Cluster
from costmodels.units import nonnegative_int
from planner.errors import CostModelError

__all__ = [
    "OPTIMIZER_STATE_BYTES_PER_ELEMENT",
    "activation_bytes",
    "fits_in_memory",
    "parameter_bytes",
]

F32_BYTES = 4

OPTIMIZER_STATE_BYTES_PER_ELEMENT = {
    "none": 0,
    "sgd": 0,
    "momentum": F32_BYTES,
    "adam": 2 * F32_BYTES,
}
"""Bytes of optimizer state per parameter element (f32 buffers)."""


def parameter_bytes(
    elements: int,
    itemsize: int,
    *,
    optimizer: str = "none",
    master_weights: bool = False,
    gradients: bool = False,
) -> int:
    """Bytes one device holds for ``elements`` local parameter elements of ``itemsize`` bytes.

    The parameters themselves, plus (when training) their gradients (same dtype),
    optimizer state and an optional f32 master copy.

    >>> parameter_bytes(1000, 4)
    4000
    >>> parameter_bytes(1000, 4, optimizer="adam", gradients=True)  # params + grads + 2 moments
    16000
    >>> parameter_bytes(1000, 4, optimizer="lion")
    Traceback (most recent call last):
    ...
    planner.errors.CostModelError: unknown optimizer 'lion'; use one of adam, momentum, none, sgd
    """
    elements = nonnegative_int(elements, "elements")
    itemsize = nonnegative_int(itemsize, "itemsize")
    if optimizer not in OPTIMIZER_STATE_BYTES_PER_ELEMENT:
        known = ", ".join(sorted(OPTIMIZER_STATE_BYTES_PER_ELEMENT))
        raise CostModelError(f"unknown optimizer {optimizer!r}; use one of {known}")
    per_element = itemsize * (2 if gradients else 1) + OPTIMIZER_STATE_BYTES_PER_ELEMENT[optimizer]
    if master_weights:
        per_element += F32_BYTES
    return elements * per_element


def activation_bytes(live_bytes: Iterable[int]) -> int:
    """Bytes of the activations live at once on one device, given each one's local bytes.

    >>> activation_bytes([]), activation_bytes([4096, 4096, 512])
    (0, 8704)
    """
    return sum(nonnegative_int(b, "live bytes") for b in live_bytes)


def fits_in_memory(bytes_per_device: int, cluster: Cluster) -> bool:
    """Whether ``bytes_per_device`` fits in one device of ``cluster``.

    >>> from costmodels.loader import load_cluster
    >>> fits_in_memory(80 * 10**9, load_cluster("nvlink-node")), fits_in_memory(81 * 10**9, load_cluster("nvlink-node"))
    (True, False)
    """
    return nonnegative_int(bytes_per_device, "bytes_per_device") <= cluster.device_memory_bytes

