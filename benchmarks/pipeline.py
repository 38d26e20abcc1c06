"""Pipelined training plans of the GPT-3 family on A100-80GB clusters: what the search chooses and how long it takes.

Each row is one ``shardplan plan MODEL.yaml --devices N`` in a fresh process (CPU seconds, user + sys, of the whole
command), for the model shapes and device counts of Megatron-LM's scaling study (Narayanan et al., 2021, table 1):
hidden size, heads and layers of each GPT, sequence 2048, vocabulary 51,200, its global batch on its GPUs, 8 per
node, on the ``a100`` preset (80 GB). Printed per row: the chosen degrees (pipeline x data x tensor parallel),
schedule, microbatches, recomputation, ZeRO stage, memory per device, predicted step time, MFU, whether every
partition search finished (``exact``), the command's CPU seconds and its goal (10 s up to 175B parameters on 1,024
GPUs, 60 s beyond); every plan must fit (the command fails otherwise).
A row whose ``exact`` is ``no`` had partition searches stopped at their node budget
(``planner.stages.search.MAX_PARTITION_NODES``); its plan is the best found, not proven the best.

    python benchmarks/pipeline.py [--rows 1.7B 18B ...] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile

# name: (hidden, heads, layers, GPUs, global batch) -- Megatron-LM's weak-scaling table
MODELS = {
    "1.7B": (2304, 24, 24, 32, 512),
    "3.6B": (3072, 32, 30, 64, 512),
    "7.5B": (4096, 32, 36, 128, 512),
    "18B": (6144, 48, 40, 256, 1024),
    "39B": (8192, 64, 48, 512, 1536),
    "76B": (10240, 80, 60, 1024, 1792),
    "145B": (12288, 96, 80, 1536, 2304),
    "310B": (16384, 128, 96, 1920, 2160),
    "530B": (20480, 128, 105, 2520, 2520),
    "1T": (25600, 160, 128, 3072, 3072),
}
SEQ, VOCAB = 2048, 51200
#: the issue's goal per row: a whole command under 10 s up to 175B parameters on 1,024 GPUs, under 60 s beyond
GOAL_S = {name: 10 if gpus <= 1024 else 60 for name, (_, _, _, gpus, _) in MODELS.items()}

MODEL = """name: gpt_{name}
cluster: a100
model: {{builder: gpt, layers: {layers}, hidden: {hidden}, heads: {heads}, seq: {seq}, batch: {batch}, vocab: {vocab}, dtype: bf16}}
"""


def run_one(name: str, folder: str) -> tuple[float, dict]:
    hidden, heads, layers, gpus, batch = MODELS[name]
    path = os.path.join(folder, f"gpt_{name}.yaml")
    with open(path, "w") as f:
        f.write(MODEL.format(name=name.replace(".", "_"), layers=layers, hidden=hidden, heads=heads, seq=SEQ,
                             batch=batch, vocab=VOCAB))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, "-m", "planner", "plan", path, "--devices", str(gpus), "--format", "json"],
                         capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{name}: shardplan plan failed (exit {out.returncode}): {out.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", nargs="+", choices=list(MODELS), help="these rows (models) only")
    ap.add_argument("--repeat", type=int, default=1, help="runs per model; the median CPU time is printed")
    args = ap.parse_args()
    names = args.rows or list(MODELS)
    header = ("model", "GPUs", "batch", "pp x dp x tp", "schedule", "m", "recompute", "ZeRO", "memory/GPU",
              "step s", "MFU", "exact", "plan CPU s", "goal s")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            times = []
            for _ in range(args.repeat):
                cpu, d = run_one(name, folder)
                times.append(cpu)
            p = d["pipeline"]
            sched = p["schedule"] + (f" v{p['virtual_stages']}" if p["virtual_stages"] > 1 else "")
            rows.append((name, d["devices"], MODELS[name][4], f"{p['degree']} x {p['data_parallel']} x "
                         f"{'x'.join(str(v) for v in p['stage_mesh'].values())}", sched, p["microbatches"],
                         p["recompute"], p["zero_stage"], f"{p['memory_bytes_per_device'] / 1e9:.1f} GB",
                         f"{p['step_time_s']:.2f}", f"{p['mfu']:.1%}", "yes" if p["partitions_exact"] else "no",
                         f"{statistics.median(times):.1f}", GOAL_S[name]))
            print("  ".join(str(c) for c in rows[-1]), file=sys.stderr, flush=True)
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for r in [header] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


if __name__ == "__main__":
    main()
