"""Tensor shardings' pending reductions: a sum, a maximum or a minimum, printed as Shardy's unreduced axes."""

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
