"""What a command shows on stderr while it works: a progress bar or spinner, stages, warnings.

The library reports long work to a :class:`~planner.progress.Progress`
(:mod:`planner.progress`); :class:`Terminal` is the one the CLI gives it:

* a **bar** (``shardplan: cost tables [#######.....]  412/1,000  2.10 s``) for a task of
  known length, a **spinner** with the elapsed time for one of unknown length (the ILP
  solver), redrawn in place on one line, and only when stderr is a terminal
  (``isatty``) and ``--quiet`` is not given; a task shorter than :data:`DELAY_S`
  draws nothing, so quick commands do not flicker;
* with ``--verbose``, every stage as its own line with the time since the start
  (on a terminal or not: the user asked for it);
* :meth:`Terminal.line` prints a line (a warning) without tearing the bar.

No dependency: a bar is a few lines, and ``tqdm`` would add an install for no gain here.
"""

from __future__ import annotations

import shutil
import threading
import time
from typing import TextIO

from costmodels.units import format_seconds
from planner.progress import Progress

__all__ = ["DELAY_S", "Terminal"]

DELAY_S = 0.5
"""A task is drawn only once it has run this long (tests set it to 0)."""
REDRAW_S = 0.1
"""The bar is redrawn at most this often, and the spinner this often while the solver runs."""
BAR_WIDTH = 24
SPINNER = "|/-\\"


class Terminal(Progress):
    """Renders progress on ``stream``: a bar when ``bar``, stage lines when ``verbose``."""

    def __init__(self, stream: TextIO, *, bar: bool, verbose: bool = False, prefix: str = "shardplan"):
        self.stream, self.bar, self.verbose, self.prefix = stream, bar, verbose, prefix
        self.started = time.monotonic()
        self.label: str | None = None
        self.detail_text = ""  # what the open task last said about itself
        self.stage_text = ""
        self.total: int | None = None
        self.done = 0
        self.task_started = 0.0
        self.last_draw = 0.0
        self.drawn = False  # a bar line is on the screen
        self.spins = 0
        self._lock = threading.RLock()
        self._stop: threading.Event | None = None

    # -- Progress --------------------------------------------------------------------------------
    def stage(self, message: str) -> None:
        with self._lock:
            self.stage_text = message
            if self.verbose:
                self.line(f"{self.prefix}: [{format_seconds(time.monotonic() - self.started)}] {message}")

    def begin(self, label: str, total: int | None = None) -> None:
        with self._lock:
            self._stop_spinner()
            self.label, self.total, self.done = label, total, 0
            self.detail_text = ""
            self.task_started = time.monotonic()
            self._draw(force=True)
            if total is None and self.bar:
                self._stop = threading.Event()
                threading.Thread(target=self._spin, args=(self._stop,), daemon=True).start()

    def advance(self, steps: int = 1) -> None:
        with self._lock:
            self.done += steps
            self._draw()

    def end(self) -> None:
        with self._lock:
            self._stop_spinner()
            if self.label is not None and self.verbose:
                took = format_seconds(time.monotonic() - self.task_started)
                count = f"{self.done:,} of {self.total:,}, " if self.total is not None else ""
                detail = f" ({self.detail_text})" if self.detail_text else ""
                self.line(f"{self.prefix}: {self.label}: {count}done in {took}{detail}")
            self._clear()
            self.label = None

    def detail(self, text: str) -> None:
        with self._lock:
            self.detail_text = text
            self._draw()

    # -- lines and the bar -----------------------------------------------------------------------
    def line(self, text: str) -> None:
        """Print ``text`` on its own line; the bar, if any, is redrawn below it at the next update."""
        with self._lock:
            self._clear()
            self.stream.write(text + "\n")
            self.stream.flush()

    def close(self) -> None:
        """Stop the spinner and take the bar off the screen."""
        with self._lock:
            self._stop_spinner()
            self._clear()
            self.label = None

    def render(self, now: float) -> str:
        """The bar (or spinner) line for the open task at time ``now``, without the carriage return."""
        elapsed = format_seconds(now - self.task_started)
        if self.total is None:
            detail = f"  {self.detail_text}" if self.detail_text else ""
            return f"{self.prefix}: {self.label} {SPINNER[self.spins % len(SPINNER)]} {elapsed}{detail}"
        total = max(self.total, 1)
        filled = min(BAR_WIDTH, BAR_WIDTH * self.done // total)
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        return f"{self.prefix}: {self.label} [{bar}] {min(self.done, total):,}/{total:,}  {elapsed}"

    def _draw(self, force: bool = False) -> None:
        if not self.bar or self.label is None:
            return
        now = time.monotonic()
        if now - self.task_started < DELAY_S or (not force and now - self.last_draw < REDRAW_S):
            return
        self.last_draw = now
        width = max(shutil.get_terminal_size((80, 24)).columns - 1, 20)
        text = self.render(now)[:width]
        self.stream.write("\r" + text.ljust(width))
        self.stream.flush()
        self.drawn = True

    def _clear(self) -> None:
        if self.drawn:
            width = max(shutil.get_terminal_size((80, 24)).columns - 1, 20)
            self.stream.write("\r" + " " * width + "\r")
            self.stream.flush()
            self.drawn = False

    def _spin(self, stop: threading.Event) -> None:
        while not stop.wait(REDRAW_S):
            with self._lock:
                if stop.is_set():
                    return
                self.spins += 1
                self._draw(force=True)

    def _stop_spinner(self) -> None:
        if self._stop is not None:
            self._stop.set()
            self._stop = None
