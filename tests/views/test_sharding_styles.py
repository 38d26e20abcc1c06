"""How the pictures tell layouts apart (planner/views/sharding_styles.py)."""

import itertools

from planner.ir.mesh import Mesh
from planner.ir.sharding import TensorSharding
from planner.views.sharding_styles import HUES, layout_styles, pattern_defs
from planner.views.svg import REPLICATED

MESH = Mesh.from_sizes("mesh", {"a": 2, "b": 2, "c": 2})


def sharding(*dims, unreduced=()):
    return TensorSharding.build(MESH, [list(d) for d in dims], unreduced=unreduced)


def lab(colour: str) -> tuple[float, float, float]:
    """CIELAB (D65) of an sRGB hex colour, from the standard formulas."""
    rgb = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883
    f = [v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116 for v in (x, y, z)]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def delta_e(c1: str, c2: str) -> float:
    return sum((p - q) ** 2 for p, q in zip(lab(c1), lab(c2))) ** 0.5


def test_any_two_fills_differ_visibly():
    # CIE76 distance above 20 is a difference anyone sees side by side (2.3 is "just noticeable")
    for c1, c2 in itertools.combinations((*HUES, REPLICATED), 2):
        assert delta_e(c1, c2) > 20, (c1, c2)


def test_fill_follows_dimension_0_pattern_the_other_dimensions_hatching_a_pending_sum():
    s = layout_styles([sharding(["a"], []), sharding(["a"], ["b"]), sharding([], ["b"]), sharding([], []),
                       sharding(["a"], [], unreduced=["c"])])
    looks = [(v.fill, v.pattern, v.pending) for v in s.values()]
    # dimension 0 on "a" is the first hue; dimension 1 on "b" the first pattern; nothing sharded is plain grey
    assert looks == [(HUES[0], 0, False), (HUES[0], 1, False), (REPLICATED, 1, False), (REPLICATED, 0, False),
                     (HUES[0], 0, True)]


def test_sixteen_layouts_of_a_plan_are_pairwise_distinct():
    # every way to put a, b or nothing on dimension 0 and on dimension 1 (a axis at most once), with and without a
    # pending sum over c: 7 x 2 = 14 layouts, plus rank-1 layouts that only differ from others by rank
    dims = [(), ("a",), ("b",), ("a", "b"), ("b", "a")]
    layouts = [sharding(d0, d1, unreduced=u) for d0 in dims for d1 in dims if not set(d0) & set(d1)
               for u in ((), ("c",))]
    layouts += [TensorSharding.build(MESH, [[]]), TensorSharding.build(MESH, [["a"]])]
    assert len(layouts) >= 16
    styles = layout_styles(layouts)
    assert len(styles) == len({s.dims_text() for s in layouts})
    looks = [v.encoding() for v in styles.values()]
    assert len(set(looks)) == len(looks)


def test_a_ninth_hue_wraps_round_with_a_pattern_of_its_own():
    mesh = Mesh.from_sizes("m", {f"x{i}": 2 for i in range(10)})
    layouts = [TensorSharding.build(mesh, [[f"x{i}"], []]) for i in range(10)]
    styles = list(layout_styles(layouts).values())
    assert [s.fill for s in styles[:len(HUES)]] == list(HUES)
    assert styles[len(HUES)].fill == HUES[0] and styles[len(HUES)].pattern != styles[0].pattern
    assert len({s.encoding() for s in styles}) == 10


def test_every_pattern_used_is_defined_once():
    styles = layout_styles([sharding([], ["a"]), sharding([], ["b"]), sharding(["a"], ["b"], unreduced=["c"])])
    defs = pattern_defs(styles.values())
    for v in styles.values():
        if v.pattern:
            assert defs.count(f'id="{v.pattern_id}"') == 1
    assert defs.count('id="layout-pending"') == 1
