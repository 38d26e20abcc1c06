"""Commands that do no large matrix products do not start OpenBLAS's thread pool (issue 11's start-up)."""

import os
import subprocess
import sys

PROBE = """
import os, sys
from planner.cli.main import main
main(sys.argv[1:])
print("OPENBLAS_NUM_THREADS=" + str(os.environ.get("OPENBLAS_NUM_THREADS")))
"""

DESCRIBE = ["describe", '[{"x"}]', "--mesh", "x=2", "--shape", "4"]


def _threads(argv, **env):
    base = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True,
                         env={**base, **env}, check=True).stdout
    return out.strip().splitlines()[-1].split("=", 1)[1]


def test_describe_runs_with_one_blas_thread():
    assert _threads(DESCRIBE) == "1"


def test_a_users_blas_setting_is_kept():
    assert _threads(DESCRIBE, OPENBLAS_NUM_THREADS="2") == "2"


def test_simulate_keeps_blas_threads():
    """The simulator multiplies real tensors: its BLAS keeps the threads numpy would start."""
    ffn = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "ffn.yaml")
    assert _threads(["simulate", ffn]) == "None"
