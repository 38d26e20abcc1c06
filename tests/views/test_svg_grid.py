"""describe --format svg: the device grid of a sharding (planner/views/svg_grid.py)."""

import xml.etree.ElementTree as ET

import pytest

from planner.cli.main import main
from planner.errors import NotExpressibleError
from planner.ir.text import parse_mesh_spec, parse_sharding
from planner.views.svg_grid import device_grid_svg
from tests.views.pictures import SVG, by_class, texts


def grid(sharding: str, mesh: str, shape):
    m = parse_mesh_spec(mesh, default_name="mesh")
    svg = device_grid_svg(parse_sharding(sharding, [m]), shape)
    return svg, ET.fromstring(svg)


def blocks(root):
    return [(b.get("data-devices"), eval(b.get("data-index")), b.get("fill")) for b in by_class(root, "rect", "block")]


def test_two_axes_on_two_dims_draw_one_cell_per_device():
    _, root = grid('[{"x"}, {"y"}]', "x=2,y=4", (64, 32))
    cells = blocks(root)
    # devices are the mesh positions row-major: device d sits at x = d // 4, y = d % 4, so it holds
    # rows [32 (d // 4), +32) and columns [8 (d % 4), +8)
    assert [(dev, idx) for dev, idx, _ in cells] == [
        (str(d), [[32 * (d // 4), 32 * (d // 4) + 32], [8 * (d % 4), 8 * (d % 4) + 8]]) for d in range(8)]
    assert len({fill for *_, fill in cells}) == 8  # one colour per block
    assert root.tag == SVG + "svg"


def test_a_replicated_axis_lists_every_device_holding_the_block():
    _, root = grid('[{"x"}, {}]', "x=2,y=4", (64, 32))
    # x splits the rows in two; the 4 devices along y (x fixed) hold the same block
    assert [(dev, idx) for dev, idx, _ in blocks(root)] == [("0,1,2,3", [[0, 32], [0, 32]]),
                                                          ("4,5,6,7", [[32, 64], [0, 32]])]
    assert "devices 0-3" in texts(root) and "devices 4-7" in texts(root)


def test_a_sub_axis_on_a_1d_mesh_is_seed_002s_layout():
    _, root = grid('[{"d":(2)4}]', "d=8", (10,))
    # "d":(2)4 is the minor 4 of d=8 = [2, 4]: device d holds block d % 4 (devices 0 and 4 hold block 0);
    # blocks are ceil(10 / 4) = 3 long, the last one padded to [9, 10)
    assert [(dev, idx) for dev, idx, _ in blocks(root)] == [
        ("0,4", [[0, 3]]), ("1,5", [[3, 6]]), ("2,6", [[6, 9]]), ("3,7", [[9, 10]])]
    ys = {b.get("y") for b in by_class(root, "rect", "block")}
    assert len(ys) == 1  # rank 1: one row


def test_rank_three_draws_one_panel_per_block_of_the_leading_dimension():
    _, root = grid('[{"y"}, {}, {"x"}]', "x=2,y=4", (8, 7, 6))
    panels = by_class(root, "g", "panel")
    assert len(panels) == 4  # y=4 splits dimension 0 in four
    for k, panel in enumerate(panels):
        cells = by_class(panel, "rect", "block")
        # in panel k (y = k), x splits dimension 2: device = 4 x + y
        assert [c.get("data-devices") for c in cells] == [str(k), str(4 + k)]
        assert all(eval(c.get("data-index"))[0] == [2 * k, 2 * k + 2] for c in cells)
    assert "one panel per block of dimension 0" in " ".join(texts(root))


def test_a_scalar_is_one_cell_held_by_every_device():
    _, root = grid("[]", "x=2,y=2", ())
    assert [(dev, idx) for dev, idx, _ in blocks(root)] == [("0,1,2,3", [])]


def test_a_pending_sum_is_stated():
    _, root = grid('[{"x"}, {}], unreduced={"y"}', "x=2,y=2", (4, 4))
    assert any("pending sum over {\"y\"}" in t for t in texts(root))
    assert len(blocks(root)) == 2


def test_the_grid_is_deterministic():
    assert grid('[{"x"}, {"y"}]', "x=2,y=4", (64, 32))[0] == grid('[{"x"}, {"y"}]', "x=2,y=4", (64, 32))[0]


def test_too_many_blocks_are_refused_with_the_way_out():
    with pytest.raises(NotExpressibleError, match="--format json"):
        grid('[{"x"}]', "x=8192", (8192,))


def test_describe_format_svg_writes_the_grid(tmp_path, capsys):
    out = tmp_path / "grid.svg"
    assert main(["describe", '[{"x"}, {"y"}]', "--mesh", "x=2,y=4", "--shape", "64x32", "--format", "svg",
                 "--out", str(out)]) == 0
    assert len(by_class(ET.parse(out).getroot(), "rect", "block")) == 8
    assert main(["describe", '[{"x"}]', "--mesh", "x=8192", "--shape", "8192", "--format", "svg"]) == 2
    assert "--format json" in capsys.readouterr().err


def cells_by_device(root):
    """Device -> (x, y) of its cell, checking that every cell of the by-device view holds one device."""
    out = {}
    for b in by_class(root, "rect", "block"):
        (device,) = map(int, b.get("data-devices").split(","))
        assert device not in out, f"device {device} drawn twice"
        out[device] = (float(b.get("x")), float(b.get("y")))
    return out


def fits(root, side=2000.0):
    return float(root.get("width")) <= side and float(root.get("height")) <= side


def grid_positions(cells):
    """Device -> (row, column), ranking the distinct x and y coordinates of the cells."""
    xs = sorted({x for x, _ in cells.values()})
    ys = sorted({y for _, y in cells.values()})
    return {d: (ys.index(y), xs.index(x)) for d, (x, y) in cells.items()}


def test_256_devices_on_one_axis_wrap_into_a_square_that_fits():
    _, root = grid('[{"x"}, {}]', "x=256", (1024, 64))
    # by block this is 256 rows of one cell (256 x 44 px and more: far over 2,000 px), so it is drawn by
    # device, wrapped row-major ceil(sqrt(256)) = 16 per row: device d at row d // 16, column d % 16
    assert fits(root)
    cells = cells_by_device(root)
    assert sorted(cells) == list(range(256))
    assert grid_positions(cells) == {d: (d // 16, d % 16) for d in range(256)}
    # each device's cell still carries its block: rows [4 d, 4 d + 4) of 1024 / 256 = 4 rows each
    index = {int(b.get("data-devices")): eval(b.get("data-index")) for b in by_class(root, "rect", "block")}
    assert index == {d: [[4 * d, 4 * d + 4], [0, 64]] for d in range(256)}


def test_a_16x16_mesh_is_drawn_in_its_own_shape():
    _, root = grid('[{"x", "y"}, {}]', "x=16,y=16", (1024, 64))
    # 256 blocks of dimension 0 do not fit by block; by device the mesh's shape is already square:
    # rows are x, columns y, and device d = 16 x + y sits at row d // 16, column d % 16
    assert fits(root)
    assert grid_positions(cells_by_device(root)) == {d: (d // 16, d % 16) for d in range(256)}
    assert "the mesh's shape" in " ".join(texts(root))


def test_a_three_axis_mesh_is_cut_where_it_is_closest_to_square():
    _, root = grid('[{"z"}]', "x=4,y=4,z=16", (256,))
    # one row of 16 blocks of 16 devices fits by block; a 256-block row does not:
    _, wide = grid('[{"x", "y", "z"}]', "x=4,y=4,z=16", (256,))
    assert len(by_class(root, "rect", "block")) == 16
    # cuts of 4 x 4 x 16: 4 | 64 or 16 | 16; the square one puts (x, y) on rows and z on columns
    assert fits(wide)
    assert grid_positions(cells_by_device(wide)) == {d: (d // 16, d % 16) for d in range(256)}


def test_a_long_thin_mesh_is_wrapped_near_square_rather_than_in_its_shape():
    _, root = grid('[{"x", "y"}]', "x=64,y=4", (256,))
    # the only cut, 64 x 4, is 16 times longer than wide (over MAX_ASPECT): wrapped 16 per row instead
    assert fits(root)
    assert grid_positions(cells_by_device(root)) == {d: (d // 16, d % 16) for d in range(256)}
    assert "16 per row" in " ".join(texts(root))


def test_a_long_row_of_blocks_is_drawn_by_device():
    _, root = grid('[{"x"}]', "x=256", (512,))
    # one row of 256 blocks at 56 px at least is 14,336 px wide
    assert fits(root) and sorted(cells_by_device(root)) == list(range(256))


def test_pending_sums_are_hatched_and_marked_apart_from_replication():
    _, pending = grid('[{"x"}, {}], unreduced={"y"}', "x=2,y=2", (4, 4))
    _, copies = grid('[{"x"}, {}]', "x=2,y=2", (4, 4))
    # both draw 2 blocks held by 2 devices each (x splits the rows; y is summed over or replicated)
    assert [b.get("data-devices") for b in by_class(pending, "rect", "block")] == \
        [b.get("data-devices") for b in by_class(copies, "rect", "block")] == ["0,1", "2,3"]
    assert len(by_class(pending, "rect", "pending")) == 2 and len(by_class(pending, "text", "pending-mark")) == 2
    assert all(b.get("data-pending") == "true" for b in by_class(pending, "rect", "block"))
    assert all(r.get("fill") == "url(#pending-hatch)" for r in by_class(pending, "rect", "pending"))
    assert [g.get("data-kind") for g in by_class(pending, "g", "legend-entry")] == ["pending"]
    assert not by_class(copies, "rect", "pending") and not by_class(copies, "text", "pending-mark")
    assert [g.get("data-kind") for g in by_class(copies, "g", "legend-entry")] == ["copy"]
    assert any("partial sums" in t and "not copies" in t for t in texts(pending))


def test_pending_sums_stay_marked_on_every_device_of_a_large_grid():
    _, root = grid('[{"x"}], unreduced={"y"}', "x=128,y=2", (256,))
    assert fits(root)
    assert len(by_class(root, "rect", "pending")) == len(cells_by_device(root)) == 256


def test_the_caption_gives_each_devices_bytes_in_the_reports_style():
    _, root = grid('[{"x"}, {}]', "x=2,y=4", (4096, 1024))
    # a 2048x1024 f32 block: 2,097,152 elements of 4 bytes = 8,388,608 B, printed as the text report does
    assert any("local 2048x1024 (8.39 MB per device)" in t for t in texts(root))


def test_a_block_view_that_fits_is_drawn_whatever_the_number_of_devices():
    _, root = grid("[{}]", "x=8192", (16,))
    # one block held by all 8,192 devices: one cell, though a cell per device would be too many
    assert [b.get("data-devices") for b in by_class(root, "rect", "block")] == [",".join(map(str, range(8192)))]
    with pytest.raises(NotExpressibleError, match="one cell per device would be 8,192 cells.*--format json"):
        grid('[{"x":(1)64}]', "x=8192", (64,))  # 64 blocks in a row: too wide by block, too many devices
