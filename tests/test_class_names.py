"""Each class name has one meaning: no two modules of the packages define a class of the same name."""

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_no_two_modules_define_a_class_of_the_same_name():
    where = defaultdict(list)
    for top in ("planner", "graphs", "costmodels"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.ClassDef):
                    where[node.name].append(str(path.relative_to(ROOT)))
    twice = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not twice, f"class names defined in several modules: {twice}"
