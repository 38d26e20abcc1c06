"""``shardplan import-jax MODULE:FUNCTION``: trace a JAX function and write it as a model file.

The module is imported with the current directory on ``sys.path`` (a dotted name, or a path to a
``.py`` file). The example arguments are ``--args`` shapes (``f32[8,128]``, one per positional
parameter) or, without ``--args``, the module attribute ``FUNCTION_example_args`` (a tuple of
arrays, ``jax.ShapeDtypeStruct``\\ s or pytrees of them, or a function returning one); the trained
weights are ``--params`` or the attribute ``FUNCTION_params`` (names or positions).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import Any

from planner.cli.args import command_options
from planner.cli.output import json_document, write_text
from planner.errors import ParseError, ShardplanError, did_you_mean

_ARG = re.compile(r"^\s*(f32|bf16|f16|i32|i64|bool)\[\s*(\d+(?:\s*,\s*\d+)*)?\s*\]\s*$")
_JAX_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "i32": "int32", "i64": "int64", "bool": "bool"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import-jax",
        help="trace a JAX function (its jaxpr) into a model YAML to plan",
        description="Import MODULE (a dotted name or a .py path; the current directory is on sys.path), trace "
        "FUNCTION with jax.make_jaxpr on example arguments, and write the model file: one catalogue op per "
        "primitive (mean, softmax, layer and RMS norms and gelu recognised), each with its source line as a comment. "
        "The shardings the program states are read: sharding constraints, reshard, out_sharding=, shard_alike, "
        "shard_map (a manual region) and argument types on an Explicit mesh (without --mesh, the mesh they name). "
        "An unsupported primitive is an error naming it and its line. Needs JAX: pip install -e \".[jax]\".",
    )
    p.add_argument("target", metavar="MODULE:FUNCTION", help="e.g. examples/jax_gpt_block.py:gpt_block")
    p.add_argument("--args", nargs="+", metavar="SPEC",
                   help="example argument shapes, one per positional parameter, e.g. f32[8,128] i32[8]; default: "
                   "the module attribute FUNCTION_example_args")
    p.add_argument("--params", nargs="+", metavar="NAME",
                   help="arguments (names, leaf names like params.w1, or positions) that are trained weights; "
                   "default: the module attribute FUNCTION_params")
    p.add_argument("--mesh", metavar="MESH", help="the device mesh, e.g. x=2,y=4")
    p.add_argument("--shardings", action="append", metavar="NAME=SHARDING", default=[],
                   help="the sharding of an argument or result, e.g. 'x=[{\"x\"}, {}]' (repeatable)")
    p.add_argument("--name", help="the model's name (default: the function's)")
    p.add_argument("--format", choices=("yaml", "json"), default="yaml",
                   help="yaml (default): the model file; json: the same model as a JSON object (model_file, which "
                   "shardplan reads as it reads YAML), its YAML text and each op's source line")
    p.add_argument("--out", metavar="FILE", help="write the model YAML to FILE (atomically) instead of stdout")
    command_options(p, run)


def parse_arg_spec(text: str) -> tuple[tuple[int, ...], str]:
    """``f32[8,128]`` -> ``((8, 128), "float32")``; ``f32[]`` is a scalar.

    >>> parse_arg_spec("bf16[4, 2]")
    ((4, 2), 'bfloat16')
    """
    m = _ARG.match(text)
    if not m:
        raise ParseError(f"cannot parse --args entry {text!r}: write a dtype and a shape like f32[8,128] "
                         f"(dtypes: {', '.join(_JAX_DTYPES)}; f32[] is a scalar)")
    shape = tuple(int(d) for d in m.group(2).split(",")) if m.group(2) else ()
    if any(d < 1 for d in shape):
        raise ParseError(f"--args entry {text!r} has a dimension of size 0; every size must be >= 1")
    return shape, _JAX_DTYPES[m.group(1)]


def _import(module: str):
    """The module named ``module`` (dotted) or at path ``module`` (``.py``), the cwd on sys.path."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        if module.endswith(".py") or os.sep in module:
            path = Path(module)
            if not path.is_file():
                raise ShardplanError(f"module file {module!r} does not exist")
            spec = importlib.util.spec_from_file_location(path.stem, path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[path.stem] = mod
            spec.loader.exec_module(mod)
            return mod
        return importlib.import_module(module)
    except ShardplanError:
        raise
    except ModuleNotFoundError as e:
        raise ShardplanError(f"cannot import module {module!r}: {e}; run from the directory that holds it or give "
                             "the path of its .py file") from None
    except Exception as e:  # the user's module failed while importing
        raise ShardplanError(f"importing module {module!r} failed: {type(e).__name__}: {' '.join(str(e).split())}") \
            from None


def _attribute(mod, name: str, what: str) -> Any:
    if not hasattr(mod, name):
        own = [n for n, v in vars(mod).items()
               if not n.startswith("_") and callable(v) and getattr(v, "__module__", None) == mod.__name__]
        raise ShardplanError(f"module {mod.__name__!r} has no {what} {name!r}{did_you_mean(name, own)} "
                             f"(its functions: {', '.join(sorted(own)) or 'none'})")
    return getattr(mod, name)


def run(args: argparse.Namespace) -> int:
    from planner.frontends.jax import require_jax, trace_function

    jax = require_jax()  # before the user's module, which imports jax itself
    from graphs.yaml_dump import dump_model

    module, sep, fn_name = args.target.rpartition(":")
    if not sep or not module or not fn_name:
        raise ParseError(f"cannot parse {args.target!r}: write MODULE:FUNCTION, e.g. examples/jax_gpt_block.py:gpt_block")
    mod = _import(module)
    fn = _attribute(mod, fn_name, "function")
    if not callable(fn):
        raise ShardplanError(f"{module}:{fn_name} is a {type(fn).__name__}, not a function")
    if args.args:
        example = [jax.ShapeDtypeStruct(*parse_arg_spec(a)) for a in args.args]
    else:
        default = getattr(mod, f"{fn_name}_example_args", None)
        if default is None:
            raise ShardplanError(f"no example arguments for {fn_name}: give their shapes with --args (e.g. --args "
                                 f"f32[8,128]) or define {fn_name}_example_args in module {module!r}")
        example = list(default() if callable(default) else default)
    params = args.params if args.params is not None else list(getattr(mod, f"{fn_name}_params", ()))
    params = [int(p) if isinstance(p, str) and p.isdigit() else p for p in params]
    shardings = {}
    for entry in args.shardings:
        name, eq, text = entry.partition("=")
        if not eq or not name.strip():
            raise ParseError(f"cannot parse --shardings {entry!r}: write NAME=SHARDING, e.g. 'x=[{{\"x\"}}, {{}}]'")
        shardings[name.strip()] = text.strip()
    traced = trace_function(fn, *example, mesh=args.mesh, shardings=shardings, params=params, name=args.name)
    text = dump_model(traced.graph, traced.sources)
    if args.format == "json":
        from planner.safe_yaml import load

        text = json_document("import-jax", {"model": traced.graph.name, "model_file": load(text, "the traced model"),
                                            "yaml": text, "sources": dict(traced.sources)})
    write_text(text, args.out)
    return 0
