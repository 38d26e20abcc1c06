"""How long work says how far it has got, without printing: the library calls a :class:`Progress`.

The planner's library code never prints (STYLE: the library never prints and never
exits). Long work — building cost tables, an ILP solve, simulating a program, planning
several models — reports to a :class:`Progress` object instead, and whoever called
the library decides what to show: the ``shardplan`` command draws a bar on a terminal
(:mod:`planner.cli.terminal`), a test records the calls, and the default
(:data:`SILENT`) ignores them.

Three kinds of report:

* :meth:`Progress.stage` — a new stage begins (``"building cost tables"``);
* :meth:`Progress.begin` / :meth:`Progress.advance` / :meth:`Progress.end` — a task of
  ``total`` steps (a bar), or of unknown length when ``total`` is None (a spinner with
  the elapsed time, e.g. while the ILP solver runs);
* :meth:`Progress.detail` — what the open task reports about itself changed (an ILP
  solver's best bound and gap);
* :func:`counted` wraps a loop in a task.

:func:`prefixed` names the work around them (``"ilp (3 of 3): cost tables"`` while
``compare`` runs its third search).

>>> class Recorder(Progress):
...     def __init__(self): self.calls = []
...     def stage(self, message): self.calls.append(("stage", message))
...     def begin(self, label, total=None): self.calls.append(("begin", label, total))
...     def advance(self, steps=1): self.calls.append(("advance", steps))
...     def end(self): self.calls.append(("end",))
>>> r = Recorder()
>>> [x * x for x in counted(r, "squares", [1, 2])]
[1, 4]
>>> r.calls
[('begin', 'squares', 2), ('advance', 1), ('advance', 1), ('end',)]
>>> as_progress(None) is SILENT, as_progress(r) is r
(True, True)
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, TypeVar

__all__ = ["SILENT", "Progress", "as_progress", "counted", "prefixed", "task"]

T = TypeVar("T")


class Progress:
    """The listener of long work. Every method does nothing here; subclasses render or record.

    Tasks do not nest: a :meth:`begin` while a task is open replaces it.
    """

    def stage(self, message: str) -> None:
        """A new stage of the work begins; ``message`` says which, in a few words."""

    def begin(self, label: str, total: int | None = None) -> None:
        """A task of ``total`` steps (None: of unknown length) begins."""

    def advance(self, steps: int = 1) -> None:
        """``steps`` more steps of the open task are done."""

    def end(self) -> None:
        """The open task is finished."""

    def detail(self, text: str) -> None:
        """The open task's state, in a few words, changed (``"best bound 1.2 ms, gap 3.0%"``)."""


SILENT = Progress()
"""The default listener: ignores every report."""


class _Messages(Progress):
    """A plain callable ``say(message)``, hearing the stages only (the API's older form)."""

    def __init__(self, say: Callable[[str], None]):
        self.say = say

    def stage(self, message: str) -> None:
        self.say(message)


class _Prefixed(Progress):
    """``inner`` with every stage and task label prefixed by ``prefix``: which part of a larger job runs."""

    def __init__(self, inner: Progress, prefix: str):
        self.inner, self.prefix = inner, prefix

    def stage(self, message: str) -> None:
        self.inner.stage(f"{self.prefix}: {message}")

    def begin(self, label: str, total: int | None = None) -> None:
        self.inner.begin(f"{self.prefix}: {label}", total)

    def advance(self, steps: int = 1) -> None:
        self.inner.advance(steps)

    def end(self) -> None:
        self.inner.end()

    def detail(self, text: str) -> None:
        self.inner.detail(text)


def prefixed(progress: Progress, prefix: str) -> Progress:
    """``progress`` with every stage and task label prefixed by ``prefix`` (:data:`SILENT` stays silent).

    >>> heard = []
    >>> prefixed(as_progress(heard.append), "ilp (3 of 3)").stage("building cost tables")
    >>> heard
    ['ilp (3 of 3): building cost tables']
    """
    return progress if progress is SILENT else _Prefixed(progress, prefix)


def as_progress(progress: Progress | Callable[[str], None] | None) -> Progress:
    """``progress`` as a :class:`Progress`: None is :data:`SILENT`, a callable hears the stages."""
    if progress is None:
        return SILENT
    if isinstance(progress, Progress):
        return progress
    if callable(progress):
        return _Messages(progress)
    raise TypeError(f"progress must be a planner.progress.Progress, a callable or None, not {type(progress).__name__}")


@contextmanager
def task(progress: Progress, label: str, total: int | None = None) -> Iterator[Progress]:
    """``begin`` ... ``end`` around a block, ``end`` even when the block raises."""
    progress.begin(label, total)
    try:
        yield progress
    finally:
        progress.end()


def counted(progress: Progress, label: str, items: Iterable[T], total: int | None = None) -> Iterator[T]:
    """Yield ``items``, one step of task ``label`` each (``total`` defaults to ``len(items)``)."""
    if total is None:
        total = len(items) if hasattr(items, "__len__") else None  # type: ignore[arg-type]
    with task(progress, label, total):
        for item in items:
            yield item
            progress.advance()
