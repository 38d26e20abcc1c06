"""Tensor shardings' pending reductions (a sum, a maximum or a minimum, printed as Shardy's unreduced axes), and
the layout a JAX array holds."""

import pytest

from planner.errors import ParseError, ShardingError
from planner.ir.text import parse_mesh, parse_sharding

MESH = parse_mesh('@m = <["x"=2, "y"=4]>')


def test_a_pending_maximum_prints_its_kind_and_round_trips():
    # a pending sum prints as before; a maximum or minimum names its kind before the axes
    for text in ('sharding<@m, [{"x"}, {}], unreduced=max{"y"}>', 'sharding<@m, [{}, {}], unreduced=min{"x", "y"}>',
                 'sharding<@m, [{"x"}, {}], unreduced={"y"}>'):
        s = parse_sharding(text, MESH)
        assert str(s) == text and parse_sharding(str(s), MESH) == s
    assert parse_sharding('[{}, {}], unreduced=max{"y"}', MESH) != parse_sharding('[{}, {}], unreduced={"y"}', MESH)
    # nothing pending: the kind is moot and reads as a sum
    assert parse_sharding('[{}, {}], unreduced=max{"y"}', MESH).with_unreduced(()).reduction == "sum"


def test_an_unknown_pending_reduction_is_refused_by_name():
    with pytest.raises(ParseError, match="unreduced=avg"):
        parse_sharding('[{}, {}], unreduced=avg{"y"}', MESH)
    with pytest.raises(ShardingError, match="unknown pending reduction"):
        parse_sharding('[{}, {}]', MESH).with_unreduced((), "mean")


def test_whole_even_keeps_the_prefix_of_whole_axes_that_divides_each_dimension():
    # the result shardings Shardy gives jitted functions (JAX 0.10.2, read after propagation): a sub-axis ends a
    # dimension's prefix ([{"dp", "tp":(1)2}, {"tp":(2)2}] -> [{"dp"}, {}]); so does an axis that would pad (12 rows
    # on a, b, c of 2 each keep a, b: 12 % 8 != 0, 12 % 4 == 0)
    mesh = parse_mesh('@m = <["dp"=2, "tp"=4]>')
    s = parse_sharding('[{"dp", "tp":(1)2}, {"tp":(2)2}, {}], unreduced={}', mesh)
    assert s.whole_even((4, 4, 32)).dims_text() == '[{"dp"}, {}, {}]'
    cube = parse_mesh('@c = <["a"=2, "b"=2, "c"=2]>')
    assert parse_sharding('[{"a", "b", "c"}, {}]', cube).whole_even((12, 32)).dims_text() == '[{"a", "b"}, {}]'
    assert parse_sharding('[{}, {"a", "b", "c"}]', cube).whole_even((16, 31)).dims_text() == '[{}, {}]'
    even = parse_sharding('[{"a"}, {"b"}, {"c"}]', cube)
    assert even.whole_even((2, 8, 32)) is even
    with pytest.raises(ShardingError, match="rank"):
        even.whole_even((2, 8))
