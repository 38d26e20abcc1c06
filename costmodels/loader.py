"""Load a :class:`~costmodels.cluster.Cluster` from a preset name, a YAML file or a mapping.

The format (``docs/clusters.md`` has the full description)::

    name: my-cluster                 # optional: defaults to the file's stem, else the preset's name
    preset: nvlink-node              # optional: a base preset whose values the others override
    device_peak_flops: 989TFLOP/s    # FLOP/s
    device_memory_bytes: 80GB        # bytes
    devices_per_node: 8              # device d is in node d // devices_per_node
    intra_node: {bandwidth_bytes_per_s: 450GB/s, latency_s: 3us}
    inter_node: {bandwidth_bytes_per_s: 50GB/s, latency_s: 10us}
    axes:                            # optional: the link of a mesh axis, by axis name
      pp: {bandwidth_bytes_per_s: 25GB/s, latency_s: 20us}
    peak_flops_by_dtype: {bf16: 989TFLOP/s, f32: 494TFLOP/s}   # optional compute keys
    vector_flops: 67TFLOP/s                                    # (costmodels.roofline)
    memory_bandwidth_bytes_per_s: 3.35TB/s                     # `inf`: unlimited
    kernel_overhead_s: 3us
    step_overhead_s: 50us
    matmul_efficiency: [[1MFLOP, 0.05], [1GFLOP, 0.4], [1TFLOP, 0.8]]   # or one number

Numbers are in the unit the key names; strings with units are accepted too
(:mod:`costmodels.units`). With a ``preset``, every key is optional and a link may
override only one of its two values. Mistakes raise
:class:`~planner.errors.ClusterError` naming the file, the line and the key.

>>> load_cluster().name
'default'
>>> cluster = load_cluster({"preset": "nvlink-node", "intra_node": {"latency_s": "2us"}})
>>> cluster.name, str(cluster.intra_node)
('nvlink-node', '450GB/s, 2us, 2us per call')
>>> load_cluster({"preset": "nvlink-node", "devices_per_node": 0}, where="model.yaml:4")
Traceback (most recent call last):
...
planner.errors.ClusterError: model.yaml:4: devices_per_node is 0; it must be an integer >= 1
"""

from __future__ import annotations

import difflib
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Union

import yaml

from costmodels.cluster import Cluster, Link
from costmodels.presets import DEFAULT_PRESET, preset_names, preset_path
from costmodels.roofline import MATMUL_DTYPES, Roofline, curve_points
from costmodels.units import parse_quantity
from planner import safe_yaml
from planner.errors import ClusterError, ShardplanError, quote
from planner.files import read_text
from planner.limits import MAX_CLUSTER_NUMBER, MAX_CLUSTER_SECONDS, MAX_DEVICES_PER_NODE, MIN_CLUSTER_RATE

__all__ = ["ClusterSpec", "load_cluster"]

ClusterSpec = Union[None, str, "os.PathLike[str]", Mapping[str, Any], Cluster]
"""What :func:`load_cluster` accepts."""

_LINK_KEYS = ("bandwidth_bytes_per_s", "latency_s", "overhead_s")
_REQUIRED_LINK_KEYS = ("bandwidth_bytes_per_s", "latency_s")
_REQUIRED = ("device_peak_flops", "device_memory_bytes", "devices_per_node", "intra_node", "inter_node")
_ROOFLINE_KEYS = ("peak_flops_by_dtype", "vector_flops", "memory_bandwidth_bytes_per_s", "kernel_overhead_s",
                  "step_overhead_s", "matmul_efficiency")
_TOP_KEYS = ("name", "preset", *_REQUIRED, "axes", *_ROOFLINE_KEYS)


def load_cluster(
    spec: ClusterSpec = None, *, base_dir: str | os.PathLike | None = None, where: str | None = None
) -> Cluster:
    """The cluster ``spec`` describes.

    ``spec`` is ``None`` (the ``default`` preset), a :class:`Cluster` (returned as
    is), a preset name, the path of a YAML file (a string ending in ``.yaml`` /
    ``.yml`` or holding a ``/``, or a :class:`os.PathLike`; relative paths are
    taken from ``base_dir``), or a mapping in the file format. ``where`` (e.g.
    ``"model.yaml:7"``) prefixes every error's location.
    """
    if spec is None:
        spec = DEFAULT_PRESET
    if isinstance(spec, Cluster):
        return spec
    presets_seen: tuple[str, ...] = ()
    if isinstance(spec, Mapping):
        raw, source = spec, _Source(where)
    elif isinstance(spec, os.PathLike) or (isinstance(spec, str) and _looks_like_path(spec)):
        raw, source = _read(Path(base_dir if base_dir is not None else ".") / os.fspath(spec), where)
    elif isinstance(spec, str):
        try:
            path = preset_path(spec)
        except ClusterError as err:
            raise err.located(where) if where else err
        raw, source = _read(path, where)
        presets_seen = (spec,)
    else:
        raise ClusterError(
            f"a cluster is given by a preset name, a YAML file path or a mapping, not {type(spec).__name__} {quote(spec)}",
            where=where,
        )
    return _build(_resolve(raw, source, presets_seen), source)


def _looks_like_path(text: str) -> bool:
    return text.endswith((".yaml", ".yml")) or "/" in text or os.sep in text


@dataclass(frozen=True, slots=True)
class _Source:
    """Where a mapping came from, to locate errors: an outer location, a file and its text."""

    where: str | None = None
    path: Path | None = None
    text: str | None = None

    def locate(self, keys: tuple[str, ...] = ()) -> str | None:
        if self.path is None:
            return self.where
        line = _line_of(self.text, keys) if keys else None
        here = f"{self.path}:{line}" if line else str(self.path)
        return f"{self.where}: {here}" if self.where else here

    def error(self, keys: tuple[str, ...], message: str) -> ClusterError:
        return ClusterError(message, where=self.locate(keys))


def _line_of(text: str, keys: tuple[str, ...]) -> int | None:
    """The 1-based line of the key path ``keys`` in YAML ``text`` (None if it is not there);
    an integer key is an index into a list."""
    try:
        node = safe_yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = None
    for key in keys:
        if isinstance(node, yaml.SequenceNode) and isinstance(key, int):
            if not 0 <= key < len(node.value):
                return line
            node = node.value[key]
            line = node.start_mark.line + 1
            continue
        if not isinstance(node, yaml.MappingNode):
            return line
        for key_node, value_node in node.value:
            if key_node.value == key:
                line, node = key_node.start_mark.line + 1, value_node
                break
        else:
            return line
    return line


def _read(path: Path, where: str | None) -> tuple[Any, _Source]:
    if not path.exists():
        raise ClusterError(
            f"cannot read cluster file {path}: it does not exist; check the path "
            f"(relative paths start at the model file's directory) or name a preset ({', '.join(preset_names())})",
            where=where,
        )
    try:
        text = read_text(path, "cluster file", ClusterError)
        source = _Source(where, path, text)
        raw = safe_yaml.load(text, str(path))
    except ShardplanError as err:  # not a text file, too large, nested too deep, an alias bomb
        raise err.located(where) if where else err
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        here = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(err, "problem", None) or str(err)
        raise ClusterError(f"not valid YAML: {problem}", where=f"{where}: {here}" if where else here) from None
    return raw, source


def _resolve(raw: Any, source: _Source, presets_seen: tuple[str, ...]) -> dict:
    """The typed values of ``raw`` merged over those of its base preset (recursively)."""
    values = _parse(raw, source)
    if "name" not in values and source.path is not None:
        values["name"] = source.path.stem
    base_name = values.pop("preset", None)
    if base_name is None:
        return values
    if base_name in presets_seen:
        chain = " -> ".join((*presets_seen, base_name))
        raise source.error(("preset",), f"presets refer to each other in a loop: {chain}")
    try:
        path = preset_path(base_name)
    except ClusterError as err:
        raise source.error(("preset",), err.message) from None
    base_raw, base_source = _read(path, None)
    return _merge(_resolve(base_raw, base_source, (*presets_seen, base_name)), values)


def _merge(base: dict, over: dict) -> dict:
    """``over`` on top of ``base``; links and axis overrides merge value by value."""
    out = dict(base)
    for key, value in over.items():
        if key in ("intra_node", "inter_node"):
            out[key] = {**base.get(key, {}), **value}
        elif key == "peak_flops_by_dtype":
            out[key] = {**base.get(key, {}), **value}
        elif key == "axes":
            axes = dict(base.get("axes", {}))
            for axis, link in value.items():
                axes[axis] = {**axes.get(axis, {}), **link}
            out[key] = axes
        else:
            out[key] = value
    return out


def _parse(raw: Any, source: _Source) -> dict:
    """Check keys and types of one cluster mapping; quantities converted to base units."""
    if not isinstance(raw, Mapping):
        raise source.error((), f"a cluster description is a mapping with keys {', '.join(_TOP_KEYS)}; got {_kind(raw)}")
    _check_keys(raw, _TOP_KEYS, (), source)
    values: dict[str, Any] = {}
    for key, value in raw.items():
        keys = (key,)
        if key in ("name", "preset"):
            if not isinstance(value, str) or not value:
                raise source.error(keys, f"{key} must be a non-empty string, got {quote(value)}")
            values[key] = value
        elif key == "device_peak_flops":
            values[key] = _quantity(value, "FLOP/s", keys, source)
        elif key == "device_memory_bytes":
            amount = _quantity(value, "bytes", keys, source)
            if not amount.is_integer():
                raise source.error(keys, f"device_memory_bytes is {quote(value)}; it must be a whole number of bytes")
            values[key] = int(amount)
        elif key == "devices_per_node":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise source.error(keys, f"devices_per_node is {quote(value)}; it must be an integer >= 1")
            if value > MAX_DEVICES_PER_NODE:
                raise source.error(keys, f"devices_per_node is {quote(value)}, more than shardplan's limit of "
                                         f"{MAX_DEVICES_PER_NODE:,} (the most devices of a mesh); for one node "
                                         f"holding every device write {MAX_DEVICES_PER_NODE}")
            values[key] = value
        elif key in ("intra_node", "inter_node"):
            values[key] = _parse_link(value, keys, source)
        elif key in _ROOFLINE_KEYS:
            values[key] = _parse_roofline_key(key, value, source)
        else:  # axes
            if not isinstance(value, Mapping):
                raise source.error(keys, f"axes maps mesh axis names to links; got {_kind(value)}")
            values[key] = {str(axis): _parse_link(link, (key, axis), source) for axis, link in value.items()}
    return values


def _parse_link(raw: Any, keys: tuple[str, ...], source: _Source) -> dict:
    name = ".".join(map(str, keys))
    if not isinstance(raw, Mapping):
        raise source.error(keys, f"{name} must be a mapping with keys {', '.join(_LINK_KEYS)}; got {_kind(raw)}")
    _check_keys(raw, _LINK_KEYS, keys, source)
    return {
        key: _quantity(value, "bytes/s" if key == "bandwidth_bytes_per_s" else "s", (*keys, key), source)
        for key, value in raw.items()
    }


def _parse_roofline_key(key: str, value: Any, source: _Source) -> Any:
    """One compute key (:mod:`costmodels.roofline`), checked where it is written."""
    keys = (key,)
    if key == "peak_flops_by_dtype":
        if not isinstance(value, Mapping):
            raise source.error(keys, f"peak_flops_by_dtype maps dtypes ({', '.join(MATMUL_DTYPES)}) to FLOP/s; "
                                     f"got {_kind(value)}")
        _check_keys(value, MATMUL_DTYPES, keys, source)
        return {dtype: _quantity(rate, "FLOP/s", (key, dtype), source) for dtype, rate in value.items()}
    if key == "vector_flops":
        return _quantity(value, "FLOP/s", keys, source)
    if key in ("kernel_overhead_s", "step_overhead_s"):
        return _quantity(value, "s", keys, source)
    if key == "memory_bandwidth_bytes_per_s":
        if value == "inf" or (isinstance(value, float) and value == math.inf):
            return math.inf
        return _quantity(value, "bytes/s", keys, source)
    # matmul_efficiency: a number, or [flops, efficiency] points; each point checked on its own line
    if isinstance(value, list):
        points = []
        for n, point in enumerate(value):
            if not isinstance(point, list) or len(point) != 2:
                raise source.error((key, n), f"matmul_efficiency: point {n + 1} is {quote(point)}; "
                                             "a point is [flops, efficiency], e.g. [1GFLOP, 0.4]")
            flops = _quantity(point[0], "FLOP", (key, n), source, f"matmul_efficiency: point {n + 1}'s flops")
            points.append((flops, point[1]))
            try:
                curve_points(points)
            except ClusterError as err:
                raise source.error((key, n), err.message) from None
        value = points
    try:
        return curve_points(value)
    except ClusterError as err:
        raise source.error(keys, err.message) from None


def _quantity(value: Any, unit: str, keys: tuple[str, ...], source: _Source, name: str | None = None) -> float:
    name = name or ".".join(map(str, keys))
    try:
        amount = parse_quantity(value, unit)
    except ValueError as err:
        raise source.error(keys, f"{name}: {err}") from None
    zero_ok = unit == "s"
    if not math.isfinite(amount) or not (amount >= 0 if zero_ok else amount > 0):
        wanted = "a finite number >= 0" if zero_ok else "a finite number > 0"
        raise source.error(keys, f"{name} is {quote(value)}; it must be {wanted}")
    # bounded so that every cost priced from the cluster is a number the searches' solvers can compare
    largest = MAX_CLUSTER_SECONDS if zero_ok else MAX_CLUSTER_NUMBER
    if amount > largest:
        raise source.error(keys, f"{name} is {quote(value)}, more than shardplan's limit of {largest:g} {unit}; "
                                 "check the number and its unit")
    if unit.endswith("/s") and amount < MIN_CLUSTER_RATE:
        raise source.error(keys, f"{name} is {quote(value)}, less than shardplan's limit of {MIN_CLUSTER_RATE:g} "
                                 f"{unit}; check the number and its unit")
    return amount


def _check_keys(raw: Mapping, allowed: tuple[str, ...], keys: tuple[str, ...], source: _Source) -> None:
    for key in raw:
        if key not in allowed:
            inside = f" in {'.'.join(map(str, keys))}" if keys else ""
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"did you mean {quote(close[0])}? " if close else ""
            raise source.error(
                (*keys, str(key)), f"unknown key {quote(key)}{inside}; {hint}the keys are {', '.join(allowed)}"
            )


def _build(values: dict, source: _Source) -> Cluster:
    missing = [key for key in _REQUIRED if key not in values]
    if missing:
        raise source.error(
            (),
            f"the cluster description lacks {', '.join(missing)}; give them, "
            f"or name a base preset to start from (preset: one of {', '.join(preset_names())})",
        )
    links = {key: values[key] for key in ("intra_node", "inter_node")}
    links.update({("axes", axis): link for axis, link in values.get("axes", {}).items()})
    for keys, link in links.items():
        lacking = [key for key in _REQUIRED_LINK_KEYS if key not in link]
        if lacking:
            keys = keys if isinstance(keys, tuple) else (keys,)
            raise source.error(keys, f"{'.'.join(keys)} lacks {' and '.join(lacking)}")

    def make(link: dict) -> Link:
        return Link(link["bandwidth_bytes_per_s"], link["latency_s"], link.get("overhead_s", 0.0))

    return Cluster(
        name=values.get("name", "custom"),
        device_peak_flops=values["device_peak_flops"],
        device_memory_bytes=values["device_memory_bytes"],
        devices_per_node=values["devices_per_node"],
        intra_node=make(values["intra_node"]),
        inter_node=make(values["inter_node"]),
        axis_links=tuple((axis, make(link)) for axis, link in values.get("axes", {}).items()),
        roofline=_roofline(values, source),
    )


def _roofline(values: dict, source: _Source) -> Roofline:
    fields = {key: values[key] for key in _ROOFLINE_KEYS if key in values}
    try:
        return Roofline(**fields)
    except ClusterError as err:  # the loader checked each key; what is left involves several
        raise source.error((), err.message) from None


def _kind(value: Any) -> str:
    return "nothing" if value is None else f"{type(value).__name__} {quote(value)}"
