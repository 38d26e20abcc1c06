"""The planner's caches: each one named, bounded, keyed by value, and cleared by one call.

Planning is pure: the same inputs give the same plan. Several steps are also
repeated many times with equal inputs (identical layers, identical tensors), so
their results are kept here. **A planning run never needs the user to clear
anything**: every cache is keyed by the values its result depends on, so
clearing one only makes the next run slower (cold), never different.
:func:`clear_caches` clears them all (benchmarks use it to time a cold start);
:func:`cache_stats` reports each one's hits, misses and size.

What is cached where (cache name, what it maps, bound), and why each bound:

* ``op sharding rules`` (:mod:`planner.rules.registry`): (op, operand shapes,
  result shape, attributes) to the op's sharding rule; 4,096.
* ``strategy enumeration`` (:mod:`planner.enumeration.strategies`): (rule, mesh,
  pieces) to the op's admissible strategies; 4,096.
* ``redistribution plans`` (:mod:`planner.redistribution.engine`): (shape, dtype,
  source, destination, cluster, objective, pieces, within, ties, typed) to the
  cheapest plan; 65,536.
* ``transposed redistribution plans`` (:mod:`planner.redistribution.transpose`):
  (forward plan, pending axes, cluster, pbroadcast, within) to the backward plan; 65,536.
* ``default cluster`` (:mod:`planner.redistribution.engine`): the cluster used
  when none is given; 1.
* ``redistribution lower bounds`` (:mod:`planner.redistribution.lower_bound`):
  (source, destination, shape, dtype) to a plan's lower bound in bytes; 65,536.
* ``redistribution pieces`` (:mod:`planner.redistribution.state`): (mesh, shape,
  refinement) to the :class:`~planner.redistribution.state.Pieces` searches run
  over; 512.
* ``cluster node spans`` (:mod:`costmodels.cluster`): (mesh, axes, devices per
  node) to whether a collective over those axes crosses nodes; 4,096.
* ``cost tables`` (:mod:`planner.model.build`): class-level edge cost
  tables; bound set there.

The bounds count *distinct* keys and were sized on the gpt builder (mesh
dp=2 x tp=4): planning 48 layers makes 4,393 distinct redistributions and a few
hundred distinct rules and enumerations (identical layers share them), so 4,096
rules and enumerations hold several models' worth, and 65,536 plans (and lower
bounds) are 15 times what that model needs. Pieces are few (one per mesh, tensor
shape and refinement: 7 for that model), so 512 is ample. Only the speed of a
run that overflows a bound changes: evicted entries are recomputed.

Besides these, every :class:`~planner.redistribution.state.Pieces` carries its
own, unregistered :class:`BoundedCache` of search results (device boxes, valid
moves; a few thousand entries for an 8-device mesh), bounded at 65,536 entries
(``planner.redistribution.state.MEMO_SIZE``), which holds one more such cache
per cluster searched on (the moves' costs), and a plain dict of per-dimension
geometry (``Pieces.per_dimension``: spans and bound terms, a few keys per dimension
and set of pieces). The A* keeps its :class:`~planner.redistribution.search.Graph`
(states, priced moves, bounds) in that memo too, one per cluster, item size,
objective and typing, and starts it afresh past ``search.GRAPH_SIZE`` (200,000)
entries. They live and die with their ``Pieces``, which the ``redistribution
pieces`` cache holds, so :func:`clear_caches` drops them too.

A :class:`BoundedCache` is a least-recently-used map; :func:`memoize` is the
decorator form for functions of hashable arguments (the replacement for
``functools.lru_cache``, which this package does not use: those caches had no
owner and no name).

>>> squares = BoundedCache("doctest squares", maxsize=2)
>>> squares.get_or_compute(3, lambda: 9), squares.get_or_compute(3, lambda: -1)
(9, 9)
>>> squares.put(4, 16), squares.put(5, 25), 3 in squares  # 3 was least recently used
(16, 25, False)
>>> @memoize("doctest cubes", maxsize=16)
... def cube(n):
...     return n ** 3
>>> cube(2), cube(2), cube.cache.stats()
(8, 8, {'hits': 1, 'misses': 1, 'size': 1, 'maxsize': 16})
>>> "doctest cubes" in cache_stats()
True
>>> clear_caches(); len(cube.cache), len(squares)
(0, 0)
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections import OrderedDict
from typing import Any, Callable, NamedTuple, TypeVar

__all__ = ["BoundedCache", "ByIdentity", "CacheInfo", "cache_stats", "clear_caches", "memoize"]

T = TypeVar("T")
_MISSING = object()

#: Every registered cache, by name (weakly: a cache nobody holds is gone).
_REGISTRY: "weakref.WeakValueDictionary[str, BoundedCache]" = weakref.WeakValueDictionary()
_REGISTRY_LOCK = threading.Lock()


class CacheInfo(NamedTuple):
    """What ``functools.lru_cache``'s ``cache_info()`` gave, for callers that read it."""

    hits: int
    misses: int
    maxsize: int
    currsize: int


class BoundedCache:
    """A least-recently-used map of at most ``maxsize`` entries, registered by ``name``.

    With ``register`` (the default) :func:`clear_caches` clears it and
    :func:`cache_stats` reports it under ``name``; a second live cache with the
    same name is reported as ``"name (2)"``. Caches owned by another object (one
    per :class:`~planner.redistribution.state.Pieces`) pass ``register=False``.

    Thread-safe enough for the planner: updates take a lock, lookups do not, and
    the function of :meth:`get_or_compute` runs outside the lock (it may use the
    same cache), so two threads may both compute a missing value; both get an
    equal result and one is kept.
    """

    __slots__ = ("name", "maxsize", "hits", "misses", "_data", "_lock", "__weakref__")

    def __init__(self, name: str, maxsize: int, register: bool = True):
        if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:
            raise ValueError(f"cache {name!r}: maxsize must be a positive int, not {maxsize!r}")
        self.name = name
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._data: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        if register:
            _register(self)

    def __repr__(self) -> str:
        return f"BoundedCache({self.name!r}, maxsize={self.maxsize}, size={len(self._data)})"

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def get(self, key: Any, default: Any = None) -> Any:
        """The value of ``key`` (now the most recently used), or ``default``."""
        value = self._data.get(key, _MISSING)
        if value is _MISSING:
            self.misses += 1
            return default
        self.hits += 1
        try:
            self._data.move_to_end(key)
        except KeyError:  # another thread evicted it meanwhile
            pass
        return value

    def put(self, key: Any, value: T) -> T:
        """Store ``value`` under ``key``, evicting the least recently used entry if full; returns ``value``."""
        data = self._data
        with self._lock:
            data[key] = value
            data.move_to_end(key)
            while len(data) > self.maxsize:
                data.popitem(last=False)
        return value

    def get_or_compute(self, key: Any, fn: Callable[..., T], *args: Any) -> T:
        """The value of ``key``; on a miss ``fn(*args)``, stored (exceptions are not cached)."""
        value = self._data.get(key, _MISSING)
        if value is _MISSING:
            self.misses += 1
            return self.put(key, fn(*args))
        self.hits += 1
        try:
            self._data.move_to_end(key)
        except KeyError:
            pass
        return value

    def clear(self) -> None:
        """Forget every entry and reset the hit and miss counts."""
        with self._lock:
            self._data.clear()
            self.hits = 0
            self.misses = 0

    def stats(self) -> dict[str, int]:
        """``{"hits", "misses", "size", "maxsize"}`` since the last :meth:`clear`."""
        return {"hits": self.hits, "misses": self.misses, "size": len(self._data), "maxsize": self.maxsize}


class ByIdentity:
    """Values worked out once per shared object within one step (a model's build, its ILP), keyed by the object's
    identity and a few hashable extras: for objects that many places share and that cost more to hash than to
    look up (identical layers' candidate tuples, cost tables). Each entry keeps its object, so an identity freed
    and reused by another object is never read as the first. Not a registered cache: it lives as long as the step.

    >>> memo, calls = ByIdentity(), []
    >>> table = [1.0, 2.0]
    >>> memo.get(table, lambda: calls.append(1) or sum(table)), memo.get(table, lambda: 0.0), len(calls)
    (3.0, 3.0, 1)
    >>> memo.get([1.0, 2.0], lambda: -1.0)  # an equal list is another object
    -1.0
    """

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict = {}

    def get(self, obj: Any, compute: Callable[[], T], *extra: Any) -> T:
        """``compute()`` for ``obj`` (and ``extra``), computed the first time only."""
        key = (id(obj), *extra)
        hit = self._entries.get(key)
        if hit is None or hit[0] is not obj:
            hit = self._entries[key] = (obj, compute())
        return hit[1]


def _register(cache: BoundedCache) -> None:
    with _REGISTRY_LOCK:
        name, n = cache.name, 1
        while name in _REGISTRY:  # e.g. a module imported twice under two names
            n += 1
            name = f"{cache.name} ({n})"
        _REGISTRY[name] = cache


class _HashedKey(list):
    """An argument tuple whose hash is computed once: a lookup hashes its key twice (find it,
    mark it recently used), and hashing shardings and clusters is not cheap."""

    __slots__ = ("hashvalue",)

    def __hash__(self) -> int:  # type: ignore[override]
        return self.hashvalue


def hashed_key(items: tuple) -> _HashedKey:
    """``items`` as a cache key whose hash is computed once (a lookup hashes its key twice)."""
    key = _HashedKey(items)
    key.hashvalue = hash(items)
    return key


_KWARGS = object()  # separates positional from keyword arguments in a key


def memoize(name: str, maxsize: int) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Cache a function of hashable arguments in a registered :class:`BoundedCache`.

    The wrapper exposes ``.cache`` (the :class:`BoundedCache`), ``.cache_clear()``
    and ``.cache_info()`` (hits, misses, maxsize, currsize). Exceptions are not
    cached. Equal arguments passed positionally and by keyword are distinct keys.
    """

    def decorate(fn: Callable[..., T]) -> Callable[..., T]:
        cache = BoundedCache(name, maxsize)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> T:
            if kwargs:
                key = hashed_key(args + (_KWARGS,) + tuple(sorted(kwargs.items())))
                return cache.get_or_compute(key, functools.partial(fn, *args, **kwargs))
            return cache.get_or_compute(hashed_key(args), fn, *args)

        def cache_info() -> CacheInfo:
            return CacheInfo(cache.hits, cache.misses, cache.maxsize, len(cache))

        wrapper.cache = cache  # type: ignore[attr-defined]
        wrapper.cache_clear = cache.clear  # type: ignore[attr-defined]
        wrapper.cache_info = cache_info  # type: ignore[attr-defined]
        return wrapper

    return decorate


def clear_caches(*names: str) -> None:
    """Clear every registered cache, or only those ``names`` names (:func:`cache_stats` lists them): the
    next planning run starts cold (same results, slower). An unknown name is a KeyError."""
    with _REGISTRY_LOCK:
        caches = [_REGISTRY[n] for n in names] if names else list(_REGISTRY.values())
    for cache in caches:
        cache.clear()


def cache_stats() -> dict[str, dict[str, int]]:
    """Per registered cache name: its :meth:`BoundedCache.stats` (hits, misses, size, maxsize)."""
    with _REGISTRY_LOCK:
        items = sorted(_REGISTRY.items())
    return {name: cache.stats() for name, cache in items}
