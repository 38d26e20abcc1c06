"""docs/model-format.md stays true: its error examples are what the bad models really report."""

from pathlib import Path

import pytest

from graphs import load_model
from planner.errors import ModelError

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "model-format.md").read_text()
BAD = ROOT / "tests" / "graphs" / "bad_models"
EXAMPLES = DOC.split("## Errors", 1)[1].split("```")[1].strip().splitlines()


@pytest.mark.parametrize("line", EXAMPLES, ids=[x.split(":")[0] for x in EXAMPLES])
def test_documented_error_is_the_real_one(line):
    filename = line.split(":", 1)[0]
    with pytest.raises(ModelError) as info:
        load_model(str(BAD / filename))
    real = str(info.value).replace(str(BAD) + "/", "")
    assert real.startswith(line.split("...")[0])


def test_every_op_is_documented():
    from graphs.ops.registry import op_names

    table = DOC.split("### Operator list", 1)[1].split("\n## ", 1)[0]
    for name in op_names():
        assert f"`{name}`" in table, name


def test_every_top_level_key_is_documented():
    from graphs.yaml_format import TOP_LEVEL_KEYS

    for key in TOP_LEVEL_KEYS:
        assert f"| `{key}` |" in DOC, key


def test_the_complete_examples_load():
    import re

    from graphs import load_model_text

    yaml_blocks = re.findall(r"```yaml\n(.*?)```", DOC, re.S)
    for block in yaml_blocks[:2]:
        assert load_model_text(block).ops


def test_the_python_examples_run(monkeypatch):
    import re

    monkeypatch.chdir(ROOT)
    for block in re.findall(r"```python\n(.*?)```", DOC, re.S):
        exec(block, {})
