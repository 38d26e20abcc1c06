"""Benchmark of tracing JAX functions in (issue 14, point 3): ``planner.frontends.jax.trace`` on a stack of
the GPT blocks of ``examples/jax_gpt_block.py``.

Prints, per depth, the ops of the traced graph and the seconds of ``trace`` (``jax.make_jaxpr``
included; each depth in a fresh process, so JAX's caches do not carry over), to show that the
translation grows linearly with the program.

    python benchmarks/jax_trace.py [--layers 4 16 48 96]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ONE = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
from examples.jax_gpt_block import example_args, gpt_block
from planner.frontends.jax import trace
params, x = example_args()
layers = int(sys.argv[2])

def stack(blocks, x):
    for p in blocks:
        x = gpt_block(p, x)
    return x

start = time.perf_counter()
graph = trace(stack, [params] * layers, x, params=["blocks"])
print(len(graph.ops), time.perf_counter() - start)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[4, 16, 48, 96])
    args = parser.parse_args()
    print(f"{'layers':>6}  {'ops':>5}  {'trace s':>7}")
    for n in args.layers:
        out = subprocess.run([sys.executable, "-c", ONE, str(ROOT), str(n)], capture_output=True, text=True,
                             check=True, cwd=ROOT).stdout.split()
        print(f"{n:>6}  {int(out[0]):>5}  {float(out[1]):>7.2f}")


if __name__ == "__main__":
    main()
