"""Turning the ways a model names its meshes into ``{name: Mesh}`` (the first is the default).

Accepted forms (YAML and Python alike):

- a mapping of axis sizes ``{"x": 2, "y": 4}``: one mesh called ``mesh``;
- the seed's text ``'<["x"=2, "y"=4]>'`` (also called ``mesh``) or the full text
  ``'@m = <["x"=2]>'`` / ``'@m = {<["x"=4]>, device_ids=[3, 2, 1, 0]}'``;
- a mapping ``{axes: {...}, device_ids: [...], axis_types: {x: Explicit}}``;
- a :class:`~planner.ir.mesh.Mesh`, a list of them, or a mapping name -> Mesh.

Every mesh of one model must cover the same number of devices.

>>> m = as_meshes({"x": 2, "y": 4})
>>> str(m["mesh"])
'@mesh = <["x"=2, "y"=4]>'
>>> str(mesh_from_value("m2", '<["a"=8]>'))
'@m2 = <["a"=8]>'
"""

from __future__ import annotations

from typing import Any, Mapping

from planner.errors import ModelError, ShardplanError, quote
from planner.ir import Mesh, parse_mesh

DEFAULT_MESH_NAME = "mesh"
_FULL_KEYS = ("axes", "device_ids", "axis_types")


def mesh_from_value(name: str, value: Any) -> Mesh:
    """One mesh from text, axis sizes, the full mapping form or a Mesh; ModelError if malformed."""
    try:
        if isinstance(value, Mesh):
            return value
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("@"):
                mesh = parse_mesh(text)
                if name != DEFAULT_MESH_NAME and mesh.name != name:
                    raise ModelError(f"mesh {quote(name)} is given as text naming a different mesh @{mesh.name}")
                return mesh
            return parse_mesh(f"@{name} = {text}")
        if isinstance(value, Mapping):
            if "axes" in value:
                unknown = [k for k in value if k not in _FULL_KEYS]
                if unknown:
                    raise ModelError(
                        f"mesh {quote(name)} has unknown key {quote(unknown[0])} (keys: {', '.join(_FULL_KEYS)})"
                    )
                return _mesh_from_sizes(name, value["axes"], value.get("device_ids"), value.get("axis_types"))
            return _mesh_from_sizes(name, value, None, None)
    except ModelError:
        raise
    except ShardplanError as e:
        raise ModelError(f"bad mesh {quote(name)}: {e.message}") from None
    raise ModelError(
        f"bad mesh {quote(name)}: expected axis sizes like {{x: 2, y: 4}} or text like '<[\"x\"=2]>', got {quote(value)}"
    )


def _mesh_from_sizes(name: str, sizes: Any, device_ids: Any, types: Any) -> Mesh:
    if not isinstance(sizes, Mapping) or not sizes:
        raise ModelError(f"bad mesh {quote(name)}: axes must be a mapping of axis names to sizes, got {quote(sizes)}")
    for axis, size in sizes.items():
        if isinstance(size, bool) or not isinstance(size, int):
            raise ModelError(f"bad mesh {quote(name)}: axis {quote(axis)} has size {quote(size)}; sizes are positive integers")
    if device_ids is not None and not (
        isinstance(device_ids, (list, tuple)) and all(isinstance(d, int) and not isinstance(d, bool) for d in device_ids)
    ):
        raise ModelError(f"bad mesh {quote(name)}: device_ids must be a list of integers, got {quote(device_ids)}")
    if types is not None:
        if not isinstance(types, Mapping):
            raise ModelError(f"bad mesh {quote(name)}: axis_types must map axis names to Auto/Explicit/Manual")
        for axis in types:
            if axis not in sizes:
                raise ModelError(f"bad mesh {quote(name)}: axis_types names axis {quote(axis)}, which the mesh does not have")
    return Mesh.from_sizes(name, {str(k): v for k, v in sizes.items()}, device_ids, dict(types or {}))


def as_meshes(value: Any) -> dict[str, Mesh]:
    """Normalise one mesh, several, or none (``None``) into an ordered ``{name: Mesh}``."""
    if value is None:
        return {}
    if isinstance(value, (Mesh, str)):
        mesh = mesh_from_value(DEFAULT_MESH_NAME, value)
        return check_same_devices({mesh.name: mesh})
    if isinstance(value, (list, tuple)):
        out: dict[str, Mesh] = {}
        for m in value:
            mesh = mesh_from_value(getattr(m, "name", DEFAULT_MESH_NAME), m)
            if mesh.name in out:
                raise ModelError(f"mesh @{mesh.name} is defined twice")
            out[mesh.name] = mesh
        return check_same_devices(out)
    if isinstance(value, Mapping):
        if not value:
            return {}
        if all(isinstance(v, Mesh) for v in value.values()):
            return check_same_devices({k: v for k, v in value.items()})
        mesh = mesh_from_value(DEFAULT_MESH_NAME, value)
        return {mesh.name: mesh}
    raise ModelError(f"bad mesh: expected a Mesh, axis sizes or mesh text, got {quote(value)}")


def check_same_devices(meshes: dict[str, Mesh]) -> dict[str, Mesh]:
    """``meshes`` unchanged if all cover the same number of devices, else ModelError."""
    items = list(meshes.values())
    for m in items[1:]:
        if m.size != items[0].size:
            raise ModelError(
                f"meshes must cover the same devices: @{items[0].name} has {items[0].size} devices "
                f"but @{m.name} has {m.size}"
            )
    return meshes
