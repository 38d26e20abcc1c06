import json
import subprocess
import sys

from planner.cli.main import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_describe_json_has_the_contract_keys(capsys):
    code, out, _ = run(capsys, "describe", '[{"x"}, {"z", "y"}]', "--mesh", '@mesh_xy = <["x"=2, "y"=4, "z"=2]>',
                       "--shape", "4x8", "--format", "json")
    assert code == 0
    d = json.loads(out)
    for key in ("sharding", "local_shape", "devices", "partition_spec", "jax_type", "mindspore", "dtensor"):
        assert key in d
    assert d["sharding"] == 'sharding<@mesh_xy, [{"x"}, {"z", "y"}]>'
    assert d["local_shape"] == [2, 1]
    assert len(d["devices"]) == 16 and d["devices"][1] == {"device": 1, "index": [[0, 2], [4, 5]]}
    assert d["mindspore"] == {"device_matrix": [2, 4, 2], "tensor_map": [2, [0, 1]]}
    assert d["dtensor"] is None  # z before y is against mesh order
    assert d["jax_type"] == "f32[4@x,8@(z,y)]"


def test_describe_with_two_meshes_binds_to_the_named_one(capsys):
    code, out, _ = run(capsys, "describe", 'sharding<@mesh_full, [{"devices":(1)4}, {"devices":(4)2}]>',
                       "--mesh", '@mesh_xy = <["x"=4, "y"=2]>', "--mesh", '@mesh_full = <["devices"=8]>',
                       "--shape", "4x4", "--format", "json")
    assert code == 0
    d = json.loads(out)
    assert d["partition_spec"] is None and d["local_shape"] == [1, 2]


def test_describe_table_lists_every_device(capsys):
    code, out, _ = run(capsys, "describe", '[{"x"}]', "--mesh", "x=4", "--shape", "7")
    assert code == 0
    assert "local shape    2" in out
    assert out.rstrip().splitlines()[-1].split() == ["3", "[6,7)"]


def test_invalid_sharding_exits_2_with_one_paragraph(capsys):
    code, out, err = run(capsys, "describe", '[{"x"}, {"x"}]', "--mesh", "x=2", "--shape", "4x4")
    assert code == 2 and out == ""
    assert 'axis "x" is used twice' in err and "Traceback" not in err


def test_invalid_mesh_exits_2(capsys):
    code, _, err = run(capsys, "describe", '[{"x"}]', "--mesh", "x=0", "--shape", "4")
    assert code == 2 and "sizes are integers >= 1" in err


def test_rank_mismatch_exits_2(capsys):
    code, _, err = run(capsys, "describe", '[{"x"}]', "--mesh", "x=2", "--shape", "4x4")
    assert code == 2 and "has rank 2" in err


def test_console_script_module_runs_and_reports_version():
    out = subprocess.run([sys.executable, "-m", "planner", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("shardplan ")
    bad = subprocess.run([sys.executable, "-m", "planner", "describe", "[{", "--mesh", "x=2", "--shape", "4"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "cannot parse sharding" in bad.stderr
