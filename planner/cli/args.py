"""Parsing the command-line forms of shapes, dtypes, meshes and shardings."""

from __future__ import annotations

import argparse
import functools
import re
from typing import Callable

from planner.errors import ParseError, quote
from planner.ir.mesh import Mesh
from planner.limits import check_tensor_elements, read_int
from planner.ir.text import parse_mesh_spec

DTYPES = ("f32", "bf16", "f16", "i32", "i64", "bool")
SEARCHES = ("auto", "bfs", "ilp", "explicit", "propagate")
PASSES = ("basic", "aggressive", "op-priority", "user-priority")
EXPORT_FORMATS = ("jax", "shardy", "dtensor", "mindspore", "jax-module")
OVERLAPS = ("none", "async")
"""``planner.searches.SEARCHES``, ``planner.searches.propagate.PASSES``, ``planner.export.FORMATS`` and
``planner.partitioning.schedule.MODES``, repeated so
that building the parser does not import the pipeline (tests/test_startup.py checks that they agree)."""


def parse_shape(text: str) -> tuple[int, ...]:
    """``4x8`` (or ``4,8``) -> ``(4, 8)``; ``scalar`` or ``""`` -> ``()``.

    >>> parse_shape("64x32")
    (64, 32)
    """
    src = text.strip().lower()
    if src in ("", "scalar", "()"):
        return ()
    if not re.fullmatch(r"\d+([x,]\d+)*", src):
        raise ParseError(f"cannot parse shape {quote(text)}: write the sizes separated by x, e.g. 64x32")
    dims = tuple(read_int(p, f"--shape {quote(text)}") for p in re.split(r"[x,]", src))
    if any(d < 1 for d in dims):
        raise ParseError(f"shape {quote(text)} has a dimension of size 0; every size must be >= 1")
    check_tensor_elements(dims, f"--shape {quote(text)}")
    return dims


def model_argument(text: str):
    """The model a command's MODEL argument names, loaded: a YAML file (whatever its name ends in),
    or ``-`` for YAML on standard input. Every error is a ``ModelError`` naming the file."""
    from graphs import load_model, load_model_text  # the model layer: not imported by ``shardplan --help``

    if text == "-":
        import sys

        from planner.errors import ModelError
        from planner.files import decode_text
        from planner.limits import MAX_INPUT_FILE_BYTES

        if sys.stdin is None:  # started with standard input closed (<&-)
            raise ModelError("standard input is closed, so there is no model to read; give the model file's path, "
                             "or pipe the model in", where="<stdin>")
        data = sys.stdin.buffer.read(MAX_INPUT_FILE_BYTES + 1)
        if len(data) > MAX_INPUT_FILE_BYTES:
            raise ModelError("the model on standard input is larger than shardplan reads; is it the right input?",
                             where="<stdin>")
        return load_model_text(decode_text(data, "<stdin>", "model on standard input", ModelError), source="<stdin>")
    return load_model(text)


def positive_seconds(text: str) -> float:
    """``--time-limit``: a finite number of seconds > 0 (an ``argparse`` type).

    >>> positive_seconds("2.5")
    2.5
    """
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{quote(text)} is not a number of seconds, e.g. 60") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{quote(text)} is not a time limit: give a number of seconds > 0, e.g. 60")
    return value


def seed(text: str) -> int:
    """``--seed``: an integer from 0 to 2**32 - 1 (an ``argparse`` type)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{quote(text)} is not an integer seed, e.g. 0") from None
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"seed {value} is out of range: give an integer from 0 to {2**32 - 1}")
    return value


def add_seed_option(parser) -> None:
    """``--seed`` as every command that draws random inputs and parameters takes it (``simulate``, ``run``)."""
    parser.add_argument("--seed", type=seed, default=0,
                        help="seed of the random inputs and parameters, 0 to 2**32-1 (default 0)")


#: ``shardplan run --repeat``: timed runs of the step at most (each a whole step; 5 are the default).
MAX_REPEAT = 10_000


def repeat_count(text: str) -> int:
    """``--repeat``: how many times to run a step, an integer from 1 to :data:`MAX_REPEAT` (an ``argparse`` type).

    >>> repeat_count("5")
    5
    """
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{quote(text)} is not a number of runs, e.g. 5") from None
    if not 1 <= value <= MAX_REPEAT:
        raise argparse.ArgumentTypeError(f"--repeat {value} is out of range: the step is timed from 1 to "
                                         f"{MAX_REPEAT:,} times, e.g. 5")
    return value


def device_count(text: str) -> int:
    """``--devices``: a number of devices, an integer >= 1 (an ``argparse`` type).

    >>> device_count("8")
    8
    """
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{quote(text)} is not a number of devices, e.g. 8") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} devices: a mesh has at least one device; give --devices N with "
                                         "N >= 1, or leave it out to use the plan's mesh size")
    return value


def parse_dtype(text: str) -> str:
    if text not in DTYPES:
        raise ParseError(f"unknown dtype {quote(text)}; use one of {', '.join(DTYPES)}")
    return text


def parse_meshes(texts: list[str] | None) -> list[Mesh]:
    """Every ``--mesh`` flag; the first is the default. Names must be distinct."""
    if not texts:
        raise ParseError("give a mesh with --mesh, e.g. --mesh x=2,y=4 or --mesh '@m = <[\"x\"=2]>'")
    meshes: list[Mesh] = []
    for i, text in enumerate(texts):
        mesh = parse_mesh_spec(text, default_name="mesh" if i == 0 else f"mesh{i}")
        if any(m.name == mesh.name for m in meshes):
            raise ParseError(f"two --mesh flags define @{mesh.name}; give each mesh its own name")
        if meshes and mesh.size != meshes[0].size:
            raise ParseError(
                f"mesh @{mesh.name} has {mesh.size} devices but @{meshes[0].name} has {meshes[0].size}; "
                "all meshes describe the same devices"
            )
        meshes.append(mesh)
    return meshes


def command_options(p: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int]) -> None:
    """``--verbose`` and ``--quiet``, which every command takes, and ``run`` as the command.

    ``run`` is called through :func:`planner.cli.output.reported`: ``args.progress`` is the
    command's :class:`~planner.progress.Progress` (a bar on a terminal), and the warnings
    the library issues are printed on stderr unless ``--quiet``.
    """
    g = p.add_mutually_exclusive_group()
    g.add_argument("-v", "--verbose", action="store_true",
                   help="print each stage of the work on stderr with the time since the start")
    g.add_argument("-q", "--quiet", action="store_true",
                   help="print neither warnings nor progress on stderr (errors still are)")
    p.set_defaults(run=functools.partial(_reported, run))


def _reported(run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    from planner.cli.output import reported  # imported when a command runs: --help stays light

    return reported(run, args)
