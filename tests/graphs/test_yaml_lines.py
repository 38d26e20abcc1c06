import pytest

from graphs.yaml_lines import LineDict, LineList, parse_yaml, plain
from planner.errors import ModelError


def test_mappings_and_lists_record_lines():
    doc = parse_yaml("name: x\ntensors:\n  a: {shape: [1]}\n  b:\n    shape: [2]\nops:\n  - {op: relu}\n  -\n    op: neg\n")
    assert isinstance(doc, LineDict) and doc.line == 1
    assert doc.key_lines == {"name": 1, "tensors": 2, "ops": 6}
    assert doc["tensors"].line_of("b") == 4 and doc["tensors"]["b"].line == 5
    assert isinstance(doc["ops"], LineList) and doc["ops"].item_lines == [7, 9]


def test_duplicate_keys_are_reported_with_both_lines():
    with pytest.raises(ModelError) as e:
        parse_yaml("a: 1\nb: 2\na: 3\n", "f.yaml")
    assert e.value.where == "f.yaml:3" and "first at line 1" in e.value.message


def test_merge_keys_may_be_overridden():
    doc = parse_yaml("base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\n")
    assert plain(doc["d"]) == {"x": 1, "y": 3}


def test_plain_returns_builtin_types():
    out = plain(parse_yaml("a: [1, {b: 2}]\n"))
    assert type(out) is dict and type(out["a"]) is list and type(out["a"][1]) is dict
