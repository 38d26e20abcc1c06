"""The ILP: brute-force optimum on random small problems, shrinking, infeasibility, limits, solvers."""

import itertools
import re
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pulp
import pytest

from costmodels.units import format_bytes

from planner.api import plan
from planner.errors import PlanningError
from planner.progress import Progress
from planner.searches import elimination, ilp
from tests.searches.brute_force import brute_force
from planner.searches.ilp import IlpResult, SolverFailed, solve_ilp
from planner.model.problem import Edge, Node, SearchProblem

MiB = 2**20
FAMILIES = ("chain", "tree", "dag", "layers")


# -- random problems -----------------------------------------------------------------------

def random_problem(seed: int, family: str) -> SearchProblem:
    """A small problem of one family; costs in µs-ms, memory in whole MiB, budgets at half MiB."""
    rng = np.random.default_rng(seed)
    if family == "layers":
        return _layered_problem(rng)
    sizes = [int(rng.integers(1, 5)) for _ in range(int(rng.integers(3, 7)))]
    nodes = [_node(rng, f"n{i}", n) for i, n in enumerate(sizes)]
    for i in range(1, len(nodes)):
        if rng.random() < 0.3:
            parent = int(rng.integers(0, i))
            nodes[i] = replace(nodes[i], follows=parent, follow_map=rng.integers(0, sizes[i], sizes[parent]))
    pairs = []
    for v in range(1, len(sizes)):
        pairs.append((int(rng.integers(0, v)) if family == "tree" else v - 1, v))
        if family == "dag" and v >= 2 and rng.random() < 0.6:
            pairs.append((v - 2, v))  # a diamond with (v-2, v-1), (v-1, v)
    edges = tuple(_class_edge(rng, u, v, sizes[u], sizes[v]) for u, v in pairs)
    same = ()
    if rng.random() < 0.4:
        a, b = (int(i) for i in rng.choice(len(sizes), 2, replace=False))
        same = ((a, rng.integers(0, 2, sizes[a]), b, rng.integers(0, 2, sizes[b])),)
    return SearchProblem(tuple(nodes), edges, same, _budget(rng, nodes), _fixed(rng, nodes))


def _layered_problem(rng) -> SearchProblem:
    """2-3 layers of the same 2-4 signatures (costs differ per layer), chained, with a residual edge."""
    layers, width = int(rng.integers(2, 4)), int(rng.integers(2, 5))
    sizes = [int(rng.integers(2, 4)) for _ in range(width)]
    follower = width - 1 if width > 2 and rng.random() < 0.5 else None
    follow_map = rng.integers(0, sizes[-1], sizes[0])
    nodes, edges = [], []
    for layer in range(layers):
        base = layer * width
        for k in range(width):
            node = _node(rng, f"layer{layer}.n{k}", sizes[k], layer=(f"n{k}", layer))
            if k == follower:
                node = replace(node, follows=base, follow_map=follow_map)
            nodes.append(node)
            if base + k:
                edges.append(_class_edge(rng, base + k - 1, base + k, nodes[base + k - 1].n, sizes[k]))
        if layer:
            edges.append(_class_edge(rng, base - width, base, sizes[0], sizes[0]))
    same = ()
    if rng.random() < 0.3:
        same = ((0, rng.integers(0, 2, sizes[0]), len(nodes) - 1, rng.integers(0, 2, sizes[-1])),)
    return SearchProblem(tuple(nodes), tuple(edges), same, _budget(rng, nodes), _fixed(rng, nodes))


def _node(rng, name, n, layer=None) -> Node:
    cost = rng.integers(0, 20, n) * 1e-6 if rng.random() < 0.5 else rng.random(n) * 1e-3
    return Node(name, cost, rng.integers(1, 64, n) * MiB, layer=layer)


def _class_edge(rng, u, v, n_u, n_v) -> Edge:
    """An edge in class form: several candidates usually share a class."""
    u_classes, v_classes = int(rng.integers(1, n_u + 1)), int(rng.integers(1, n_v + 1))
    shape = (u_classes, v_classes)
    cost = rng.integers(0, 10, shape) * 1e-6 if rng.random() < 0.5 else rng.random(shape) * 1e-3
    return Edge(u, v, rng.integers(0, u_classes, n_u), rng.integers(0, v_classes, n_v), cost)


def _budget(rng, nodes):
    """None, or half a MiB off every reachable total, so no total sits within solver tolerance of it."""
    if rng.random() < 0.5:
        return None
    low = sum(int(node.memory.min()) for node in nodes) // MiB
    high = sum(int(node.memory.max()) for node in nodes) // MiB
    return (int(rng.integers(low, high + 1)) + 0.5) * MiB


def _fixed(rng, nodes):
    if rng.random() >= 0.3:
        return {}
    i = int(rng.integers(0, len(nodes)))
    return {i: int(rng.integers(0, nodes[i].n))}


# -- references ----------------------------------------------------------------------------

def tied(problem: SearchProblem) -> SearchProblem:
    """``problem`` with layer tying written as ``same`` groups (equal candidates), for brute force."""
    groups = {}
    for i, node in enumerate(problem.nodes):
        if node.layer is not None and node.follows is None:
            groups.setdefault((node.layer[0], node.n), []).append(i)
    same = list(problem.same)
    for members in groups.values():
        head = min(members, key=lambda r: (problem.nodes[r].layer[1], r))
        same += [(head, np.arange(problem.nodes[head].n), r, np.arange(problem.nodes[r].n))
                 for r in members if r != head]
    return replace(problem, same=tuple(same))


def optimum(problem: SearchProblem, *, shrink: bool):
    """Brute force's optimum of what ``solve_ilp`` solves: tied layers if feasible, else untied; None if none."""
    candidates = (tied(problem), problem) if shrink else (problem,)
    for candidate in candidates:
        try:
            return brute_force(candidate)[1]
        except PlanningError:
            continue
    return None


def assert_optimal(result: IlpResult, problem: SearchProblem, expected: float):
    assert len(result.choice) == len(problem.nodes)
    assert problem.feasible(result.choice)
    assert result.objective == problem.objective(result.choice)
    assert result.objective == pytest.approx(expected, rel=1e-9, abs=1e-15)
    assert result.report.optimal and result.report.gap is not None and result.report.gap <= 1e-9


def hard_problem(count=40, n=10, classes=4, seed=0) -> SearchProblem:
    """Random dense class costs with skip edges: a problem no solver closes instantly."""
    rng = np.random.default_rng(seed)
    nodes = tuple(Node(f"n{i}", rng.random(n) * 1e-3) for i in range(count))
    edges = tuple(Edge(i, j, rng.integers(0, classes, n), rng.integers(0, classes, n),
                       rng.random((classes, classes)) * 1e-3)
                  for i in range(count) for j in (i + 1, i + 2, i + 5) if j < count)
    return SearchProblem(nodes, edges)


# -- optimality ----------------------------------------------------------------------------

@pytest.mark.parametrize("shrink", [False, True], ids=["full", "shrunk"])
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("seed", range(50))
def test_highs_finds_the_brute_force_optimum(seed, family, shrink):
    check_against_brute_force(random_problem(seed, family), shrink)


def check_against_brute_force(problem, shrink, solver="highs"):
    """solve_ilp finds brute force's optimum of what it solves, or refuses when nothing is feasible."""
    expected = optimum(problem, shrink=shrink)
    if expected is None:
        with pytest.raises(PlanningError, match="no choice"):
            solve_ilp(problem, solver=solver, shrink=shrink)
    else:
        assert_optimal(solve_ilp(problem, solver=solver, shrink=shrink), problem, expected)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("seed", range(12))
def test_cbc_and_highs_agree_on_the_optimum(seed, family):
    problem = random_problem(seed, family)
    expected = optimum(problem, shrink=True)
    if expected is None:
        for solver in ("highs", "cbc"):
            with pytest.raises(PlanningError, match="no choice"):
                solve_ilp(problem, solver=solver)
        return
    highs, cbc = solve_ilp(problem, solver="highs"), solve_ilp(problem, solver="cbc")
    assert (highs.report.name, cbc.report.name) == ("HiGHS", "CBC")
    assert_optimal(highs, problem, expected)
    assert_optimal(cbc, problem, expected)


def test_tiny_costs_are_optimised_exactly():
    rng = np.random.default_rng(7)
    nodes = tuple(Node(f"n{i}", rng.random(3) * 1e-9) for i in range(5))
    edges = tuple(Edge.from_matrix(i, i + 1, rng.random((3, 3)) * 1e-9) for i in range(4))
    problem = SearchProblem(nodes, edges)
    assert_optimal(solve_ilp(problem), problem, brute_force(problem)[1])


def test_docstring_example_result():
    p = SearchProblem(nodes=(Node("a", np.array([0.0, 1.0])), Node("b", np.array([0.0, 0.0]))),
                      edges=(Edge.from_matrix(0, 1, np.array([[5.0, 0.0], [0.0, 5.0]])),))
    result = solve_ilp(p)
    assert (result.choice, result.objective) == ((0, 1), 0.0)
    assert result.report.status == "Optimal" and result.report.nodes_solved == 2


def test_empty_problem():
    result = solve_ilp(SearchProblem(()))
    assert (result.choice, result.objective, result.report.variables) == ((), 0.0, 0)


def test_same_problem_same_choice_even_with_ties():
    flat = SearchProblem(tuple(Node(f"n{i}", np.zeros(4)) for i in range(6)),
                         tuple(Edge.from_matrix(i, i + 1, np.zeros((4, 4))) for i in range(5)))
    for solver in ("highs", "cbc"):
        first = solve_ilp(flat, solver=solver).choice
        assert all(solve_ilp(flat, solver=solver).choice == first for _ in range(3))
    problem = random_problem(3, "dag")
    assert len({solve_ilp(problem).choice for _ in range(3)}) == 1


# -- infeasibility and errors ------------------------------------------------------------------

def _memory_chain(budget, **kw):
    nodes = tuple(Node(f"n{i}", np.array([0.0, 1e-3]), np.array([4 * MiB, 2 * MiB])) for i in range(3))
    return SearchProblem(nodes, (Edge.from_matrix(0, 1, np.ones((2, 2))),), memory_budget=budget, **kw)


def test_budget_below_every_choice_names_the_budget_and_the_least_memory():
    # the least memory: three nodes whose smallest candidate takes 2 MiB each
    budget, least = format_bytes(5 * MiB), format_bytes(3 * 2 * MiB)
    with pytest.raises(PlanningError, match=re.escape(f"memory budget of {budget} per device: every choice "
                                                      f"needs at least {least}")):
        solve_ilp(_memory_chain(5 * MiB))


@pytest.mark.parametrize("solver", ["auto", "highs", "cbc"])
def test_budget_infeasible_with_the_fixed_candidates_is_a_planning_error(solver):
    # every solver's proof of infeasibility (CBC's log says so; a CBC stopped on its time limit without a solution
    # is a SolverFailed, below)
    with pytest.raises(PlanningError, match="fixed candidates together with the memory budget") as info:
        solve_ilp(_memory_chain(7 * MiB, fixed={0: 0, 1: 0}), solver=solver)
    assert not isinstance(info.value, SolverFailed)


def test_conflicting_fixed_and_same_groups_raise():
    nodes = (Node("a", np.zeros(2)), Node("b", np.zeros(2)))
    same = ((0, np.array([0, 1]), 1, np.array([0, 1])),)
    for shrink in (False, True):
        with pytest.raises(PlanningError, match="shard_as groups.*fixed"):
            solve_ilp(SearchProblem(nodes, same=same, fixed={0: 0, 1: 1}), shrink=shrink)


def test_fixed_follower_no_parent_candidate_reaches_is_infeasible():
    nodes = (Node("a", np.zeros(2)), Node("b", np.zeros(3), follows=0, follow_map=np.array([0, 1])))
    with pytest.raises(PlanningError, match="no choice satisfies the fixed candidates"):
        solve_ilp(SearchProblem(nodes, fixed={1: 2}))


def test_fixed_candidate_out_of_range_raises():
    with pytest.raises(PlanningError, match="'a' is fixed to candidate 3, but has 2 candidates"):
        solve_ilp(SearchProblem((Node("a", np.zeros(2)),), fixed={0: 3}))


def test_follow_cycle_raises():
    nodes = (Node("a", np.zeros(2), follows=1, follow_map=np.arange(2)),
             Node("b", np.zeros(2), follows=0, follow_map=np.arange(2)))
    with pytest.raises(PlanningError, match="cycle"):
        solve_ilp(SearchProblem(nodes))


def test_unknown_solver_raises():
    with pytest.raises(PlanningError, match="unknown ILP solver 'gurobi'; choose one of auto, elimination, highs, cbc"):
        solve_ilp(SearchProblem(()), solver="gurobi")


def test_highs_requested_without_highspy_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(ilp, "_highs_available", lambda: False)
    with pytest.raises(PlanningError, match="pip install highspy"):
        solve_ilp(random_problem(0, "chain"), solver="highs")
    monkeypatch.setattr(elimination, "MAX_CELLS", 1)  # auto's exact solver refuses: the MIP solver there is CBC
    assert solve_ilp(random_problem(1, "chain")).report.name == "CBC"


def test_cbc_requested_without_a_binary_raises(monkeypatch):
    monkeypatch.setattr(ilp, "_cbc_path", lambda: None)
    with pytest.raises(PlanningError, match="no CBC binary"):
        solve_ilp(random_problem(0, "chain"), solver="cbc")


def test_auto_solves_by_elimination_and_falls_back_to_highs_where_its_tables_are_too_large(monkeypatch):
    problem = random_problem(0, "chain")
    assert solve_ilp(problem).report.name == "elimination"
    monkeypatch.setattr(elimination, "MAX_CELLS", 1)
    assert solve_ilp(problem).report.name == "HiGHS"


def test_elimination_alone_refuses_a_model_whose_tables_are_too_large(monkeypatch):
    monkeypatch.setattr(elimination, "MAX_CELLS", 1)
    with pytest.raises(SolverFailed, match="elimination cannot solve this model: .* above its limit of 1; use "
                                           "--solver highs"):
        solve_ilp(random_problem(0, "chain"), solver="elimination")


def test_auto_falls_back_to_highs_where_the_memory_budget_binds():
    # the cheapest choice (candidate 0 everywhere) needs 3 x 4 MiB, over the 7 MiB budget; any candidate 0
    # makes 4 + 2 + 2 = 8 MiB, so the optimum under the budget is candidate 1 everywhere (as brute force says)
    problem = _memory_chain(7 * MiB)
    result = solve_ilp(problem)
    assert result.report.name == "HiGHS"
    assert_optimal(result, problem, brute_force(problem)[1])
    with pytest.raises(SolverFailed, match="memory budget"):
        solve_ilp(problem, solver="elimination")
    unbound = solve_ilp(replace(problem, memory_budget=64 * MiB))
    assert unbound.report.name == "elimination"  # the optimum fits: elimination's answer stands


@pytest.mark.parametrize("shrink", [False, True], ids=["full", "shrunk"])
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("seed", range(50))
def test_elimination_finds_the_brute_force_optimum(seed, family, shrink):
    # elimination alone takes no binding memory budget (auto hands those to HiGHS: tested above)
    check_against_brute_force(replace(random_problem(seed, family), memory_budget=None), shrink, "elimination")


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("seed", range(25))
def test_auto_finds_the_brute_force_optimum_with_memory_budgets(seed, family):
    check_against_brute_force(random_problem(seed, family), True, "auto")


@pytest.mark.parametrize("seed", range(3))
def test_elimination_and_highs_agree_on_a_hard_problem(seed):
    problem = hard_problem(seed=seed)
    exact, highs = solve_ilp(problem, solver="elimination"), solve_ilp(problem, solver="highs")
    assert highs.report.optimal and exact.report.optimal
    assert exact.objective == pytest.approx(highs.objective, rel=1e-9)


def test_solver_failed_is_a_planning_error_so_callers_can_fall_back():
    assert issubclass(SolverFailed, PlanningError)


# -- shrinking -----------------------------------------------------------------------------

def _layers(count, *, layer_hints=True, width=3, n=4):
    """``count`` identical layers of a ``width``-node chain, chained by their last node."""
    rng = np.random.default_rng(0)
    costs = [rng.random(n) * 1e-3 for _ in range(width)]
    tables = [rng.random((2, 2)) * 1e-3 for _ in range(width)]
    classes = [rng.integers(0, 2, n) for _ in range(width)]
    nodes, edges = [], []
    for layer in range(count):
        for k in range(width):
            i = len(nodes)
            nodes.append(Node(f"l{layer}.n{k}", costs[k], layer=(f"n{k}", layer) if layer_hints else None))
            if i:
                edges.append(Edge(i - 1, i, classes[(k - 1) % width], classes[k], tables[k]))
    return SearchProblem(tuple(nodes), tuple(edges))


def test_layer_tying_solves_one_layer_for_all():
    untied = solve_ilp(_layers(6, layer_hints=False), solver="highs")
    tied_result = solve_ilp(_layers(6), solver="highs")
    assert (untied.report.nodes_solved, tied_result.report.nodes_solved) == (18, 3)
    assert tied_result.report.variables < untied.report.variables / 3
    assert tied_result.report.constraints < untied.report.constraints / 3
    assert tied_result.choice[:3] * 6 == tied_result.choice
    problem = _layers(6)
    best = min(problem.objective(layer * 6) for layer in itertools.product(range(4), repeat=3))
    assert tied_result.objective == pytest.approx(best, rel=1e-9)


def test_layers_fixed_differently_are_solved_untied():
    problem = replace(_layers(2), fixed={0: 0, 3: 1})
    result = solve_ilp(problem)
    assert result.report.nodes_solved == 6
    assert_optimal(result, problem, brute_force(problem)[1])


def test_folded_followers_get_no_variables():
    nodes = (Node("a", np.array([3.0, 0.0, 1.0])),
             Node("b", np.array([0.0, 5.0]), follows=0, follow_map=np.array([0, 1, 0])),
             Node("c", np.array([0.0, 0.0, 2.0]), follows=1, follow_map=np.array([2, 0])),
             Node("d", np.array([0.0, 1.0])))
    edges = (Edge.from_matrix(2, 3, np.array([[0.0, 4.0], [4.0, 0.0], [1.0, 0.0]])),)
    problem = SearchProblem(nodes, edges)
    full, shrunk = solve_ilp(problem, shrink=False, solver="highs"), solve_ilp(problem, shrink=True, solver="highs")
    assert (full.report.nodes_solved, shrunk.report.nodes_solved) == (4, 2)
    assert shrunk.report.variables < full.report.variables
    for result in (full, shrunk):
        assert_optimal(result, problem, brute_force(problem)[1])


def test_edge_to_own_follower_and_separable_edges_need_no_edge_variables():
    nodes = (Node("a", np.zeros(3)),
             Node("b", np.zeros(3), follows=0, follow_map=np.array([1, 2, 0])),
             Node("c", np.zeros(2)))
    edges = (Edge.from_matrix(0, 1, np.arange(9.0).reshape(3, 3)),  # folds into a's unary cost
             Edge(0, 2, np.array([0, 0, 0]), np.array([0, 1]), np.array([[1.0, 2.0]])))  # one class: unary
    problem = SearchProblem(nodes, edges)
    result = solve_ilp(problem, solver="highs")
    assert result.report.variables == 3 + 2
    assert_optimal(result, problem, brute_force(problem)[1])


def test_parallel_edges_between_tied_layers_share_edge_variables():
    one, six = solve_ilp(_layers(2), solver="highs"), solve_ilp(_layers(6), solver="highs")
    assert six.report.variables == one.report.variables
    assert six.report.constraints == one.report.constraints


# -- time limits ----------------------------------------------------------------------------

@pytest.mark.parametrize("solver,limit", [("highs", 0.05), ("cbc", 0.1)])
def test_time_limit_gives_a_feasible_answer_with_its_gap_or_solver_failed(solver, limit):
    problem = hard_problem()
    try:
        result = solve_ilp(problem, solver=solver, time_limit=limit)
    except SolverFailed as failed:
        assert failed.report is not None and not failed.report.optimal and failed.report.gap is None
        assert str(failed).startswith(f"{failed.report.name} stopped without a solution: ")
        return
    assert problem.feasible(result.choice)
    assert result.objective == problem.objective(result.choice)
    if not result.report.optimal:
        assert result.report.gap is not None and result.report.gap > 0


# -- PuLP ------------------------------------------------------------------------------------

def test_installed_pulp_is_in_the_supported_range():
    low, high = ilp.SUPPORTED_PULP
    assert low <= int(pulp.__version__.split(".")[0]) < high


def test_building_and_solving_raise_no_deprecation_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for solver in ("highs", "cbc"):
            solve_ilp(random_problem(2, "dag"), solver=solver)
    assert [w for w in caught if issubclass(w.category, DeprecationWarning)] == []


def test_the_time_limit_counts_building_the_model_and_the_solver_never_starts_past_it(monkeypatch):
    """time_limit bounds the whole solve_ilp call: with no time left once the cost tables are read
    and the model built, the solver is not started and the call fails with a report saying so."""
    import planner.searches.ilp as ilp

    def never(*args, **kwargs):
        raise AssertionError("the solver started after the time limit")

    monkeypatch.setattr(ilp, "_run_highs", never)
    monkeypatch.setattr(ilp, "_run_cbc", never)
    with pytest.raises(SolverFailed) as failed:
        solve_ilp(hard_problem(), solver="highs", time_limit=1e-9)
    assert failed.value.report.status == "not run" and not failed.value.report.optimal
    assert "before it started" in str(failed.value)


# -- every config: elimination's optimum is HiGHS's ------------------------------------------

_CONFIGS = sorted(p.name for p in (Path(__file__).parents[2] / "configs").glob("*.yaml"))
_LARGE_CONFIGS = ("gpt2_small.yaml", "transformer_block.yaml")  # HiGHS takes seconds on these


def _optimum_by(path: Path, training: bool, solver: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return plan(str(path), search="ilp", training=training, solver=solver)


@pytest.mark.parametrize("training", [False, True], ids=["forward", "training"])
@pytest.mark.parametrize("config", [pytest.param(c, marks=pytest.mark.slow) if c in _LARGE_CONFIGS else c
                                    for c in _CONFIGS])
def test_elimination_and_highs_give_the_same_optimum_on_every_config(config, training):
    path = Path(__file__).parents[2] / "configs" / config
    exact, highs = _optimum_by(path, training, "elimination"), _optimum_by(path, training, "highs")
    assert highs.solver.name == "HiGHS" and highs.solver.optimal
    assert exact.solver.name == "elimination" and exact.solver.optimal
    assert exact.totals.objective == pytest.approx(highs.totals.objective, rel=1e-9, abs=0.0)


class _Heard(Progress):
    def __init__(self):
        self.calls = []

    def begin(self, label, total=None):
        self.calls.append(("begin", label))

    def detail(self, text):
        self.calls.append(("detail", text))


def test_progress_hears_the_solver_that_runs_and_highs_bound_and_gap():
    from costmodels.units import format_seconds

    problem = _memory_chain(None)
    heard = _Heard()
    result = solve_ilp(problem, solver="highs", progress=heard)
    assert [c for c in heard.calls if c[0] == "begin"] == [("begin", "ILP: reading the cost tables"),
                                                            ("begin", "ILP solve (HiGHS)")]
    details = [text for kind, text in heard.calls if kind == "detail"]
    assert details[:2] == ["building the model", "solving"]
    # proven optimal: HiGHS's best bound is the optimum (the objective, in seconds) and its gap 0
    assert details[-1] == f"best bound {format_seconds(result.objective)}, gap 0.00%"
    heard = _Heard()
    solve_ilp(problem, solver="auto", progress=heard)  # auto: variable elimination solves it, no MIP
    assert ("begin", "ILP solve (elimination)") in heard.calls and not any("HiGHS" in c[1] for c in heard.calls)


def test_a_fanout_table_charges_each_layout_some_participant_needs_once():
    # by its definition, per assignment of candidates: the producer's row of costs, summed over the layouts the
    # producer (here also a reader) or any reader needs; the table read through its classes must give exactly that
    # (the table keys its cells by one integer where the layouts and producer classes fit 63 bits, else by bytes:
    # both ways are drawn)
    rng = np.random.default_rng(5)
    for k in range(20):
        layouts = int(rng.integers(0, 12)) if k % 2 else int(rng.integers(60, 70))  # none: nothing to charge
        u_class = rng.integers(0, 3, size=int(rng.integers(1, 5)))
        cost = rng.random((int(u_class.max()) + 1, layouts))
        owners = sorted(int(o) for o in rng.choice([0, 2, 3, 4], size=int(rng.integers(1, 4)), replace=False))
        readers = tuple((o, rng.random((len(u_class) if o == 0 else int(rng.integers(1, 5)), layouts)) < 0.3)
                        for o in owners)
        fanout = ilp._ClassFanout(0, u_class, readers, cost)
        factor = ilp._fanout_factor(fanout)
        need = dict(readers)
        sizes = [len(u_class) if o == 0 else need[o].shape[0] for o in factor.scope]
        for choice in itertools.product(*(range(n) for n in sizes)):
            picked = dict(zip(factor.scope, choice))
            needed = np.zeros(layouts, dtype=bool)
            for o, mask in need.items():
                needed |= mask[picked[o]]
            expected = (needed * cost[u_class[picked[0]]]).sum()
            cell = tuple(factor.candidates(a, n)[k] for a, (n, k) in enumerate(zip(sizes, choice)))
            assert factor.table[cell] == expected
