"""Benchmark of the numpy device simulator on a model with GPT-2 small's layer sizes.

Two transformer layers (hidden 768, 12 heads, seq 1024, MLP 3072) on 8 simulated
devices (dp=2 x tp=4, Megatron annotations), planned with bfs, then simulated with
seeded data and compared with the single-device reference: the forward pass, and a
training step (forward and backward, every gradient compared). Each run is a fresh
process, so its peak resident memory is its own. Prints per mode and dtype the wall
time of ``simulate()`` (median of --repeat, reference included), whether every
result is exact, the measured and predicted bytes, the most any simulated device
held at once, and the peak process memory; then the training / forward time ratio.

    python benchmarks/simulate.py [--batch 4] [--layers 2] [--repeat 3] [--dtypes f64 f32]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys

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


def child(args) -> None:
    """One simulation in this process; prints its numbers as JSON."""
    from planner.api import plan
    from planner.simulation.run import simulate

    p = plan(MODEL.format(layers=args.layers, batch=args.batch), training=args.mode == "training")
    r = simulate(p, seed=args.seed, dtype=args.dtype)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Linux: kilobytes
    print(json.dumps({"ok": r.ok, "time_s": r.time_s, "measured": r.measured_comm_bytes_per_device,
                      "predicted": r.predicted_comm_bytes_per_device, "peak_device": r.peak_device_bytes,
                      "rss": peak_kb * 1024}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dtypes", nargs="+", default=["f64"], choices=("f64", "f32"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="forward", help=argparse.SUPPRESS)
    parser.add_argument("--dtype", default="f64", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    print(f"{'mode':>8}  {'dtype':>5}  {'layers':>6}  {'batch':>5}  {'ok':>4}  {'sim s':>7}  {'measured B':>12}  "
          f"{'predicted B':>12}  {'peak device MB':>14}  {'peak process MB':>15}")
    medians = {}
    for dtype in args.dtypes:
        for mode in ("forward", "training"):
            runs = []
            for seed in range(args.repeat):
                cmd = [sys.executable, __file__, "--child", "--mode", mode, "--dtype", dtype, "--seed", str(seed),
                       "--layers", str(args.layers), "--batch", str(args.batch)]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                runs.append(json.loads(out.strip().splitlines()[-1]))
            t = statistics.median(r["time_s"] for r in runs)
            rss = statistics.median(r["rss"] for r in runs)
            medians[(dtype, mode)] = t
            r = runs[0]
            print(f"{mode:>8}  {dtype:>5}  {args.layers:>6}  {args.batch:>5}  {str(all(x['ok'] for x in runs)):>4}  "
                  f"{t:>7.2f}  {r['measured']:>12,}  {r['predicted']:>12,}  {r['peak_device'] / 1e6:>14.1f}  "
                  f"{rss / 1e6:>15.0f}")
    for dtype in args.dtypes:
        ratio = medians[(dtype, "training")] / medians[(dtype, "forward")]
        print(f"\n{dtype}: training step / forward = {ratio:.2f}x")
    print("\nsim s: wall time of simulate() (reference included), median of", args.repeat,
          "fresh processes; peak process MB: their median peak resident memory (planning included)")


if __name__ == "__main__":
    main()
