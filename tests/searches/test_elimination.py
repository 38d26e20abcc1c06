"""Variable elimination: the exact minimum of a sum of cost tables, checked against enumerating every assignment."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.searches.elimination import Factor, Infeasible, TooLarge, _least, minimise


def enumerate_minimum(sizes, factors):
    """The least total over every assignment (inf if all are forbidden), and the first assignment reaching it."""
    best, arg = np.inf, None
    for choice in itertools.product(*(range(n) for n in sizes)):
        total = sum(float(f.table[tuple(f.candidates(a, sizes[v])[choice[v]] for a, v in enumerate(f.scope))])
                    for f in factors)
        if total < best:
            best, arg = total, choice
    return best, arg


def total_of(sizes, factors, choice):
    return sum(float(f.table[tuple(f.candidates(a, sizes[v])[choice[v]] for a, v in enumerate(f.scope))])
               for f in factors)


@st.composite
def problems(draw):
    """Up to 6 variables of 1-4 candidates; up to 9 factors over 1-3 of them, in class form or not, some
    entries forbidden (inf)."""
    count = draw(st.integers(1, 6))
    sizes = [draw(st.integers(1, 4)) for _ in range(count)]
    factors = []
    for _ in range(draw(st.integers(0, 9))):
        scope = tuple(sorted(draw(st.sets(st.integers(0, count - 1), min_size=1, max_size=min(3, count)))))
        classes = None
        if draw(st.booleans()):
            classes = tuple(np.array(draw(st.lists(st.integers(0, 2), min_size=sizes[v], max_size=sizes[v])))
                            for v in scope)
            shape = tuple(int(c.max()) + 1 for c in classes)
        else:
            shape = tuple(sizes[v] for v in scope)
        cells = int(np.prod(shape))
        values = draw(st.lists(st.one_of(st.integers(0, 9).map(float), st.just(np.inf)) if draw(st.booleans())
                               else st.integers(0, 9).map(float), min_size=cells, max_size=cells))
        factors.append(Factor(scope, np.array(values).reshape(shape), classes))
    return sizes, factors


@settings(max_examples=300, deadline=None)
@given(problems())
def test_minimum_equals_enumerating_every_assignment(problem):
    sizes, factors = problem
    expected, _ = enumerate_minimum(sizes, factors)
    if not np.isfinite(expected):
        with pytest.raises(Infeasible):
            minimise(sizes, factors)
        return
    choice, value = minimise(sizes, factors)
    assert value == expected  # integer costs: sums are exact whatever the order
    assert total_of(sizes, factors, choice) == expected


def test_class_form_gives_what_the_expanded_table_gives():
    rng = np.random.default_rng(3)
    u_class, v_class = rng.integers(0, 3, 7), rng.integers(0, 2, 5)
    table = rng.random((3, 2))
    unary = [Factor((0,), rng.random(7)), Factor((1,), rng.random(5))]
    compact = minimise((7, 5), unary + [Factor((0, 1), table, (u_class, v_class))])
    expanded = minimise((7, 5), unary + [Factor((0, 1), table[np.ix_(u_class, v_class)])])
    assert compact == expanded


def test_ties_go_to_the_lowest_candidates():
    # every assignment costs 0: the answer is candidate 0 everywhere
    sizes = (3, 4, 2)
    factors = [Factor((0, 1), np.zeros((3, 4))), Factor((1, 2), np.zeros((4, 2)))]
    assert minimise(sizes, factors) == ((0, 0, 0), 0.0)


def test_a_ring_is_solved_exactly():
    # a cycle of 8 variables, each pair of neighbours paying 1 unless they differ: with 2 candidates an
    # even ring alternates at cost 0, and a unary charge on variable 0's candidate 0 picks the phase
    n = 8
    differ = np.array([[1.0, 0.0], [0.0, 1.0]])
    factors = [Factor(tuple(sorted((i, (i + 1) % n))), differ) for i in range(n)]
    factors.append(Factor((0,), np.array([0.5, 0.0])))
    choice, value = minimise((2,) * n, factors)
    assert value == 0.0 and choice == (1, 0, 1, 0, 1, 0, 1, 0)


def test_a_table_over_the_limit_is_refused_before_it_is_built():
    # a clique of 4 variables of 10 candidates: any first elimination builds 10 ** 4 cells
    factors = [Factor(pair, np.zeros((10, 10))) for pair in itertools.combinations(range(4), 2)]
    with pytest.raises(TooLarge) as info:
        minimise((10,) * 4, factors, max_cells=9_999)
    assert info.value.cells == 10_000
    assert minimise((10,) * 4, factors, max_cells=10_000)[1] == 0.0


def test_malformed_factors_are_rejected():
    with pytest.raises(ValueError, match="sorted and distinct"):
        Factor((1, 0), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="2-dimensional"):
        Factor((0, 1), np.zeros(2))
    with pytest.raises(ValueError, match="one class per candidate"):
        Factor((0,), np.zeros(2), (np.array([0, 2]),))
    with pytest.raises(ValueError, match="does not match the 3 candidates"):
        minimise((3,), [Factor((0,), np.zeros(2))])


def test_least_over_summed_parts_is_argmin_and_min_of_the_whole_table():
    # small integer costs give many equal minima: the first index among them wins, as argmin picks it;
    # parts of size 1 along an axis broadcast, inf entries (forbidden) lose to any finite one
    rng = np.random.default_rng(11)
    for _ in range(50):
        shape = tuple(int(n) for n in rng.integers(1, 5, size=int(rng.integers(1, 4))))
        parts = []
        for _ in range(int(rng.integers(1, 4))):
            own = tuple(n if rng.random() < 0.7 else 1 for n in shape)
            part = rng.integers(0, 3, size=own).astype(float)
            part[rng.random(own) < 0.1] = np.inf
            parts.append(part)
        table = np.broadcast_to(sum(parts[1:], parts[0]), shape)
        best, least = _least(parts, shape)
        assert np.array_equal(best, table.argmin(axis=0))
        assert np.array_equal(least, table.min(axis=0))
