"""``OpDef``: what the catalogue knows about one operator kind.

An ``OpDef`` holds plain functions, all taking the operands' shapes (tuples of
ints; ``()`` is a scalar) and the op's attributes as a mapping:

- ``infer(shapes, dtypes, attrs, names=None) -> (shape, dtype)`` checks the operands and
  gives the result; on a mismatch it raises :class:`~planner.errors.ModelError`
  whose message names the operands (``names``, default ``#0``, ``#1`` ...) with their
  shapes, e.g. ``matmul contracts 64 with 32: inputs x (64x64) and w (32x16)``.
- ``flops(in_shapes, out_shape, attrs) -> int`` under the convention documented in
  the family's module (a multiply-add is 2 FLOPs, elementwise work 1 per element).
- ``bytes_accessed(in_shapes, out_shape, itemsizes, attrs) -> int``: the bytes of
  device memory one instance reads and writes, ``itemsizes`` the operands' element
  sizes then the result's. The convention (:func:`every_element_once`, the default):
  every operand element is read once and every result element written once, as a
  fused kernel with perfect on-chip reuse would (a matmul reads each operand once).
  A family overrides it where that is wrong and says so in its module: a gather
  reads only the rows it picks, a slice only the elements it keeps, a reshape is a
  new view of the same buffer (0 bytes), annotations, region boundaries and manual
  collectives touch no memory as ops (a collective's time is its communication).
  Like ``flops`` it reads only shapes, so it gives a device's share on local shapes.
- ``reference(arrays, attrs) -> np.ndarray`` computes the op on one device in numpy.
- ``canonical(shapes, attrs) -> dict`` (optional) rewrites attributes into the one
  form the rest of the planner reads (non-negative axes, pairs for ``stride``).
- ``vjp(arrays, attrs, result, cotangent, wrt) -> tuple of arrays`` (the
  vector-Jacobian product, exact for ``reference``): ``attrs`` canonical with
  defaults filled (as ``reference`` gets them in a graph), ``cotangent`` the
  cotangent of the result, ``wrt`` a tuple of operand indices. It returns one array
  per index of ``wrt``, of that operand's shape, in the cotangent's dtype, and
  *fresh*: never aliasing ``arrays``, ``result``, ``cotangent`` or another returned
  array (callers accumulate into them in place). What it reads is declared by
  ``vjp_reads_inputs`` (:meth:`OpDef.vjp_inputs` says which; else the operands may be stand-ins from :func:`shape_stand_in`:
  only their shape and dtype are read) and ``vjp_reads_result`` (else ``result`` may be
  None); callers use the flags to free memory early. ``vjp_in_place`` (optional, one
  operand) is the same VJP written into the cotangent's own buffer, for a caller
  that owns the cotangent and is done with it (softmax: no second array the size of
  the attention probabilities). Integer and bool operands
  (gather's indices, cross_entropy's labels) are not differentiable: asking for
  one raises :class:`~planner.errors.ModelError` (see :func:`check_wrt`), and so
  does a cast to an integer or bool dtype. ``vjp`` is None for an op that cannot
  be trained (none of the catalogue today); ``stop_gradient``'s is zeros (``blocks_gradient``).
- ``requires_out_sharding``: the op means nothing without an ``out_sharding``
  (``sharding_constraint``); a graph refuses such an op without one.

What the layers above need to know about the op is set here too, so that no
module keeps a list of op names:

- ``rule``: its sharding rule, named ``module.function`` inside :mod:`planner.rules`
  (``"matmul.matmul"``): the rule says which factors pass through, are reduced or
  need replication. A name, not an import: the rules sit above the catalogue, and
  :mod:`planner.rules.registry` resolves the name. None only for an op listed in
  :data:`planner.rules.registry.NO_RULE`.
- ``matmul_units``: the op runs on the matmul units (tensor cores, MXUs): matmul,
  einsum and conv2d. The roofline prices its FLOPs at the dtype's matmul peak times the
  matmul efficiency, every other op's at the vector rate (:mod:`costmodels.compute`).
- ``elementwise``: each result element is computed from the operands' elements at
  its own (broadcast) position: the pointwise family and the annotation identities.
- ``follows_operand``: a unary elementwise op whose best layout is its operand's,
  once that operand's pending sums are reduced; the ILP folds its strategy into
  its producer's.
- ``passes_shardings``: Shardy's pass-through ops, which its op-priority
  propagation visits first: the elementwise ops, ``reshape`` and ``transpose``.
- ``keeps_padding``: on blocks padded at the end of a dimension its shards do not divide
  (the planner's ``ceil(n / shards)`` blocks), the op's local instance leaves its result's
  padding at the end of each dimension too, so it runs on padded blocks as they are (the
  shard_map lowering, :mod:`planner.engines.jax_spmd`); False for ``reshape``, which would
  interleave a merged dimension's padding with its elements.
- ``indexes``: ``(i, j, d)`` triples: operand ``i`` holds integer indices into
  dimension ``d`` of operand ``j`` (gather's indices into its table's rows); example
  inputs draw such an operand inside ``[0, size)``. ``d`` may name the attribute that holds
  the dimension (take_along_axis's ``"axis"``): :meth:`OpDef.indexed` reads it.
- ``fan_in_dims``: ``(i, dims)`` pairs: a result element sums operand ``i`` over
  those of its dimensions, where that is not every dimension but the last (conv2d's
  weight: all but the first; a gather's table: none, rows are looked up). Example
  inputs scale a parameter by ``1 / sqrt(fan-in)``.
- ``jax_form(jnp, lax, arrays, attrs) -> jax array``: the op in ``jax.numpy`` with
  ``reference``'s semantics, given the modules so that the catalogue never imports
  JAX (an optional extra); None for the collectives of manual regions, which
  :mod:`planner.engines.jax_regions` lowers. It and ``jax_local_form`` are self-contained module-level
  functions (a ``def``, no lambda or closure, whose body reads only its parameters and builtins and imports
  ``math`` or ``numpy`` itself), so that a generated module can embed their source (``inspect.getsource``).
- ``local_reference(arrays, attrs, ctx, rule)`` and
  ``local_vjp(arrays, attrs, cotangent, ctx, wrt)``: one device's result block and
  operand cotangent blocks in the simulator (:mod:`planner.simulation.local_ops`),
  for an op whose value on a block is not ``reference`` / ``vjp`` of the block
  (a reduction that divides by the global count, a gather from this device's table
  rows, a reshape into the block's shape). ``ctx`` is the device's
  :class:`~planner.simulation.local_ops.LocalContext` (each block's global shape,
  index ranges, local shape and ``valid_mask()``; ``rule_result_shape(rule)``),
  ``rule`` the op's sharding rule. ``local_vjp_reads``: the operands ``local_vjp`` reads (None: those
  :meth:`OpDef.vjp_inputs` names).
- ``jax_local_form(jnp, lax, arrays, attrs, ctx)``: the same local instance in ``jax.numpy``, run
  inside one ``shard_map`` (:mod:`planner.engines.jax_spmd`), for the ops with a ``local_reference``;
  ``ctx`` (:class:`~planner.engines.jax_spmd.Local`) gives each block's global and local
  shape (operands, then the result), ``start(which, dim)``, traced from ``axis_index``, and
  ``valid(which)``, False on a padded block's padding (None where it has none). Its
  backward is ``jax.vjp``'s.

Missing attributes take the defaults listed in ``attrs``; the functions accept
either the raw or the canonical mapping.

>>> from graphs.ops.registry import get_op
>>> mm = get_op("matmul")
>>> mm.infer([(64, 64), (64, 16)], ["f32", "f32"], {})
((64, 16), 'f32')
>>> mm.flops([(64, 64), (64, 16)], (64, 16), {})
131072
>>> mm.bytes_accessed([(64, 64), (64, 16)], (64, 16), (4, 4, 4), {}), mm.matmul_units   # (4096 + 1024 + 1024) x 4
(24576, True)
>>> import numpy as np
>>> a, b = np.ones((2, 3)), np.ones((3, 4))
>>> [g.shape for g in mm.vjp([a, b], {"transpose_a": False, "transpose_b": False}, None, np.ones((2, 4)), (0, 1))]
[(2, 3), (3, 4)]
>>> mm.rule, get_op("relu").follows_operand, get_op("reshape").passes_shardings, get_op("gather").indexes
('matmul.matmul', True, True, ((1, 0, 'axis'),))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from planner.errors import ModelError, did_you_mean, quote


class _Required:
    """Marks an attribute without a default."""

    def __repr__(self) -> str:
        return "REQUIRED"


#: The default of an attribute that must be given.
REQUIRED: Any = _Required()


def _identity_attrs(shapes: Sequence[tuple[int, ...]], attrs: Mapping[str, Any]) -> dict:
    return dict(attrs)


def every_element_once(in_shapes: Sequence[Sequence[int]], out_shape: Sequence[int], itemsizes: Sequence[int],
                       attrs: Mapping[str, Any]) -> int:
    """Bytes of an op that reads every operand element once and writes every result element once.

    >>> every_element_once([(8, 4), (4,)], (8, 4), (2, 2, 4), {})   # 32 x 2 + 4 x 2 + 32 x 4
    200
    """
    shapes = (*in_shapes, out_shape)
    if len(itemsizes) != len(shapes):
        raise ModelError(f"bytes_accessed needs one itemsize per operand and one for the result: "
                         f"{len(shapes)}, got {len(itemsizes)}")
    return sum(_numel(shape) * size for shape, size in zip(shapes, itemsizes))


def no_bytes_accessed(in_shapes, out_shape, itemsizes, attrs) -> int:
    """An op that is a view or a marker, not a kernel: it touches no memory."""
    return 0


def _numel(shape: Sequence[int]) -> int:
    count = 1
    for d in shape:
        count *= int(d)
    return count


def shape_stand_in(shape: Sequence[int], dtype: Any) -> np.ndarray:
    """A read-only array of ``shape`` and ``dtype`` holding no memory (one shared zero).

    Passed to a ``vjp`` in place of an operand the VJP does not read
    (``vjp_reads_inputs`` false): it still tells the operand's shape and dtype.

    >>> s = shape_stand_in((1000, 1000), np.float64)
    >>> s.shape, s.dtype, s.nbytes // s.size, s.base.nbytes
    ((1000, 1000), dtype('float64'), 8, 8)
    """
    return np.broadcast_to(np.zeros((), dtype), tuple(shape))


def check_wrt(op: str, arrays: Sequence[Any], wrt: Sequence[int], roles: Sequence[str] = ()) -> None:
    """ModelError unless every index of ``wrt`` names a floating-point operand of ``arrays``.

    ``roles`` optionally names the operands (``("logits", "labels")``) for the message.

    >>> check_wrt("gather", [np.zeros((4, 2)), np.zeros(3, np.int32)], (1,), ("table", "indices"))
    Traceback (most recent call last):
    ...
    planner.errors.ModelError: gather has no gradient with respect to its indices (operand 1, int32): integer and bool operands are not differentiable
    """
    for i in wrt:
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not 0 <= i < len(arrays):
            raise ModelError(f"{op} has no operand {quote(i)} to differentiate (it has {len(arrays)})")
        dtype = None if arrays[i] is None else np.asarray(arrays[i]).dtype
        if dtype is not None and not np.issubdtype(dtype, np.floating):
            role = f"its {roles[i]} (operand {i}, {dtype})" if i < len(roles) else f"operand {i} ({dtype})"
            raise ModelError(f"{op} has no gradient with respect to {role}: integer and bool operands are "
                             "not differentiable")


@dataclass(frozen=True, slots=True)
class OpDef:
    """One operator kind of the catalogue (see the module docstring)."""

    name: str
    family: str
    min_inputs: int
    max_inputs: int | None
    attrs: tuple[tuple[str, Any], ...]
    infer: Callable[..., tuple[tuple[int, ...], str]]
    flops: Callable[..., int]
    reference: Callable[..., Any]
    canonical: Callable[..., dict] = _identity_attrs
    vjp: Callable[..., tuple] | None = None
    vjp_reads_inputs: bool = True
    vjp_reads_result: bool = False
    multilinear: bool = False
    vjp_in_place: Callable[..., tuple] | None = None
    requires_out_sharding: bool = False
    rule: str | None = None
    elementwise: bool = False
    follows_operand: bool = False
    passes_shardings: bool = False
    keeps_padding: bool = True
    indexes: tuple[tuple[int, int, int | str], ...] = ()
    fan_in_dims: tuple[tuple[int, tuple[int, ...]], ...] = ()
    jax_form: Callable[..., Any] | None = None
    local_reference: Callable[..., Any] | None = None
    local_vjp: Callable[..., tuple] | None = None
    local_vjp_reads: tuple[int, ...] | None = None
    jax_local_form: Callable[..., Any] | None = None
    bytes_accessed: Callable[..., int] = every_element_once
    matmul_units: bool = False
    #: with its statistic factor sharded (a normalisation): the AllReduces of its forward and of its
    #: backward, in order, each the reductions (``"sum"``, ``"max"``) of the statistics it carries
    statistics: tuple[tuple[tuple[str, ...], ...], tuple[tuple[str, ...], ...]] = ((), ())
    #: with its statistic factor sharded and reduced away (argmax, argmin): the statistics each device takes of
    #: its block, in order, each AllGathered over the factor's axes, of the local result's size: ``"operand"``
    #: (the extreme, in the operand's dtype) or ``"result"`` (its global index, in the result's dtype); then each
    #: device picks among the gathered ones, as XLA partitions a variadic reduce (JAX 0.10.2: two AllGathers)
    gathered_statistics: tuple[str, ...] = ()
    #: its backward runs with its ``PERMUTATION`` factor sharded (a concat's pieces, a slice's pad, a scan's
    #: gathered cotangent); False (``sort``, whose transpose scatters by the keys' order): a training step that
    #: computes its operand gradients keeps the factor whole
    permutation_backward: bool = True
    #: XLA's SPMD partitioner has no rule for the op (its TopK): it replicates every operand, runs the op whole
    #: and slices the result to its sharding (DefaultAction), so ``--search propagate``, which plans what XLA
    #: compiles, computes it replicated; the other searches keep the op's rule (its local instance is exact)
    xla_replicates: bool = False
    #: linear in its operands jointly, so JAX's explicit mode types a sum pending over mesh axes through it: every
    #: operand pending over the same axes gives a result pending over them (JAX 0.10's unreduced rules)
    keeps_pending: bool = False
    #: a reduction XLA's partitioner completes one sharded reduced dimension at a time, the last first, each by
    #: an AllReduce over that dimension's axes (JAX 0.10.2: a sum over [{"dp"}, {"tp"}] all-reduces over tp,
    #: then over dp; a dimension on two axes is one AllReduce over both); a dot likewise, one contracting
    #: dimension at a time in reverse order of its dimension numbers (an einsum's letters in order)
    reduces_by_dimension: bool = False
    #: its VJP sums an operand's cotangent over the dimensions the operand lacks by a dot (a matmul's weight
    #: gradient over the batch and sequence) or a reduce_sum (a broadcast bias's, a norm weight's), as JAX's
    #: transposes write them, which XLA's partitioner completes one sharded dimension at a time, the last of the
    #: other operands' dimensions first (JAX 0.10.2: x [{"dp"}, {"tp"}, {}] @ w gives w's gradient an AllReduce
    #: over tp, then one over dp)
    reduces_cotangents_by_dimension: bool = False
    #: XLA's dot partitioner groups the devices by the mesh axes its result takes from one operand's kept
    #: dimensions; the other operand, holding one of those axes on a dimension of its own that it must give up,
    #: is first moved onto the mesh axes free inside each group (one CollectivePermute), then resharded inside
    #: the group (JAX 0.10.2: ``x[{"a"}, {}] @ w[{}, {"a"}]`` on 2x2x2 permutes ``w`` to ``[{}, {"b", "c"}]``
    #: and gathers it over b and c, 2048 B a device where a gather over a moves 1024 B); the ``xla``
    #: redistribution policy does the same (:meth:`planner.model.nodes.OpNode.regroup`)
    xla_groups_operands: bool = False
    #: Shardy registers a sharding rule for the op; without one (a CHLO op such as ``chlo.erf``) Shardy's
    #: propagation passes no sharding between the op's operands and its result, so ``--search propagate`` does
    #: not either (each side keeps what its other readers and writers give it)
    shardy_rule: bool = True
    #: operands JAX's explicit mode requires sharded alike when all have the result's shape (its select_n: the
    #: cases and the predicate; its sort: keys and payload); where jnp.where broadcasts one, they take the
    #: consensus (JAX 0.10.2, probed)
    sharded_alike: tuple[int, ...] = ()
    #: operands JAX's explicit mode requires of one sharding whatever their shapes (its dynamic_update_slice: the
    #: operand and the update, JAX 0.10.2, probed)
    typed_alike: tuple[int, ...] = ()
    #: its result carries no gradient back to its operand (JAX's ``stop_gradient``): the result is a constant to
    #: the backward, so :func:`graphs.gradients.requires_grad` leaves it out, and with it whatever reaches the
    #: outputs only through such ops (``jax.nn.logsumexp``'s shift: its maximum is not differentiated)
    blocks_gradient: bool = False

    def indexed(self, attrs: Mapping[str, Any]) -> tuple[tuple[int, int, int], ...]:
        """:attr:`indexes` with each dimension an attribute names read from ``attrs`` (canonical).

        >>> from graphs.ops.registry import get_op
        >>> get_op("take_along_axis").indexed({"axis": 1}), get_op("cross_entropy").indexed({})
        (((1, 0, 1),), ((1, 0, -1),))
        """
        return tuple((i, j, int(attrs[d]) if isinstance(d, str) else d) for i, j, d in self.indexes)

    def vjp_inputs(self, wrt: Sequence[int], n: int) -> tuple[int, ...]:
        """The operands the VJP reads for the cotangents of ``wrt`` (the others may be stand-ins).

        A multilinear op (``mul``, ``matmul``, ``einsum``, ``conv2d``) needs, for the
        cotangent of operand ``k``, only the *other* operands: the scores a constant
        scale multiplies need not be kept for the backward.

        >>> from graphs.ops.registry import get_op
        >>> get_op("matmul").vjp_inputs((0,), 2), get_op("add").vjp_inputs((0, 1), 2), get_op("gelu").vjp_inputs((0,), 1)
        ((1,), (), (0,))
        """
        if not self.vjp_reads_inputs:
            return ()
        if self.multilinear:
            return tuple(i for i in range(n) if any(i != k for k in wrt))
        return tuple(range(n))

    @property
    def attr_names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.attrs)

    def arity_text(self) -> str:
        """``1 input``, ``2 or 3 inputs``, ``at least 1 input``."""
        lo, hi = self.min_inputs, self.max_inputs
        if hi is None:
            return f"at least {lo} input{'s' if lo != 1 else ''}"
        if lo == hi:
            return f"{lo} input{'s' if lo != 1 else ''}"
        if hi == lo + 1:
            return f"{lo} or {hi} inputs"
        return f"{lo} to {hi} inputs"

    def check_arity(self, n: int, names: Sequence[str] = ()) -> None:
        """Raise :class:`ModelError` unless ``n`` operands are allowed."""
        if n < self.min_inputs or (self.max_inputs is not None and n > self.max_inputs):
            given = f" ({', '.join(names)})" if names else ""
            raise ModelError(f"{self.name} takes {self.arity_text()}, got {n}{given}")

    def with_defaults(self, attrs: Mapping[str, Any]) -> dict:
        """``attrs`` with defaults filled in; unknown or missing attributes raise ModelError.

        >>> from graphs.ops.registry import get_op
        >>> get_op("softmax").with_defaults({})
        {'axis': -1}
        """
        allowed = dict(self.attrs)
        for key in attrs:
            if key not in allowed:
                known = ", ".join(self.attr_names) or "none"
                hint = did_you_mean(key, self.attr_names)
                raise ModelError(f"{self.name} has no attribute {quote(key)}{hint} (its attributes: {known})")
        out = {}
        for key, default in self.attrs:
            if key in attrs:
                out[key] = attrs[key]
            elif default is REQUIRED:
                raise ModelError(f"{self.name} needs the attribute {quote(key)}")
            else:
                out[key] = default
        return out
