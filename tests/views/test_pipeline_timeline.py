"""The pipelined plan's timeline: boxes at the plan's own timeline's times, one row per device group, the sends
as arrows between the right boxes, the bubble hatched in the plan's proportion, recomputation inside backwards."""

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from planner.api import plan_pipeline
from planner.stages.cost import Config, Evaluation
from planner.stages.plan import PipelinePlan, StagePlan
from planner.stages.schedules import device_orders, timeline
from planner.views.pipeline_timeline import timeline_svg
from tests.views.pictures import SVG, by_class, texts

TINY = Path(__file__).resolve().parents[1] / "stages" / "tiny_gpt.yaml"


def synthetic_plan(schedule, p, m, v=1, f=1e-3, b=2e-3, send=0.0, redo=0.0, sync=0.0) -> PipelinePlan:
    """A plan whose every stage takes ``f`` forward and ``b`` backward (``redo`` of it recomputation), its timeline
    the schedule run by :func:`timeline`, as the search's evaluation runs it."""
    S = p * v
    tl = timeline(device_orders(schedule, p, m, v), [f] * S, [b] * S, send)
    step = max(run[-1][2] + sync for run in tl.runs)
    config = Config(p, 1, (("tp", 1),), 1, m, schedule, v, "full" if redo else "none", 0, tuple(range(S + 1)))
    ev = Evaluation(step, (100,) * p, (f,) * S, (b,) * S, (send,) * (S - 1), (sync,) * p, tl)
    stages = tuple(StagePlan(k, k % p, (f"layer{k}",), "tp=1", config.recompute, 100, f, b, redo) for k in range(S))
    return PipelinePlan("synthetic", "a100", p, f"pp={p} x dp=1 x tp=1", config, ev, stages, 0.0, 0.0, 1, 1, ())


def boxes(root):
    """(kind, microbatch, stage) -> the box's attributes and its rectangle."""
    out = {}
    for g in by_class(root, "g", "box"):
        rect = g.find(SVG + "rect")
        out[(g.get("data-kind"), int(g.get("data-microbatch")), int(g.get("data-stage")))] = (g, rect)
    return out


@pytest.mark.parametrize("p,m", [(4, 3), (2, 5), (3, 1)])
def test_gpipe_boxes_start_at_the_textbook_times(p, m):
    # GPipe with equal stages and free sends: the forward of microbatch j on stage d starts at (j + d) * f; the
    # last forward ends at (m + p - 1) * f, then the backward of microbatch j on stage d starts at
    # (m + p - 1) * f + (j + p - 1 - d) * b (it waits for the same microbatch's backward one stage later)
    f, b = 1e-3, 2e-3
    got = boxes(ET.fromstring(timeline_svg(synthetic_plan("gpipe", p, m, f=f, b=b))))
    assert len(got) == 2 * m * p
    for j in range(m):
        for d in range(p):
            g, _ = got[("F", j, d)]
            assert float(g.get("data-start")) == pytest.approx((j + d) * f)
            assert float(g.get("data-end")) == pytest.approx((j + d + 1) * f)
            g, _ = got[("B", j, d)]
            assert float(g.get("data-start")) == pytest.approx((m + p - 1) * f + (j + p - 1 - d) * b)
            assert float(g.get("data-end")) - float(g.get("data-start")) == pytest.approx(b)


def test_boxes_are_the_plans_timeline_on_a_real_plan():
    plan = plan_pipeline(str(TINY), devices=4, pipeline={"stages": 2, "microbatches": 2, "schedule": "1f1b"})
    got = boxes(ET.fromstring(timeline_svg(plan)))
    runs = plan.evaluation.timeline.runs
    assert len(got) == sum(len(r) for r in runs)
    for d, run in enumerate(runs):
        for a, start, end in run:
            g, _ = got[(a.kind, a.microbatch, a.stage)]
            assert (int(g.get("data-group")), float(g.get("data-start")), float(g.get("data-end"))) == (d, start, end)


def test_one_row_per_device_group_and_each_virtual_stage_on_its_group():
    p, v, m = 2, 2, 4
    root = ET.fromstring(timeline_svg(synthetic_plan("interleaved", p, m, v)))
    rows = by_class(root, "g", "row")
    assert [r.get("data-group") for r in rows] == ["0", "1"]
    for row in rows:
        d = int(row.get("data-group"))
        stages = sorted({int(g.get("data-stage")) for g in by_class(row, "g", "box")})
        assert stages == [k for k in range(p * v) if k % p == d]  # Megatron's placement: stage k on group k % p
        for g in by_class(row, "g", "box"):
            assert int(g.get("data-chunk")) == int(g.get("data-stage")) // p
    # interleaved boxes name their chunk; a box's title has its stage, chunk, microbatch, start and end
    g = next(g for g in by_class(root, "g", "box") if g.get("data-stage") == "3")
    assert "chunk 1" in g.find(SVG + "title").text and "microbatch" in g.find(SVG + "title").text


def test_rows_are_ordered_top_to_bottom_and_boxes_sit_on_their_row():
    root = ET.fromstring(timeline_svg(synthetic_plan("1f1b", 3, 4)))
    tops = {}
    for row in by_class(root, "g", "row"):
        ys = {float(g.find(SVG + "rect").get("y")) for g in by_class(row, "g", "box")}
        assert len(ys) == 1
        tops[int(row.get("data-group"))] = ys.pop()
    assert tops[0] < tops[1] < tops[2]


@pytest.mark.parametrize("schedule,p,m,v", [("gpipe", 3, 2, 1), ("1f1b", 4, 4, 1), ("interleaved", 2, 4, 2)])
def test_sends_are_arrows_from_the_senders_end_to_the_receivers_start(schedule, p, m, v):
    send = 0.25e-3
    root = ET.fromstring(timeline_svg(synthetic_plan(schedule, p, m, v, send=send)))
    got = boxes(root)
    arrows = by_class(root, "line", "send")
    S = p * v
    # every microbatch crosses S - 1 boundaries forward and S - 1 backward
    assert len(arrows) == 2 * m * (S - 1)
    pairs = set()
    for line in arrows:
        src = line.get("data-from")
        dst = line.get("data-to")
        kind, rest = dst[0], dst[1:]
        mb, stage = map(int, rest.split("@"))
        # a forward waits for the previous stage's forward, a backward for the next stage's backward
        want = f"F{mb}@{stage - 1}" if kind == "F" else f"B{mb}@{stage + 1}"
        assert src == want
        pairs.add((src, dst))
        g_src, r_src = got[(src[0], mb, int(src.split("@")[1]))]
        g_dst, r_dst = got[(kind, mb, stage)]
        # the data arrives a send later than it left, and the receiver starts no earlier
        assert float(g_dst.get("data-start")) >= float(g_src.get("data-end")) + send - 1e-15
        assert float(line.get("x1")) == pytest.approx(float(r_src.get("x")) + float(r_src.get("width")), abs=0.15)
        assert float(line.get("x2")) == pytest.approx(float(r_dst.get("x")), abs=0.05)
        y_src, y_dst = float(r_src.get("y")), float(r_dst.get("y"))
        h = float(r_src.get("height"))
        assert {float(line.get("y1")), float(line.get("y2"))} <= {y_src, y_src + h, y_dst, y_dst + h}
    assert len(pairs) == len(arrows)


@pytest.mark.parametrize("schedule,p,m,v", [("gpipe", 4, 3, 1), ("1f1b", 4, 8, 1), ("interleaved", 2, 4, 2)])
def test_the_hatched_idle_time_is_the_plans_bubble(schedule, p, m, v):
    plan = synthetic_plan(schedule, p, m, v, send=0.1e-3, sync=0.5e-3)
    root = ET.fromstring(timeline_svg(plan))
    schedule_s = plan.evaluation.timeline.step_time_s
    idle = sum(float(r.get("data-end")) - float(r.get("data-start")) for r in by_class(root, "rect", "idle"))
    assert idle / (p * schedule_s) == pytest.approx(plan.bubble_fraction)
    if schedule == "gpipe":  # GPipe's paper: (p - 1) / (m + p - 1) of the schedule idle, with free sends
        free = synthetic_plan(schedule, p, m, v)
        idle = sum(float(r.get("data-end")) - float(r.get("data-start"))
                   for r in by_class(ET.fromstring(timeline_svg(free)), "rect", "idle"))
        assert idle / (p * free.evaluation.timeline.step_time_s) == pytest.approx((p - 1) / (m + p - 1))
    assert f"bubble {plan.bubble_fraction:.1%}" in " ".join(texts(root))


def test_the_axis_ends_at_the_plans_step_and_its_ticks_are_milliseconds():
    plan = synthetic_plan("1f1b", 2, 4, sync=0.7e-3)
    root = ET.fromstring(timeline_svg(plan))
    (end,) = by_class(root, "line", "step-end")
    assert float(end.get("data-time")) == plan.step_time_s  # the step: the schedule, then each group's sync
    (sched,) = by_class(root, "line", "schedule-end")
    assert float(sched.get("data-time")) == plan.evaluation.timeline.step_time_s
    ticks = [float(t.get("data-time")) for t in by_class(root, "line", "tick")]
    assert ticks[0] == 0.0 and ticks[-1] <= plan.step_time_s
    (axis,) = by_class(root, "g", "axis")
    labels = texts(axis)
    assert all(t.endswith(" ms") for t in labels)
    assert [float(t[:-3]) / 1e3 for t in labels] == pytest.approx(ticks)
    # the syncs start where each group's last backward ends and last the plan's sync time
    for rect, run in zip(by_class(root, "rect", "sync"), plan.evaluation.timeline.runs):
        assert float(rect.get("data-start")) == run[-1][2]
        assert float(rect.get("data-end")) == pytest.approx(run[-1][2] + 0.7e-3)


def test_recomputation_is_a_band_inside_each_backward_in_its_share():
    b, redo = 2e-3, 0.5e-3
    root = ET.fromstring(timeline_svg(synthetic_plan("1f1b", 2, 2, b=b, redo=redo)))
    for g in by_class(root, "g", "box"):
        bands = by_class(g, "rect", "recompute")
        if g.get("data-kind") == "F":
            assert bands == []
            continue
        (band,) = bands
        box = g.find(SVG + "rect")
        assert float(band.get("x")) == float(box.get("x"))  # recomputation comes first in the backward
        assert float(band.get("width")) / float(box.get("width")) == pytest.approx(redo / b, abs=0.01)
    assert not by_class(ET.fromstring(timeline_svg(synthetic_plan("1f1b", 2, 2))), "rect", "recompute")


def test_forward_and_backward_differ_in_colour_and_label():
    root = ET.fromstring(timeline_svg(synthetic_plan("gpipe", 2, 2)))
    fills = {g.get("data-kind"): g.find(SVG + "rect").get("fill") for g in by_class(root, "g", "box")}
    assert fills["F"] != fills["B"]
    labels = {t for g in by_class(root, "g", "box") for t in texts(g)}
    assert {"F0", "F1", "B0", "B1"} <= labels


def test_the_same_plan_gives_the_same_bytes():
    assert timeline_svg(synthetic_plan("interleaved", 2, 4, 2, send=1e-4)) == \
        timeline_svg(synthetic_plan("interleaved", 2, 4, 2, send=1e-4))

