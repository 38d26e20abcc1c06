import json
from pathlib import Path

from planner.cli.main import main

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_graph_json_keys_and_ffn_totals(capsys):
    assert main(["graph", str(CONFIGS / "ffn.yaml"), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["ops"][0]) == {"name", "op", "inputs", "output", "shape", "dtype", "flops", "bytes_accessed",
                                   "param_bytes"}
    # a 64x64 @ 64x64 f32 matmul reads both operands once and writes its result once: 3 x 64 x 64 x 4 bytes
    assert data["ops"][0] == {
        "name": "dense1.matmul", "op": "matmul", "inputs": ["x", "w1"], "output": "h1",
        "shape": [64, 64], "dtype": "f32", "flops": 2 * 64 * 64 * 64, "bytes_accessed": 3 * 64 * 64 * 4,
        "param_bytes": 64 * 64 * 4,
    }
    # ffn: two matmuls (3 matrices each), two bias adds (two matrices and a 64-vector each), one relu (two matrices)
    matrix = 64 * 64 * 4
    assert data["totals"] == {"ops": 5, "flops": 2 * (2 * 64 ** 3) + 3 * 64 * 64,
                              "bytes_accessed": 2 * 3 * matrix + 2 * (2 * matrix + 64 * 4) + 2 * matrix,
                              "param_bytes": (2 * 64 * 64 + 2 * 64) * 4}


def test_graph_table_shows_bytes_accessed_beside_flops(capsys):
    assert main(["graph", str(CONFIGS / "ffn.yaml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("op "))
    assert header.split()[5:] == ["flops", "bytes", "accessed", "param", "bytes"]
    relu = next(line for line in lines if line.startswith("relu "))
    assert "32,768 B" in relu  # reads and writes one 64x64 f32 matrix: 2 x 16,384 bytes
    total = next(line for line in lines if line.startswith("total "))
    assert "197,120 B" in total  # the JSON total above: 12 matrices and two 64-vectors of f32


def test_graph_dot_lists_every_edge(capsys):
    assert main(["graph", str(CONFIGS / "ffn.yaml"), "--format", "dot"]) == 0
    out = capsys.readouterr().out
    assert out.startswith('digraph "ffn"') and '"h3" -> "dense2.matmul";' in out


def test_graph_of_a_broken_model_exits_2_with_file_and_line(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nmesh: {x: 2}\ntensors:\n  x: {shape: [4, 4]}\nops:\n  - {name: f, op: frobnicate, inputs: [x], output: y}\n")
    assert main(["graph", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:6" in err and "unknown op 'frobnicate'" in err
