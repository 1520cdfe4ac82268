"""The registry refuses a wrong declaration at import time and derives the queue settings from it."""

from __future__ import annotations

from typing import Any

import pytest

from offpath.domain.backoff import Backoff
from offpath.domain.errors import RegistryError
from offpath.domain.registry import (
    MAX_WORKER_TIMEOUT_S,
    WORKER_TIMEOUT_MARGIN_S,
    JobType,
    QueueClass,
    Registry,
)
from offpath.jobs import load_job_types
from offpath_tools.fakes import AnyPayload, queue_classes_only


def noop(payload: Any, ctx: Any) -> None:
    return None


def job_type(name: str = "reports.build", **changes: Any) -> JobType:
    settings: dict[str, Any] = {
        "name": name,
        "function": noop,
        "payload_model": AnyPayload,
        "queue": "default",
        "max_attempts": 5,
        "timeout_s": 30,
        "backoff": Backoff(),
    }
    settings.update(changes)
    return JobType(**settings)


@pytest.fixture
def registry() -> Registry:
    return queue_classes_only()


@pytest.mark.parametrize(
    "name",
    ["", "Reports", "1report", "../etc/passwd", "report name", 'quote"d', "$job", "tab\tname", "x" * 64],
)
def test_a_job_type_name_outside_the_pattern_is_refused(registry: Registry, name: str) -> None:
    with pytest.raises(RegistryError, match="name must match"):
        registry.add_job_type(job_type(name))


@pytest.mark.parametrize("name", ["a", "reports.build", "send_welcome_email", "billing-v2.run", "x" * 63])
def test_a_well_formed_job_type_name_is_accepted(registry: Registry, name: str) -> None:
    assert registry.add_job_type(job_type(name)).name in registry.job_types


def test_a_job_type_on_an_undeclared_queue_is_refused(registry: Registry) -> None:
    with pytest.raises(RegistryError, match="queue class 'reports' is not declared"):
        registry.add_job_type(job_type(queue="reports"))


@pytest.mark.parametrize("max_attempts", [0, -1, 101])
def test_max_attempts_outside_one_to_a_hundred_is_refused(registry: Registry, max_attempts: int) -> None:
    with pytest.raises(RegistryError, match=r"max_attempts must be 1\.\.100"):
        registry.add_job_type(job_type(max_attempts=max_attempts))


@pytest.mark.parametrize("max_attempts", [1, 100])
def test_max_attempts_at_the_bounds_is_accepted(registry: Registry, max_attempts: int) -> None:
    assert registry.add_job_type(job_type(max_attempts=max_attempts)).max_attempts == max_attempts


@pytest.mark.parametrize("timeout_s", [0, MAX_WORKER_TIMEOUT_S - WORKER_TIMEOUT_MARGIN_S + 1])
def test_a_timeout_the_worker_cannot_honour_is_refused(registry: Registry, timeout_s: int) -> None:
    with pytest.raises(RegistryError, match="timeout_s"):
        registry.add_job_type(job_type(timeout_s=timeout_s))


def test_a_second_function_under_the_same_name_is_refused(registry: Registry) -> None:
    registry.add_job_type(job_type())

    with pytest.raises(RegistryError, match="registered twice"):
        registry.add_job_type(job_type(function=lambda payload, ctx: None))


def test_registering_the_same_function_again_is_harmless(registry: Registry) -> None:
    registry.add_job_type(job_type())

    registry.add_job_type(job_type())

    assert list(registry.job_types) == ["reports.build"]


def test_loading_the_job_types_twice_registers_each_once() -> None:
    first = dict(load_job_types().job_types)

    assert load_job_types().job_types == first


def test_a_new_queue_class_takes_job_types_and_gets_its_own_settings(registry: Registry) -> None:
    registry.add_queue(QueueClass("reports", batch_size=5, max_concurrency=3))

    registry.add_job_type(job_type(queue="reports", timeout_s=120, max_attempts=7))

    assert [jt.name for jt in registry.job_types_on("reports")] == ["reports.build"]
    # A full batch of five of its slowest job type, each with its margin.
    assert registry.worker_timeout_s("reports") == 5 * (120 + WORKER_TIMEOUT_MARGIN_S)
    assert registry.max_receive_count("reports") > 7


def test_a_queue_class_declared_twice_with_other_settings_is_refused(registry: Registry) -> None:
    registry.add_queue(QueueClass("reports", batch_size=5))

    with pytest.raises(RegistryError, match="declared twice"):
        registry.add_queue(QueueClass("reports", batch_size=6))


@pytest.mark.parametrize(
    "settings",
    [
        {"name": "Reports"},
        {"name": "reports_queue"},
        {"name": "reports", "batch_size": 0},
        {"name": "reports", "batch_size": 20},
        {"name": "reports", "batching_window_s": 301},
        {"name": "reports", "max_concurrency": 1},
        {"name": "reports", "retention_days": 14, "dlq_retention_days": 14},
        {"name": "reports", "dlq_retention_days": 15},
    ],
)
def test_a_queue_class_with_impossible_settings_is_refused(settings: dict[str, Any]) -> None:
    with pytest.raises(RegistryError):
        QueueClass(**settings)


def test_max_receive_count_stays_above_every_job_types_max_attempts() -> None:
    registry = load_job_types()

    for name in registry.queues:
        most = max((jt.max_attempts for jt in registry.job_types_on(name)), default=0)
        assert registry.max_receive_count(name) > most, name


def test_visibility_timeout_is_at_least_six_worker_timeouts() -> None:
    registry = load_job_types()

    for name in registry.queues:
        assert registry.visibility_timeout_s(name) >= 6 * registry.worker_timeout_s(name), name


def test_the_slowest_allowed_job_type_still_gets_six_worker_timeouts(registry: Registry) -> None:
    registry.add_job_type(job_type(timeout_s=MAX_WORKER_TIMEOUT_S - WORKER_TIMEOUT_MARGIN_S))

    assert registry.worker_timeout_s("default") == MAX_WORKER_TIMEOUT_S
    assert registry.visibility_timeout_s("default") >= 6 * MAX_WORKER_TIMEOUT_S


def test_a_full_batch_of_each_queue_classes_slowest_job_type_fits_its_worker_timeout() -> None:
    registry = load_job_types()

    for name in registry.queues:
        slowest = max((jt.timeout_s for jt in registry.job_types_on(name)), default=0)
        full_batch = registry.batch_size(name) * (slowest + WORKER_TIMEOUT_MARGIN_S)
        assert full_batch <= registry.worker_timeout_s(name) <= MAX_WORKER_TIMEOUT_S, name


def test_a_batch_too_slow_for_lambdas_15_minutes_is_made_smaller(registry: Registry) -> None:
    registry.add_queue(QueueClass("reports", batch_size=10, batching_window_s=5, max_concurrency=3))
    registry.add_job_type(job_type(queue="reports", timeout_s=300))

    # Three records of 300 s and their margins would take 930 s: two fit.
    assert registry.batch_size("reports") == 2
    assert registry.worker_timeout_s("reports") == 2 * (300 + WORKER_TIMEOUT_MARGIN_S)


def test_a_queue_class_of_fast_job_types_keeps_its_batch_size(registry: Registry) -> None:
    registry.add_queue(QueueClass("reports", batch_size=10, max_concurrency=3))
    registry.add_job_type(job_type(queue="reports", timeout_s=5))

    assert registry.batch_size("reports") == 10
    assert registry.worker_timeout_s("reports") == 10 * (5 + WORKER_TIMEOUT_MARGIN_S)
