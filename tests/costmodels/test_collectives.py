"""Collective costs: the SPEC §4 ring table by hand, and the byte conventions the simulator checks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from costmodels.cluster import Link
from costmodels.units import format_seconds
from costmodels.collectives import (
    NO_COST,
    RING,
    CollectiveCost,
    all_gather_cost,
    all_reduce_cost,
    all_to_all_cost,
    chunk_bytes,
    collective_permute_cost,
    reduce_scatter_cost,
)

# alpha = 1 us, beta = 1 GB/s: a byte costs 1 ns, so times are easy to write by hand.
LINK = Link(bandwidth_bytes_per_s=1e9, latency_s=1e-6)
# The SPEC §4 table with p = 4 and a full (gathered) tensor of n = 4096 bytes: s = n / p = 1024.
P, N, S = 4, 4096, 1024


def test_all_gather_of_four_receives_three_shards():
    cost = all_gather_cost(P, S, LINK)
    assert cost.bytes_per_device == 3 * 1024
    assert cost.time_s == pytest.approx(3e-6 + 3072e-9)


def test_reduce_scatter_of_four_receives_three_pieces():
    cost = reduce_scatter_cost(P, S, LINK)
    assert cost.bytes_per_device == 3072
    assert cost.time_s == pytest.approx(3e-6 + 3072e-9)


def test_all_reduce_of_four_receives_twice_three_chunks():
    cost = all_reduce_cost(P, chunk_bytes(N // 4, P, 4), LINK)  # 1024 f32 elements
    assert cost.bytes_per_device == 6144
    assert cost.time_s == pytest.approx(6e-6 + 6144e-9)


def test_all_to_all_of_four_receives_three_quarters_of_local_bytes():
    local = N  # each device holds 4096 bytes, one 1024-byte chunk per member
    cost = all_to_all_cost(P, local // P, LINK)
    assert cost.bytes_per_device == 3 * local // 4 == 3072
    assert cost.time_s == pytest.approx(3e-6 + 3072e-9)


def test_collective_permute_receives_the_local_bytes_in_one_step():
    cost = collective_permute_cost(S, LINK)
    assert cost == CollectiveCost(1024, pytest.approx(1e-6 + 1024e-9))


def test_all_reduce_is_a_reduce_scatter_then_an_all_gather():
    for p in (1, 2, 3, 8):
        rs, ag = reduce_scatter_cost(p, 100, LINK), all_gather_cost(p, 100, LINK)
        ar = all_reduce_cost(p, 100, LINK)
        assert ar.bytes_per_device == (rs + ag).bytes_per_device
        assert ar.time_s == pytest.approx((rs + ag).time_s)


@pytest.mark.parametrize("cost", [all_gather_cost, reduce_scatter_cost, all_reduce_cost, all_to_all_cost])
def test_group_of_one_device_costs_nothing(cost):
    assert cost(1, 1 << 20, LINK) == CollectiveCost(0, 0.0)


def test_permute_of_nothing_costs_nothing_not_even_latency():
    assert collective_permute_cost(0, LINK) == NO_COST == CollectiveCost(0, 0.0)


def test_chunk_bytes_pads_to_whole_pieces():
    assert chunk_bytes(10, 4, 4) == 12  # ceil(10/4) = 3 f32 elements
    assert chunk_bytes(8, 4, 2) == 4
    assert chunk_bytes(0, 4, 4) == 0
    assert chunk_bytes(3, 8, 4) == 4  # fewer elements than devices: one padded element each


def test_padded_all_reduce_counts_the_padding():
    # 10 f32 elements over 4 devices: 4 chunks of 3 elements, 2 of them padding
    assert all_reduce_cost(4, chunk_bytes(10, 4, 4), LINK).bytes_per_device == 2 * 3 * 12


def test_byte_counts_are_python_ints_even_from_numpy_sizes():
    cost = all_gather_cost(np.int64(4), np.int64(1024), LINK)
    assert type(cost.bytes_per_device) is int and cost.bytes_per_device == 3072
    assert type(chunk_bytes(np.int64(10), 4, np.int64(4))) is int


def test_fractional_bytes_are_rejected():
    with pytest.raises(TypeError, match="shard_bytes must be an integer, got 1.5"):
        all_gather_cost(4, 1.5, LINK)


def test_empty_group_and_negative_bytes_are_rejected():
    with pytest.raises(ValueError, match="at least one device"):
        all_reduce_cost(0, 8, LINK)
    with pytest.raises(ValueError, match="chunk_bytes must be >= 0"):
        all_to_all_cost(2, -8, LINK)


def test_costs_of_successive_steps_add_up():
    steps = [all_gather_cost(4, 100, LINK), collective_permute_cost(50, LINK)]
    total = sum(steps, NO_COST)
    assert total.bytes_per_device == 350
    assert total.time_s == pytest.approx(3e-6 + 300e-9 + 1e-6 + 50e-9)


def test_ring_model_bundles_the_default_functions():
    assert RING.all_gather is all_gather_cost
    assert RING.collective_permute(8, LINK) == collective_permute_cost(8, LINK)


def test_cost_str_is_compact():
    cost = all_gather_cost(P, S, LINK)
    # the reports' unit style (costmodels.units): exact bytes below a megabyte, three digits of time
    assert str(cost) == f"{cost.bytes_per_device:,} B, {format_seconds(cost.time_s)}"
    assert str(CollectiveCost(3072, 6.072e-6)) == "3,072 B, 6.07 us"


@given(
    p=st.integers(1, 64),
    nbytes=st.integers(0, 1 << 40),
    bandwidth=st.floats(1e6, 1e13),
    latency=st.floats(0, 1e-3),
)
def test_time_is_steps_times_latency_plus_bytes_over_bandwidth(p, nbytes, bandwidth, latency):
    link = Link(bandwidth, latency)
    for cost, steps, factor in [
        (all_gather_cost, p - 1, p - 1),
        (reduce_scatter_cost, p - 1, p - 1),
        (all_reduce_cost, 2 * (p - 1), 2 * (p - 1)),
        (all_to_all_cost, p - 1, p - 1),
    ]:
        result = cost(p, nbytes, link)
        assert result.bytes_per_device == factor * nbytes
        assert result.time_s == pytest.approx(steps * latency + factor * nbytes / bandwidth)


def test_overhead_is_paid_once_per_collective_so_two_calls_cost_more_than_one():
    from costmodels import Link, all_gather_cost, all_reduce_cost, reduce_scatter_cost

    link = Link(100.0, 1.0, 10.0)
    ar = all_reduce_cost(4, 100, link)
    rs_ag = reduce_scatter_cost(4, 100, link) + all_gather_cost(4, 100, link)
    assert ar.bytes_per_device == rs_ag.bytes_per_device
    assert ar.time_s == 10.0 + 6 * 1.0 + 600 / 100.0
    assert rs_ag.time_s == ar.time_s + 10.0
