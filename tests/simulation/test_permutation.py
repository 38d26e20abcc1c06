"""A concatenate along a sharded dimension runs as XLA's SPMD partitioner compiles it: each operand moved off
that dimension by an AllToAll (or AllGathered along it where no other dimension divides), a local concatenate,
the result moved back; the backward slices each operand's piece out of the cotangent, as XLA does. A slice runs
XLA's halo exchange, forward and backward (its zero pad). Forward and backward equal the single-device reference
(f64) and the bytes the simulator moves equal the plan's op collectives."""

import pytest

from planner.api import plan
from planner.model.halo_exchange import halo_permutes
from planner.simulation.run import simulate

#: case -> (mesh, operand shapes, concat axis, the operands' and result's sharding, exchanges' group size)
CASES = {
    "1d": ("{d: 8}", [(16, 16), (16, 16)], 1, '[{}, {"d"}]', 8),
    "unequal": ("{d: 8}", [(16, 8), (16, 24)], 1, '[{}, {"d"}]', 8),
    "three": ("{d: 8}", [(16, 16), (16, 8), (16, 24)], 1, '[{}, {"d"}]', 8),
    "rows 2d": ("{a: 2, b: 4}", [(8, 32), (8, 32)], 0, '[{"a"}, {}]', 2),
    "both 2d": ("{a: 2, b: 4}", [(16, 16), (16, 16)], 1, '[{"a"}, {"b"}]', 4),
    "3-d": ("{d: 8}", [(4, 8, 16), (4, 8, 8)], 2, '[{}, {}, {"d"}]', 8),
    # no other dimension splits 8 ways (6 rows): each operand is gathered, each device slices the result
    "gathered": ("{d: 8}", [(6, 16), (6, 8)], 1, '[{}, {"d"}]', 8),
}


def _model(case: str, kind: str = "param") -> str:
    mesh, shapes, axis, sharding, _ = CASES[case]
    names = [f"x{i}" for i in range(len(shapes))]
    tensors = "".join(f"\n  {n}: {{shape: {list(s)}, kind: {kind}, sharding: '{sharding}'}}"
                      for n, s in zip(names, shapes))
    return f"""
name: cat
mesh: {mesh}
tensors:{tensors}
ops:
  - {{name: c, op: concat, inputs: [{", ".join(names)}], output: z, axis: {axis}}}
  - {{name: t, op: tanh, inputs: [z], output: y, out_sharding: '{sharding}'}}
outputs: [y]
"""


def _result_shape(case):
    _, shapes, axis, _, _ = CASES[case]
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return out


def _local_bytes(shape, devices: int) -> int:
    n = 4  # f32
    for d in shape:
        n *= d
    return n // devices


def _check(p, compute, forward, backward):
    """The op's forward and backward exchanges are ``forward`` and ``backward`` ([kind, bytes per device]), and
    the plan simulates exactly, moving the bytes it predicts."""
    assert [(c.kind, c.bytes_per_device) for c in compute.collectives] == forward
    assert [(c.kind, c.bytes_per_device) for c in p.program.op_collectives("backward")] == backward
    r = simulate(p)
    assert r.ok, r
    assert r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device


@pytest.mark.parametrize("case", sorted(CASES))
def test_concat_along_a_sharded_dimension_simulates_exactly_with_its_exchanges(case):
    p = plan(_model(case), search="propagate", training=True)
    [compute] = [c for c in p.program.computes() if c.op.name == "c"]
    mesh, shapes, _, _, group = CASES[case]
    devices = 2 if case == "rows 2d" else 8  # the blocks each tensor is split into (the sharding's axes)
    out = _result_shape(case)
    if case == "gathered":
        # an AllGather receives the p - 1 blocks a device lacks; the result's own part is sliced locally
        forward = [("AllGather", _local_bytes(s, devices) * (group - 1)) for s in shapes]
    else:
        # an AllToAll keeps one of p chunks of the local block: each operand, then the result
        a2a = [("AllToAll", _local_bytes(s, devices) * (group - 1) // group) for s in shapes]
        forward = a2a + [("AllToAll", _local_bytes(out, devices) * (group - 1) // group)]
    _check(p, compute, forward, _pieces_back(case, shapes, out, devices))
    assert not any(r.plan.steps for r in p.program.redistributions("forward"))


def _pieces_back(case, shapes, out, devices, wrt=None):
    """A concat's backward as XLA compiles it: each operand's piece sliced out of the cotangent, the slice's halo
    exchange (planner/model/halo_exchange.py, pinned to XLA's permutes by tests/model/test_halo_exchange.py),
    or, where XLA gathers, one AllGather of the cotangent (the p - 1 blocks a device lacks) cut locally."""
    _, _, axis, _, group = CASES[case]
    rest = _local_bytes(out, devices) // (out[axis] // group)  # bytes of one element along the axis, per block
    moves, start, gathered = [], 0, False
    for k, shape in enumerate(shapes):
        permutes = halo_permutes(out[axis], shape[axis], -start, group)
        start += shape[axis]
        if wrt is not None and k not in wrt:
            continue
        if permutes is None and not gathered:
            moves.append(("AllGather", _local_bytes(out, devices) * (group - 1)))
            gathered = True
        moves += [("CollectivePermute", (hi - lo) * rest) for lo, hi, _ in permutes or ()]
    return moves


def test_a_gradient_of_one_operand_slices_only_its_piece():
    text = _model("1d").replace("x0: {shape: [16, 16], kind: param", "x0: {shape: [16, 16], kind: input")
    p = plan(text, search="propagate", training=True)
    # x1 is columns [16, 32) of the 16x32 cotangent over 8 devices (4 columns a block, 2 of a piece's block):
    # block i of x1's cotangent is the cotangent's [16 + 2i, 18 + 2i), in block 4 + i // 2, which XLA's compact
    # exchange moves in two permutes, a 2-column range of blocks 4..7 each (16 rows x 2 x 4 B)
    backward = [(c.kind, c.bytes_per_device) for c in p.program.op_collectives("backward")]
    assert backward == _pieces_back("1d", [(16, 16), (16, 16)], [16, 32], 8, wrt=(1,)) == \
        [("CollectivePermute", 128)] * 2
    assert {c.operand for c in p.program.op_collectives("backward")} == {1}  # x1's cotangent, as run lists it
    r = simulate(p)
    assert r.ok and r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device


def test_every_search_prices_the_exchanges_and_simulates_them():
    # the large concat of benchmarks/xla_concat_slice.py, where bandwidth outweighs latency: every search
    # keeps the concatenated dimension sharded (or moves the same bytes around a local concat)
    text = _model("1d").replace("[16, 16]", "[2048, 2048]")
    for search in ("bfs", "ilp", "propagate"):
        p = plan(text, search=search, training=True)
        r = simulate(p)
        assert r.ok, (search, r)
        assert r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device
        # forward 3 AllToAlls of 7/8 of the local blocks (operands 2 MiB, result 4 MiB over 8); backward the
        # halo exchanges slicing both operands' pieces out of the cotangent
        forward = (2 * 2 ** 21 + 2 ** 22) * 7 // 8
        backward = sum(b for _, b in _pieces_back("1d", [(2048, 2048)] * 2, [2048, 4096], 8))
        assert r.predicted_comm_bytes_per_device == forward + backward, search


#: slice case -> (mesh, input shape, starts, stops, sharding, XLA's forward permutes, its backward's), each a
#: permute's bytes per device, derived by hand from XLA's halo exchange (planner/model/halo_exchange.py;
#: tests/model/test_halo_exchange.py compares it with XLA itself): block i of the result needs the input's
#: [start + b_o i, start + b_o (i + 1)), where b_i and b_o are the input's and the result's blocks; the backward
#: pads the cotangent with zeros back to the input's size, block i needing the cotangent's [b_i i - start, ...)
SLICES = {
    # b_i 4, b_o 2 over 8 devices: block i's window lies in input block i // 2 (halo 2i > 2 b_o: the compact
    # exchange); the first permute sends whole blocks 0..3 to devices 1, 2, 4, 6, the second the upper halves of
    # blocks 1..3 to 3, 5, 7: 16 rows x 4 and x 2 columns of f32. Backward: block i < 4 needs cotangent blocks 2i
    # and 2i + 1 (2 columns each), in two permutes; blocks 4..7 are all padding
    "prefix": ("{d: 8}", (16, 32), (0, 0), (16, 16), '[{}, {"d"}]', [16 * 4 * 4, 16 * 2 * 4], [16 * 2 * 4] * 2),
    # windows [8 + 2i, 10 + 2i): blocks 2..5 halves; device 4 keeps its own; the same two permutes' sizes.
    # Backward: halos of at most 8 = 2 b_i: the neighbour exchange, three permutes from the left (distances 3, 2,
    # 1) and three from the right, each a whole cotangent block of 2 columns
    "middle": ("{d: 8}", (16, 32), (0, 8), (16, 24), '[{}, {"d"}]', [16 * 4 * 4, 16 * 2 * 4], [16 * 2 * 4] * 6),
    # 6 rows: the same windows, buffers of 6 rows
    "short rows": ("{d: 8}", (6, 32), (0, 8), (6, 24), '[{}, {"d"}]', [6 * 4 * 4, 6 * 2 * 4], [6 * 2 * 4] * 6),
    # rows [4, 12) of 16 over a = 2 (b_i 8, b_o 4): each window lies in the device's own block, nothing moves;
    # backward, each block is its own cotangent block beside zeros
    "rows 2d": ("{a: 2, b: 4}", (16, 32), (4, 0), (12, 32), '[{"a"}, {"b"}]', [], []),
    # a window that splits unevenly (15 over 8: blocks of 2, the last padded), an LM's shifted labels x[:, 1:]:
    # block i needs [1 + 2i, 3 + 2i), its own block's second element and its right neighbour's first: one
    # permute of 1 column (16 rows x 4 B). Backward, the cotangent padded by one zero before: each block needs
    # its left neighbour's last element, one permute of 1 column
    "shift right": ("{d: 8}", (16, 16), (0, 1), (16, 16), '[{}, {"d"}]', [16 * 4], [16 * 4]),
    # x[:, :-1]: block i needs [2i, 2i + 2), its own block, forward and backward: nothing moves
    "shift left": ("{d: 8}", (16, 16), (0, 0), (16, 15), '[{}, {"d"}]', [], []),
    # a window of fewer positions than devices, x[:, 1:4] of 8 over 4 (b_i 2, b_o 1, block 3 only padding, which
    # XLA trims before its exchange): block i needs position 1 + i, a left halo of i - 1, at most 1: one permute of
    # 1 column to blocks 1 and 2. Backward, the cotangent's 3 positions (blocks of 1) padded back to 8 (blocks of
    # 2): block i needs the cotangent's [2i - 1, 2i + 1), right halos of i up to 2: two permutes of 1 column
    "small window": ("{d: 4}", (16, 8), (0, 1), (16, 4), '[{}, {"d"}]', [16 * 4], [16 * 4] * 2),
}
#: a slice whose backward XLA gathers: x[:, :4] of 12 columns over 4 devices (b_i 3, b_o 1). Forward, compact:
#: block i needs column i; blocks 1 and 3 get theirs in one permute (columns [1, 2) of block 0 and [0, 1) of block
#: 1: a 2-column buffer), block 2 in a second (1 column). Backward, the cotangent padded from 4 to 12 columns
#: (output blocks of 3): its halos (up to 8) exceed twice the output block, but that (6) covers the whole
#: cotangent (4 blocks of 1), so XLA gathers it (an AllGather: the 3 one-column blocks of 3 rows a device lacks)
#: and each device pads and slices locally
GATHERED_BACK = ("{d: 4, e: 2}", (3, 12), (0, 0), (3, 4), '[{}, {"d"}]', [3 * 2 * 4, 3 * 1 * 4], [])


def _slice_model(spec) -> str:
    mesh, shape, starts, stops, sharding, _, _ = spec
    return f"""
name: sl
mesh: {mesh}
tensors:
  x: {{shape: {list(shape)}, kind: param, sharding: '{sharding}'}}
ops:
  - {{name: s, op: slice, inputs: [x], output: z, starts: {list(starts)}, stops: {list(stops)}}}
  - {{name: t, op: tanh, inputs: [z], output: y, out_sharding: '{sharding}'}}
outputs: [y]
"""


@pytest.mark.parametrize("case", sorted(SLICES))
def test_slice_along_a_sharded_dimension_simulates_exactly_with_xlas_halo_exchange(case):
    p = plan(_slice_model(SLICES[case]), search="propagate", training=True)
    [compute] = [c for c in p.program.computes() if c.op.name == "s"]
    forward, backward = ([("CollectivePermute", b) for b in sizes] for sizes in SLICES[case][-2:])
    _check(p, compute, forward, backward)


def test_a_slice_whose_backward_xla_gathers_gathers_the_cotangent():
    p = plan(_slice_model(GATHERED_BACK), search="propagate", training=True)
    [compute] = [c for c in p.program.computes() if c.op.name == "s"]
    _check(p, compute, [("CollectivePermute", 24), ("CollectivePermute", 12)], [("AllGather", 3 * 1 * 4 * 3)])


def test_a_slice_of_two_dimensions_needs_them_replicated():
    text = _slice_model(SLICES["prefix"]).replace("starts: [0, 0], stops: [16, 16]", "starts: [0, 0], stops: [8, 16]")
    p = plan(text, search="propagate", training=True)
    [compute] = [c for c in p.program.computes() if c.op.name == "s"]
    assert compute.collectives == () and compute.strategy.operands[0].dims_text() == "[{}, {}]"
    r = simulate(p)
    assert r.ok and r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device


def test_a_window_of_at_most_half_the_devices_positions_is_replicated_by_an_allreduce_in_place():
    # x[:, 5:7] of 8 positions over 4 devices: a position on each of devices 0 and 1, devices 2 and 3 only
    # padding; read whole, each device puts its position in place in a zeroed window (a local Slice) and one
    # AllReduce of the 6 x 2 f32 window completes it, 2 * 3/4 * 48 B per device (XLA's ReplicatePartial; gathering
    # the 4 padded blocks would move as many, 3 x 6 x 1 f32)
    text = """
name: short
mesh: {d: 4}
tensors:
  x: {shape: [6, 8], kind: param, sharding: '[{}, {"d"}]'}
ops:
  - {name: s, op: slice, inputs: [x], output: z, starts: [0, 5], stops: [6, 7]}
  - {name: t, op: tanh, inputs: [z], output: y, out_sharding: '[{}, {}]'}
outputs: [y]
"""
    p = plan(text, search="propagate", training=True)
    [move] = [r for r in p.redistributions if r.tensor == "z" and r.phase == "forward"]
    assert [(s.kind, s.bytes_per_device) for s in move.plan.steps] == [("Slice", 0), ("AllReduce", 72)]
    r = simulate(p)
    assert r.ok and r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device


PADDED_TAILS = {
    "dot": "  - {name: m, op: matmul, inputs: [h, w], output: y}",
    "product": "  - {name: m, op: mul, inputs: [h, z], output: y}",
    "sum over the window": "  - {name: m, op: sum, inputs: [h], output: y, axes: [1]}",
}


@pytest.mark.parametrize("tail", sorted(PADDED_TAILS))
@pytest.mark.parametrize("window", [(2, 3), (1, 4)])
def test_ops_compute_on_a_window_split_past_its_size_and_simulate_exactly(tail, window):
    # x[:, 2:3] and x[:, 1:4] of 8 positions over 4 devices: propagation keeps d on the window (a position per
    # device, the others padding) through tanh and the ops after it where the window passes through them (the dot's
    # rows, the product), as XLA computes on padded blocks; the sum over the window reads it replicated
    start, stop = window
    text = f"""
name: padded
mesh: {{d: 4}}
tensors:
  x: {{shape: [6, 8, 4], kind: param, sharding: '[{{}}, {{"d"}}, {{}}]'}}
  w: {{shape: [4, 5], kind: param}}
ops:
  - {{name: s, op: slice, inputs: [x], output: z, starts: [0, {start}, 0], stops: [6, {stop}, 4]}}
  - {{name: t, op: tanh, inputs: [z], output: h}}
{PADDED_TAILS[tail]}
outputs: [y]
"""
    for training in (False, True):
        p = plan(text.replace("  w: {shape: [4, 5], kind: param}\n", "") if tail != "dot" else text,
                 search="propagate", training=training)
        ops = {o.name: o for o in p.ops}
        assert ops["t"].result_sharding.dims_text() == '[{}, {"d"}, {}]'
        if tail != "sum over the window":
            assert ops["m"].result_sharding.dims_text() == '[{}, {"d"}, {}]'
        r = simulate(p)
        assert r.ok and r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device, (tail, training)
