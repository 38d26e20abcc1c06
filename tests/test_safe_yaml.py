"""planner.safe_yaml: nesting and alias expansion bounded before any object is built."""

from __future__ import annotations

import time

import pytest
import yaml

from planner.errors import LimitError
from planner.limits import MAX_YAML_DEPTH, MAX_YAML_NODES
from planner.safe_yaml import load


def bomb(levels: int, fan: int = 10) -> str:
    """``levels`` anchors, each a list of ``fan`` aliases of the previous: fan**levels leaves."""
    lines = ["l0: &l0 [" + ", ".join(["x"] * fan) + "]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * fan) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_shared_aliases_within_the_limit_load():
    doc = load(bomb(4))  # 10^4 leaves expanded: far under the limit
    assert len(doc["l3"]) == 10 and doc["l3"][0] is doc["l2"]  # aliases stay shared objects


def test_alias_bomb_is_refused_at_its_line_without_expanding():
    start = time.process_time()
    with pytest.raises(LimitError, match=f"more than {MAX_YAML_NODES:,} items") as info:
        load(bomb(9), "bomb.yaml")
    # l_k expands to 1 + 10 * (l_(k-1)'s nodes) = (10^(k+2) - 1) / 9 nodes (l0: 11): l5 is the first past
    # 10^6 with 1,111,111; it is on line 6
    assert info.value.where == "bomb.yaml:6"
    assert time.process_time() - start < 1.0  # one visit per node of the file, not per expanded node


def test_depth_counts_through_aliases():
    inner = "[" * 60 + "]" * 60
    text = f"a: &a {inner}\nb: {'[' * 50}*a{']' * 50}\n"  # each part under 100 levels, together over
    with pytest.raises(LimitError, match=f"more than {MAX_YAML_DEPTH} levels"):
        load(text)


def test_deep_block_nesting_is_refused_not_a_recursion_error():
    text = "".join("  " * i + f"k{i}:\n" for i in range(5000)) + "  " * 5000 + "v: 1\n"
    with pytest.raises(LimitError, match="nested more than"):
        load(text, "deep.yaml")


def test_recursive_alias_is_refused():
    with pytest.raises(LimitError, match="never ends"):
        load("a: &a [1, *a]\n")


def test_merge_keys_still_work():
    assert load("base: &b {x: 1}\nd: {<<: *b, y: 2}\n")["d"] == {"x": 1, "y": 2}


def test_yaml_1_1_integer_spellings_read_as_yaml_does():
    # hex 0x2 = 2, binary 0b10 = 2, -0x8 = -8, a leading 0 is octal (017 = 8 + 7 = 15, as is !!int 0o17),
    # sexagesimal 1:30 = 1 * 60 + 30 = 90, underscores are separators (1_000 = 1000)
    assert load("[0x2, 0b10, -0x8, 017, !!int 0o17, 1:30, 1_000]") == [2, 2, -8, 15, 15, 90, 1000]


@pytest.mark.parametrize("value, kind", [
    ("2020-13-45", "a date"),      # a plain value spelled like a date that is none
    ("!!int abc", "an integer"),   # a tag naming a type its text is not
    ('!!int "-"', "an integer"),  # a tag on a quoted value still types it
    ("!!float 0x10", "a number"),
    ("!!bool maybe", "a boolean"),
])
def test_value_not_of_the_type_yaml_reads_it_as_is_a_located_yaml_error(value, kind):
    with pytest.raises(yaml.constructor.ConstructorError) as info:
        load(f"a: 1\nb: {value}\n", "m.yaml")
    assert info.value.problem_mark.line + 1 == 2
    assert kind in info.value.problem and "quote the value" in info.value.problem


def test_a_hex_integer_of_too_many_digits_is_refused_before_it_is_read():
    with pytest.raises(LimitError, match="m.yaml:1: a number has 102 digits"):
        load("a: 0x" + "f" * 100, "m.yaml")  # the prefix counts: 2 + 100 characters
