"""Per-device memory: parameters, gradients, optimizer state, activations."""

from __future__ import annotations

import pytest

from costmodels.loader import load_cluster
from costmodels.memory import activation_bytes, fits_in_memory, parameter_bytes


def test_inference_parameters_are_elements_times_itemsize():
    assert parameter_bytes(1000, 2) == 2000


def test_adam_adds_two_f32_moments_per_element():
    assert parameter_bytes(1000, 4, optimizer="adam") == 1000 * (4 + 8)


def test_mixed_precision_adam_training_is_sixteen_bytes_per_bf16_parameter():
    # bf16 params (2) + bf16 grads (2) + two f32 moments (8) + f32 master copy (4)
    assert parameter_bytes(10, 2, optimizer="adam", master_weights=True, gradients=True) == 10 * 16


def test_momentum_is_one_f32_buffer_and_sgd_has_none():
    assert parameter_bytes(10, 4, optimizer="momentum") == 10 * 8
    assert parameter_bytes(10, 4, optimizer="sgd") == parameter_bytes(10, 4)


def test_unknown_optimizer_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown optimizer 'adamw'; use one of adam, momentum, none, sgd"):
        parameter_bytes(10, 4, optimizer="adamw")


def test_activations_add_up_their_local_bytes():
    assert activation_bytes([1024, 2048, 0]) == 3072
    assert activation_bytes(iter([])) == 0
    with pytest.raises(ValueError, match="live bytes must be >= 0"):
        activation_bytes([-1])


def test_fits_in_memory_compares_with_the_device_memory():
    cluster = load_cluster("default")  # 80 GiB
    assert fits_in_memory(80 * 2**30, cluster)
    assert not fits_in_memory(80 * 2**30 + 1, cluster)
