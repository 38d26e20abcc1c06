"""Every command a new user runs on the manual-region configs (issue 13): plan, simulate, explain, compare,
--format program; a bad region is a located error with exit status 2."""

from pathlib import Path

import pytest

from planner.cli.main import main

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
BY_HAND = str(CONFIGS / "megatron_by_hand.yaml")
DP = str(CONFIGS / "dp_training_step.yaml")


def test_plan_lists_the_region_ops_and_the_psums_communication(capsys):
    assert main(["plan", BY_HAND]) == 0
    out = capsys.readouterr().out
    assert "mlp/enter/w1" in out and "mlp/sum" in out and "psum" in out
    assert "mlp/sum  psum        AllReduce{\"tp\"}  12,288 B" in out
    assert "communication 12,288 B per device" in out  # the psum's AllReduce (tests/simulation derive it)


def test_program_shows_manual_types_and_the_body_collective(capsys):
    assert main(["plan", DP, "--training", "--format", "program"]) == 0
    out = capsys.readouterr().out
    assert '%step/h = matmul(%step/x, %step/w) {name: step/mm, strategy: ((1, 1), (1, 1)), pbroadcast %step/w over ' \
           '{"dp"}}' in out
    assert "// AllReduce over dp (group of 4), 24 B per device" in out
    assert "vjp(psum)(%dstep/loss) {name: step/total} : f32[] -> (f32[]{\"dp\"})   // transpose pbroadcast: no " \
           "communication" in out


@pytest.mark.parametrize("args", [[BY_HAND], [DP, "--training"], [str(CONFIGS / "ring_matmul.yaml"), "--training"],
                                  [str(CONFIGS / "manual_free_axis.yaml"), "--search", "propagate"]])
def test_simulate_matches_the_reference_and_the_predicted_bytes(args, capsys):
    assert main(["simulate", *args]) == 0
    out = capsys.readouterr().out
    assert "OK: simulated" in out and "(equal)" in out


def test_explain_says_a_tensor_is_a_regions_input_or_body_tensor(capsys):
    assert main(["explain", BY_HAND, "w1"]) == 0
    assert "  input of manual region 'mlp': in-sharding as written [{}, {\"tp\"}]" in capsys.readouterr().out
    assert main(["explain", BY_HAND, "mlp/h"]) == 0
    assert "body tensor of manual region 'mlp' (manual axes tp)" in capsys.readouterr().out


def test_compare_runs_every_search_on_a_region(capsys):
    assert main(["compare", BY_HAND]) == 0
    out = capsys.readouterr().out
    for search in ("propagate", "bfs", "ilp"):
        assert f"{search} " in out
    assert out.count("AllReduce 1") == 3


def test_bad_region_exits_2_naming_the_file_line_and_region(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(Path(BY_HAND).read_text().replace("psum, axes: [tp]", "psum, axes: [dp]"))
    assert main(["plan", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:21: region 'mlp': collective 'sum' (psum) is over axis 'dp'" in err
    assert "Traceback" not in err


def test_explicit_mode_types_a_region_boundary_and_refuses_a_disagreement_with_status_2(capsys):
    """--search explicit types every axis (seed 001): w1 has no annotation, so its type is replicated, but the
    region reads it sharded on tp; only an explicit reshard moves an Explicit axis."""
    assert main(["plan", BY_HAND, "--search", "explicit"]) == 2
    err = capsys.readouterr().err
    assert "region 'mlp': the in-sharding [{}, {\"tp\"}] of 'w1' disagrees with its type [{}, {}]" in err
    assert "only an explicit reshard moves an Explicit axis" in err and "Traceback" not in err


def test_regions_on_a_mesh_with_an_explicit_axis_plan_and_simulate(tmp_path, capsys):
    model = tmp_path / "typed.yaml"
    model.write_text(Path(BY_HAND).read_text().replace("mesh: {tp: 4}", "mesh: {axes: {dp: 2, tp: 4}, "
                                                                        "axis_types: {dp: Explicit}}"))
    for search in ("bfs", "ilp", "propagate"):
        assert main(["simulate", str(model), "--search", search, "--training"]) == 0, search
        assert "OK: simulated" in capsys.readouterr().out


def test_no_pbroadcast_training_of_a_region_is_refused_with_status_2(capsys):
    assert main(["simulate", DP, "--training", "--no-pbroadcast"]) == 2
    assert "train models with regions with the variance types (drop --no-pbroadcast)" in capsys.readouterr().err
