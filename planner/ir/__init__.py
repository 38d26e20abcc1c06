"""The sharding representation: meshes, axis references, shardings, their text and layout."""

from planner.ir.axis import AxisRef
from planner.ir.layout import device_index_ranges, same_layout
from planner.ir.mesh import AxisType, Mesh, MeshAxis
from planner.ir.sharding import DimSharding, TensorSharding
from planner.ir.text import parse_axis_ref, parse_mesh, parse_sharding

__all__ = [
    "AxisRef",
    "AxisType",
    "DimSharding",
    "Mesh",
    "MeshAxis",
    "TensorSharding",
    "device_index_ranges",
    "parse_axis_ref",
    "parse_mesh",
    "parse_sharding",
    "same_layout",
]
