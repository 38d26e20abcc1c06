"""Device-variance types (seed 004): the ``f32[3,4]{i}`` syntax, printed and parsed."""

import pytest

from planner.errors import ParseError
from planner.ir.axis import AxisRef
from planner.ir.variance import VarType, parse_type


@pytest.mark.parametrize("text", ["f32[3]{i}", "f32[3,4]{i,j}", "i32[]{i}", "f32[8]", "f32[]"])
def test_type_text_round_trips(text):
    assert parse_type(text).text() == text
    assert parse_type(parse_type(text).text()) == parse_type(text)


def test_type_fields_come_from_the_seed_syntax():
    assert parse_type("f32[3,4]{i,j}") == VarType("f32", (3, 4), frozenset({"i", "j"}))
    assert parse_type("i32[]{i}") == VarType("i32", (), frozenset({"i"}))


def test_invariant_type_prints_without_braces_and_parses_with_empty_braces():
    assert str(VarType("f32", (8,))) == "f32[8]"
    assert parse_type("f32[8]{}") == parse_type("f32[8]") == VarType("f32", (8,), frozenset())


def test_axes_print_in_the_given_order_else_sorted():
    t = parse_type("f32[]{j,i}")
    assert t.text() == "f32[]{i,j}"
    assert t.text(order=("j", "i")) == "f32[]{j,i}"
    assert t.text(order=("j",)) == "f32[]{j,i}"  # axes missing from order come after, sorted


def test_variance_is_a_set_and_compares_as_one():
    assert parse_type("f32[2]{i,j}") == parse_type("f32[2]{j,i}")
    assert parse_type("f32[2]{i}") != parse_type("f32[2]{j}")
    assert parse_type("f32[2]{i}").varies_over("i") and parse_type("f32[2]{i}").invariant_over("j")


def test_sub_axes_are_accepted_as_axis_refs():
    t = VarType("f32", (2,), frozenset({AxisRef("x", 1, 2), "y"}))
    assert t.text() == 'f32[2]{"x":(1)2,y}'
    assert parse_type(t.text()) == t


@pytest.mark.parametrize("bad", ["f32", "f32[3,]", "f32[a]", "f32[3]{i", "F32[3]"])
def test_malformed_types_raise_parse_errors(bad):
    with pytest.raises(ParseError, match="device-variance type|dtype"):
        parse_type(bad)
