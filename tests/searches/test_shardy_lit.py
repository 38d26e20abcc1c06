"""Shardy's propagation lit tests as golden tests, through the CLI.

Each YAML file under ``shardy_lit/`` transcribes vectors of one lit file of Shardy
(``shardy/dialect/sdy/transforms/propagation/test/<name>.mlir``): per vector the lit
function it comes from (``func``), the pass its RUN line runs (``propagation``), the
function as one of our models, and the shardings its CHECK lines give (``expected``).
Each vector is planned by ``shardplan plan MODEL --search propagate --propagation PASS
--format json`` and every CHECKed value must have the CHECKed sharding.
"""

import json
from pathlib import Path

import pytest
import yaml

from planner.cli.main import main

HERE = Path(__file__).resolve().parent / "shardy_lit"
VECTORS = [(path.stem, v) for path in sorted(HERE.glob("*.yaml")) for v in yaml.safe_load(path.read_text())]


def test_the_vectors_cover_priorities_groups_sub_axes_and_manual_computations():
    files = {stem for stem, _ in VECTORS}
    assert files == {"user_priority_propagation", "op_priority_propagation", "sharding_group_propagation",
                     "basic_propagation", "basic_propagation_manual_computation"}
    assert len(VECTORS) >= 15
    assert any(":(" in s for _, v in VECTORS for s in v["expected"].values())  # sub-axes among the CHECKs


IDS = [f"{stem}:{v['func'].split()[0]}:{v['propagation']}" for stem, v in VECTORS]


@pytest.mark.parametrize("stem, vector", VECTORS, ids=IDS)
def test_shardy_lit_vector(stem, vector, tmp_path, capsys):
    model = tmp_path / "model.yaml"
    model.write_text(yaml.safe_dump(vector["model"], sort_keys=False))
    argv = ["plan", str(model), "--search", "propagate", "--propagation", vector["propagation"], "--format", "json"]
    assert main(argv) == 0, capsys.readouterr().err
    tensors = json.loads(capsys.readouterr().out)["tensors"]
    got = {t: tensors[t]["sharding"] for t in vector["expected"]}
    assert got == {t: f"sharding<@mesh, {s}>" for t, s in vector["expected"].items()}
