"""The model layer: operator catalogue, computation graphs, the YAML format and builders.

``graphs`` turns a model description (a YAML file, :class:`GraphBuilder` calls or a
builder such as :func:`graphs.builders.gpt`) into a :class:`ComputationGraph`: a
bipartite networkx graph of tensors and ops whose shapes and dtypes are inferred by
the catalogue in :mod:`graphs.ops`. See ``docs/model-format.md`` for the YAML format.

>>> from graphs import load_model_text
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

from __future__ import annotations

import importlib

# each public name and the module it lives in: imported when first asked for, so that a command
# needing one corner of the model layer (``graphs.dtypes`` for a redistribution) does not load the
# operator catalogue, the YAML format and the builders
_PUBLIC = {
    "DTYPES": "graphs.dtypes",
    "dtype_itemsize": "graphs.dtypes",
    "numpy_dtype": "graphs.dtypes",
    "ComputationGraph": "graphs.graph",
    "OpSpec": "graphs.graph",
    "TensorSpec": "graphs.graph",
    "GraphBuilder": "graphs.graph_builder",
    "get_op": "graphs.ops.registry",
    "op_names": "graphs.ops.registry",
    "load_model": "graphs.yaml_format",
    "load_model_text": "graphs.yaml_format",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'graphs' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
