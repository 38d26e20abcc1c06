"""Golden ``str(rule)`` of the rules users read most: matmul, einsum, reshape, gather."""

import pytest

from planner.rules import rule_for

GOLDEN = [
    ("matmul", [(8, 32), (32, 16)], {}, "([i,k],[k,j])->([i,j]) {i=8,j=16,k=32} reduction={k}"),
    ("matmul", [(32, 8), (32, 16)], {"transpose_a": True},
     "([k,i],[k,j])->([i,j]) {i=8,j=16,k=32} reduction={k}"),
    ("matmul", [(8, 32), (16, 32)], {"transpose_b": True},
     "([i,k],[j,k])->([i,j]) {i=8,j=16,k=32} reduction={k}"),
    ("matmul", [(4, 8, 32), (32, 16)], {}, "([a,i,k],[k,j])->([a,i,j]) {a=4,i=8,j=16,k=32} reduction={k}"),
    ("matmul", [(4, 1, 8, 32), (3, 32, 16)], {},
     "([a,1,i,k],[b,k,j])->([a,b,i,j]) {a=4,b=3,i=8,j=16,k=32} reduction={k}"),
    ("einsum", [(2, 8, 4), (2, 4, 16)], {"equation": "bij,bjk->bik"},
     "([b,i,j],[b,j,k])->([b,i,k]) {b=2,i=8,j=4,k=16} reduction={j}"),
    ("einsum", [(3, 4), (4, 5), (5, 2)], {"equation": "ij,jk,kl->il"},
     "([i,j],[j,k],[k,l])->([i,l]) {i=3,j=4,k=5,l=2} reduction={j,k}"),
    ("reshape", [(8,)], {"shape": [2, 4]}, "([ij])->([i,j]) {i=2,j=4}"),
    ("reshape", [(2, 4)], {"shape": [8]}, "([i,j])->([ij]) {i=2,j=4}"),
    ("reshape", [(4, 6)], {"shape": [8, 3]}, "([i,jk])->([ij,k]) {i=4,j=2,k=3}"),
    ("reshape", [(3, 2)], {"shape": [2, 3]}, "([i,j])->([k,l]) {i=3,j=2,k=2,l=3} need_replication={i,j,k,l}"),
    ("reshape", [(6, 4)], {"shape": [4, 6]},
     "([ij,k])->([il,m]) {i=2,j=3,k=4,l=2,m=6} need_replication={j,k,l,m}"),
    ("reshape", [(1, 8, 1)], {"shape": [2, 1, 4]}, "([1,ij,1])->([i,1,j]) {i=2,j=4}"),
    ("gather", [(50257, 768), (8, 1024)], {}, "([v,h],[i,j])->([i,j,h]) {h=768,i=8,j=1024,v=50257} reduction={v}"),
]


@pytest.mark.parametrize("op, shapes, attrs, text", GOLDEN, ids=[f"{g[0]}-{i}" for i, g in enumerate(GOLDEN)])
def test_rule_prints_compactly(op, shapes, attrs, text):
    from graphs.ops.registry import get_op
    out = get_op(op).infer(shapes, ["f32" if i == 0 or op != "gather" else "i32" for i in range(len(shapes))],
                           attrs)[0]
    assert str(rule_for(op, shapes, out, attrs)) == text
