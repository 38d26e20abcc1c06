"""The model layer: operator catalogue, computation graphs, the YAML format and builders.

``graphs`` turns a model description (a YAML file, :class:`GraphBuilder` calls or a
builder such as :func:`graphs.builders.gpt`) into a :class:`ComputationGraph`: a
bipartite networkx graph of tensors and ops whose shapes and dtypes are inferred by
the catalogue in :mod:`graphs.ops`. See ``docs/model-format.md`` for the YAML format.

>>> g = load_model_text('''
... name: tiny
... mesh: {x: 2}
... tensors:
...   a: {shape: [4, 8], kind: input}
...   w: {shape: [8, 2], kind: param, sharding: '[{}, {"x"}]'}
... ops:
...   - {name: mm, op: matmul, inputs: [a, w], output: y}
... ''')
>>> g.tensor("y").shape, g.total_flops()
((4, 2), 128)
"""

from graphs.dtypes import DTYPES, dtype_itemsize, numpy_dtype
from graphs.graph import ComputationGraph, OpSpec, TensorSpec
from graphs.graph_builder import GraphBuilder
from graphs.ops.registry import get_op, op_names
from graphs.yaml_format import load_model, load_model_text

__all__ = [
    "DTYPES",
    "ComputationGraph",
    "GraphBuilder",
    "OpSpec",
    "TensorSpec",
    "dtype_itemsize",
    "get_op",
    "load_model",
    "load_model_text",
    "numpy_dtype",
    "op_names",
]
