"""Seed 002's FFN: BFS from the configured first MatMul reproduces MindSpore's strategies."""

from pathlib import Path

from planner.ir import parse_mesh
from planner.ir.layout import partial_groups
from planner.api import plan

FFN = Path(__file__).resolve().parents[2] / "configs" / "ffn.yaml"


def test_bfs_reproduces_the_seed_strategies():
    p = plan(FFN, search="bfs")
    strategies = {o.name: o.strategy.text() for o in p.ops}
    assert strategies == {
        "dense1.matmul": "((2, 1), (1, 4))",
        "dense1.add": "((2, 4), (4,))",
        "relu": "((2, 4),)",
        "dense2.matmul": "((2, 4), (4, 1))",
        "dense2.add": "((2, 4), (4,))",
    }


def test_second_matmul_is_reduced_over_the_seed_group_0_1_2_3():
    """The seed inserts AllReduce (group 0-1-2-3) + StridedSlice (32x64 -> 32x16) before the
    second Add; ours is the same reduction over the same groups fused into one ReduceScatter,
    which moves half the bytes and leaves each device the seed's 32x16 block."""
    p = plan(FFN, search="bfs")
    (row,) = p.reshards
    assert (row.tensor, row.producer, row.readers) == ("h4", "dense2.matmul", ("dense2.add",))
    (step,) = row.steps
    assert step.kind == "ReduceScatter" and [str(a) for a in step.axes] == ['"d":(2)4'] and list(step.dims) == [1]
    assert step.bytes_per_device == 3 * 32 * 16 * 4  # (p-1) blocks of 32x16 f32
    all_reduce_plus_slice = 2 * 3 * (32 * 64 // 4) * 4
    assert step.bytes_per_device * 2 == all_reduce_plus_slice
    # the reduction groups are the seed's group_ranks 0-1-2-3 (and 4-5-6-7)
    mesh = parse_mesh('@mesh = <["d"=8]>')
    from planner.ir.text import parse_sharding
    groups = partial_groups(parse_sharding(str(row.source), mesh))
    assert list(groups) == [0, 0, 0, 0, 1, 1, 1, 1]
    out = parse_sharding(str(row.destination), mesh)
    assert out.local_shape((64, 64)) == (32, 16)


def test_every_decision_traces_back_to_the_configured_matmul():
    p = plan(FFN, search="bfs")
    chain = p.explain("y")
    assert chain[-1].endswith("user: strategy ((2, 1), (1, 4)) given in the model")
    assert [row["source"] for row in p.table()] == ["user"] + ["propagated"] * 4
