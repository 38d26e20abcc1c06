"""The communication-cost gate: measure plans, keep baselines, compare the two.

A **baseline** is a JSON file checked into the user's repository. It records, for each
model file, what the plan of that model communicates: bytes received per device, the
modelled communication time, and the collectives it runs, counted by kind (``Slice``
is local, so it is not counted). It also records the search and the training flag the
numbers were measured with, since plans from another search are not comparable::

    {
      "version": 1,
      "search": "bfs",
      "training": false,
      "models": {
        "ffn.yaml": {"comm_bytes_per_device": 6144, "comm_time_s": 1.7e-05, "collectives": {"ReduceScatter": 1}}
      }
    }

Model paths are stored relative to the baseline file's directory, with forward slashes,
so one file works from any checkout and any working directory. In memory (``Baseline.models``,
the keys of ``measure`` results passed to :func:`compare`, :class:`Row.model`) a model is
the path to open it from the current directory, as :func:`model_path` spells it.

A model is **worse** than its baseline when its communication bytes, its communication
time or its total number of collectives grew by more than ``tolerance`` (relative: 0.05
is 5%). Growth from zero is always worse. A relative change below ``1e-9`` is treated as
no change, so that floating-point rounding on another machine cannot fail the gate.

>>> old = {"m.yaml": {"comm_bytes_per_device": 1000, "comm_time_s": 2e-05, "collectives": {"AllReduce": 1}}}
>>> new = {"m.yaml": {"comm_bytes_per_device": 1040, "comm_time_s": 2e-05, "collectives": {"AllReduce": 1}}}
>>> [(r.metric, r.old, r.new, round(r.change, 3), r.worse) for r in compare(old, new, tolerance=0.05)]
[('comm_bytes_per_device', 1000, 1040, 0.04, False), ('comm_time_s', 2e-05, 2e-05, 0.0, False), ('collectives', 1, 1, 0.0, False)]
>>> worse_models(compare(old, new, tolerance=0.0))
['m.yaml']
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from planner.errors import BaselineError, GateError, quote  # the errors are defined there; re-exported here
from planner.files import read_text, write_output
from graphs import ComputationGraph, load_model
from planner.api import SEARCHES, plan

FORMAT_VERSION = 1
METRICS = ("comm_bytes_per_device", "comm_time_s", "collectives")
ROUNDING = 1e-9  # relative changes smaller than this are floating-point noise, not a change


@dataclass(frozen=True, slots=True)
class Baseline:
    """A loaded baseline: ``models`` maps a model path (openable from the current directory) to its metrics."""

    path: str
    search: str
    training: bool
    models: Mapping[str, dict]


@dataclass(frozen=True, slots=True)
class Row:
    """One metric of one model, before and after.

    ``change`` is relative (``0.25`` = 25% more); it is ``None`` when ``old`` is zero
    (or missing) and ``new`` is not. ``worse`` says the growth exceeds the tolerance.
    """

    model: str
    metric: str
    old: float | int | None
    new: float | int | None
    change: float | None
    worse: bool

    @property
    def better(self) -> bool:
        return self.old is not None and self.new is not None and self.new < self.old and not _same(self.old, self.new)

    def to_dict(self) -> dict:
        return {"model": self.model, "metric": self.metric, "old": self.old, "new": self.new,
                "change": self.change, "worse": self.worse}


# -- model paths ------------------------------------------------------------------------------------

def model_path(path: str | os.PathLike) -> str:
    """The one spelling of a model path used in memory and in output.

    Relative to the current directory when the file is below it, else absolute;
    forward slashes, no ``./``.

    >>> model_path("./configs//ffn.yaml")
    'configs/ffn.yaml'
    """
    absolute = os.path.abspath(path)
    try:
        rel = os.path.relpath(absolute)
    except ValueError:  # another drive on Windows
        rel = absolute
    chosen = absolute if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel
    return chosen.replace(os.sep, "/")


def stored_key(baseline_path: str | os.PathLike, model: str | os.PathLike) -> str:
    """How a baseline file names ``model``: relative to the file's directory, with forward slashes.

    >>> stored_key("configs/baselines.json", "configs/ffn.yaml")
    'ffn.yaml'
    >>> stored_key("ci/baselines.json", "configs/ffn.yaml")
    '../configs/ffn.yaml'
    """
    directory = os.path.dirname(os.path.abspath(baseline_path))
    try:
        rel = os.path.relpath(os.path.abspath(model), directory)
    except ValueError:
        raise BaselineError(
            f"cannot store {model} relative to the baseline's directory {directory} (another drive); "
            "keep the baseline file on the same drive as the models"
        ) from None
    return rel.replace(os.sep, "/")


def _from_stored(baseline_path: str | os.PathLike, key: str) -> str:
    return model_path(os.path.join(os.path.dirname(os.path.abspath(baseline_path)), key))


# -- measuring ----------------------------------------------------------------------------------------

def measure(model: str | os.PathLike | ComputationGraph, search: str = "bfs", training: bool = False) -> dict:
    """Plan ``model`` (a YAML path, or a model already loaded) and return what the plan communicates.

    ``{"comm_bytes_per_device": int, "comm_time_s": float, "collectives": {kind: count}}``,
    the counts over every redistribution and gradient reduction, ``Slice`` excluded,
    kinds in alphabetical order and absent when zero. Plans are deterministic, so the
    same model, search and flag always measure the same.
    """
    graph = model if isinstance(model, ComputationGraph) else load_model(model)
    program = plan(graph, search=search, training=training).program
    return {
        "comm_bytes_per_device": int(program.comm_bytes_per_device()),
        "comm_time_s": float(program.comm_time_s()),
        "collectives": program.collective_counts(),
    }


def total_collectives(metrics: Mapping[str, Any]) -> int:
    return sum(metrics["collectives"].values())


# -- baseline files --------------------------------------------------------------------------------------

_REDO = "fix it, or delete it and run `shardplan check ... --update` to write it again"


def load_baseline(path: str | os.PathLike) -> Baseline:
    """Read and validate a baseline file; raises :class:`BaselineError` saying what to do."""
    where = str(path)
    if not os.path.lexists(path):
        raise BaselineError(
            "the baseline file does not exist; run `shardplan check MODEL.yaml ... --baseline "
            f"{where} --update` to create it",
            where=where,
        )
    text = read_text(path, "baseline file", BaselineError)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise BaselineError(f"line {e.lineno} column {e.colno}: not valid JSON ({e.msg}); {_REDO}",
                            where=where) from None
    except RecursionError:  # the json module recurses once per nested [ or {
        raise BaselineError(f"the JSON is nested too deeply to be a baseline; {_REDO}", where=where) from None
    search, training, models = _check_document(doc, where)
    return Baseline(
        path=where,
        search=search,
        training=training,
        models={_from_stored(path, key): _canonical_metrics(value) for key, value in models.items()},
    )


def baseline_text(path: str | os.PathLike, entries: Mapping[str, Mapping], search: str, training: bool) -> str:
    """The exact text :func:`write_baseline` writes: fixed key order, models sorted, trailing newline."""
    models: dict[str, dict] = {}
    for model, metrics in entries.items():
        key = stored_key(path, model)
        if key in models:
            raise GateError(f"two entries name the same model file {quote(key)}; give each model once")
        _check_metrics(metrics, f"the metrics of {model}")
        models[key] = _canonical_metrics(metrics)
    doc = {
        "version": FORMAT_VERSION,
        "search": search,
        "training": bool(training),
        "models": {key: models[key] for key in sorted(models)},
    }
    _check_document(doc, str(path))
    return json.dumps(doc, indent=2) + "\n"


def write_baseline(path: str | os.PathLike, entries: Mapping[str, Mapping], search: str, training: bool) -> bool:
    """Write a baseline safely (:func:`planner.files.write_output`: a temporary file renamed over
    ``path``; never over one of the model files of ``entries``).

    ``entries`` maps model paths (as opened from the current directory) to :func:`measure`
    results. Returns whether the file changed; an identical file is left untouched.
    """
    text = baseline_text(path, entries, search, training)
    target = Path(path)
    if target.is_file() and target.read_bytes() == text.encode("utf-8"):
        return False
    write_output(path, text, protect=list(entries))
    return True


def _check_document(doc: Any, where: str) -> tuple[str, bool, dict]:
    def bad(what: str) -> BaselineError:
        return BaselineError(f"{what}; {_REDO}", where=where)

    if not isinstance(doc, dict):
        raise bad(f"a baseline is a JSON object with version, search, training and models, not {_json_type(doc)}")
    missing = [k for k in ("version", "search", "training", "models") if k not in doc]
    if missing:
        raise bad(f"the baseline has no {', '.join(missing)}")
    unknown = sorted(set(doc) - {"version", "search", "training", "models"})
    if unknown:
        raise bad(f"unknown key {quote(unknown[0])} in the baseline; the keys are version, search, training and models")
    if doc["version"] != FORMAT_VERSION:
        raise bad(f"version is {quote(doc['version'])}, but this shardplan reads version {FORMAT_VERSION}")
    if doc["search"] not in SEARCHES:
        raise bad(f"search is {quote(doc['search'])}; it must be one of {', '.join(SEARCHES)}")
    if not isinstance(doc["training"], bool):
        raise bad(f"training must be true or false, got {json.dumps(doc['training'])}")
    models = doc["models"]
    if not isinstance(models, dict):
        raise bad(f"models must map model paths to metrics, not {_json_type(models)}")
    for key, metrics in models.items():
        try:
            _check_metrics(metrics, f"models[{json.dumps(key)}]")
        except GateError as e:
            raise bad(e.message) from None
    return doc["search"], doc["training"], models


def _check_metrics(metrics: Any, what: str) -> None:
    if not isinstance(metrics, Mapping):
        raise GateError(f"{what} must be an object with {', '.join(METRICS)}, not {_json_type(metrics)}")
    if set(metrics) != set(METRICS):
        missing = [m for m in METRICS if m not in metrics]
        extra = sorted(set(metrics) - set(METRICS))
        raise GateError(f"{what} has " + (f"no {', '.join(missing)}" if missing else f"the unknown key {quote(extra[0])}")
                        + f"; its keys are {', '.join(METRICS)}")
    b = metrics["comm_bytes_per_device"]
    if isinstance(b, bool) or not isinstance(b, int) or b < 0:
        raise GateError(f"{what}.comm_bytes_per_device must be a whole number >= 0, got {json.dumps(b, default=str)}")
    t = metrics["comm_time_s"]
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
        raise GateError(f"{what}.comm_time_s must be a number of seconds >= 0, got {json.dumps(t, default=str)}")
    kinds = metrics["collectives"]
    if not isinstance(kinds, Mapping):
        raise GateError(f"{what}.collectives must map collective kinds to counts, not {_json_type(kinds)}")
    for kind, n in kinds.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise GateError(f"{what}.collectives.{kind} must be a whole number >= 0, got {json.dumps(n, default=str)}")


def _canonical_metrics(metrics: Mapping) -> dict:
    kinds = metrics["collectives"]
    return {
        "comm_bytes_per_device": int(metrics["comm_bytes_per_device"]),
        "comm_time_s": float(metrics["comm_time_s"]),
        "collectives": {k: int(kinds[k]) for k in sorted(kinds) if kinds[k]},
    }


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "true/false", int: "a number",
             float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


# -- comparing ---------------------------------------------------------------------------------------------

def check_compatible(baseline: Baseline, search: str, training: bool) -> None:
    """Raise :class:`GateError` when ``baseline`` was measured with another search or training flag."""
    if baseline.search != search:
        raise GateError(
            f"the baseline was measured with --search {baseline.search}, not {search}; check with "
            f"--search {baseline.search}, or measure every model again for {search} with --update "
            "(and no model arguments)",
            where=baseline.path,
        )
    if baseline.training != training:
        had, asked = ("with", "without") if baseline.training else ("without", "with")
        raise GateError(
            f"the baseline was measured {had} --training, but this check runs {asked} it; use the same flag, "
            "or measure every model again with --update (and no model arguments)",
            where=baseline.path,
        )


def compare(baseline: Baseline | Mapping[str, Mapping], measured: Mapping[str, Mapping], tolerance: float = 0.0) -> list[Row]:
    """One :class:`Row` per metric (``METRICS``) per measured model, in the order of ``measured``.

    ``baseline`` is a :class:`Baseline` or a mapping like ``measured`` (model path -> metrics).
    Every measured model must be in the baseline (:class:`GateError` names those that are not).
    """
    tolerance = check_tolerance(tolerance)
    old_models = baseline.models if isinstance(baseline, Baseline) else baseline
    old_by_path = {model_path(k): v for k, v in old_models.items()}
    missing = [model_path(m) for m in measured if model_path(m) not in old_by_path]
    if missing:
        raise GateError(f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not in the baseline; "
                        "run with --update to add " + ("it" if len(missing) == 1 else "them"))
    rows: list[Row] = []
    for model, new in measured.items():
        path = model_path(model)
        old = old_by_path[path]
        for metric in METRICS:
            a, b = (total_collectives(old), total_collectives(new)) if metric == "collectives" else (old[metric], new[metric])
            rows.append(_row(path, metric, a, b, tolerance))
    return rows


def _row(model: str, metric: str, old: float, new: float, tolerance: float) -> Row:
    if old == 0:
        change = 0.0 if new == 0 else None
        return Row(model, metric, old, new, change, worse=new > 0)
    change = (new - old) / old
    if abs(change) < ROUNDING:
        change = 0.0
    return Row(model, metric, old, new, change, worse=change > tolerance)


def _same(old: float, new: float) -> bool:
    return old == new or (old != 0 and abs((new - old) / old) < ROUNDING)


def check_tolerance(tolerance: float) -> float:
    """``tolerance`` as a float, checked to be a finite number >= 0.

    >>> check_tolerance(-0.1)
    Traceback (most recent call last):
      ...
    planner.errors.GateError: the tolerance must be a relative growth >= 0 (0.05 allows 5%), got -0.1
    """
    value = float(tolerance)
    if not math.isfinite(value) or value < 0:
        raise GateError(f"the tolerance must be a relative growth >= 0 (0.05 allows 5%), got {tolerance}")
    return value


def worse_models(rows: Iterable[Row]) -> list[str]:
    """The models with at least one worse row, in row order."""
    return list(dict.fromkeys(r.model for r in rows if r.worse))


def better_models(rows: Iterable[Row]) -> list[str]:
    """The models not worse on any metric and better on at least one, in row order."""
    rows = list(rows)
    worse = set(worse_models(rows))
    return [m for m in dict.fromkeys(r.model for r in rows if r.better) if m not in worse]


def collective_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, int, int]]:
    """``(kind, old count, new count)`` for each collective kind whose count differs, by kind.

    >>> collective_changes({"collectives": {"AllReduce": 2}}, {"collectives": {"AllGather": 1, "AllReduce": 2}})
    [('AllGather', 0, 1)]
    """
    a, b = old["collectives"], new["collectives"]
    return [(k, a.get(k, 0), b.get(k, 0)) for k in sorted(set(a) | set(b)) if a.get(k, 0) != b.get(k, 0)]
