"""What the commands say about bad input: one line on stderr for every exit 2, user values cut to
80 characters and control characters escaped, and advice that fits the mistake (a memory budget
below every plan, a shard_as group that cannot hold, a dtype in upper case, zero devices).

Runs are in-process (``main([...])`` with capsys), from an empty folder so that paths print as given.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from planner.cli.main import main
from planner.errors import QUOTE_CHARS

HERE = Path(__file__).parent
BAD = HERE / "bad_inputs"
REPO = HERE.parent.parent
FFN = str(REPO / "configs" / "ffn.yaml")

#: Every model file of the bad-input corpus (the cluster and baseline files are read through other files).
CORPUS = sorted(p for p in BAD.iterdir() if p.is_file() and p.suffix in (".yaml", "")
                and not p.name.startswith("cluster_") or p.name.endswith("_model.yaml"))


@pytest.fixture(autouse=True)
def _in_an_empty_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SHARDPLAN_DEBUG", raising=False)


def run(argv, capsys):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def one_line_error(argv, capsys) -> str:
    """The stderr of a user error, checked to be exactly one printable line and nothing on stdout."""
    status, out, err = run(argv, capsys)
    assert status == 2, (argv, err)
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err[:-1].isprintable(), repr(err)  # no terminal escape, no other control character
    assert "Traceback" not in err and "AxisRef(" not in err and "usage:" not in err
    return err[:-1]


# -- one line, whatever the input -------------------------------------------------------------------------------

@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_every_user_error_of_the_corpus_is_one_line(path, capsys):
    for argv in (["graph", path], ["plan", path], ["export", path, "--to", "jax"]):
        status, _, err = run(argv, capsys)
        assert status in (0, 2), (argv, err)
        if status == 2:
            assert err.count("\n") == 1 and err[:-1].isprintable(), (argv, err)


@pytest.mark.parametrize("argv, command", [
    (["plan"], "plan"),                                      # a required argument missing
    (["plan", FFN, "--bogus"], "plan"),                      # an argument the command does not know
    (["plan", FFN, "--search", "nope"], "plan"),             # a choice that is not one
    (["compare", FFN, "--search", "ilp"], "compare"),        # compare runs every search: it has no --search
    (["simulate", FFN, "--seed", "x"], "simulate"),          # a value of the wrong type
    (["calibrate"], "calibrate"),
    (["describe"], "describe"),
    ([], None),                                              # no command at all
    (["nosuch"], None),                                      # no such command
    (["--bogus"], None),
])
def test_argument_errors_are_one_line_naming_the_command_and_its_help(argv, command, capsys):
    err = one_line_error(argv, capsys)
    prog = f"shardplan {command}" if command else "shardplan"
    assert err.startswith(f"{prog}: error: ") and err.endswith(f"; see {prog} --help")


def test_a_sharding_that_does_not_parse_quotes_it_on_the_same_line(capsys):
    err = one_line_error(["describe", '[{"x"} {}]', "--mesh", "x=2", "--shape", "4x4"], capsys)
    assert err.endswith("""cannot parse sharding at column 8: expected ']', found '{' (in [{"x"} {}])""")


# -- values cut and escaped ------------------------------------------------------------------------------------

def test_a_two_thousand_axis_sharding_is_cut(tmp_path, capsys):
    axes = ", ".join(f'"a{i}"' for i in range(2000))
    model = tmp_path / "long.yaml"
    model.write_text(f"name: long\nmesh: {{x: 2}}\ntensors:\n  a: {{shape: [8], kind: input, sharding: '[{{{axes}}}]'}}\n"
                     "ops:\n  - {name: r, op: relu, inputs: [a], output: c}\noutputs: [c]\n")
    err = one_line_error(["plan", model], capsys)
    assert 'axis "a0" is not in mesh @mesh' in err
    # the sharding is quoted cut to QUOTE_CHARS: the message is the file, the rule and at most 80 characters of it
    assert '"a1999"' not in err and len(err) < len(str(model)) + 3 * QUOTE_CHARS + 100


def quoted(err: str) -> list[str]:
    """The values a message quotes ('...'), quotes included."""
    return re.findall(r"'[^']*'", err)


def test_an_unknown_preset_of_three_thousand_characters_is_cut(capsys):
    err = one_line_error(["plan", FFN, "--cluster", "x" * 3000], capsys)
    assert err.startswith("shardplan plan: error: unknown cluster preset 'xxx")
    assert "x" * QUOTE_CHARS not in err and all(len(q) <= QUOTE_CHARS for q in quoted(err))
    assert err.endswith("tpu-v5p (or give the path of a cluster YAML file)")  # the advice is whole


def test_a_long_name_quoted_by_any_message_is_cut(tmp_path, capsys):
    model = tmp_path / "m.yaml"
    model.write_text(f"name: m\nmesh: {{x: 2}}\ntensors:\n  a: {{shape: [8], kind: input}}\n"
                     f"ops:\n  - {{name: r, op: relu, inputs: [{'b' * 5000}], output: c}}\noutputs: [c]\n")
    err = one_line_error(["plan", model], capsys)
    assert "reads tensor 'bbb" in err and "b" * QUOTE_CHARS not in err
    assert all(len(q) <= QUOTE_CHARS for q in quoted(err))


def test_a_long_name_printed_without_quotes_is_cut(tmp_path, capsys):
    name = "a" * 1000  # (YAML allows keys of up to 1,024 characters)
    model = tmp_path / "m.yaml"
    model.write_text(f"name: m\nmesh: {{x: 2}}\ntensors:\n  {name}: {{shape: [8], kind: input}}\n"
                     f"  b: {{shape: [4], kind: input}}\nops: []\nshard_as: [[{name}, b]]\n")
    err = one_line_error(["plan", model], capsys)
    assert "shard_as groups tensors of different shapes: aaa" in err and "but b is f32[4]" in err
    assert "a" * QUOTE_CHARS not in err and str(model) in err  # the path is kept whole


def test_the_command_line_cuts_a_value_some_message_quotes_with_repr(capsys, monkeypatch):
    """The net under quote(): a message that quotes a long value with repr still prints it cut."""
    from planner.cli import describe
    from planner.errors import ShardplanError

    def fail(args):
        raise ShardplanError(f"no axis {'y' * 500!r} here; it's {'z' * 100!r}, or 'w'")

    monkeypatch.setattr(describe, "run", fail)
    err = one_line_error(["describe", '[{"x"}]', "--mesh", "x=2", "--shape", "4"], capsys)
    cut = QUOTE_CHARS - 5  # the value, its two quotes and "..." fill QUOTE_CHARS
    assert err == f"shardplan describe: error: no axis '{'y' * cut}...' here; it's '{'z' * cut}...', or 'w'"


def test_terminal_escapes_in_names_are_printed_escaped(tmp_path, capsys):
    # a shard_as clash between two tensors whose names hold ESC[31m (written as YAML escapes), and an
    # axis of a flag's sharding that holds one
    model = tmp_path / "ansi.yaml"
    model.write_text('name: ansi\nmesh: {x: 2}\ntensors:\n'
                     '  "a\\e[31m": {shape: [8], kind: input, sharding: \'[{"x"}]\'}\n'
                     '  "b\\e[31m": {shape: [8], kind: input, sharding: \'[{}]\'}\n'
                     'ops:\n  - {name: r, op: add, inputs: ["a\\e[31m", "b\\e[31m"], output: c}\noutputs: [c]\n'
                     'shard_as: [["a\\e[31m", "b\\e[31m"]]\n')
    err = one_line_error(["plan", model], capsys)
    assert "shard_as group [a\\x1b[31m, b\\x1b[31m] cannot hold" in err
    err = one_line_error(["describe", '[{"x\x1b[31m"}]', "--mesh", "x=2", "--shape", "4"], capsys)
    assert 'axis "x\\x1b[31m" is not in mesh' in err


def test_a_raw_control_character_in_a_yaml_file_is_a_user_error_with_its_line(capsys):
    path = BAD / "raw_escape.yaml"
    err = one_line_error(["plan", path], capsys)
    assert err.startswith(f"shardplan plan: error: {path}:7: the file holds the control character U+001B at column 37")


# -- advice that fits the mistake ------------------------------------------------------------------------------

@pytest.mark.parametrize("search", ["bfs", "ilp", "auto"])
def test_a_memory_budget_below_every_plan_names_what_the_smallest_plan_needs(search, capsys):
    from costmodels.units import format_bytes
    from planner.api import plan

    # the need: each node of the planning model at its smallest candidate's memory, summed
    nodes = plan(FFN, search="bfs").decision.model.problem.nodes
    least = sum(int(min(n.memory)) for n in nodes if n.memory is not None)
    err = one_line_error(["plan", FFN, "--search", search, "--memory-budget", "1"], capsys)
    assert err == (f"shardplan plan: error: the memory budget of 1 B per device is below what the smallest plan "
                   f"needs: at least {format_bytes(least)} per device (each op's and tensor's least memory, summed); "
                   f"give --memory-budget {least} or more, or plan on more devices")


@pytest.mark.parametrize("search", ["bfs", "ilp", "auto", "propagate"])
def test_a_shard_as_clash_names_the_group_line_and_both_annotations(search, capsys):
    path = BAD / "shard_as_conflict.yaml"
    err = one_line_error(["plan", path, "--search", search], capsys)
    assert err == (f"shardplan plan: error: {path}:10: shard_as group [a, b] cannot hold: tensor 'a' is annotated "
                   """[{"x"}, {}] (line 5) and tensor 'b' [{}, {"x"}] (line 6), which disagree on dimension 0 """
                   """({"x"} against {}); make the members' annotations agree, or annotate one member only""")


def test_bfs_names_the_op_it_cannot_place_with_its_line_and_ilp_decides_alone(tmp_path, capsys):
    # r's strategy splits c's columns; shard_as asks c to be laid out as a, whose rows are split
    model = tmp_path / "pinned.yaml"
    model.write_text('name: pinned\nmesh: {x: 2}\ntensors:\n'
                     '  a: {shape: [8, 8], kind: input, sharding: \'[{"x"}, {}]\'}\n'
                     '  b: {shape: [8, 8], kind: input}\n'
                     'ops:\n'
                     '  - {name: r, op: relu, inputs: [b], output: c, strategy: [[1, 2]]}\n'
                     '  - {name: s, op: add, inputs: [a, c], output: d}\n'
                     'outputs: [d]\nshard_as: [[a, c]]\n')
    err = one_line_error(["plan", model, "--search", "bfs"], capsys)
    assert err.startswith(f"shardplan plan: error: {model}:7: breadth-first propagation found no candidate for op 'r' ")
    err = one_line_error(["plan", model, "--search", "ilp"], capsys)
    assert "breadth-first" not in err and "no choice satisfies the shard_as groups" in err


def test_a_flat_shard_as_list_shows_the_fix(capsys):
    err = one_line_error(["plan", BAD / "shard_as_flat.yaml"], capsys)
    assert err.endswith("shard_as_flat.yaml:10: `shard_as` is a list of groups, each a list of tensors sharded alike, "
                        "not a list of tensors: write shard_as: [[a, b]]")


def test_an_upper_case_dtype_suggests_its_lower_case_name(capsys):
    err = one_line_error(["plan", BAD / "dtype_upper_case.yaml"], capsys)
    assert err.endswith("dtype_upper_case.yaml:5: tensor 'a': unknown dtype 'F32': dtype names are lower case; "
                        "did you mean f32? (dtypes are f32, bf16, f16, i32, i64, bool)")


@pytest.mark.parametrize("devices", ["0", "-3"])
def test_run_on_zero_devices_says_a_mesh_needs_one(devices, capsys):
    err = one_line_error(["run", FFN, "--devices", devices], capsys)
    assert f"argument --devices: {devices} devices: a mesh has at least one device" in err
    assert "mesh of 0" not in err and "mesh of -3" not in err


def test_compare_help_offers_no_search_flag(capsys):
    status, out, _ = run(["compare", "--help"], capsys)
    assert status == 0 and "--propagation" in out and "--search" not in out
