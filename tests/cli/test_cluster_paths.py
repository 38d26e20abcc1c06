"""--cluster on the command line is relative to the current directory; a model's cluster: to the model file."""

from pathlib import Path

from planner.cli.main import main

FFN = Path(__file__).resolve().parents[2] / "configs" / "ffn.yaml"


def test_cluster_paths_are_read_from_where_they_were_written(tmp_path, monkeypatch, capsys):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "lab.yaml").write_text("preset: nvlink-node\n")
    (tmp_path / "here.yaml").write_text("preset: ib-cluster\n")
    (tmp_path / "models" / "m.yaml").write_text(FFN.read_text().replace("\ntensors:", "\ncluster: lab.yaml\ntensors:", 1))
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "models/m.yaml"]) == 0  # the model's cluster: lab.yaml, next to the model
    assert main(["plan", "models/m.yaml", "--cluster", "here.yaml"]) == 0  # ./here.yaml
    capsys.readouterr()
    assert main(["plan", "models/m.yaml", "--cluster", "lab.yaml"]) == 2  # not ./lab.yaml: there is none
    err = capsys.readouterr().err
    assert "lab.yaml" in err and "Traceback" not in err
