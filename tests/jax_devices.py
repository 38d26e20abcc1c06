"""Running a JAX script on 8 host CPU devices, in a child process (XLA reads its device count once, at start)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_on_eight_devices(script: str, *args: str, stdin: str | None = None, timeout: float = 600):
    """Run ``python -c script ROOT *args`` with 8 host devices (the repository on its path, its root the working
    directory) and return the JSON of its last line of output; a failure shows the end of its stderr."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu",
               PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", script, str(ROOT), *args], input=stdin, text=True, capture_output=True,
                       env=env, timeout=timeout, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])
