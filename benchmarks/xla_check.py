"""Our predicted communication against XLA's, given our plan, for every config.

For each ``configs/*.yaml``, forward and with ``--training``, runs ``shardplan run CONFIG --engine jax
--format json`` in a fresh process (host devices: as many as the plan's mesh has, 8 for most configs and 4
for the manual-region ones; ``run`` sets ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` itself):
the plan (of each ``--searches``; default ``auto``, the default search) is built in jax.numpy with every tensor constrained to its planned sharding,
jitted, run and checked against the numpy reference; the compiled program's collectives are read from its
HLO. Printed: whether the run matched the reference, our predicted bytes per device, XLA's (same
convention: bytes one device receives under ring algorithms, costmodels/collectives.py), their ratio, the
collectives on each side by kind, and, per config where they differ, which collectives differ (measured
from the two lists), which of XLA's all-reduces are dynamic-sliced by their reader (reduce-scatters XLA did
not form) and which pending sums the plan leaves that a PartitionSpec cannot say (left to XLA).

    python benchmarks/xla_check.py [--configs ffn megatron_mlp] [--modes forward training]
        [--searches auto bfs ilp propagate explicit] [--lowering auto|shard_map|constraints] [--jax]

``--jax`` adds the JAX functions of ``benchmarks/jax_models.py`` (an MLP, attention with head reshapes, an
embedding gather), each traced by ``shardplan import-jax`` on a ``dp=2, tp=4`` mesh (rows ``jax:NAME``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHORT = {"AllGather": "AG", "AllReduce": "AR", "AllToAll": "A2A", "CollectivePermute": "CP", "ReduceScatter": "RS"}


def run(config: Path, training: bool, search: str, lowering: str) -> dict:
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    argv = [sys.executable, "-m", "planner", "run", str(config), "--format", "json", "--search", search,
            "--lowering", lowering] + (["--training"] if training else [])
    r = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
    if r.returncode not in (0, 1):
        return {"error": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}",
                "refused": r.returncode == 2}
    return json.loads(r.stdout)


def traced(folder: Path) -> list[Path]:
    """The JAX functions of benchmarks/jax_models.py as model files (``shardplan import-jax``) in ``folder``."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from jax_models import FUNCTIONS

    out = []
    for name in FUNCTIONS:
        path = folder / f"{name}.yaml"
        argv = [sys.executable, "-m", "planner", "import-jax", f"benchmarks/jax_models.py:{name}", "--mesh",
                "dp=2,tp=4", "--out", str(path)]
        r = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
        if r.returncode != 0:
            raise SystemExit(f"import-jax {name}: {r.stderr.strip()}")
        out.append(path)
    return out


def summary(rows, searches, modes) -> str:
    """The detail rows as one line per config: XLA/plan per (search, mode)."""
    cells: dict[str, dict] = {}
    for name, search, mode, ok, _lowering, predicted, _xla, ratio, *_ in rows:
        if ok not in ("yes", "NO"):
            ratio = ok
        elif ratio == "-":
            ratio = "none" if predicted == "0" else "-"
        cells.setdefault(name, {})[(search, mode)] = ratio + ("" if ok != "NO" else " (mismatch)")
    header = ["config"] + [f"{s} {'fwd' if m == 'forward' else 'train'}" for s in searches for m in modes]
    table = [header] + [[name] + [c.get((s, m), "") for s in searches for m in modes] for name, c in cells.items()]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in table)


def counts(by_kind: dict, side: str) -> str:
    parts = [f"{SHORT[k]} {v[side + '_count']}" for k, v in by_kind.items() if v[side + "_count"]]
    return ", ".join(parts) or "none"


def differences(d: dict) -> list[str]:
    """Where XLA's collectives differ from the plan's, measured from the two lists."""
    out = []
    for kind, k in d["by_kind"].items():
        if (k["xla_count"], k["xla_bytes_per_device"]) != (k["predicted_count"], k["predicted_bytes_per_device"]):
            out.append(f"{kind}: plan {k['predicted_count']} ({k['predicted_bytes_per_device']:,} B), "
                       f"XLA {k['xla_count']} ({k['xla_bytes_per_device']:,} B)")
    sliced = [c for c in d["xla_collectives"] if c["kind"] == "all-reduce" and c["sliced_after"]]
    if sliced and d.get("lowering") == "constraints":
        out.append(f"{len(sliced)} XLA all-reduce(s) ({sum(c['bytes_per_device'] for c in sliced):,} B) dynamic-sliced "
                   "by their reader: reduce-scatters not formed (" +
                   "; ".join(sorted({c['op_name'].split('/', 1)[-1] for c in sliced})) + ")")
    if out and d["unconstrained"]:
        out.append("pending sums left to XLA (no PartitionSpec): " + ", ".join(d["unconstrained"]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", nargs="*", help="config names (default: every configs/*.yaml)")
    ap.add_argument("--modes", nargs="*", choices=("forward", "training"), default=["forward", "training"])
    ap.add_argument("--searches", nargs="*", default=["auto"], choices=("auto", "bfs", "ilp", "propagate", "explicit"),
                    help="searches to plan with (default auto, the default search)")
    ap.add_argument("--lowering", default="auto", choices=("auto", "shard_map", "constraints"),
                    help="shardplan run's --lowering (default auto)")
    ap.add_argument("--jax", action="store_true", help="add the JAX functions of benchmarks/jax_models.py")
    args = ap.parse_args()
    configs = [ROOT / "configs" / f"{c.removesuffix('.yaml')}.yaml" for c in args.configs] if args.configs \
        else sorted((ROOT / "configs").glob("*.yaml"))
    if args.jax:
        configs += traced(Path(tempfile.mkdtemp(prefix="xla_check_")))
    rows, notes = [], []
    for config in configs:
        for search in args.searches:
            for mode in args.modes:
                d = run(config, mode == "training", search, args.lowering)
                name = f"jax:{config.stem}" if config.parent != ROOT / "configs" else config.name
                where = f"{name} {search} {mode}"
                if "error" in d:
                    rows.append((name, search, mode, "refused" if d["refused"] else "error", "-", "-", "-",
                                 "-", "-", "-"))
                    notes.append(f"{where}: {d['error']}")
                    continue
                pred, xla = d["predicted_comm_bytes_per_device"], d["xla_comm_bytes_per_device"]
                ratio = "-" if d["ratio"] is None else f"{d['ratio']:.4f}"
                rows.append((name, search, mode, "yes" if d["ok"] else "NO",
                             d.get("lowering", "constraints"), f"{pred:,}", f"{xla:,}", ratio,
                             counts(d["by_kind"], "predicted"), counts(d["by_kind"], "xla")))
                diff = differences(d)
                if d.get("lowering_note"):
                    diff.append(f"run as constraints: {d['lowering_note']}")
                if diff:
                    notes.append(f"{where}:\n" + "\n".join(f"  {line}" for line in diff))
    header = ("config", "search", "mode", "ok", "lowering", "plan B/dev", "XLA B/dev", "XLA/plan", "plan collectives",
              "XLA collectives")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for r in [header] + rows:
        print("  ".join(str(v).rjust(w) if i in (5, 6, 7) else str(v).ljust(w)
                        for i, (v, w) in enumerate(zip(r, widths))).rstrip())
    print("\nXLA/plan bytes per device by config, search and mode (refused: the search refuses the model; "
          "none: the plan has no collective, nor does XLA):")
    print(summary(rows, args.searches, args.modes))
    if notes:
        print("\nwhere they differ (AG AllGather, AR AllReduce, RS ReduceScatter, A2A AllToAll, CP CollectivePermute):")
        print("\n".join(notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
