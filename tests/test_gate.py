"""planner.gate: measuring plans, baseline files, and the comparison the CI gate makes."""

import json
import shutil
from pathlib import Path

import pytest

from planner.gate import (
    Baseline,
    BaselineError,
    GateError,
    better_models,
    check_compatible,
    compare,
    load_baseline,
    measure,
    model_path,
    write_baseline,
    worse_models,
)
from planner.api import plan
from planner.searches import SEARCHES

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
CHECKED_IN = CONFIGS / "baselines.json"
SMALL = ("ffn", "megatron_mlp", "conv_net", "embedding_head")  # the configs that plan in well under a second


def metrics(bytes_, time_s, **kinds):
    return {"comm_bytes_per_device": bytes_, "comm_time_s": time_s, "collectives": kinds}


def pin_output_replicated(path: Path) -> None:
    """Make the FFN's output replicated: its plan must then all-gather instead of reduce-scatter."""
    text = path.read_text()
    assert "output: y}" in text
    path.write_text(text.replace("output: y}", "output: y, out_sharding: '[{}, {}]'}"))


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A checkout-like directory with two small models; the tests run from it."""
    models = tmp_path / "models"
    models.mkdir()
    for name in ("ffn", "megatron_mlp"):
        shutil.copy(CONFIGS / f"{name}.yaml", models / f"{name}.yaml")
    monkeypatch.chdir(tmp_path)
    return tmp_path


# -- measure ------------------------------------------------------------------------------------------

def test_measure_ffn_is_one_reduce_scatter():
    m = measure(CONFIGS / "ffn.yaml")
    assert m["comm_bytes_per_device"] == 6144
    assert m["collectives"] == {"ReduceScatter": 1}
    assert m["comm_time_s"] == pytest.approx(1.706144e-05)


def test_measure_counts_collectives_of_every_reshard_and_gradient_sync_but_not_slices():
    p = plan(str(CONFIGS / "ffn.yaml"), search="bfs", training=True).to_dict()
    steps = [s["kind"] for r in p["redistributions"] + p["gradient_syncs"] for s in r["steps"]]
    assert "Slice" in steps  # so the exclusion below is really tested
    m = measure(CONFIGS / "ffn.yaml", training=True)
    assert "Slice" not in m["collectives"]
    assert sum(m["collectives"].values()) == sum(1 for k in steps if k != "Slice")
    assert list(m["collectives"]) == sorted(m["collectives"])
    assert m["comm_bytes_per_device"] == p["totals"]["comm_bytes_per_device"]
    assert m["comm_time_s"] == p["totals"]["comm_time_s"]


def test_measure_is_deterministic():
    assert measure(CONFIGS / "megatron_mlp.yaml") == measure(CONFIGS / "megatron_mlp.yaml")


# -- the checked-in baselines ------------------------------------------------------------------------------

def test_checked_in_baseline_lists_every_config_measured_with_the_default_search():
    raw = json.loads(CHECKED_IN.read_text())
    assert sorted(raw["models"]) == sorted(p.name for p in CONFIGS.glob("*.yaml"))
    b = load_baseline(CHECKED_IN)
    assert (b.search, b.training) == (SEARCHES[0], False)
    assert all(Path(m).is_file() for m in b.models)


@pytest.mark.parametrize("name", SMALL)
def test_checked_in_baseline_holds_for_small_config(name):
    b = load_baseline(CHECKED_IN)
    rows = compare(b, {str(CONFIGS / f"{name}.yaml"): measure(CONFIGS / f"{name}.yaml", b.search, b.training)})
    assert [r.metric for r in rows] == ["comm_bytes_per_device", "comm_time_s", "collectives"]
    assert not worse_models(rows), rows
    assert all(r.change == 0 for r in rows), "the baseline is out of date: run shardplan check --update"


# -- baseline files -------------------------------------------------------------------------------------------

def test_written_baseline_stores_paths_relative_to_its_directory(workdir):
    entries = {"models/ffn.yaml": metrics(6144, 1.7e-05, ReduceScatter=1)}
    write_baseline("models/baselines.json", entries, "bfs", False)
    raw = json.loads((workdir / "models" / "baselines.json").read_text())
    assert raw == {"version": 1, "search": "bfs", "training": False,
                   "models": {"ffn.yaml": {"comm_bytes_per_device": 6144, "comm_time_s": 1.7e-05,
                                           "collectives": {"ReduceScatter": 1}}}}
    write_baseline("elsewhere.json", entries, "bfs", False)
    assert list(json.loads((workdir / "elsewhere.json").read_text())["models"]) == ["models/ffn.yaml"]


def test_baseline_works_from_another_checkout_and_directory(workdir, tmp_path_factory, monkeypatch):
    measured = {"models/ffn.yaml": measure("models/ffn.yaml")}
    write_baseline("models/baselines.json", measured, "bfs", False)
    other = tmp_path_factory.mktemp("other_checkout") / "repo"
    shutil.copytree(workdir, other)
    monkeypatch.chdir(other / "models")
    b = load_baseline("baselines.json")
    assert list(b.models) == ["ffn.yaml"]
    assert not worse_models(compare(b, {"ffn.yaml": measure("ffn.yaml")}))


def test_baseline_text_is_stable_sorted_and_ends_with_a_newline(workdir):
    entries = {
        "models/megatron_mlp.yaml": metrics(10, 2.0, AllReduce=1),
        "models/ffn.yaml": metrics(5, 1.0, ReduceScatter=1, AllGather=2),
    }
    path = workdir / "models" / "baselines.json"
    assert write_baseline(path, entries, "bfs", False) is True
    text = path.read_text()
    assert text.endswith("}\n")
    raw = json.loads(text)
    assert list(raw) == ["version", "search", "training", "models"]
    assert list(raw["models"]) == ["ffn.yaml", "megatron_mlp.yaml"]
    assert list(raw["models"]["ffn.yaml"]["collectives"]) == ["AllGather", "ReduceScatter"]
    before = path.stat().st_mtime_ns
    assert write_baseline(path, dict(reversed(list(entries.items()))), "bfs", False) is False
    assert path.read_text() == text and path.stat().st_mtime_ns == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["baselines.json", "ffn.yaml", "megatron_mlp.yaml"]


def test_load_round_trips_write(workdir):
    entries = {"models/ffn.yaml": metrics(6144, 1.7e-05, ReduceScatter=1)}
    write_baseline("models/b.json", entries, "ilp", True)
    b = load_baseline("models/b.json")
    assert b == Baseline(path="models/b.json", search="ilp", training=True, models=entries)
    assert write_baseline("models/b.json", b.models, b.search, b.training) is False


def test_missing_baseline_says_to_run_with_update(tmp_path):
    with pytest.raises(BaselineError) as info:
        load_baseline(tmp_path / "nope.json")
    assert str(tmp_path / "nope.json") in str(info.value)
    assert "--update" in str(info.value) and "create it" in str(info.value)


def test_invalid_json_names_file_and_line(tmp_path):
    bad = tmp_path / "b.json"
    bad.write_text('{\n  "version": 1,\n  oops\n}\n')
    with pytest.raises(BaselineError, match=r"b\.json: line 3 column 3: not valid JSON .*--update"):
        load_baseline(bad)


@pytest.mark.parametrize("doc, message", [
    ([], "a baseline is a JSON object"),
    ({"version": 1, "search": "bfs", "training": False}, "the baseline has no models"),
    ({"version": 2, "search": "bfs", "training": False, "models": {}}, "version is 2"),
    ({"version": 1, "search": "dfs", "training": False, "models": {}}, "search is 'dfs'"),
    ({"version": 1, "search": "bfs", "training": "no", "models": {}}, "training must be true or false"),
    ({"version": 1, "search": "bfs", "training": False, "models": []}, "models must map model paths"),
    ({"version": 1, "search": "bfs", "training": False, "models": {"a.yaml": {"comm_time_s": 1}}},
     r'models\["a.yaml"\] has no comm_bytes_per_device, collectives'),
    ({"version": 1, "search": "bfs", "training": False,
      "models": {"a.yaml": {"comm_bytes_per_device": -1, "comm_time_s": 0, "collectives": {}}}},
     "comm_bytes_per_device must be a whole number >= 0, got -1"),
    ({"version": 1, "search": "bfs", "training": False,
      "models": {"a.yaml": {"comm_bytes_per_device": 1, "comm_time_s": "1s", "collectives": {}}}},
     "comm_time_s must be a number of seconds"),
    ({"version": 1, "search": "bfs", "training": False,
      "models": {"a.yaml": {"comm_bytes_per_device": 1, "comm_time_s": 0, "collectives": {"AllReduce": 0.5}}}},
     "collectives.AllReduce must be a whole number"),
])
def test_wrong_structure_is_a_baseline_error(tmp_path, doc, message):
    bad = tmp_path / "b.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(BaselineError, match=message) as info:
        load_baseline(bad)
    assert str(info.value).startswith(f"{bad}: ") and "--update" in str(info.value)


def test_check_compatible_names_the_baselines_search_and_flag():
    b = Baseline("b.json", "bfs", False, {})
    check_compatible(b, "bfs", False)
    with pytest.raises(GateError, match="measured with --search bfs, not ilp"):
        check_compatible(b, "ilp", False)
    with pytest.raises(GateError, match="measured without --training"):
        check_compatible(b, "bfs", True)


# -- compare ----------------------------------------------------------------------------------------------------

def test_growth_above_tolerance_is_worse_and_at_tolerance_is_not():
    old = {"m.yaml": metrics(1000, 1.0, AllReduce=1)}
    assert not worse_models(compare(old, {"m.yaml": metrics(1050, 1.0, AllReduce=1)}, tolerance=0.05))
    rows = compare(old, {"m.yaml": metrics(1060, 1.0, AllReduce=1)}, tolerance=0.05)
    assert [(r.metric, r.worse) for r in rows] == [("comm_bytes_per_device", True), ("comm_time_s", False),
                                                    ("collectives", False)]
    assert rows[0].change == pytest.approx(0.06)
    assert worse_models(rows) == ["m.yaml"]


@pytest.mark.parametrize("new, metric", [
    (metrics(1000, 1.2, AllReduce=1), "comm_time_s"),
    (metrics(1000, 1.0, AllReduce=1, AllGather=1), "collectives"),
])
def test_more_time_or_more_collectives_alone_is_worse(new, metric):
    rows = compare({"m.yaml": metrics(1000, 1.0, AllReduce=1)}, {"m.yaml": new})
    assert [r.metric for r in rows if r.worse] == [metric]


def test_a_new_kind_replacing_another_is_not_worse_by_itself():
    rows = compare({"m.yaml": metrics(1000, 1.0, AllReduce=1)}, {"m.yaml": metrics(1000, 1.0, AllToAll=1)})
    assert not worse_models(rows)


def test_improvements_are_reported():
    rows = compare({"m.yaml": metrics(1000, 1.0, AllReduce=2)}, {"m.yaml": metrics(500, 0.5, AllReduce=1)})
    assert [r.change for r in rows] == [-0.5, -0.5, -0.5]
    assert not worse_models(rows) and better_models(rows) == ["m.yaml"]


def test_growth_from_zero_is_worse_whatever_the_tolerance():
    rows = compare({"m.yaml": metrics(0, 0.0)}, {"m.yaml": metrics(8, 1e-06, AllGather=1)}, tolerance=10.0)
    assert all(r.worse and r.change is None for r in rows)


def test_floating_point_noise_is_not_a_change():
    t = 1.7061440000000002e-05
    rows = compare({"m.yaml": metrics(10, t)}, {"m.yaml": metrics(10, t * (1 + 1e-13))})
    assert rows[1].change == 0 and not rows[1].worse and not rows[1].better


def test_compare_matches_spellings_of_the_same_path_and_rejects_unknown_models(workdir):
    rows = compare({"models/ffn.yaml": metrics(1, 1.0)}, {"./models//ffn.yaml": metrics(1, 1.0)})
    assert {r.model for r in rows} == {"models/ffn.yaml"}
    assert rows[0].model == model_path(workdir / "models" / "ffn.yaml")
    with pytest.raises(GateError, match="models/megatron_mlp.yaml is not in the baseline; run with --update"):
        compare({"models/ffn.yaml": metrics(1, 1.0)}, {"models/megatron_mlp.yaml": metrics(1, 1.0)})


def test_negative_tolerance_is_rejected():
    with pytest.raises(GateError, match="tolerance must be"):
        compare({}, {}, tolerance=-0.01)


def test_a_plan_that_communicates_more_fails_the_comparison(workdir):
    model = workdir / "models" / "ffn.yaml"
    write_baseline("models/baselines.json", {str(model): measure(model)}, "bfs", False)
    pin_output_replicated(model)
    rows = compare(load_baseline("models/baselines.json"), {str(model): measure(model)})
    assert worse_models(rows) == ["models/ffn.yaml"]
    assert [(r.old, r.new) for r in rows if r.metric != "comm_time_s"] == [(6144, 14336), (1, 2)]
