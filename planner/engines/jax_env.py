"""Getting JAX ready to run a plan: is it installed, and does it see the devices the plan's mesh has.

On a CPU-only machine XLA shows one host device unless ``--xla_force_host_platform_device_count=N`` is in
``XLA_FLAGS`` *before* JAX initialises its backend. :func:`ensure_devices` sets that flag (keeping any other
flags the user gave) when JAX has not been imported yet, imports JAX, enables 64-bit types (so ``i64``
tensors stay 64-bit; float tensors are still computed in their declared dtype) and checks the device count.
JAX is imported and started with Ctrl-C held back (:func:`interrupts_held`): a KeyboardInterrupt raised
inside jaxlib's native start-up crashes the process or leaves JAX half-imported.
Every failure is a :class:`~planner.errors.EngineError` (exit status 2) that says what to do.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import signal
import sys
import threading

from planner.errors import EngineError

INSTALL_HINT = ('install the optional JAX extra: pip install -e ".[jax]" in a checkout, '
                'or pip install "shardplan[jax]"')
_FLAG = "--xla_force_host_platform_device_count"


def jax_installed() -> bool:
    """Whether ``import jax`` can work (without importing it)."""
    if "jax" in sys.modules:
        return sys.modules["jax"] is not None
    return importlib.util.find_spec("jax") is not None


def require_jax() -> None:
    """EngineError with the install command unless ``jax`` can be imported."""
    if not jax_installed():
        raise EngineError(f"running a plan on JAX needs jax, which is not installed: {INSTALL_HINT}")


def with_device_count(flags: str, n: int) -> str:
    """``flags`` (an ``XLA_FLAGS`` value) asking for ``n`` host devices, other flags kept.

    >>> with_device_count("--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=2", 8)
    '--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=8'
    >>> with_device_count("", 4)
    '--xla_force_host_platform_device_count=4'
    """
    kept = [f for f in flags.split() if not re.match(re.escape(_FLAG) + r"(=|$)", f)]
    return " ".join(kept + [f"{_FLAG}={n}"])


def host_device_count(flags: str) -> int | None:
    """The number of host devices ``flags`` (an ``XLA_FLAGS`` value) asks for, None when they do not say.

    >>> host_device_count("--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=4"), host_device_count("")
    (4, None)
    """
    counts = [f.split("=", 1)[1] for f in flags.split() if f.startswith(_FLAG + "=")]
    return int(counts[-1]) if counts and counts[-1].isdigit() else None


@contextlib.contextmanager
def interrupts_held():
    """Hold SIGINT back for the block and deliver it after: JAX's import and the start of its backend run in
    native code that a KeyboardInterrupt raised in the middle of crashes (a segmentation fault) or leaves
    half-done (``ImportError: Encountered an error while initializing the extension``). Only where Python handles
    SIGINT (the main thread, a Python handler); elsewhere a plain block."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield
        return
    held = []
    signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held:
            previous(signal.SIGINT, None)  # the handler the block held back: KeyboardInterrupt by default


def ensure_devices(n: int, mesh_size: int):
    """Import JAX with ``n`` devices for a mesh of ``mesh_size``; returns the ``jax`` module.

    Raises EngineError when JAX is missing, when ``n`` is not the mesh's size, or when JAX was already
    imported (and initialised) with fewer devices than needed.
    """
    require_jax()
    if n < 1:
        raise EngineError(f"--devices {n}: a mesh has at least one device; give --devices {mesh_size}, the plan's "
                          "mesh size, or leave it out")
    if n != mesh_size:
        raise EngineError(f"--devices {n} does not match the plan's mesh of {mesh_size} devices: run with "
                          f"--devices {mesh_size} (or plan on a mesh of {n} devices with --mesh)")
    fresh = "jax" not in sys.modules
    if fresh:
        os.environ["XLA_FLAGS"] = with_device_count(os.environ.get("XLA_FLAGS", ""), n)
    with interrupts_held():
        import jax

        devices = jax.devices()
    if len(devices) < n:
        seen = f"JAX sees {len(devices)} {devices[0].platform} device{'s' if len(devices) != 1 else ''}"
        if not fresh:
            raise EngineError(f"{seen} but the plan's mesh needs {n}: JAX was already initialised in this process; "
                              f"start a fresh one (on CPU with XLA_FLAGS={_FLAG}={n})")
        raise EngineError(f"{seen} but the plan's mesh needs {n}: plan on a mesh of {len(devices)} devices "
                          "(--mesh) or run where there are more")
    jax.config.update("jax_enable_x64", True)  # only for a run that goes ahead: i64 tensors stay 64-bit
    return jax
