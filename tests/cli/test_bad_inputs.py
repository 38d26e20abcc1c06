"""Every command on a corpus of bad inputs (tests/cli/bad_inputs/): exit status 2, one clear
message naming the file (and line) or flag, never a traceback, never a hang.

The corpus holds small hostile files (alias bombs in each part of a model, a recursive alias,
a dimension of 10^30, a 10^8-device mesh, Latin-1 / UTF-16 / binary files); the large ones
(20,000 nested ``[``, a file over the size limit) are generated here. Runs are in-process
(``main([...])`` with capsys), but for standard output on a full disk, which needs a real process
(signals: tests/cli/test_signals.py).
"""

from __future__ import annotations

import importlib.util
import io
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from planner.cli.main import main
from planner.limits import MAX_INPUT_FILE_BYTES, MAX_MESH_DEVICES, MAX_SIMULATION_BYTES

HERE = Path(__file__).parent
BAD = HERE / "bad_inputs"
REPO = HERE.parent.parent
FFN = str(REPO / "configs" / "ffn.yaml")
BASELINE = str(REPO / "configs" / "baselines.json")

#: Every command that reads a model file, as argv around the model path.
MODEL_COMMANDS = {
    "graph": lambda m: ["graph", m],
    "plan": lambda m: ["plan", m],
    "simulate": lambda m: ["simulate", m],
    # --update measures every model it is given (without it, check stops at a model not in the baseline)
    "check": lambda m: ["check", m, "--baseline", "new-baseline.json", "--update"],
    "compare": lambda m: ["compare", m],
    "export": lambda m: ["export", m, "--to", "jax"],
}
if importlib.util.find_spec("jax") is not None:  # without JAX, run says how to install it before reading the model
    MODEL_COMMANDS["run"] = lambda m: ["run", m, "--engine", "jax"]


@pytest.fixture(autouse=True)
def _outside_the_repository(tmp_path, monkeypatch):
    """Run from an empty folder, so that paths print absolute (check prints paths below the current
    folder relative to it), and with internal errors reported, not re-raised."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SHARDPLAN_DEBUG", raising=False)


def run(argv, capsys):
    """``(status, stdout, stderr)`` of one in-process run, with the invariants of every bad input:
    nothing on stdout, one line on stderr, no traceback."""
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, err
    return status, out, err


def assert_user_error(argv, capsys, *words):
    status, out, err = run(argv, capsys)
    assert status == 2, (argv, err)
    assert out == "", out
    assert len(err.splitlines()) == 1, err
    for w in words:
        assert w in err, (w, err)
    return err


# -- bad model files, through every command that reads one --------------------------------------------------

#: (file in the corpus, line the error names or None, key words of the message). The lines are those of the
#: corpus files: each alias bomb's first line is a comment, then name (2), mesh (3), cluster/tensors (4), ops.
MODEL_CASES = [
    ("alias_bomb_name.yaml", 2, ("alias", "1,000,000")),
    ("alias_bomb_mesh.yaml", 3, ("alias", "1,000,000")),
    ("alias_bomb_cluster.yaml", 4, ("alias", "1,000,000")),
    ("alias_bomb_shape.yaml", 4, ("alias", "1,000,000")),
    ("alias_bomb_attr.yaml", 5, ("alias", "1,000,000")),
    ("recursive_alias.yaml", 2, ("alias", "never ends")),
    ("malformed.yaml", 3, ("YAML syntax error",)),
    ("huge_dimension.yaml", 4, ("tensor 'a'", "10^30", "limit")),
    ("huge_mesh.yaml", 3, ("100,000,000 devices", f"{MAX_MESH_DEVICES:,}")),
    ("latin1.yaml", 1, ("not UTF-8", "0xe9", "Latin-1")),
    ("utf16.yaml", None, ("UTF-16", "save it as UTF-8")),
    ("binary.yaml", None, ("not text", "NUL")),
    ("cluster_latin1_model.yaml", None, ("cluster_latin1.yaml:1", "cluster file is not UTF-8")),
    ("cluster_bomb_model.yaml", None, ("cluster_bomb.yaml:2", "alias")),
    ("not_a_date.yaml", 4, ("'2020-13-45' as a date", "month must be in 1..12", "quote the value")),
    ("cluster_bad_int_model.yaml", None, ("cluster_bad_int.yaml:3", "'eight' as an integer")),
    # 2 FLOPs per multiply-add, 21 products of 22 operands, 2^48 terms each: log10(42 * 2^1056) = 319.5
    ("huge_einsum.yaml", 5, ("op 'e'", "einsum computes about 10^319.5 FLOPs", "limit of 10^30")),
    ("gather_index_out_of_range.yaml", 8, ("op 'look'", "constant 50", "dimension 0 of table", "size is 50")),
    ("label_out_of_range.yaml", 8, ("op 'loss'", "constant -1", "dimension 1 of logits", "[0, 10)")),
    ("const_overflows_dtype.yaml", 6, ("tensor 'c'", "1099511627776", "does not fit its dtype i32")),
    ("collective_group_size.yaml", 5, ("op 'o'", "group_size is '1e3'", "leave it out")),
    ("cluster_huge_node_model.yaml", None, ("cluster_huge_node.yaml:3", "devices_per_node", "limit of 16,384")),
]


@pytest.mark.parametrize("command", sorted(MODEL_COMMANDS))
@pytest.mark.parametrize("name, line, words", MODEL_CASES, ids=[c[0] for c in MODEL_CASES])
def test_bad_model_file_is_a_user_error_naming_file_and_line(command, name, line, words, capsys):
    path = str(BAD / name)
    if command == "graph" and name.startswith("cluster_"):
        assert run(["graph", path], capsys)[0] == 0  # graph lists ops: it does not read the cluster
        return
    where = f"{path}:{line}:" if line else ""
    assert_user_error(MODEL_COMMANDS[command](path), capsys, *words, where)
    assert not os.path.exists("new-baseline.json")  # check --update wrote nothing


@pytest.mark.parametrize("command", sorted(MODEL_COMMANDS))
def test_twenty_thousand_nested_brackets_are_refused_not_a_recursion_error(command, tmp_path, capsys):
    model = tmp_path / "nested.yaml"
    model.write_text("name: " + "[" * 20_000 + "\n")
    # (run from tmp_path: check prints the path relative to it)
    assert_user_error(MODEL_COMMANDS[command](model), capsys, "nested.yaml:1:", "nested more than 100 levels")


@pytest.mark.parametrize("command", sorted(MODEL_COMMANDS))
def test_a_five_thousand_digit_dimension_is_refused(command, tmp_path, capsys):
    model = tmp_path / "digits.yaml"
    model.write_text(f"name: m\nmesh: {{x: 2}}\ntensors: {{a: {{shape: [{'9' * 5000}]}}}}\nops: []\n")
    assert_user_error(MODEL_COMMANDS[command](model), capsys, "digits.yaml:3:", "5,000 digits")


@pytest.mark.parametrize("command", sorted(MODEL_COMMANDS))
def test_model_path_that_is_no_model_file(command, tmp_path, capsys):
    assert_user_error(MODEL_COMMANDS[command](tmp_path), capsys, "folder")
    missing = FFN[: -len(".yaml")]  # configs/ffn: the user left out the extension
    if command != "check":  # check names the missing file its own way (tests/cli/test_check.py)
        assert_user_error(MODEL_COMMANDS[command](missing), capsys, "does not exist", f"did you mean {FFN}?")
    assert_user_error(MODEL_COMMANDS[command]("/bin/ls"), capsys, "/bin/ls", "not text")


def test_model_file_without_yaml_extension_is_read_as_a_file(capsys):
    # it used to be parsed as YAML *text* ("<string>:1: a model file must be a mapping")
    status, out, _ = run(["graph", BAD / "no_extension"], capsys)
    assert status == 0 and out.startswith("model plain\n")


def test_dash_reads_the_model_from_standard_input(monkeypatch, capsys):
    text = Path(FFN).read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text)))
    status, out, _ = run(["graph", "-"], capsys)
    assert status == 0 and out.startswith("model ffn\n")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("name: caf\u00e9\n".encode("latin-1"))))
    assert_user_error(["plan", "-"], capsys, "<stdin>:1:", "not UTF-8")


def test_model_file_over_the_size_limit(tmp_path, capsys):
    model = tmp_path / "big.yaml"
    with open(model, "wb") as f:  # sparse: no megabytes written to the disk
        f.truncate(MAX_INPUT_FILE_BYTES + 1)
    assert_user_error(["plan", model], capsys, str(model), "64 MiB", "right file")


# -- legal models whose values cannot be checked, or that have nothing to train -----------------------------------

#: (file in the corpus, line the error names, key words): values that are not finite where simulate compares them,
#: named where they first appear (the const, or the op that computes them from finite operands).
NOT_FINITE_CASES = [
    ("not_finite_nan_const.yaml", 6, ("output 'y' holds nan", "const 'c', which holds nan")),
    ("not_finite_divide_by_zero.yaml", 8, ("output 'y' holds inf", "op 'd' (div)")),
    ("not_finite_layernorm_eps0.yaml", 7, ("output 'y' holds nan", "op 'ln' (layernorm)", "eps above 0")),
]


@pytest.mark.parametrize("training", [[], ["--training"]])
@pytest.mark.parametrize("name, line, words", NOT_FINITE_CASES, ids=[c[0] for c in NOT_FINITE_CASES])
def test_values_that_are_not_finite_are_a_user_error_naming_where_they_first_appear(name, line, words, training,
                                                                                    capsys):
    path = str(BAD / name)
    assert_user_error(["simulate", path, *training], capsys, f"{path}:{line}:", "values are not finite", *words)
    assert run(["plan", path, *training], capsys)[0] == 0  # planning reads no values


@pytest.mark.parametrize("command", sorted({"plan", "simulate", "run"} & set(MODEL_COMMANDS)))
def test_training_a_model_without_a_float_output_is_a_user_error(command, capsys):
    """plan, simulate and run agree: refused before planning (run before JAX starts)."""
    path = str(BAD / "no_float_output.yaml")
    assert_user_error(MODEL_COMMANDS[command](path) + ["--training"], capsys, f"{path}:",
                      "no float output to differentiate", "without --training")
    if command != "run":  # its forward is a legal model (run's is in tests/engines/test_jax_run.py)
        assert run(MODEL_COMMANDS[command](path), capsys)[0] == 0


@pytest.mark.parametrize("command", ["simulate", "run"])
def test_indices_computed_out_of_range_are_a_user_error_at_the_op(command, capsys):
    """The model loads (the indices are an op's result, not a constant), but its reference cannot run."""
    if command not in MODEL_COMMANDS:
        pytest.skip("run needs JAX")
    path = str(BAD / "computed_index_out_of_range.yaml")
    assert run(["plan", path], capsys)[0] == 0
    words = (f"{path}:9:", "op 'look'", "hold 100 to 100", "[0, 50)")
    if command == "run":  # in a process of its own: JAX may already run on one device in this one
        done = subprocess.run([sys.executable, "-m", "planner", *MODEL_COMMANDS[command](path)], capture_output=True,
                              text=True, cwd=REPO, timeout=600)
        assert done.returncode == 2 and all(w in done.stderr for w in words), done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
        return
    assert_user_error(MODEL_COMMANDS[command](path), capsys, *words)


# -- check: its baseline file, and a broken model it does not know ----------------------------------------------

@pytest.mark.parametrize("name, words", [("baseline_utf16.json", ("UTF-16",)), ("baseline_binary.json", ("not text",))])
def test_check_with_an_unreadable_baseline(name, words, capsys):
    assert_user_error(["check", FFN, "--baseline", BAD / name], capsys, str(BAD / name), *words)


def test_check_with_a_deeply_nested_baseline(tmp_path, capsys):
    baseline = tmp_path / "baseline.json"
    baseline.write_text("[" * 20_000)
    assert_user_error(["check", FFN, "--baseline", baseline], capsys, str(baseline), "nested too deeply")


def test_check_reports_the_models_yaml_error_not_that_it_is_missing_from_the_baseline(capsys):
    err = assert_user_error(["check", BAD / "malformed.yaml", "--baseline", BASELINE], capsys, "malformed.yaml:3:")
    assert "not in the baseline" not in err


# -- flags -----------------------------------------------------------------------------------------------------

DESCRIBE = ["describe", '[{"x"}, {}]', "--mesh", "x=2"]
RESHARD = ["reshard", "--mesh", "x=2,y=4", "--from", '[{"x"}, {}]', "--to", '[{"y"}, {}]']


@pytest.mark.parametrize("argv, words", [
    (DESCRIBE + ["--shape", "1e24x8"], ("cannot parse shape '1e24x8'",)),
    (DESCRIBE + ["--shape", "1" + "0" * 24 + "x8"], ("--shape", "elements", "limit")),
    (["describe", '[{"x"}]', "--mesh", "x=100000000", "--shape", "100000000"], ("100,000,000 devices", "limit")),
    (["describe", '[{"a0"}]', "--mesh", ",".join(f"a{i}=1" for i in range(33)), "--shape", "4"], ("33 axes",)),
    (DESCRIBE + ["--shape", "4x4", "--mesh", "x=2,y=" + "9" * 40], ("devices", "limit")),
    (RESHARD + ["--shape", "1" + "0" * 30 + "x8"], ("--shape", "limit")),
    (RESHARD + ["--shape", "1000000x1000000", "--verify"], ("1000000x1000000", "TiB", "16 GiB", "leave out --verify")),
    (["simulate", FFN, "--seed", "-1"], ("--seed", "out of range")),
    (["simulate", FFN, "--seed", "x"], ("--seed", "not an integer")),
    (["simulate", str(BAD / "needs_7tib.yaml")], ("needs up to", "TiB", "limit of 16 GiB", "--dtype f32")),
    (["simulate", FFN, "--seed", str(2**32)], ("--seed", "out of range", str(2**32 - 1))),
    # run checks its flags before it imports JAX: these need no JAX
    (["run", FFN, "--seed", "-1"], ("--seed", "out of range")),
    (["run", FFN, "--seed", str(2**32)], ("--seed", "out of range")),
    (["run", FFN, "--seed", "x"], ("--seed", "not an integer")),
    (DESCRIBE + ["--shape", "9" * 5000], ("5,000 digits",)),  # int() itself refuses over 4,300 digits
    (["plan", FFN, "--mesh", "d=" + "9" * 5000], ("mesh axis 'd'", "5,000 digits")),
    (["plan", FFN, "--memory-budget", "1e400"], ("--memory-budget", "finite")),
    (["plan", FFN, "--time-limit", "-1"], ("--time-limit", "seconds > 0")),
    (["plan", FFN, "--time-limit", "nan"], ("--time-limit", "seconds > 0")),
    (["compare", FFN, "--time-limit", "inf"], ("--time-limit", "seconds > 0")),
])
def test_bad_flag_is_a_user_error_naming_it(argv, words, capsys):
    # argparse's errors too are one line: the message, then where to read the usage
    status, out, err = run(argv, capsys)
    assert status == 2, err
    assert out == ""
    assert len(err.splitlines()) == 1, err
    for w in words:
        assert w in err, (w, err)


def test_simulation_limit_is_checked_before_allocating(monkeypatch, capsys):
    """The 7 TiB model is refused from sizes alone: numpy never allocates. The bound in the message is at least
    the reference's peak, derived from the file: x (10^12 elements), w (10^9) and y = x @ w (10^9) held while
    the matmul runs, plus 3 times its largest array (x) for its temporaries, 8 bytes each in f64."""
    import re

    import numpy as np

    def refuse(*args, **kwargs):
        raise AssertionError("the simulator allocated")

    monkeypatch.setattr(np.random, "default_rng", refuse)
    reference = (10**12 + 10**9 + 10**9 + 3 * 10**12) * 8
    assert reference > MAX_SIMULATION_BYTES
    err = assert_user_error(["simulate", BAD / "needs_7tib.yaml"], capsys, "needs up to", "8 devices")
    figure, unit = re.search(r"needs up to ([0-9.]+) (TiB|PiB)", err).groups()
    assert float(figure) * 2 ** {"TiB": 40, "PiB": 50}[unit] >= reference * (1 - 1e-3)  # printed to 3 digits


# -- outputs ---------------------------------------------------------------------------------------------------

OUT_COMMANDS = {
    "plan": ["plan", FFN, "--out"],
    "export": ["export", FFN, "--to", "jax", "--out"],
    "compare": ["compare", FFN, "--out"],
}


@pytest.mark.parametrize("command", sorted(OUT_COMMANDS))
def test_out_refuses_folders_missing_folders_devices_and_the_model(command, tmp_path, capsys):
    argv = OUT_COMMANDS[command]
    assert_user_error(argv + [tmp_path], capsys, str(tmp_path), "folder")
    assert_user_error(argv + [tmp_path / "no" / "plan.txt"], capsys, "does not exist", "create it first")
    assert_user_error(argv + ["/dev/null"], capsys, "/dev/null", "not a regular file")
    assert Path("/dev/null").is_char_device()  # still the device, not a file (as root it was replaced)
    model = tmp_path / "ffn.yaml"
    model.write_text(Path(FFN).read_text())
    argv = [model if a == FFN else a for a in argv]
    assert_user_error(argv + [model], capsys, "input file", "overwrite")
    assert model.read_text() == Path(FFN).read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ffn.yaml"]  # no temporary file left behind


def test_out_through_a_symlink_writes_its_target(tmp_path, capsys):
    target = tmp_path / "plan.json"
    link = tmp_path / "link.json"
    link.symlink_to(target.name)
    assert run(["export", FFN, "--to", "jax", "--out", link], capsys)[0] == 0
    assert run(["export", FFN, "--to", "jax"], capsys)[1] == target.read_text()  # what it writes to stdout
    assert link.is_symlink() and os.readlink(link) == target.name


def test_compare_out_into_a_missing_folder(tmp_path, capsys):
    assert_user_error(["compare", FFN, "--out", tmp_path / "missing" / "c.txt"], capsys, "does not exist")


def test_check_update_onto_a_folder_is_refused(tmp_path, capsys):
    assert_user_error(["check", FFN, "--baseline", tmp_path, "--update"], capsys, str(tmp_path), "folder")


# -- exit statuses that are not user errors ----------------------------------------------------------------------

def test_simulation_mismatch_is_an_internal_error(monkeypatch, capsys):
    """A plan whose simulation differs is shardplan's bug, not a regression: exit 3 with a one-line report
    on stderr (exit 1 belongs to check alone)."""
    from planner.simulation import run as simulation

    def wrong(plan, seed=0, dtype="f64", progress=None):
        phase = {"measured_comm_bytes_per_device": 8, "predicted_comm_bytes_per_device": 8, "collectives": {}}
        return SimpleNamespace(
            ok=False, outputs={"y": {"ok": False, "max_abs_error": 1.0, "max_rel_error": 1.0}}, gradients={},
            phases={"forward": phase}, training=False, devices=8, dtype=dtype, time_s=0.0,
            measured_comm_bytes_per_device=8, predicted_comm_bytes_per_device=8)

    monkeypatch.setattr(simulation, "simulate", wrong)
    status = main(["simulate", FFN])
    out, err = capsys.readouterr()
    assert status == 3
    assert "MISMATCH" in out  # the table still shows what differs
    assert err.splitlines() == [err.strip()] and err.startswith("shardplan: internal error: the simulated y differ")


def test_reshard_that_does_not_verify_is_an_internal_error(monkeypatch, capsys):
    from planner.simulation import reshard as simulated
    from planner.simulation.reshard import Verification

    monkeypatch.setattr(simulated, "verify", lambda plan: Verification(False, 0, 4096, (), "wrong layout"))
    status = main(RESHARD + ["--shape", "64x32", "--verify"])
    out, err = capsys.readouterr()
    assert status == 3
    assert "NOT verified on the simulator: wrong layout" in out
    assert err == ("shardplan: internal error: the redistribution did not verify on the simulator: wrong layout; "
                   "this is a bug in shardplan: please report it with the command and model\n")


def test_standard_output_on_a_full_disk_is_one_line_and_exit_2():
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "planner", "graph", FFN], stdout=full, stderr=subprocess.PIPE,
                              text=True, cwd=REPO)
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("shardplan graph: error: standard output: cannot write: No space left on device; "
                           "free space on its disk or write elsewhere\n")


# -- standard streams: closed, or an encoding that cannot spell every character ------------------------------------

#: Every command that writes its result to standard output, as argv.
STDOUT_COMMANDS = {
    "graph": ["graph", FFN],
    "plan": ["plan", FFN],
    "explain": ["explain", FFN, "y"],
    "describe": DESCRIBE + ["--shape", "8x8"],
    "reshard": RESHARD + ["--shape", "8x8"],
    "simulate": ["simulate", FFN],
    "check": ["check", FFN, "--baseline", BASELINE],
    "compare": ["compare", FFN],
    "export": ["export", FFN, "--to", "jax"],
}


@pytest.mark.parametrize("command", sorted(STDOUT_COMMANDS))
def test_closed_standard_output_is_one_line_and_exit_2(command, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", None)  # what Python sets when the process starts with fd 1 closed
    assert_user_error(STDOUT_COMMANDS[command], capsys, "standard output", "it is closed", "redirect it to a file")


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["plan", "--help"]], ids=repr)  # bare shardplan: stderr only
def test_help_and_version_on_a_closed_standard_output_are_one_line_and_exit_2(argv, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", None)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == [err.strip()] and "standard output: cannot write: it is closed" in err, err


def test_closed_standard_output_with_out_writes_the_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", None)
    assert run(["plan", FFN, "--out", tmp_path / "plan.txt"], capsys)[0] == 0
    assert (tmp_path / "plan.txt").read_text().startswith("model ffn")


def test_closed_standard_output_in_a_real_process():
    """``shardplan plan m.yaml >&-``: fd 1 itself closed, not just the Python object."""
    done = subprocess.run([sys.executable, "-m", "planner", "plan", FFN], stderr=subprocess.PIPE, text=True,
                          cwd=REPO, preexec_fn=lambda: os.close(1))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("shardplan plan: error: standard output: cannot write: it is closed")
    assert len(done.stderr.splitlines()) == 1


def test_closed_standard_input_for_dash_is_a_user_error(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", None)
    assert_user_error(["graph", "-"], capsys, "<stdin>", "standard input is closed")


#: A model whose names are not ASCII: Latin-1 letters, a CJK character, a name that is one letter.
UNICODE_MODEL = """\
name: modèle
mesh: {d: 8}
tensors:
  x: {shape: [64, 64], kind: input}
  poids: {shape: [64, 64], kind: param}
  wé: {shape: [64, 64], kind: param}
ops:
  - {name: café, op: matmul, inputs: [x, poids], output: h1, strategy: [[2, 1], [1, 4]]}
  - {name: 乘, op: matmul, inputs: [h1, wé], output: ÿ}
outputs: [ÿ]
"""


@pytest.mark.parametrize("argv", [["graph"], ["plan"], ["plan", "--format", "program"], ["plan", "--format", "csv"],
                                  ["plan", "--format", "html"], ["explain", "ÿ"], ["simulate"], ["compare"]],
                         ids=lambda argv: "-".join(argv))
def test_an_ascii_standard_output_escapes_what_it_cannot_spell(argv, tmp_path, monkeypatch, capsys):
    model = tmp_path / "u.yaml"
    model.write_text(UNICODE_MODEL, encoding="utf-8")
    ascii_out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")  # as PYTHONIOENCODING=ascii makes it
    monkeypatch.setattr(sys, "stdout", ascii_out)
    argv = argv[:1] + [str(model)] + argv[1:]
    status = main(argv)
    err = capsys.readouterr().err
    assert status == 0, err
    ascii_out.flush()
    text = ascii_out.buffer.getvalue().decode("ascii")
    assert "mod\\xe8le" in text or "caf\\xe9" in text or "\\xff" in text, text  # each command names some of them


def test_an_ascii_standard_output_in_a_real_process(tmp_path):
    model = tmp_path / "u.yaml"
    model.write_text(UNICODE_MODEL, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "planner", "plan", str(model)], capture_output=True, cwd=REPO,
                          env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode("ascii").startswith("model mod\\xe8le, search auto")
