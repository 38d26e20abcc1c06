"""Benchmark of the numpy device simulator on a model with GPT-2 small's layer sizes.

Two transformer layers (hidden 768, 12 heads, seq 1024, MLP 3072) on 8 simulated
devices (dp=2 x tp=4, Megatron annotations), planned with bfs, then simulated with
seeded data and compared with the single-device reference. Prints the wall time of
the simulation (median of --repeat), whether the result is exact, the measured and
predicted bytes, and the largest number of bytes any device held at once next to
the size of all of the model's tensors (the bound on memory: devices hold blocks).

    python benchmarks/simulate.py [--batch 4] [--layers 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics

from planner.api import plan
from planner.simulation.run import simulate

MODEL = """
name: gpt2_layers
mesh: {{dp: 2, tp: 4}}
model: {{builder: transformer, layers: {layers}, hidden: 768, heads: 12, seq: 1024, batch: {batch}}}
shardings:
  x: '[{{"dp"}}, {{}}, {{}}]'
  "layer*.attn.w[qkv]": '[{{}}, {{"tp"}}]'
  "layer*.attn.wo": '[{{"tp"}}, {{}}]'
  "layer*.mlp.w1": '[{{}}, {{"tp"}}]'
  "layer*.mlp.w2": '[{{"tp"}}, {{}}]'
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    p = plan(MODEL.format(layers=args.layers, batch=args.batch))
    total_bytes = sum(t.numel * 8 for t in p.outcome.model.graph.tensors.values())  # float64 as simulated
    runs = [simulate(p, seed=i) for i in range(args.repeat)]
    r = runs[0]
    t = statistics.median(x.time_s for x in runs)
    print(f"{'layers':>6}  {'batch':>5}  {'devices':>7}  {'ok':>4}  {'sim s':>7}  {'measured B':>12}  {'predicted B':>12}  "
          f"{'peak device MB':>14}  {'all tensors MB':>14}")
    print(f"{args.layers:>6}  {args.batch:>5}  {r.devices:>7}  {str(all(x.ok for x in runs)):>4}  {t:>7.2f}  "
          f"{r.measured_comm_bytes_per_device:>12,}  {r.predicted_comm_bytes_per_device:>12,}  "
          f"{r.peak_device_bytes / 1e6:>14.1f}  {total_bytes / 1e6:>14.1f}")
    print("\nsim s: wall time of simulate() (reference included), median of", args.repeat)


if __name__ == "__main__":
    main()
