"""One error hierarchy: every exception class lives in planner.errors, user and internal errors apart."""

import importlib
import inspect
import pkgutil

import pytest

import planner.errors as errors
from costmodels import (
    Link, all_gather_cost, compute_time_s, load_cluster, parameter_bytes, parse_quantity, slowest_link,
)

PACKAGES = ("planner", "costmodels", "graphs")

# Private control-flow signals that are raised and caught inside one module and never
# escape it; anything else must be defined in planner.errors.
PRIVATE_SIGNALS = {"planner.searches.ilp._Infeasible", "planner.model.explicit_types._Unsupported",
                   "planner.redistribution.xla_route._NoRoute", "planner.redistribution.xla_route._Unmodelled"}


def _modules():
    for name in PACKAGES:
        package = importlib.import_module(name)
        yield package
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{name}."):
            yield importlib.import_module(info.name)


def _exception_classes_defined_in(module):
    for _, cls in inspect.getmembers(module, inspect.isclass):
        if cls.__module__ == module.__name__ and issubclass(cls, BaseException) and not issubclass(cls, Warning):
            yield cls


def test_every_error_class_lives_in_planner_errors():
    stray = sorted(
        f"{cls.__module__}.{cls.__qualname__}"
        for module in _modules()
        if module is not errors
        for cls in _exception_classes_defined_in(module)
    )
    assert [name for name in stray if name not in PRIVATE_SIGNALS] == []


def test_old_homes_re_export_the_classes():
    from planner.gate import BaselineError, GateError
    from planner.searches.ilp import SolverFailed
    from planner.redistribution.engine import ReshardError

    assert (GateError, BaselineError, SolverFailed, ReshardError) == (
        errors.GateError, errors.BaselineError, errors.SolverFailed, errors.ReshardError)
    assert SolverFailed("timed out", report=None).report is None


def test_user_errors_and_internal_errors_are_distinct():
    members = [cls for _, cls in inspect.getmembers(errors, inspect.isclass) if issubclass(cls, Exception)]
    # warnings are issued (warnings.warn), never raised: one family of their own, beside the two error kinds
    said = {cls for cls in members if issubclass(cls, Warning)}
    assert said == {errors.ShardplanWarning, errors.ModelWarning, errors.PlanWarning}
    assert all(issubclass(cls, errors.ShardplanWarning) for cls in said)
    classes = [cls for cls in members if cls not in said]
    user = {cls for cls in classes if issubclass(cls, errors.ShardplanError)}
    internal = {cls for cls in classes if issubclass(cls, errors.InternalError)}
    assert user and internal and not user & internal
    assert user | internal == set(classes)  # no third kind
    assert issubclass(errors.SimulationMismatch, errors.InternalError)
    assert not issubclass(errors.InternalError, errors.ShardplanError)
    with pytest.raises(errors.InternalError):  # `except ShardplanError` does not swallow a bug
        try:
            raise errors.SimulationMismatch("devices 0 and 1 hold different values for the same block")
        except errors.ShardplanError:
            pytest.fail("an internal error was caught as a user error")
    for cls in sorted(classes, key=lambda c: c.__name__):
        assert cls.__doc__ and cls.__doc__.strip(), f"{cls.__name__} does not say when it is raised"


def test_cost_model_rejects_bad_quantity_with_project_error():
    with pytest.raises(errors.CostModelError, match=r"^'450GB' is not a quantity in bytes/s; write a number") as info:
        parse_quantity("450GB", "bytes/s")
    assert isinstance(info.value, errors.ShardplanError)
    assert isinstance(info.value, ValueError)  # callers that catch ValueError keep working
    assert str(info.value.located("cluster.yaml:3")).startswith("cluster.yaml:3: '450GB' is not a quantity")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: parameter_bytes(10, 4, optimizer="lion"), "unknown optimizer 'lion'"),
        (lambda: parameter_bytes(-1, 4), "elements must be >= 0, got -1"),
        (lambda: compute_time_s(float("nan"), load_cluster()), "flops_per_device must be a finite number >= 0"),
        (lambda: all_gather_cost(0, 8, Link(1e9, 0.0)), "at least one device"),
        (lambda: slowest_link([]), "at least one link"),
    ],
)
def test_cost_functions_raise_cost_model_errors(call, message):
    with pytest.raises(errors.CostModelError, match=message):
        call()


def test_cluster_loader_still_locates_a_bad_quantity(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "name: c\ndevice_peak_flops: 1TFLOP/s\ndevice_memory_bytes: 80GiB\ndevices_per_node: 8\n"
        "intra_node: {bandwidth_bytes_per_s: 450GB, latency_s: 3us}\n"
        "inter_node: {bandwidth_bytes_per_s: 50GB/s, latency_s: 10us}\n"
    )
    with pytest.raises(errors.ClusterError, match=r"c\.yaml:5.*'450GB' is not a quantity in bytes/s"):
        load_cluster(str(path))
