"""The planner's public entry point: ``planner.plan(model, ...) -> Plan``.

``plan`` loads the model (a path, YAML text or a built graph), normalises the
arguments once, has the search named by ``search`` decide it
(:mod:`planner.searches`: every search is ``search(request) -> Decision``) and
returns the typed, frozen :class:`~planner.report.Plan` read off the lowered program.

>>> p = plan('''
... name: tiny
... mesh: {x: 2}
... tensors:
...   a: {shape: [8, 4], kind: input, sharding: '[{"x"}, {}]'}
...   w: {shape: [4, 4], kind: param}
... ops:
...   - {name: mm, op: matmul, inputs: [a, w], output: h}
...   - {name: act, op: relu, inputs: [h], output: y}
... ''', search="bfs")
>>> [(row["name"], row["strategy"]) for row in p.table()]
[('mm', [[2, 1], [1, 1]]), ('act', [[2, 1]])]
>>> str(p.tensors["y"].sharding), p.totals.comm_bytes_per_device
('sharding<@mesh, [{"x"}, {}]>', 0)
"""

from __future__ import annotations

import os
import warnings
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from costmodels import Cluster, format_bytes, format_quantity, load_cluster
from graphs import ComputationGraph, load_model, load_model_text
from graphs.gradients import check_differentiable
from graphs.lint import model_warnings
from planner.errors import ModelWarning, PlanningError, PlanWarning, quote
from planner.ir.mesh import Mesh
from planner.ir.text import parse_mesh_spec
from planner.model.decision import Decision
from planner.model.mesh_override import with_model_types
from planner.model.options import OUTPUT_LAYOUTS, Options
from planner.model.phases import parse_per_phase
from planner.model.request import Request
from planner.progress import Progress, as_progress, task
from planner.partitioning.schedule import MODES as OVERLAPS
from planner.report import Plan, make_plan
from planner.searches import DEFAULT_SEARCH, SEARCHES, search_named
from planner.searches.propagate import PASSES
from graphs.pipeline_spec import PipelineSpec, read_pipeline

__all__ = ["OUTPUT_LAYOUTS", "OVERLAPS", "SEARCHES", "PipelinePlan", "Plan", "PlanWarning", "export_pipeline", "load",
           "plan", "plan_pipeline"]

if TYPE_CHECKING:
    from planner.stages.plan import PipelinePlan


def __getattr__(name: str) -> Any:
    """:class:`~planner.stages.plan.PipelinePlan`, imported when first asked for: the pipeline level (the stages
    and their exports) loads only for a pipelined plan, not for every ``shardplan plan``."""
    if name == "PipelinePlan":
        from planner.stages.plan import PipelinePlan

        return PipelinePlan
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load(model: Any) -> ComputationGraph:
    """A graph from a path, YAML text or a graph.

    A string is a path when it has one line and ends in ``.yaml`` / ``.yml``, names an existing
    path, or has no ``:`` (YAML text of a model always has one); else it is YAML text.
    """
    if isinstance(model, ComputationGraph):
        return model
    if isinstance(model, Path) or (isinstance(model, str) and "\n" not in model and (
            model.endswith((".yaml", ".yml")) or ":" not in model or os.path.exists(model))):
        return load_model(model)
    if isinstance(model, str):
        return load_model_text(model)
    raise PlanningError(f"cannot plan {type(model).__name__}: give a YAML path, YAML text or a ComputationGraph")


def _planning_mesh(graph: ComputationGraph, mesh: Any) -> Mesh:
    if mesh is None:
        return graph.mesh
    if isinstance(mesh, Mesh):
        chosen = mesh
    elif str(mesh) in graph.meshes:
        chosen = graph.meshes[str(mesh)]
    else:
        chosen = parse_mesh_spec(str(mesh), default_name=graph.mesh.name if graph.meshes else "mesh")
    if graph.meshes and chosen.size != graph.mesh.size:
        raise PlanningError(
            f"--mesh {chosen.short()} has {chosen.size} devices but the model's mesh @{graph.mesh.name} has "
            f"{graph.mesh.size}; a different mesh must cover the same devices"
        )
    return chosen


def _cluster(graph: ComputationGraph, cluster: Any) -> Cluster:
    """The cluster to cost on: ``cluster`` (the ``--cluster`` flag) if given, else the model's ``cluster:``.

    A relative path is read where it was written: the model's ``cluster:`` relative to
    the model file's folder (the model and its cluster travel together), the argument
    relative to the current directory (as every path on a command line is).
    """
    if cluster is not None:
        return load_cluster(cluster)
    base = str(Path(graph.source).parent) if graph.source and Path(str(graph.source)).exists() else None
    return load_cluster(graph.cluster, base_dir=base)


def cluster_of(graph: ComputationGraph, cluster: Any = None) -> Cluster:
    """The cluster a plan of ``graph`` is costed on: ``cluster`` (a preset, a path or a Cluster) if given, else the
    model's ``cluster:`` (read relative to the model's folder)."""
    return cluster if isinstance(cluster, Cluster) else _cluster(graph, cluster)


def plan(
    model: Any,
    *,
    search: str = DEFAULT_SEARCH,
    mesh: Any = None,
    cluster: Any = None,
    training: bool = False,
    memory_budget: float | None = None,
    time_limit: float | None = None,
    solver: str = "auto",
    outputs_layout: str | None = None,
    progress: Progress | Callable[[str], None] | None = None,
    insert_pbroadcast: bool = True,
    axes_per_phase: Any = "auto",
    propagation: str = "user-priority",
    overlap: str = "async",
) -> Plan:
    """Plan ``model`` (a path, YAML text or graph); see the module docstring.

    ``insert_pbroadcast=False`` (training only) switches off seed 004's
    device-variance types: every cotangent is treated as device-varying, so the
    backward sums what is already whole, as transposes did before the seed. It is
    there to show what the types save; plans are costed and run that way.

    ``axes_per_phase`` (``auto``, ``all`` or a number): how many mesh pieces each
    phase of the search decides; ``auto`` plans meshes of up to two pieces whole and
    larger ones a piece at a time after the first two (:mod:`planner.model.phases`);
    the plan's ``search_space`` says which, with the gap to a lower bound.
    ``time_limit`` (seconds) bounds the whole search, not only the solver.

    ``propagation`` (``search="propagate"`` only): the rule-based pass, one of
    ``basic``, ``aggressive``, ``op-priority``, ``user-priority`` (default), each
    building on the previous (:mod:`planner.searches.propagate`).

    ``overlap`` (``async``, default, or ``none``): how the plan's step time (``totals.step_time_s``) is
    scheduled: collectives on their links' streams beside independent compute, or the serial sum
    (:mod:`planner.partitioning.schedule`). Every search optimises the serial sum (``totals.objective``);
    ``totals.overlap_gap`` says how much it overstates the scheduled step.

    ``outputs_layout`` (``free``, ``replicated`` or ``even``) overrides the model's
    ``outputs_layout``. ``progress``, if given, hears how far the work has got: a
    :class:`~planner.progress.Progress` gets the stages, the cost tables built and the
    solver's run (the CLI draws a bar from them on a terminal); a plain callable gets a
    short message at each stage.
    Notes such as an ILP fallback are issued as :class:`PlanWarning` and kept in
    ``Plan.warnings``.
    """
    progress = as_progress(progress)
    decide = search_named(search)
    if propagation not in PASSES:
        raise PlanningError(f"unknown propagation pass {quote(propagation)}; use one of {', '.join(PASSES)}")
    if overlap not in OVERLAPS:
        raise PlanningError(f"unknown overlap mode {quote(overlap)}; use one of {', '.join(OVERLAPS)}")
    per_phase = parse_per_phase(axes_per_phase)
    graph = load(model)
    progress.stage(f"loaded {graph.name}: {len(graph.ops)} ops")
    if training:
        check_differentiable(graph)  # the backward is the transposed forward: every op needs a VJP
    layout = outputs_layout if outputs_layout is not None else graph.outputs_layout
    options = Options(training=training, memory_budget=memory_budget, outputs_layout=layout,
                      insert_pbroadcast=insert_pbroadcast, overlap=overlap)
    planning_mesh = with_model_types(graph, _planning_mesh(graph, mesh))  # axis types go with the axis names
    request = Request(graph, planning_mesh, _cluster(graph, cluster), options, time_limit, solver, progress,
                      per_phase, propagation)
    decision = decide(request)
    model_notes = model_warnings(graph)
    notes = (*decision.notes, *_memory_notes(decision, request.cluster))
    for note in model_notes:
        warnings.warn(note, ModelWarning, stacklevel=2)
    for note in notes:
        warnings.warn(note, PlanWarning, stacklevel=2)
    progress.stage("lowering the plan")
    with task(progress, "lowering and costing the plan"):
        return make_plan(replace(decision, notes=(*model_notes, *notes)))


def _memory_notes(decision: Decision, cluster: Cluster) -> tuple[str, ...]:
    """A warning when the plan needs more memory per device than the cluster's devices have."""
    need = int(decision.model.problem.memory(decision.choice))
    have = cluster.device_memory_bytes
    if need <= have:
        return ()
    return (f"the plan needs {format_bytes(need)} per device (parameters, optimizer state and live activations) but a "
            f"device of cluster {cluster.name!r} has {format_bytes(have)}: it would not fit; shard more (e.g. "
            f"--search ilp --memory-budget {format_quantity(have, 'bytes')}), plan on more devices, or give a --cluster with more memory",)


def plan_pipeline(
    model: Any,
    *,
    devices: int | None = None,
    pipeline: Any = None,
    cluster: Any = None,
    memory_budget: float | None = None,
    search: str = DEFAULT_SEARCH,
    progress: Progress | Callable[[str], None] | None = None,
) -> PipelinePlan:
    """Plan a pipelined training step of ``model`` (:mod:`planner.stages`): the pipeline degree, the
    data-parallel degree and the stage mesh, the stages' layers, the microbatches, the schedule, the
    recomputation and the ZeRO stage, each as the model's ``pipeline:`` mapping (or ``pipeline``, a
    :class:`~graphs.pipeline_spec.PipelineSpec` or mapping, which replaces it) pins or leaves to the search.

    ``devices``: plan for that many devices of the cluster, the planner building the mesh; without it, a model
    whose mesh has the pipeline axis is planned on that mesh (``pp`` that axis, ``dp`` its ``dp`` axis, the stage
    mesh the rest), any other on as many devices as its mesh has. ``search`` plans each stage mesh (the SPMD
    searches); ``memory_budget`` (bytes per device) replaces the cluster's device memory.
    """
    from planner.stages.plan import pipeline_plan
    from planner.stages.search import search_pipeline

    progress = as_progress(progress)
    graph = load(model)
    check_differentiable(graph)
    spec = _pipeline_spec(graph, pipeline)
    chosen = _cluster(graph, cluster)
    if devices is not None and (isinstance(devices, bool) or not isinstance(devices, int) or devices < 1):
        raise PlanningError(f"--devices must be a whole number of devices, at least 1, got {quote(devices)}")
    axis = spec.axis or "pp"
    mesh = graph.mesh if graph.meshes else None
    _check_pipeline_axis_unsharded(graph, axis)
    fixed = mesh if devices is None and mesh is not None and axis in mesh.axis_names else None
    if devices is None:
        if mesh is None:
            raise PlanningError(f"model {quote(graph.name)} has no mesh: plan it with --devices N")
        devices = mesh.size
    searched = search_pipeline(graph, devices, chosen, spec, memory_budget, mesh=fixed, search=search,
                               progress=progress)
    pinned = frozenset(spec.pinned()) | ({"mesh"} if fixed is not None else frozenset())
    return pipeline_plan(searched, graph, chosen, devices, pinned)


def export_pipeline(
    model: Any,
    to: str = "jax",
    *,
    devices: int | None = None,
    pipeline: Any = None,
    cluster: Any = None,
    memory_budget: float | None = None,
    search: str = DEFAULT_SEARCH,
    progress: Progress | Callable[[str], None] | None = None,
) -> dict:
    """:func:`plan_pipeline`'s plan of ``model`` in notation ``to`` (:func:`planner.export.export_pipeline`):
    the mesh, the stages, the schedule, and per stage the layouts of the SPMD plan its costs were read from,
    planned again by ``search`` on the chosen stage mesh for one microbatch."""
    from planner.export import export_pipeline as _export_pipeline
    from planner.stages.layers import microbatched
    from planner.stages.profile import stage_program

    progress = as_progress(progress)
    graph = load(model)
    chosen = plan_pipeline(graph, devices=devices, pipeline=pipeline, cluster=cluster, memory_budget=memory_budget,
                           search=search, progress=progress)
    c = chosen.config
    one = microbatched(graph, c.microbatch)
    progress.stage("planning the stages' SPMD program for the export")
    staged = stage_program(one, Mesh.from_sizes("stage", dict(c.stage_axes)), _cluster(graph, cluster), search)
    return _export_pipeline(chosen, make_plan(staged.decision), staged, one, to)


def _pipeline_spec(graph: ComputationGraph, pipeline: Any) -> PipelineSpec:
    if pipeline is None or pipeline == "auto":
        return graph.pipeline if graph.pipeline is not None and pipeline is None else PipelineSpec()
    if isinstance(pipeline, PipelineSpec):
        return pipeline
    return read_pipeline(pipeline)


def _check_pipeline_axis_unsharded(graph: ComputationGraph, axis: str) -> None:
    """The pipeline axis carries stages, not shards: an annotation naming it is refused with the fix."""
    for t in graph.tensors.values():
        s = t.sharding
        if s is not None and any(a.name == axis for a in s.used_axes()):
            where = f" ({graph.source}:{t.line})" if graph.source and t.line else ""
            raise PlanningError(f"tensor {quote(t.name)}{where} is sharded over {quote(axis)}, the pipeline axis: an "
                                f"axis carries either pipeline stages or shards; drop {quote(axis)} from its sharding, "
                                f"or name another pipeline axis in pipeline.axis")
