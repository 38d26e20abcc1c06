"""The search state's geometry helpers: distinct values, and permutes lifted to every replica."""

import numpy as np

from planner.ir.axis import AxisRef
from planner.ir.mesh import Mesh
from planner.redistribution.state import Pieces, distinct


def test_distinct_values_are_sorted_and_unique():
    for values in ([3, 1, 3, 0, 1], [], [7], [2, 2, 2]):
        assert distinct(np.array(values, dtype=np.int64)).tolist() == sorted(set(values))


def test_lifted_pairs_repeat_each_pair_in_every_replica():
    """Within axis y of x=2,y=4,z=2, the rows are the devices with x and z digits 0; a permute
    between two rows is the same permute in each of the four (x, z) replicas, shifted by the
    replica's position offset."""
    mesh = Mesh.from_sizes("m", {"x": 2, "y": 4, "z": 2})
    pc = Pieces.refine(mesh, (8, 8), [], False, within=[AxisRef("y")])
    assert pc.n == 4
    pairs = [(0, 3), (2, 1)]
    expected = sorted(
        (int(pc.device_at[pc.positions[a] + off]), int(pc.device_at[pc.positions[b] + off]))
        for a, b in pairs for off in pc.offsets.tolist()
    )
    assert pc.lift_pairs(pairs) == tuple(expected)
    assert len(expected) == len(pairs) * mesh.size // pc.n
    assert pc.lift_pairs([]) == ()
