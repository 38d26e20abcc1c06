"""The planner's caches: one public call clears them all, each is bounded, results never depend on them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import planner
from planner.caches import BoundedCache, cache_stats, clear_caches, memoize

ROOT = Path(__file__).resolve().parents[1]


def test_clear_caches_is_the_public_one():
    assert planner.clear_caches is clear_caches
    assert "clear_caches" in planner.__all__


def test_clear_caches_empties_every_registered_cache():
    from planner.api import plan

    plan(ROOT / "configs" / "ffn.yaml")  # fills the planner's own caches
    mine = BoundedCache("test: a registered cache", maxsize=8)
    mine.put("k", 1)
    stats = cache_stats()
    for name in ("op sharding rules", "strategy enumeration", "redistribution plans", "redistribution pieces",
                 "test: a registered cache"):
        assert stats[name]["size"] > 0, name
    clear_caches()
    after = cache_stats()
    assert set(after) >= set(stats)
    assert all(s["size"] == 0 and s["hits"] == 0 and s["misses"] == 0 for s in after.values()), after
    assert "k" not in mine


def test_unregistered_cache_is_left_alone():
    own = BoundedCache("test: owned", maxsize=4, register=False)
    own.put(1, "one")
    clear_caches()
    assert own.get(1) == "one"
    assert "test: owned" not in cache_stats()


def test_bounded_cache_evicts_least_recently_used():
    cache = BoundedCache("test: lru", maxsize=3, register=False)
    for k in "abc":
        cache.put(k, k.upper())
    assert cache.get("a") == "A"  # a is now the most recently used; b the least
    cache.put("d", "D")
    assert "b" not in cache and len(cache) == 3
    assert [k for k in "acd" if k in cache] == ["a", "c", "d"]
    assert cache.get_or_compute("c", lambda: "never") == "C"  # c is now recent; a the least
    assert cache.put("e", "E") == "E"
    assert "a" not in cache
    assert cache.get("a", "missing") == "missing"
    assert cache.stats() == {"hits": 2, "misses": 1, "size": 3, "maxsize": 3}
    cache.clear()
    assert len(cache) == 0 and cache.stats()["hits"] == 0


def test_bounded_cache_caches_none_and_not_exceptions():
    cache = BoundedCache("test: none", maxsize=2, register=False)
    calls = []
    assert cache.get_or_compute("x", lambda: calls.append(1)) is None
    assert cache.get_or_compute("x", lambda: calls.append(1)) is None
    assert calls == [1]

    def boom():
        raise KeyError("no")

    with pytest.raises(KeyError):
        cache.get_or_compute("y", boom)
    assert "y" not in cache


@pytest.mark.parametrize("maxsize", [0, -1, None, 2.0, True])
def test_bounded_cache_needs_a_positive_bound(maxsize):
    with pytest.raises(ValueError, match="maxsize"):
        BoundedCache("test: unbounded", maxsize=maxsize, register=False)


def test_memoize_keys_by_value_and_is_registered():
    calls = []

    @memoize("test: memoized add", maxsize=2)
    def add(a, b=0):
        calls.append((a, b))
        return a + b

    assert add(1, 2) == add(1, 2) == 3
    assert add((1,), (2,)) == (1, 2)
    assert add(1, b=2) == 3  # keyword arguments are another key
    assert calls == [(1, 2), ((1,), (2,)), (1, 2)]
    assert len(add.cache) == 2  # bounded: (1, 2) positional was evicted
    assert add.cache_info().hits == 1 and add.cache_info().currsize == 2
    assert cache_stats()["test: memoized add"]["maxsize"] == 2
    add.cache_clear()
    assert len(add.cache) == 0


def test_same_name_twice_is_reported_twice():
    a = BoundedCache("test: twin", maxsize=2)
    b = BoundedCache("test: twin", maxsize=2)
    a.put(1, 1)
    b.put(1, 1)
    stats = cache_stats()
    assert stats["test: twin"]["size"] == stats["test: twin (2)"]["size"] == 1
    clear_caches()
    assert len(a) == len(b) == 0


def _without_times(value):
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if not (isinstance(k, str) and k.endswith("time_s"))}
    if isinstance(value, (list, tuple)):
        return [_without_times(v) for v in value]
    return value


def test_plans_are_identical_cold_and_warm():
    from planner.api import plan

    config = ROOT / "configs" / "ffn.yaml"
    clear_caches()
    cold = plan(config).to_dict()
    warm = plan(config).to_dict()
    clear_caches()
    cold_again = plan(config).to_dict()
    assert _without_times(cold) == _without_times(warm) == _without_times(cold_again)


_FUNCTOOLS_CACHE = re.compile(
    r"^\s*@(functools\.)?(lru_cache|cache)\b|functools\.(lru_cache|cache)\(|^\s*from functools import[^\n]*\b(lru_cache|cache)\b",
    re.MULTILINE,
)


def test_every_lru_cache_is_registered():
    """No module of the planner or the cost models keeps a functools cache: every cache is a named,
    bounded BoundedCache that clear_caches() reaches."""
    sources = [p for d in ("planner", "costmodels") for p in sorted((ROOT / d).rglob("*.py"))]
    assert len(sources) > 20
    offenders = [str(p.relative_to(ROOT)) for p in sources if _FUNCTOOLS_CACHE.search(p.read_text())]
    assert offenders == []


def test_the_scan_sees_a_functools_cache():
    assert _FUNCTOOLS_CACHE.search("from functools import lru_cache\n")
    assert _FUNCTOOLS_CACHE.search("import x\n\n@functools.cache\ndef f(): pass\n")
    assert _FUNCTOOLS_CACHE.search("@lru_cache(maxsize=1)\ndef f(): pass\n")
    assert _FUNCTOOLS_CACHE.search("g = functools.lru_cache(maxsize=8)(f)\n")
    assert not _FUNCTOOLS_CACHE.search("from functools import wraps\n# not functools.lru_cache: memoize\n")


def test_clear_caches_by_name_clears_only_those():
    from planner.caches import cache_stats, clear_caches
    from planner.ir import parse_mesh, parse_sharding
    from planner.redistribution import reshard

    mesh = parse_mesh('@m = <["x"=2, "y"=4]>')
    reshard((64, 32), "f32", parse_sharding('[{"x"}, {"y"}]', mesh), parse_sharding('[{"y"}, {"x"}]', mesh))
    before = cache_stats()
    assert before["redistribution plans"]["size"] > 0
    clear_caches("redistribution plans")
    after = cache_stats()
    assert after["redistribution plans"]["size"] == 0
    kept = [n for n, s in before.items() if n != "redistribution plans" and s["size"] and after[n]["size"]]
    assert kept, "clearing one cache by name emptied the others too"
    with pytest.raises(KeyError):
        clear_caches("no such cache")


def test_meshes_and_clusters_built_apart_hash_alike_and_a_changed_one_is_another_key():
    # both key the planner's caches and hash once, when built: equal values must give equal hashes, and a
    # replaced field must give a new hash (dataclasses.replace builds anew)
    from dataclasses import replace

    from costmodels import load_cluster
    from planner.ir.mesh import Mesh

    a, b = Mesh.from_sizes("m", {"x": 2, "y": 4}), Mesh.from_sizes("m", {"x": 2, "y": 4})
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    c = Mesh.from_sizes("m", {"x": 4, "y": 2})
    assert c != a and len({a, c}) == 2
    one, two = load_cluster("h100"), load_cluster("h100")
    assert one == two and hash(one) == hash(two)
    other = replace(one, device_memory_bytes=one.device_memory_bytes // 2)
    assert other != one and len({one, other}) == 2 and hash(replace(other)) == hash(other)
