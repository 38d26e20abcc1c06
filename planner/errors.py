"""The project's exceptions: one small hierarchy, each class says when it is raised.

There are two branches, never mixed:

* :class:`ShardplanError` — the user's input is wrong (a file, a flag, a sharding, a
  cluster). The message says what to change. The CLI prints it and exits with status 2.
* :class:`InternalError` — an invariant of shardplan's own code broke: a bug, whatever
  the input. It is deliberately *not* a :class:`ShardplanError`, so ``except
  ShardplanError`` never hides one. The CLI reports it in one line and exits with status 3.

The library raises these and never prints or exits. What the user should know but
that does not stop the work is a warning (:class:`ShardplanWarning` and its two kinds,
issued with :func:`warnings.warn`); the CLI prints them on stderr unless ``--quiet``.

>>> issubclass(CostModelError, ShardplanError), issubclass(SimulationMismatch, ShardplanError)
(True, False)
"""

from __future__ import annotations

import re


class ShardplanError(Exception):
    """Base class of every error caused by user input (a file, a flag, a sharding).

    ``where`` is an optional location prefix (``"model.yaml:12"``) printed before
    the message.
    """

    def __init__(self, message: str, *, where: str | None = None):
        super().__init__(message)
        self.message = message
        self.where = where

    def located(self, where: str) -> "ShardplanError":
        """Return a copy of this error whose message is prefixed by ``where``."""
        err = type(self).__new__(type(self))
        err.__dict__.update(self.__dict__)
        Exception.__init__(err, self.message)
        err.where = where if self.where is None else f"{where}: {self.where}"
        return err

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


class MeshError(ShardplanError):
    """A mesh is malformed: duplicate or unknown axis names, bad sizes, bad device ids."""


class ParseError(ShardplanError):
    """Text in one of our notations (sharding, mesh, PartitionSpec ...) does not parse."""


class ShardingError(ShardplanError):
    """A sharding violates an invariant of the representation (see :mod:`planner.ir.sharding`)."""


class NotExpressibleError(ShardplanError):
    """A sharding has no equivalent in another notation (JAX, MindSpore, DTensor)."""


class ModelError(ShardplanError):
    """A model description (YAML or builder arguments) is wrong."""


class RuleError(ShardplanError):
    """An operator's sharding rule cannot be applied (unknown op, illegal result)."""


class ClusterError(ShardplanError):
    """A cluster description is wrong or names an unknown preset."""


class PlanningError(ShardplanError):
    """The search cannot satisfy the user's constraints."""


class SolverFailed(PlanningError):
    """The solver stopped without a usable solution (time limit, crash, numerical trouble).

    Callers may fall back to BFS. ``report`` is the
    :class:`~planner.model.decision.SolverReport` when the solver ran, else ``None``.
    """

    def __init__(self, message: str, *, report: "SolverReport | None" = None):  # noqa: F821
        super().__init__(message)
        self.report = report


class EliminationTooLarge(PlanningError):
    """Variable elimination (:mod:`planner.searches.elimination`) would build a table of more cells than
    its limit; ``cells`` is the largest it would build. The ILP hands such a model to a MIP solver; asked
    for elimination alone it says so as :class:`SolverFailed`."""

    def __init__(self, cells: int, max_cells: int):
        super().__init__(f"variable elimination would build a table of {cells:,} cells, above its limit of "
                         f"{max_cells:,}")
        self.cells = cells


class EliminationInfeasible(PlanningError):
    """Every assignment of a variable-elimination problem takes a forbidden (``inf``) entry; the ILP says
    which of its constraints could not be met."""


class ReshardError(ShardplanError):
    """A redistribution that cannot be done (different device counts, shapes ...)."""


class VarianceError(ShardplanError):
    """A per-device (shmap) program is ill-typed for device variance (seed 004): a collective
    gets a varying operand where it needs an invariant one or the reverse, the operands of a
    local op vary over different axes, or an unmapped output varies over an axis it omits."""


class EngineError(ShardplanError):
    """A plan cannot be run on a real engine as asked: JAX is not installed, ``--devices`` differs from the
    mesh's size, JAX was already initialised with too few devices (:mod:`planner.engines.jax_env`), or the
    plan is pipelined (``run`` and ``export --to jax-module`` write one SPMD program)."""


class GateError(ShardplanError):
    """The gate cannot compare: a model is not in the baseline, the search differs, a bad tolerance."""


class BaselineError(GateError):
    """A baseline file is missing, is not JSON, or is not shaped as a baseline (see :mod:`planner.gate`)."""


class CostModelError(ShardplanError, ValueError):
    """A cost function got a bad argument: a quantity that does not parse (``"450GB"`` for
    bytes/s), an unknown optimizer, a negative byte or FLOP count, an empty device group.

    Also a :class:`ValueError` (what these functions raised before), so code that
    catches ``ValueError`` around them — the cluster loader adding the file and line
    to a bad quantity, for one — keeps working.

    >>> from costmodels import parse_quantity
    >>> parse_quantity("fast", "bytes/s")
    Traceback (most recent call last):
    ...
    planner.errors.CostModelError: 'fast' is not a quantity in bytes/s; write a number of bytes/s or e.g. '450GB/s'
    """


class LimitError(ShardplanError):
    """An input exceeds one of shardplan's size limits (:mod:`planner.limits`): elements of a
    tensor, devices or axes of a mesh, bytes of a file, YAML nesting or alias expansion, memory
    of a simulation. Raised before anything of that size is allocated."""


class OutputError(ShardplanError):
    """An output cannot be written where the user asked: a folder, a device node, a missing
    folder, the model file itself, a full disk (see :func:`planner.files.write_output`)."""


class InternalError(Exception):
    """Base class of broken invariants of shardplan's own code: a bug, never the user's fault.

    Not a :class:`ShardplanError`: the CLI reports it as an internal error (exit 3)
    and ``SHARDPLAN_DEBUG=1`` shows its traceback.
    """

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class SimulationMismatch(InternalError):
    """The simulator caught a plan or program that does not do what it claims: a device
    lacks elements of its new block, devices disagree on the values of one block, some
    elements are held by no device, a program reads a tensor in the wrong layout.

    Raised as ``SimulationMismatch(message)``; :func:`planner.simulation.reshard.verify`
    turns it into a failed verification.
    """


class ShardplanWarning(UserWarning):
    """Something the user should know that does not stop the work: issued with :func:`warnings.warn`.

    The CLI prints each on stderr (``shardplan plan: warning: ...``) unless ``--quiet``,
    and never changes the exit status for one.
    """


class ModelWarning(ShardplanWarning):
    """A model that is legal but probably not what was meant: a declared tensor no op reads
    and no output names, an op whose result reaches no output, no ops at all."""


class PlanWarning(ShardplanWarning):
    """Something the user should know about a plan: the ILP fell back to BFS, a search ignores
    an annotation the model gives, the plan needs more memory per device than the cluster's
    devices have. Kept in ``Plan.warnings`` as well."""


def did_you_mean(word: object, options, n: int = 1) -> str:
    """``"; did you mean X?"`` (or ``"X or Y"``) for the options closest to ``word``, else ``""``.

    >>> did_you_mean("matmull", ["matmul", "einsum"])
    '; did you mean matmul?'
    """
    import difflib

    if len(str(word)) > QUOTE_CHARS:  # nothing is close to a huge value, and comparing costs its length squared
        return ""
    close = difflib.get_close_matches(str(word), [str(o) for o in options], n=n)
    return f"; did you mean {' or '.join(close)}?" if close else ""


#: How many characters of a value an error message quotes (see :func:`quote`).
QUOTE_CHARS = 80


def quote(value: object, limit: int = QUOTE_CHARS) -> str:
    """``repr(value)`` cut to about ``limit`` characters, without building the whole repr first.

    Every message that quotes a value the user gave uses this, so that a huge value (a
    long list, a deeply nested or alias-expanded YAML value) costs nothing to report.

    >>> quote("matmul")
    "'matmul'"
    >>> quote(list(range(1000)), limit=40)
    '[0, 1, 2, 3, 4, 5, ...] (1000 items)'
    >>> len(quote("x" * 10_000))
    80
    """
    import reprlib

    r = reprlib.Repr()
    r.maxlevel, r.maxstring, r.maxother = 3, limit, limit
    r.maxlist = r.maxtuple = r.maxdict = r.maxset = r.maxfrozenset = r.maxdeque = r.maxarray = 6
    text = escape_controls(r.repr(value))
    if isinstance(value, (list, tuple, dict, set)) and len(value) > 6:
        text += f" ({len(value)} items)"
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def clip(text: str, limit: int = QUOTE_CHARS) -> str:
    r"""``text`` as the user wrote it in one of our notations (a sharding, a mesh), without the quotes
    :func:`quote` adds: control characters escaped, cut to ``limit`` characters.

    >>> clip('[{"x"}, {}]')
    '[{"x"}, {}]'
    >>> clip('[{"x\x1b[31m"}]')
    '[{"x\\x1b[31m"}]'
    >>> len(clip("a" * 1000))
    80
    """
    text = escape_controls(str(text)[: 4 * limit])
    return text if len(text) <= limit else text[: limit - 3] + "..."


def escape_controls(text: str) -> str:
    r"""``text`` with every control or format character (a terminal's escape sequences, a newline, a
    right-to-left override) written as a Python escape, so that echoing a user's value cannot
    change the terminal or split the message over lines.

    >>> escape_controls("a\x1b[31mb\nc\u202ed")
    'a\\x1b[31mb\\nc\\u202ed'
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode("ascii") for c in text)


def one_line(message: str) -> str:
    r"""A message as the command prints it: on one line (a line break and the indentation after it
    become one space) and with control characters escaped (:func:`escape_controls`).

    >>> one_line("cannot parse x:\n  [{\x1b}]")
    'cannot parse x: [{\\x1b}]'
    """
    return _cut_quoted(escape_controls(" ".join(part.strip() for part in message.splitlines() if part.strip())))


#: A value quoted in a message: a quote that opens after a space or bracket (not an apostrophe inside a
#: word), up to the same quote before a space, a bracket or punctuation.
_QUOTED = re.compile(r"""(?:^|(?<=[\s(\[{=,:]))(['"])(.*?)\1(?=$|[\s)\]},;:.?!])""")


#: A word of a message too long to be anything but a value: no path (no ``/``), no space.
_LONG_WORD = re.compile(r"[^\s/]{%d,}(?=\s|$)" % (QUOTE_CHARS + 5))  # + quotes and punctuation


def _cut_quoted(message: str) -> str:
    """``message`` with every quoted value longer than :data:`QUOTE_CHARS` cut to that length, the net
    under :func:`quote` for a value some message quoted with ``repr``; a word longer than that without a
    ``/`` (a name printed without quotes; paths are kept whole) is cut too.

    >>> _cut_quoted("unknown op '" + "x" * 200 + "'; did you mean it?") == "unknown op '" + "x" * 75 + "...'; did you mean it?"
    True
    >>> _cut_quoted("inputs " + "a" * 200 + " and b") == "inputs " + "a" * 77 + "... and b"
    True
    """
    if len(message) <= QUOTE_CHARS:
        return message

    def cut(m: re.Match) -> str:
        q, value = m.group(1), m.group(2)
        return m.group(0) if len(value) + 2 <= QUOTE_CHARS else f"{q}{value[: QUOTE_CHARS - 5]}...{q}"

    message = _QUOTED.sub(cut, message)
    return _LONG_WORD.sub(lambda m: m.group(0)[: QUOTE_CHARS - 3] + "...", message)
