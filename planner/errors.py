"""The project's exceptions: one small hierarchy, each class says when it is raised.

The library raises these and never prints or exits; the CLI catches
:class:`ShardplanError` once, prints its message to stderr and exits with status 2.
"""

from __future__ import annotations


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
    """A sharding violates an invariant of the representation (SPEC §2)."""


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


def did_you_mean(word: object, options, n: int = 1) -> str:
    """``"; did you mean X?"`` (or ``"X or Y"``) for the options closest to ``word``, else ``""``.

    >>> did_you_mean("matmull", ["matmul", "einsum"])
    '; did you mean matmul?'
    """
    import difflib

    close = difflib.get_close_matches(str(word), [str(o) for o in options], n=n)
    return f"; did you mean {' or '.join(close)}?" if close else ""
