"""Benchmark of start-up time (issue 11): how long a fresh process takes to import or to print help.

Prints, per command, the median wall time of --repeat fresh subprocesses and which of the
heavy modules (solvers, SciPy, networkx) the command imported. The target is < 0.3 s for
``import planner`` and ``shardplan --help``.

    python benchmarks/startup.py [--repeat 5] [--importtime]

``--importtime`` also prints, per command, the slowest imports one or two levels deep of one run
(``python -X importtime``, cumulative microseconds).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HEAVY = ("pulp", "highspy", "scipy", "networkx")
REPORT = "import sys; print(' '.join(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)"


def _script() -> list[str]:
    """The installed ``shardplan`` console script, run by this interpreter (no pyenv shim in the way)."""
    script = Path(sys.executable).parent / "shardplan"
    return [sys.executable, str(script)] if script.is_file() else [sys.executable, "-m", "planner"]


def commands() -> list[tuple[str, list[str], str]]:
    """``(label, argv, python code that does the same in-process, to list the heavy modules)``."""
    cli = "from planner.cli.main import main; main({argv!r})"
    return [
        ("python -c pass", [sys.executable, "-c", "pass"], "pass"),
        ("import planner", [sys.executable, "-c", "import planner"], "import planner"),
        ("shardplan --help", [*_script(), "--help"], cli.format(argv=["--help"])),
        ("shardplan plan --help", [*_script(), "plan", "--help"], cli.format(argv=["plan", "--help"])),
        ("import planner.api", [sys.executable, "-c", "import planner.api"], "import planner.api"),
    ]


def wall(argv: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def heavy_modules(code: str) -> str:
    probe = f"import contextlib, io\nwith contextlib.redirect_stdout(io.StringIO()):\n"
    probe += "\n".join("    " + line for line in code.splitlines()) + "\n"
    probe += REPORT.format(heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    return out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "-"


def slowest_imports(code: str, n: int = 8) -> list[str]:
    """The ``n`` slowest imports one or two levels deep, by cumulative time (``python -X importtime``)."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True)
    rows = []
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "cumulative" not in line:
            _, cumulative, name = line.split("|")
            depth = (len(name) - len(name.lstrip()) - 1) // 2
            if depth <= 1 and name.strip() not in ("site", "encodings"):
                rows.append((int(cumulative), "  " * depth + name.strip()))
    return [f"    {c / 1e6:6.3f} s  {name}" for c, name in sorted(rows, reverse=True)[:n]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="fresh processes per command (default 5)")
    parser.add_argument("--importtime", action="store_true", help="also list the slowest top-level imports")
    args = parser.parse_args()
    width = max(len(label) for label, _, _ in commands())
    print(f"{'command':<{width}}  median s  heavy modules imported")
    for label, argv, code in commands():
        print(f"{label:<{width}}  {wall(argv, args.repeat):8.3f}  {heavy_modules(code) or '-'}", flush=True)
        if args.importtime:
            print("\n".join(slowest_imports(code)))
    print(f"(median of {args.repeat} fresh processes; target < 0.3 s for import planner and shardplan --help)")


if __name__ == "__main__":
    main()
