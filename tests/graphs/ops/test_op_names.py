"""An op's name is spelled in code only where it is defined, registered, given its rule, or built.

Everything else the planner knows about an op is a trait of its OpDef, looked up by name
(``get_op(name).follows_operand``), never a table or an ``if`` keyed by op names. This test reads
every module of ``planner/``, ``graphs/`` and ``costmodels/`` and lists the string constants of its
code (docstrings and their examples aside) that are op names.
"""

import ast
from pathlib import Path
from types import MappingProxyType

from graphs.ops import annotation, collectives, conv, gather, loss, matmul, normalization, pointwise, reductions
from graphs.ops import shape_ops
from graphs.ops.registry import OPS

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("planner", "graphs", "costmodels")
FAMILY_MODULES = (annotation, collectives, conv, gather, loss, matmul, normalization, pointwise, reductions,
                  shape_ops)


def _defines(module, op) -> bool:
    """Whether ``module`` defines ``op``: as one of its names, or in a table of ops it builds (the collectives)."""
    return any(v is op or (isinstance(v, MappingProxyType) and any(x is op for x in v.values()))
               for v in vars(module).values())

#: Modules that create ops and so spell any op's name: the model builders and the JAX frontends.
BUILDERS = ("graphs/builders/", "planner/frontends/", "graphs/manual_regions.py")

#: The modules that still spell op names besides those, each with the names and the reason.
ELSEWHERE = {
    # the registry of collectives: seed 004's primitives by name, each with its types, transpose, kernel, lowering
    "planner/collectives.py": {"all_gather", "all_gather_invariant", "all_to_all", "axis_index", "pbroadcast",
                               "pmax", "pmean", "pmin", "ppermute", "pscatter", "psum", "psum_scatter"},
    # a manual region's boundary and the pbroadcasts its variance types imply
    "planner/partitioning/program.py": {"manual_enter", "manual_exit", "pbroadcast"},
    # the shard_map lowering writes seed 004's primitives the steps are: the pbroadcasts of the variance types, the
    # fused all_gather (varying), the one ppermute of a permute step over every axis and a Slice's pscatter
    "planner/engines/jax_spmd.py": {"all_gather", "pbroadcast", "ppermute", "pscatter"},
    "planner/simulation/run.py": {"manual_enter", "manual_exit"},
    # a reshape's pieces: the mesh axes cut so that shardings can follow it, and explicit mode's reshape rule
    "planner/model/build.py": {"reshape"},
    "planner/model/explicit_types.py": {"reshape"},
    # what a propagation barrier lets through, for the searches that honour it
    "planner/searches/propagate/engine.py": {"propagation_barrier"},
    "planner/model/ignored.py": {"propagation_barrier"},
    # a memo key of the redistribution search's moves (an all-gather), not the op
    "planner/redistribution/moves.py": {"gather"},
    # DTensor's Partial(reduce_op="sum"): the reduction a pending sum awaits, in DTensor's words, not the op
    "planner/notations/dtensor.py": {"sum"},
    # the kinds of pending reduction (Shardy's unreduced=max{...}), named once beside the sharding, not the ops
    "planner/ir/sharding.py": {"max", "min", "sum"},
}


def _docstrings(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                yield first.value


def spelled_op_names():
    """``{module path: op names its code spells}`` over the packages."""
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            docs = {id(d) for d in _docstrings(tree)}
            names = {node.value for node in ast.walk(tree)
                     if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in OPS
                     and id(node) not in docs}
            if names:
                out[path.relative_to(ROOT).as_posix()] = names
    return out


def allowed_places(name):
    """Where op ``name`` may be spelled: its definition, the registry and its rule module."""
    home = next(m for m in FAMILY_MODULES if _defines(m, OPS[name]))
    rule = OPS[name].rule
    rule_module = rule.split(".")[0] if rule is not None else None
    places = {home.__name__.replace(".", "/") + ".py", "graphs/ops/registry.py"}
    if rule_module is not None:
        places.add(f"planner/rules/{rule_module}.py")
    return places


def test_no_module_keeps_a_table_of_op_names():
    spelled = spelled_op_names()
    assert spelled, "the scan found no op names at all: wrong root?"
    stray = {}
    for path, names in spelled.items():
        if path.startswith(BUILDERS):
            continue
        left = {n for n in names if path not in allowed_places(n)} - ELSEWHERE.get(path, set())
        if left:
            stray[path] = sorted(left)
    assert not stray, f"op names spelled outside their OpDef, rule and builders (make them OpDef traits): {stray}"


def test_every_exception_is_still_needed():
    spelled = spelled_op_names()
    stale = {path: sorted(names - spelled.get(path, set())) for path, names in ELSEWHERE.items()
             if names - spelled.get(path, set())}
    assert not stale, f"these modules no longer spell these op names; drop them from ELSEWHERE: {stale}"


def test_the_consumers_of_op_traits_spell_no_op_name():
    spelled = spelled_op_names()
    for path in ("graphs/evaluate.py", "planner/engines/jax_ops.py", "planner/rules/registry.py",
                 "planner/simulation/local_ops.py", "planner/simulation/local_vjp.py"):
        assert path not in spelled, (path, spelled.get(path))
