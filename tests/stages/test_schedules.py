"""The microbatch schedules: textbook step times and bubbles, in-flight microbatches, and the timeline
checked against a naive fixpoint over every device."""

import itertools
import random

import pytest

from planner.errors import PlanningError
from planner.stages.schedules import (Action, compiled, device_orders, ends, held_moments, peak_bytes, peak_bytes_at,
                                     peak_in_flight, timeline)

CASES = [("gpipe", p, m, 1) for p in (1, 2, 4) for m in (1, 3, 8)] + \
        [("1f1b", p, m, 1) for p in (1, 2, 4) for m in (1, 3, 8)] + \
        [("interleaved", p, m, v) for p in (1, 2, 4) for m in (p, 2 * p, 4 * p) for v in (1, 2, 3)]


@pytest.mark.parametrize("schedule,p,m,v", CASES)
def test_every_device_runs_each_of_its_stages_forward_and_backward_once_per_microbatch(schedule, p, m, v):
    orders = device_orders(schedule, p, m, v)
    for d, order in enumerate(orders):
        stages = [k for k in range(p * v) if k % p == d]
        want = sorted(Action(kind, j, k) for kind in "FB" for j in range(m) for k in stages)
        assert sorted(order) == want


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p,m", [(1, 4), (2, 4), (4, 8), (4, 3), (8, 16)])
def test_uniform_stages_take_m_plus_p_minus_one_slots(schedule, p, m):
    # GPipe and 1F1B with equal stages and free sends: (m + p - 1) * (f + b) (GPipe's paper, PipeDream-Flush)
    f, b = 1.5, 2.5
    t = timeline(device_orders(schedule, p, m), [f] * p, [b] * p)
    assert t.step_time_s == pytest.approx((m + p - 1) * (f + b))
    assert t.bubble_fraction == pytest.approx((p - 1) / (m + p - 1))


@pytest.mark.parametrize("p,m,v", [(2, 4, 2), (4, 8, 2), (4, 16, 4), (2, 6, 3)])
def test_interleaving_divides_the_bubble_by_the_virtual_stages(p, m, v):
    # Megatron's interleaved 1F1B: the bubble is (p - 1) * (f + b) / v of a device's whole-model chunk times,
    # here each virtual stage takes f and b, so a device's chunk is v * (f + b)
    f, b = 1.0, 2.0
    t = timeline(device_orders("interleaved", p, m, v), [f] * (p * v), [b] * (p * v))
    ideal = m * v * (f + b)
    assert t.step_time_s == pytest.approx(ideal + (p - 1) * v * (f + b) / v)


@pytest.mark.parametrize("p,m", [(4, 8), (4, 2), (8, 8), (2, 1)])
def test_1f1b_holds_at_most_p_minus_d_microbatches_and_gpipe_all(p, m):
    assert [peak_in_flight(o) for o in device_orders("1f1b", p, m)] == [min(p - d, m) for d in range(p)]
    assert [peak_in_flight(o) for o in device_orders("gpipe", p, m)] == [m] * p


@pytest.mark.parametrize("p,m,v", [(4, 8, 2), (2, 8, 3), (4, 16, 2)])
def test_interleaved_warms_up_as_megatron_does(p, m, v):
    # Megatron: (p - d - 1) * 2 + (v - 1) * p warm-up forwards, then one more forward before the first backward
    for d, order in enumerate(device_orders("interleaved", p, m, v)):
        warmup = min((p - d - 1) * 2 + (v - 1) * p, m * v)
        assert [a.kind for a in order[:warmup + 1]] == ["F"] * min(warmup + 1, m * v)
        assert peak_in_flight(order) == min(warmup + 1, m * v)


def naive_step_time(orders, forward, backward, send):
    """Independent oracle: sweep every device again and again, starting whatever is runnable, until all ran."""
    stages = len(forward)
    end = {}
    free = [0.0] * len(orders)
    pos = [0] * len(orders)
    for _ in range(sum(len(o) for o in orders) + 1):
        for d, order in enumerate(orders):
            if pos[d] == len(order):
                continue
            a = order[pos[d]]
            if a.kind == "F":
                dep = None if a.stage == 0 else ("F", a.microbatch, a.stage - 1)
            else:
                dep = ("F", a.microbatch, a.stage) if a.stage == stages - 1 else ("B", a.microbatch, a.stage + 1)
            if dep is not None and dep not in end:
                continue
            arrive = 0.0 if dep is None else end[dep] + (send[min(dep[2], a.stage)] if dep[2] != a.stage else 0.0)
            start = max(free[d], arrive)
            end[(a.kind, a.microbatch, a.stage)] = free[d] = start + (forward if a.kind == "F" else backward)[a.stage]
            pos[d] += 1
    assert all(pos[d] == len(o) for d, o in enumerate(orders))
    return max(free)


@pytest.mark.parametrize("schedule,p,m,v", [c for c in CASES if c[1] > 1])
def test_the_timeline_equals_a_naive_sweep_on_uneven_stages_and_sends(schedule, p, m, v):
    rng = random.Random(hash((schedule, p, m, v)) % 1000)
    stages = p * v
    forward = [rng.uniform(0.5, 3.0) for _ in range(stages)]
    backward = [rng.uniform(0.5, 6.0) for _ in range(stages)]
    send = [rng.uniform(0.0, 1.0) for _ in range(stages - 1)]
    orders = device_orders(schedule, p, m, v)
    t = timeline(orders, forward, backward, send)
    assert t.step_time_s == pytest.approx(naive_step_time(orders, forward, backward, send))
    for run in t.runs:  # one action at a time per device
        for (_, _, e1), (_, s2, _) in itertools.pairwise(run):
            assert s2 >= e1 - 1e-12
    assert sum(t.busy_s) == pytest.approx(m * (sum(forward) + sum(backward)))


@pytest.mark.parametrize("schedule,p,m,v", CASES)
def test_the_compiled_schedule_ends_each_device_when_the_timeline_does(schedule, p, m, v):
    # ends() walks the compiled order once; the timeline runs the devices' orders: the same sums, so the same floats
    rng = random.Random(hash((schedule, p, m, v, "ends")) % 1000)
    stages = p * v
    forward = [rng.uniform(0.5, 3.0) for _ in range(stages)]
    backward = [rng.uniform(0.5, 6.0) for _ in range(stages)]
    send = [rng.uniform(0.0, 1.0) for _ in range(stages - 1)]
    orders = device_orders(schedule, p, m, v)
    c = compiled(orders)
    assert ends(c, forward, backward, send) == [run[-1][2] for run in timeline(orders, forward, backward, send).runs]
    assert c.in_flight == tuple(peak_in_flight(o) for o in orders)


@pytest.mark.parametrize("schedule,p,m,v", CASES)
def test_the_peak_read_at_the_held_moments_is_the_peak_of_every_action(schedule, p, m, v):
    # the moments keep, per kind and stage, the actions no other holds more stashes than: with bytes never
    # negative the peak is among them, so the two reads agree on any bytes
    rng = random.Random(hash((schedule, p, m, v, "moments")) % 1000)
    stages = p * v
    for order in device_orders(schedule, p, m, v):
        moments = held_moments(order)
        assert len(moments) <= len(order)
        for _ in range(5):
            stash = [rng.randint(0, 100) for _ in range(stages)]
            work_f = [rng.randint(0, 300) for _ in range(stages)]
            work_b = [rng.randint(0, 300) for _ in range(stages)]
            assert peak_bytes_at(moments, stash, work_f, work_b) == peak_bytes(order, stash, work_f, work_b)


def test_1f1b_and_gpipe_peak_at_two_moments_per_device():
    # one stage per device: the most in flight before a forward and before a backward
    assert {len(held_moments(o)) for o in device_orders("gpipe", 4, 64)} == {2}
    assert {len(held_moments(o)) for o in device_orders("1f1b", 4, 64)} == {2}


def test_peak_bytes_counts_the_stash_in_flight_plus_the_running_action():
    # device 0 of a 2-device 1F1B with 3 microbatches runs F0 F1 B0 F2 B1 B2: two stashes of 10 before B0
    order = device_orders("1f1b", 2, 3)[0]
    assert [str(a) for a in order] == ["F0@0", "F1@0", "B0@0", "F2@0", "B1@0", "B2@0"]
    assert peak_bytes(order, [10, 0], [4, 0], [7, 0]) == 2 * 10 + 7
    assert peak_bytes(order, [10, 0], [15, 0], [1, 0]) == 10 + 15


@pytest.mark.parametrize("args,match", [
    (("zigzag", 2, 4, 1), "unknown pipeline schedule"),
    (("1f1b", 2, 4, 2), "need the interleaved schedule"),
    (("interleaved", 4, 6, 2), "not a multiple of 4"),
    (("gpipe", 0, 4, 1), "at least one device"),
])
def test_impossible_schedules_are_refused_with_the_fix(args, match):
    with pytest.raises(PlanningError, match=match):
        device_orders(*args)
