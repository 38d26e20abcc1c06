"""Measuring the JAX devices present and fitting a cluster to them: what ``shardplan calibrate`` runs.

Every measurement is one jitted ``jax.shard_map`` over all ``N`` devices at once, each device working on
its own blocks, so that devices sharing a host (8 host devices on a few CPU cores) contend as they do in
``shardplan run``. Each program is compiled and run once to warm up, then timed (``block_until_ready``) a
few times; its time is the median. What is measured:

* **dispatch and per-op overhead**: a program of one tiny op and one of :data:`CHAIN` tiny ops kept apart
  by ``optimization_barrier`` (so XLA cannot fuse them): the difference per op is ``kernel_overhead_s``,
  the rest of the one-op program is the dispatch of a program, taken off every other time and written as
  ``step_overhead_s`` (a plan's step is one program: it pays the dispatch once, not once per op or
  collective);
* **matmul**: a grid of local shapes ``m x k x n`` from small to large in each dtype (``f32``, ``bf16``;
  ``f16`` too on GPUs);
* **memory bandwidth**: ``y = x * a + b`` on buffers much larger than the caches;
* **vector FLOPs**: chains of multiply-adds that XLA fuses into one loop, of two lengths: the extra
  FLOPs over the extra time (the bytes are the same, so the memory drops out);
* **collectives**: every step kind the planner prices (AllReduce, ReduceScatter, AllGather, AllToAll,
  CollectivePermute, as the registry's ``jax.lax`` lowering of its primitive) over every axis of size > 1
  of a 1-D mesh of the ``N`` devices and of a 2-D one (``(2, 4)`` for 8), at message sizes from 4 KiB
  to 16 MiB a device.

:mod:`costmodels.fit` fits the cluster's numbers; :meth:`Calibration.residuals` sets each measurement
beside what the fitted numbers, as a file holds them, predict; :meth:`Calibration.cluster_file` is the
file. JAX is imported by :func:`start_jax` only, with the host devices asked for on a CPU-only machine.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Sequence

from costmodels.cluster import Link
from costmodels.fit import (
    CollectiveSample,
    MatmulFit,
    MatmulSample,
    RateSample,
    collective_shapes,
    collective_time_s,
    fit_link,
    fit_matmul,
    fit_rate,
    fit_slope_rate,
    link_rounded,
    matmul_time_s,
    per_op_overhead_s,
    relative_error,
    roofline_time_s,
    significant,
)
from costmodels.units import format_seconds
from costmodels.writer import ClusterFile
from planner.collectives import STEP_KINDS, jax_lowering
from planner.engines.jax_env import (INSTALL_HINT, host_device_count, interrupts_held, jax_installed,
                                     with_device_count)
from planner.errors import EngineError
from planner.progress import SILENT, Progress

__all__ = ["DEFAULT_HOST_DEVICES", "ONLY", "Calibration", "Residual", "calibrate", "start_jax"]

DEFAULT_HOST_DEVICES = 8
"""Host devices JAX is started with on a CPU-only machine when ``--devices`` is not given: the mesh size of the
configs ``shardplan run`` runs."""

ONLY = ("compute", "links")
"""What ``--only`` may restrict a calibration to."""

CHAIN = 128
"""Tiny ops in the program that measures the per-op overhead."""

TARGET_DISPATCHES = 5
"""An op is timed in a program that runs at least this many dispatches' time (:meth:`_Bench.op_s`)."""

MAX_COPIES = 32
"""At most this many independent instances of a short op in one program."""

#: The step kinds measured: those that communicate (each lowers to an HLO collective), in the registry's order.
MEASURED_KINDS = tuple(k.name for k in STEP_KINDS.values() if k.hlo)

#: The residual family of the matmul grid (its table's title: the samples are labelled by dtype and shape).
MATMUL = "matmul m x k x n"

_ITEMSIZE = {"f32": 4, "bf16": 2, "f16": 2}
_MiB = 2**20


@dataclass(frozen=True, slots=True)
class Grid:
    """What one calibration measures, by platform and ``--quick``."""

    cubes: tuple[int, ...]               # local m = k = n of the square matmuls
    rectangles: tuple[int, ...]          # s of the matmuls s x 4s x s and 4s x s x 4s
    bandwidth_bytes: tuple[int, ...]     # buffer a device streams through y = x * a + b
    vector_elements: int                 # elements a device runs the multiply-add chains on
    vector_chains: tuple[int, int]       # the two chain lengths
    collective_bytes: tuple[int, ...]    # the larger local buffer of a collective
    min_runs: int
    max_runs: int
    budget_s: float                      # timed runs stop after this once min_runs are done


def grid(platform: str, quick: bool) -> Grid:
    """The measurements for ``platform``: on the CPU small enough for a few cores shared by 8 host devices (about
    a minute; messages up to 4 MiB), on accelerators up to 16 MiB messages and 8192-cubed matmuls."""
    sizes = tuple(4096 * 4**i for i in range(7))  # 4 KiB .. 16 MiB
    if platform == "cpu":
        if quick:
            return Grid((32, 128, 512), (), (8 * _MiB,), 2**16, (16, 48), sizes[:5:4], 3, 15, 0.05)
        return Grid((16, 32, 64, 128, 256, 512), (32, 128), (4 * _MiB, 16 * _MiB), 2**18, (16, 80),
                    sizes[:6], 5, 30, 0.1)
    if quick:
        return Grid((256, 1024, 4096), (), (256 * _MiB,), 2**24, (64, 256), sizes[:5:4], 3, 15, 0.05)
    return Grid((128, 256, 512, 1024, 2048, 4096, 8192), (256, 1024), (256 * _MiB, 1024 * _MiB), 2**26,
                (64, 512), sizes, 5, 40, 0.2)


def dtypes(platform: str) -> tuple[str, ...]:
    """The graph dtypes whose matmul peak is measured: ``f16`` only where it differs in hardware (GPUs)."""
    return ("f32", "bf16", "f16") if platform == "gpu" else ("f32", "bf16")


@dataclass(frozen=True, slots=True)
class Residual:
    """One measurement beside the fit's prediction (seconds)."""

    family: str
    label: str
    measured_s: float
    fitted_s: float

    @property
    def relative_error(self) -> float:
        return relative_error(self.measured_s, self.fitted_s)


@dataclass(frozen=True)
class Calibration:
    """What was measured and the numbers fitted to it (as the cluster file holds them: 4 significant digits).

    Times of the samples are the programs' times less the dispatch of a program (:attr:`dispatch_s`).
    """

    jax_version: str
    platform: str
    device_kind: str
    devices: int
    measured_at: str
    quick: bool
    only: str | None
    device_memory_bytes: int
    memory_source: str
    dispatch_s: float
    kernel_overhead_s: float
    meshes: tuple[tuple[int, ...], ...] = ()
    matmul: tuple[MatmulSample, ...] = ()
    bandwidth: tuple[RateSample, ...] = ()
    vector: tuple[tuple[RateSample, int], ...] = ()      # (FLOPs sample, its bytes)
    collectives: tuple[CollectiveSample, ...] = ()
    matmul_fit: MatmulFit | None = None
    memory_bandwidth_bytes_per_s: float | None = None
    vector_flops: float | None = None
    link: Link | None = None
    elapsed_s: float = field(default=0.0, compare=False)

    @property
    def measures_compute(self) -> bool:
        return self.only != "links"

    @property
    def measures_links(self) -> bool:
        return self.only != "compute"

    def residuals(self) -> list[Residual]:
        """Every measurement beside what the fitted numbers predict for it, family by family."""
        rows: list[Residual] = []
        if self.measures_compute:
            bw, vf, o = self.memory_bandwidth_bytes_per_s, self.vector_flops, self.kernel_overhead_s
            rows += [Residual(MATMUL, s.label, s.time_s, matmul_time_s(s, self.matmul_fit, bw, o))
                     for s in self.matmul]
            # y = x * a + b: 2 FLOPs and 2 x 4 bytes an element
            rows += [Residual("memory", s.label, s.time_s, roofline_time_s(s.work / 4, s.work, vf, bw, o))
                     for s in self.bandwidth]
            rows += [Residual("vector", s.label, s.time_s, roofline_time_s(s.work, nbytes, vf, bw, o))
                     for s, nbytes in self.vector]
        if self.measures_links:
            rows += [Residual(s.kind, s.label, s.time_s, collective_time_s(s, self.link)) for s in self.collectives]
        return rows

    def median_abs_relative_error(self) -> float:
        errors = [abs(r.relative_error) for r in self.residuals()]
        return statistics.median(errors) if errors else 0.0

    def header(self) -> tuple[str, ...]:
        """The cluster file's comment: when and how it was measured."""
        mode = " --quick" if self.quick else ""
        mode += f" --only {self.only}" if self.only else ""
        lines = [f"Measured by shardplan calibrate{mode} on {self.measured_at}.",
                 f"jax {self.jax_version}, platform {self.platform}, device kind {self.device_kind}, "
                 f"{self.devices} device{'s' if self.devices != 1 else ''} measured at once"
                 + (", as one node (inter_node = intra_node)." if self.measures_links else "."),
                 f"device_memory_bytes: {self.memory_source}."]
        if self.measures_compute:
            shapes = sorted(self.matmul, key=lambda s: s.flops)
            smallest, largest = (f"{s.m}x{s.k}x{s.n}" for s in (shapes[0], shapes[-1]))
            lines.append(f"compute: matmul {', '.join(sorted({s.dtype for s in self.matmul}))} on "
                         f"{len({(s.m, s.k, s.n) for s in self.matmul})} local shapes ({smallest} to {largest}); "
                         "memory bandwidth from y = x * a + b; vector_flops from fused multiply-add chains; "
                         f"kernel_overhead_s from {CHAIN} tiny ops.")
        else:
            lines.append("compute: not measured (--only links): from the preset.")
        if self.measures_links:
            meshes = ", ".join("x".join(map(str, m)) for m in self.meshes)
            sizes = sorted({s.buffer_bytes for s in self.collectives})
            lines.append(f"links: {', '.join(MEASURED_KINDS)} over every axis of the meshes {meshes}, "
                         f"{_size(sizes[0])} to {_size(sizes[-1])} a device; fitted by non-negative least squares "
                         "to costmodels/collectives.py.")
        else:
            lines.append("links: not measured (--only compute): from the preset.")
        lines.append(f"Fit: median |relative error| {self.median_abs_relative_error():.1%} over "
                     f"{len(self.residuals())} measurements (shardplan calibrate prints them all).")
        return tuple(lines)

    def cluster_file(self, name: str, preset: str | None = None) -> ClusterFile:
        """The cluster file of this calibration; ``preset`` gives what was not measured (``--only``)."""
        compute = {}
        if self.measures_compute:
            fit = self.matmul_fit
            compute = dict(device_peak_flops=max(p for _, p in fit.peak_flops_by_dtype),
                           peak_flops_by_dtype=fit.peak_flops_by_dtype, vector_flops=self.vector_flops,
                           memory_bandwidth_bytes_per_s=self.memory_bandwidth_bytes_per_s,
                           kernel_overhead_s=self.kernel_overhead_s, step_overhead_s=self.dispatch_s,
                           matmul_efficiency=fit.curve)
        return ClusterFile(name=name, devices_per_node=self.devices if self.measures_links else None,
                           device_memory_bytes=self.device_memory_bytes,
                           header=self.header(), preset=preset if self.only else None,
                           link=self.link if self.measures_links else None, **compute)


def _size(nbytes: int) -> str:
    return f"{nbytes // _MiB} MiB" if nbytes >= _MiB else f"{nbytes // 1024} KiB"


# -- starting JAX ----------------------------------------------------------------------------------------------

def start_jax(devices: int | None = None):
    """``(jax, the devices to measure)``: JAX imported with ``devices`` host devices (default
    :data:`DEFAULT_HOST_DEVICES`, unless ``XLA_FLAGS`` already names a count) when it was not imported yet.

    Raises EngineError when JAX is missing or sees fewer devices than ``devices``.
    """
    if not jax_installed():
        raise EngineError(f"shardplan calibrate measures JAX devices and needs jax, which is not installed: "
                          f"{INSTALL_HINT}")
    if devices is not None and devices < 1:
        raise EngineError(f"--devices {devices}: give a number of devices >= 1")
    fresh = "jax" not in sys.modules
    flags = os.environ.get("XLA_FLAGS", "")
    if fresh and (devices is not None or host_device_count(flags) is None):
        os.environ["XLA_FLAGS"] = with_device_count(flags, devices or DEFAULT_HOST_DEVICES)
    with interrupts_held():
        import jax

        present = jax.devices()
    platform = present[0].platform
    if devices is not None and devices > len(present):
        seen = f"JAX sees {len(present)} {platform} device{'s' if len(present) != 1 else ''}"
        if platform == "cpu":
            how = ("JAX was already initialised in this process: start a fresh one, where shardplan calibrate starts "
                   f"JAX with --devices host devices (XLA_FLAGS=--xla_force_host_platform_device_count={devices})"
                   if not fresh else f"give --devices {len(present)} or fewer")
        else:
            how = (f"give --devices {len(present)} or fewer (only CPU host devices can be raised, by "
                   "XLA_FLAGS=--xla_force_host_platform_device_count=N, which shardplan calibrate sets itself)")
        raise EngineError(f"--devices {devices} is more than the devices present: {seen}; {how}")
    return jax, list(present[: len(present) if devices is None else devices])


def device_memory_bytes(devices: Sequence) -> tuple[int, str]:
    """A device's memory and where the number comes from: JAX's ``memory_stats`` (``bytes_limit``) where the
    backend reports it, else the host's memory shared by the devices."""
    stats = None
    try:
        stats = devices[0].memory_stats()
    except Exception:  # backends without memory statistics raise (some) or return None (the CPU)
        stats = None
    if stats and stats.get("bytes_limit"):
        return int(stats["bytes_limit"]), "JAX's memory_stats() bytes_limit of device 0"
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return total // len(devices), f"the host's memory / {len(devices)} device{'s' if len(devices) != 1 else ''}"


# -- measuring ------------------------------------------------------------------------------------------------------

class _Bench:
    """Programs over the devices, their inputs, and the median of timed runs."""

    def __init__(self, jax, devices, g: Grid):
        import numpy as np

        self.jax, self.np, self.devices, self.grid = jax, np, devices, g
        self.n = len(devices)
        self.dispatch_s = 0.0

    def mesh(self, shape: tuple[int, ...]):
        names = ("d",) if len(shape) == 1 else ("x", "y")
        grid = self.np.empty(self.n, dtype=object)
        grid[:] = self.devices
        return self.jax.sharding.Mesh(grid.reshape(shape), names)

    def spec(self, mesh):
        """Each device's blocks one after another along dimension 0."""
        names = tuple(mesh.axis_names)
        return self.jax.sharding.PartitionSpec(names[0] if len(names) == 1 else names)

    def program(self, mesh, body, n_args: int, copies: int = 1):
        """``body`` (``n_args`` blocks in, one out) jitted as a ``shard_map`` over ``mesh``; with ``copies`` > 1,
        that many independent instances of it on as many sets of arguments, all of their results returned
        (none can be merged with another or left out)."""
        spec = self.spec(mesh)

        def instances(*blocks):
            return tuple(body(*blocks[i * n_args:(i + 1) * n_args]) for i in range(copies))

        return self.jax.jit(self.jax.shard_map(instances, mesh=mesh, in_specs=(spec,) * (n_args * copies),
                                               out_specs=(spec,) * copies, check_vma=False))

    def array(self, mesh, local_shape: tuple[int, ...], dtype: str):
        """A global array whose block on each device has ``local_shape``, filled on the devices (small values)."""
        jax = self.jax
        shape = (local_shape[0] * self.n, *local_shape[1:])
        sharding = jax.sharding.NamedSharding(mesh, self.spec(mesh))

        def fill():
            i = jax.lax.broadcasted_iota(jax.numpy.float32, shape, len(shape) - 1)
            return ((i % 13.0) * 0.125 - 0.75).astype(jax.numpy.dtype(_JNP[dtype]))

        return jax.jit(fill, out_shardings=sharding)()

    def median_s(self, fn, args: Sequence, min_runs: int | None = None) -> float:
        """Median seconds of ``fn(*args)``, compiled and run once to warm up, then timed."""
        jax, g = self.jax, self.grid
        jax.block_until_ready(fn(*args))
        least = g.min_runs if min_runs is None else min_runs
        times: list[float] = []
        start = time.perf_counter()
        while len(times) < max(least, g.max_runs):
            t = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times.append(time.perf_counter() - t)
            if len(times) >= least and time.perf_counter() - start >= g.budget_s:
                break
        return statistics.median(times)

    def op_s(self, mesh, body, args: Sequence) -> float:
        """Seconds one instance of ``body`` takes inside a program: the program's time less the dispatch. An op
        shorter than :data:`TARGET_DISPATCHES` dispatches is timed again as that many independent instances in
        one program (at most :data:`MAX_COPIES`), so that the dispatch's noise is shared among them."""
        program = self.median_s(self.program(mesh, body, len(args)), args)
        one = max(program - self.dispatch_s, 0.1 * program)
        target = TARGET_DISPATCHES * max(self.dispatch_s, 1e-4)
        copies = min(MAX_COPIES, math.ceil(target / one)) if program < target else 1
        if copies < 2:
            return one
        program = self.median_s(self.program(mesh, body, len(args), copies), list(args) * copies)
        return max(program - self.dispatch_s, 0.1 * program) / copies


_JNP = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}


def _overheads(b: _Bench) -> tuple[float, float]:
    """``(dispatch of a program, kernel overhead per op)`` from one tiny matmul and a chain of :data:`CHAIN`
    (matmuls are kernels of their own: XLA fuses no two of them, where it fuses any chain of elementwise ops)."""
    mesh = b.mesh((b.n,))
    x = b.array(mesh, (8, 8), "f32")

    def chain(v, w):
        for _ in range(CHAIN):
            v = v @ w
        return v

    one = b.median_s(b.program(mesh, lambda v, w: v @ w, 2), (x, x), min_runs=20)
    many = b.median_s(b.program(mesh, chain, 2), (x, x), min_runs=20)
    overhead = per_op_overhead_s(one, many, CHAIN)
    return max(0.0, one - overhead), overhead


def _matmuls(b: _Bench, platform: str, progress: Progress) -> list[MatmulSample]:
    g = b.grid
    shapes = [(s, s, s) for s in g.cubes] + [sh for s in g.rectangles for sh in ((s, 4 * s, s), (4 * s, s, 4 * s))]
    shapes.sort(key=lambda sh: (sh[0] * sh[1] * sh[2], sh))
    mesh = b.mesh((b.n,))
    samples = []
    todo = [(d, sh) for d in dtypes(platform) for sh in shapes]
    progress.begin("matmul shapes", len(todo))
    for dtype, (m, k, n) in todo:
        a, w = b.array(mesh, (m, k), dtype), b.array(mesh, (k, n), dtype)
        samples.append(MatmulSample(dtype, m, k, n, _ITEMSIZE[dtype], b.op_s(mesh, lambda x, y: x @ y, (a, w))))
        del a, w
        progress.advance()
    progress.end()
    return samples


def _bandwidth(b: _Bench) -> list[RateSample]:
    mesh = b.mesh((b.n,))
    samples = []
    for nbytes in b.grid.bandwidth_bytes:
        elements = nbytes // 4
        x = b.array(mesh, (elements,), "f32")
        a, c = b.array(mesh, (1,), "f32"), b.array(mesh, (1,), "f32")
        # read x, write y
        time_s = b.op_s(mesh, lambda v, s, t: v * s + t, (x, a, c))
        samples.append(RateSample(f"y = x * a + b, {_size(nbytes)} f32", 2 * nbytes, time_s))
        del x
    return samples


def _vector(b: _Bench) -> list[tuple[RateSample, int]]:
    mesh = b.mesh((b.n,))
    elements = b.grid.vector_elements
    x = b.array(mesh, (elements,), "f32")
    a, c = b.array(mesh, (1,), "f32"), b.array(mesh, (1,), "f32")
    samples = []
    for length in b.grid.vector_chains:
        def chain(v, s, t, length=length):
            for _ in range(length):
                v = v * s + t
            return v

        label = f"{length} multiply-adds on {elements} f32"
        samples.append((RateSample(label, 2.0 * length * elements, b.op_s(mesh, chain, (x, a, c))), 2 * 4 * elements))
    return samples


def meshes(n: int) -> tuple[tuple[int, ...], ...]:
    """The meshes whose axes the collectives run over: ``(n,)``, and ``(a, n // a)`` for the smallest factor
    ``a`` of a composite ``n``.

    >>> meshes(8), meshes(6), meshes(7), meshes(1)
    (((8,), (2, 4)), ((6,), (2, 3)), ((7,),), ((1,),))
    """
    factor = next((a for a in range(2, n) if n % a == 0), None)
    return ((n,),) if factor is None else ((n,), (factor, n // factor))


def _collectives(b: _Bench, progress: Progress) -> list[CollectiveSample]:
    todo = []
    for shape in meshes(b.n):
        mesh = b.mesh(shape)
        for axis, p in zip(mesh.axis_names, shape):
            if p > 1:
                where = f"mesh {'x'.join(map(str, shape))} axis {axis}={p}"
                todo += [(mesh, axis, p, where, kind, size)
                         for kind in MEASURED_KINDS for size in b.grid.collective_bytes]
    samples = []
    progress.begin("collectives", len(todo))
    for mesh, axis, p, where, kind, size in todo:
        elements = max(p, size // 4 // p * p)
        operand, result = collective_shapes(kind, elements, p)
        lower = jax_lowering(STEP_KINDS[kind].primitive, mesh)
        attrs = {"axes": (axis,), "dim": 0, "split_dim": 0, "concat_dim": 0,
                 "perm": tuple((i, (i + 1) % p) for i in range(p))}
        x = b.array(mesh, (operand,), "f32")
        t = b.op_s(mesh, lambda v, lower=lower, attrs=attrs: lower(v, attrs), (x,))
        samples.append(CollectiveSample(kind, p, operand, result, 4, t, f"{where}, {_size(4 * max(operand, result))}"))
        del x
        progress.advance()
    progress.end()
    return samples


def calibrate(devices: int | None = None, *, only: str | None = None, quick: bool = False,
              progress: Progress = SILENT) -> Calibration:
    """Measure the devices JAX sees (the first ``devices`` of them) and fit a cluster to them.

    ``only="compute"`` skips the collectives (one device is then enough), ``only="links"`` the compute;
    ``quick`` measures fewer shapes and sizes, with fewer runs each.
    """
    if only is not None and only not in ONLY:
        raise EngineError(f"--only {only}: choose one of {', '.join(ONLY)}")
    if devices == 1 and only != "compute":
        raise EngineError("collectives need >= 2 devices; --devices 1 measures none: add --only compute "
                          "(the links then come from a preset), or give --devices 2 or more")
    started = time.perf_counter()
    jax, present = start_jax(devices)
    platform = present[0].platform
    if len(present) < 2 and only != "compute":
        raise EngineError(f"collectives need >= 2 devices; JAX sees 1 {platform} device: calibrate the compute "
                          "part alone with --only compute (the links then come from a preset), or run where there "
                          "are more devices")
    measured_at = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    g = grid(platform, quick)
    b = _Bench(jax, present, g)
    memory, memory_source = device_memory_bytes(present)
    progress.stage("measuring the dispatch of a program and the per-op overhead")
    b.dispatch_s, overhead = _overheads(b)
    overhead = significant(overhead)
    values: dict = {}
    if only != "links":
        progress.stage("measuring matmul throughput")
        mm = _matmuls(b, platform, progress)
        progress.stage("measuring memory bandwidth and vector FLOPs")
        bw_samples, vector_samples = _bandwidth(b), _vector(b)
        values.update(matmul=tuple(mm), bandwidth=tuple(bw_samples), vector=tuple(vector_samples),
                      matmul_fit=fit_matmul(mm, overhead).rounded(),
                      memory_bandwidth_bytes_per_s=significant(fit_rate(bw_samples, overhead)),
                      vector_flops=significant(fit_slope_rate([s for s, _ in vector_samples], overhead)))
    if only != "compute":
        progress.stage("measuring collectives")
        coll = _collectives(b, progress)
        values.update(collectives=tuple(coll), link=link_rounded(fit_link(coll)),
                      meshes=tuple(shape for shape in meshes(b.n) if max(shape) > 1))
    return Calibration(jax_version=jax.__version__, platform=platform, device_kind=str(present[0].device_kind),
                       devices=len(present), measured_at=measured_at, quick=quick, only=only,
                       device_memory_bytes=memory, memory_source=memory_source, dispatch_s=b.dispatch_s,
                       kernel_overhead_s=overhead, elapsed_s=time.perf_counter() - started, **values)
