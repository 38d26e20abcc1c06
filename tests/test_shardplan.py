"""``import shardplan`` is the public API under the project's name: the same objects as the packages'."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_shardplan_plans_a_model_as_planner_api_does():
    import shardplan
    from planner.api import plan

    p = shardplan.plan(str(ROOT / "configs" / "ffn.yaml"))
    q = plan(str(ROOT / "configs" / "ffn.yaml"))
    assert isinstance(p, shardplan.Plan)
    assert p.table() == q.table()
    assert p.totals == q.totals


def test_shardplan_reexports_the_packages_objects():
    import shardplan
    import planner.api
    import planner.errors
    import planner.redistribution

    assert shardplan.plan is planner.api.plan and shardplan.load is planner.api.load
    assert shardplan.reshard is planner.redistribution.reshard
    assert shardplan.ShardplanError is planner.errors.ShardplanError
    assert all(hasattr(shardplan, name) for name in shardplan.__all__)
    errors = [getattr(planner.errors, n) for n in dir(planner.errors)]
    public = {e for e in errors if isinstance(e, type) and issubclass(e, planner.errors.ShardplanError)}
    assert public <= {getattr(shardplan, n) for n in shardplan.__all__} | {planner.errors.BaselineError,
                                                                          planner.errors.CostModelError,
                                                                          planner.errors.EngineError,
                                                                          planner.errors.OutputError,
                                                                          # the ILP's solver signals, caught inside
                                                                          planner.errors.EliminationTooLarge,
                                                                          planner.errors.EliminationInfeasible}


def test_shardplan_reshards_text_shardings():
    import shardplan

    mesh = shardplan.parse_mesh('@mesh = <["x"=2, "y"=4]>')
    src = shardplan.parse_sharding('[{"x"}, {"y"}]', mesh)
    dst = shardplan.parse_sharding('[{"y"}, {"x"}]', mesh)
    plan = shardplan.reshard((64, 32), "f32", src, dst)
    assert plan.steps and plan.bytes_per_device > 0


def test_a_plan_error_is_a_shardplan_error():
    import shardplan

    with pytest.raises(shardplan.ShardplanError):
        shardplan.plan(str(ROOT / "configs" / "no-such-model.yaml"))


def test_import_shardplan_works_in_a_fresh_interpreter_outside_the_checkout(tmp_path):
    """The installed module, not a file beside the tests: run from another directory."""
    code = "import shardplan; print(shardplan.plan.__module__, shardplan.__version__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "planner.api"


def test_import_shardplan_loads_none_of_the_packages():
    """The program's entry point lives in shardplan.py: nothing of shardplan may load before it guards Ctrl-C."""
    code = "import sys, shardplan; print(sorted(m for m in sys.modules if m.split('.')[0] in {'planner', 'graphs', " \
           "'costmodels'}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "[]\n"


def test_program_entry_point_is_console_main():
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert cfg["options.entry_points"]["console_scripts"].split() == ["shardplan", "=", "shardplan:console_main"]


def test_ctrl_c_while_the_packages_load_is_one_line_and_130():
    """A SIGINT that lands while planner.ir is being imported (raised there by an import hook, deterministically)."""
    code = (
        "import sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'planner.ir':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupt())\n"
        "sys.argv = ['shardplan', 'plan', 'configs/ffn.yaml']\n"
        "import shardplan\n"
        "shardplan.console_main()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 130
    assert out.stderr == "shardplan: interrupted\n" and out.stdout == ""
