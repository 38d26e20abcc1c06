import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from planner.ir import parse_mesh, parse_sharding
from planner.simulation.distributed import DistributedArray

from ..ir.shardings_strategy import shapes_for, shardings


@given(st.data())
def test_from_global_then_to_global_is_the_identity(data):
    s = data.draw(shardings())
    shape = data.draw(shapes_for(s.rank, max_dim=7))
    x = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    arr = DistributedArray.from_global(x, s, rng=np.random.default_rng(0))
    assert np.array_equal(arr.to_global(), x)
    assert all(b.shape == s.local_shape(shape) for b in arr.blocks)


def test_partial_sums_are_uneven_and_add_up():
    mesh = parse_mesh('@m = <["x"=2]>')
    x = np.full((2, 2), 10, dtype=np.int64)
    arr = DistributedArray.from_global(x, parse_sharding('[{}, {}], unreduced={"x"}', mesh), rng=np.random.default_rng(3))
    assert not np.array_equal(arr.blocks[0], arr.blocks[1])
    assert np.array_equal(arr.blocks[0] + arr.blocks[1], x)


def test_padding_is_zero_and_outside_the_tensor():
    mesh = parse_mesh('@m = <["x"=4]>')
    arr = DistributedArray.from_global(np.ones(5), parse_sharding('[{"x"}]', mesh))
    assert [b.tolist() for b in arr.blocks] == [[1, 1], [1, 1], [1, 0], [0, 0]]
