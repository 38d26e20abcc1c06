"""Start-up stays light (issue 11): importing the package and printing help load no solver, SciPy or networkx.

These tests check what a fresh interpreter imports, not how long it takes; the timing is
measured by benchmarks/startup.py.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pulp", "highspy", "scipy", "networkx")
PIPELINE = ("planner.api", "planner.model", "planner.searches", "planner.redistribution", "planner.simulation", "planner.gate")


def imported_after(code: str) -> tuple[set[str], str]:
    """The modules a fresh interpreter holds after running ``code``, and what the code printed."""
    probe = (
        "import contextlib, io, json, sys\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        + "".join(f"    {line}\n" for line in code.splitlines())
        + "print(json.dumps({'modules': sorted(sys.modules), 'out': out.getvalue()}))\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout.splitlines()[-1])
    return set(data["modules"]), data["out"]


def test_import_planner_loads_no_solver_scipy_or_networkx():
    modules, _ = imported_after("import planner")
    assert not modules & set(HEAVY)
    assert not modules & set(PIPELINE)


@pytest.mark.parametrize("argv", [["--help"], ["plan", "--help"], ["check", "--help"], ["reshard", "--help"],
                                  ["simulate", "--help"], ["run", "--help"], ["calibrate", "--help"],
                                  ["--version"]])
def test_help_loads_no_solver_scipy_networkx_or_pipeline(argv):
    modules, out = imported_after(f"from planner.cli.main import main\nassert main({argv!r}) == 0")
    assert not modules & set(HEAVY)
    assert not modules & set(PIPELINE)
    assert "shardplan" in out


def test_import_planner_and_run_help_load_no_jax():
    """JAX is imported only when a plan is run on it (planner.engines), never to start or print help."""
    modules, _ = imported_after("import planner")
    assert "jax" not in modules
    modules, out = imported_after("from planner.cli.main import main\nassert main(['run', '--help']) == 0")
    assert "jax" not in modules and "planner.engines.jax_run" not in modules and "--devices" in out
    modules, out = imported_after("from planner.cli.main import main\nassert main(['calibrate', '--help']) == 0")
    assert "jax" not in modules and "planner.engines.calibrate" not in modules and "--only" in out


def test_plan_help_still_lists_every_search():
    _, out = imported_after("from planner.cli.main import main\nmain(['plan', '--help'])")
    assert "{auto,bfs,ilp,explicit,propagate}" in out


def test_the_cli_searches_are_the_planners():
    """planner.cli.args repeats planner.api.SEARCHES so that building the parser imports no pipeline."""
    from planner.api import SEARCHES
    from planner.cli.args import PASSES as CLI_PASSES, SEARCHES as CLI_SEARCHES
    from planner.searches.propagate import PASSES

    assert CLI_PASSES == tuple(PASSES)
    from planner.cli.args import EXPORT_FORMATS
    from planner.export import FORMATS

    assert EXPORT_FORMATS == FORMATS + ("jax-module",)  # the JSON exports, and the module of the JAX engine

    assert CLI_SEARCHES == SEARCHES
    from planner.cli.calibrate import ONLY as CLI_ONLY
    from planner.engines.calibrate import ONLY

    assert CLI_ONLY == ONLY

    from planner.cli.args import OVERLAPS
    from planner.partitioning.schedule import MODES

    assert OVERLAPS == MODES


def test_loading_a_model_does_not_import_networkx_until_the_graph_view_is_used():
    modules, out = imported_after(
        "import sys\nfrom graphs import load_model\ng = load_model('configs/ffn.yaml')\n"
        "print('networkx' in sys.modules, g.nx.number_of_nodes() > 0, g.nx is g.nx)"
    )
    assert out.split() == ["False", "True", "True"]
    assert "networkx" in modules


def test_a_bfs_plan_loads_no_ilp_solver():
    modules, out = imported_after("from planner.cli.main import main\n"
                                  "assert main(['plan', 'configs/ffn.yaml', '--search', 'bfs']) == 0")
    assert "totals: communication" in out
    assert not modules & {"pulp", "highspy", "planner.searches.ilp", "networkx"}


def test_a_default_plan_solved_by_elimination_loads_no_mip_solver():
    modules, out = imported_after("from planner.cli.main import main\nassert main(['plan', 'configs/ffn.yaml']) == 0")
    assert "totals: communication" in out
    assert "planner.searches.elimination" in modules
    assert not modules & {"pulp", "highspy", "networkx"}


@pytest.mark.parametrize("search", ["auto", "bfs", "ilp"])
def test_planning_a_transformer_never_imports_numpy_ma(search):
    """The cost tables and the ILP's reductions avoid np.unique's first plain call, which imports
    numpy.ma (tens of milliseconds of every plan command)."""
    argv = ["plan", "configs/transformer_block.yaml", "--training", "--search", search]
    modules, out = imported_after(f"from planner.cli.main import main\nassert main({argv!r}) == 0")
    assert "totals: communication" in out
    assert "numpy.ma" not in modules


def test_shardplan_plan_runs_as_a_command():
    run = subprocess.run([sys.executable, "-m", "planner", "plan", "configs/ffn.yaml"], capture_output=True, text=True,
                         cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("model ffn") and "totals: communication" in run.stdout


def test_a_user_error_still_exits_2_with_its_message():
    run = subprocess.run([sys.executable, "-m", "planner", "plan", "configs/no-such-model.yaml"], capture_output=True,
                         text=True, cwd=ROOT)
    assert run.returncode == 2
    assert run.stderr.startswith("shardplan plan: error: ") and "no-such-model.yaml" in run.stderr
