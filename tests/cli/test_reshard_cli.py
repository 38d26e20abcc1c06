"""``shardplan reshard`` (issue 11's start-up): what the command imports, and that --verify still runs."""

import subprocess
import sys

from planner.cli.main import main

PROBE = """
import sys
from planner.cli.main import main
main(sys.argv[1:])
print("imported:" + " ".join(sorted(m for m in ("numpy.ma", "planner.simulation.reshard", "scipy") if m in sys.modules)))
"""

SWAP = ["reshard", "--mesh", "x=2,y=4", "--shape", "64x32", "--from", '[{"x"}, {"y"}]', "--to", '[{"y"}, {"x"}]']


def _imported(argv) -> str:
    out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=True).stdout
    return out.splitlines()[-1].split(":", 1)[1]


def test_reshard_imports_neither_the_simulator_nor_numpy_ma():
    """The plan needs the engine only: the simulator is imported for --verify, and the engine
    avoids np.unique, whose first call imports numpy.ma (about 0.02 s)."""
    assert _imported(SWAP) == ""


def test_reshard_with_verify_runs_the_simulator(capsys):
    assert main([*SWAP, "--verify"]) == 0
    assert "verified on the simulator: exact result" in capsys.readouterr().out


def test_reshard_says_when_its_search_ran_out_of_budget(capsys):
    """On a=4,b=2,c=2,d=2 this pair's searches run out of budget (benchmarks/reshard.py's
    slowest random pair there): the table and the JSON say the plan is the best found."""
    argv = ["reshard", "--mesh", "a=4,b=2,c=2,d=2", "--shape", "6x64x32", "--from", '[{"b", "d"}, {"c"}, {"a"}]',
            "--to", '[{"d"}, {"b", "a"}, {}]']
    assert main(argv) == 0
    assert "search: ran out of its budget; this is the best plan it found" in capsys.readouterr().out
    assert main([*argv, "--format", "json"]) == 0
    assert '"exact": false' in capsys.readouterr().out
    assert main(SWAP) == 0  # a proven plan says nothing of the kind
    assert "budget" not in capsys.readouterr().out
