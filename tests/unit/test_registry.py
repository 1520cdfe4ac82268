"""The registry refuses a wrong declaration at import time and derives the queue settings from it."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from offpath.domain import registry as registry_module
from offpath.domain.backoff import Backoff
from offpath.domain.errors import RegistryError
from offpath.domain.registry import (
    MAX_WORKER_TIMEOUT_S,
    SUBMITTERS,
    WORKER_TIMEOUT_MARGIN_S,
    JobType,
    QueueClass,
    Registry,
    Schedule,
    Submitter,
    job,
)
from offpath.jobs import load_job_types
from offpath.jobs.billing import MAX_AMOUNT_CENTS, MonthlyBillingPayload
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
    first = dict(load_job_types(demo=True).job_types)

    assert load_job_types(demo=True).job_types == first


# -- who may submit a job type, and the demo job types ---------------------------------------------


def test_a_job_type_is_submitted_by_tenants_unless_it_says_otherwise(registry: Registry) -> None:
    assert registry.add_job_type(job_type()).submitted_by == "tenant"


def test_an_unknown_submitter_is_refused(registry: Registry) -> None:
    with pytest.raises(RegistryError, match="submitted_by must be one of tenant, admin, system"):
        registry.add_job_type(job_type(submitted_by="everyone"))


@pytest.mark.parametrize(
    ("submitted_by", "allowed"),
    [
        ("tenant", {"tenant", "admin", "system"}),
        ("admin", {"admin", "system"}),
        ("system", {"system"}),
    ],
)
def test_each_submitter_may_submit_the_job_types_of_its_authority_or_less(
    submitted_by: Submitter, allowed: set[str]
) -> None:
    declared = job_type(submitted_by=submitted_by)

    assert {who for who in SUBMITTERS if declared.may_be_submitted_by(who)} == allowed


def test_the_job_decorator_records_who_may_submit(registry: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_module, "REGISTRY", registry)

    @job("reports.rebuild", payload=AnyPayload, submitted_by="admin")
    def rebuild(payload: Any, ctx: Any) -> None:
        return None

    assert registry.job_types["reports.rebuild"].submitted_by == "admin"


@pytest.mark.parametrize("name", ["billing.monthly_invoices", "maintenance.nightly_cleanup"])
def test_the_shipped_scheduled_job_types_are_submitted_by_the_system_only(name: str) -> None:
    assert load_job_types().job_types[name].submitted_by == "system"


@pytest.mark.parametrize("amount", [0, -1, MAX_AMOUNT_CENTS + 1, 99_999_999])
def test_the_monthly_charge_is_bounded(amount: int) -> None:
    with pytest.raises(ValidationError, match="amount_cents"):
        MonthlyBillingPayload(amount_cents=amount)


def test_the_demo_job_types_are_left_out_unless_asked_for() -> None:
    without = load_job_types()
    with_demo = load_job_types(demo=True)

    assert not [name for name in without.job_types if name.startswith("demo.")]
    assert {"demo.echo", "demo.sleep", "demo.flaky", "demo.poison"} <= set(with_demo.job_types)
    demo = {name for name in with_demo.job_types if name.startswith("demo.")}
    assert set(with_demo.job_types) - set(without.job_types) == demo
    assert without.schedules == {n: s for n, s in with_demo.schedules.items() if s.job not in demo}
    assert {"monthly-billing", "nightly-cleanup"} <= set(without.schedules)
    assert without.queues == with_demo.queues


def test_leaving_job_types_out_leaves_out_their_schedules(registry: Registry) -> None:
    registry.add_job_type(job_type("reports.build"))
    registry.add_job_type(job_type("reports.keep"))
    registry.add_schedule(Schedule("build-nightly", "cron(0 3 * * ? *)", "UTC", "reports.build", {}))
    registry.add_schedule(Schedule("keep-nightly", "cron(0 4 * * ? *)", "UTC", "reports.keep", {}))

    kept = registry.without(lambda jt: jt.name == "reports.build")

    assert list(kept.job_types) == ["reports.keep"]
    assert list(kept.schedules) == ["keep-nightly"]
    assert list(registry.job_types) == ["reports.build", "reports.keep"]


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
    registry = load_job_types(demo=True)

    for name in registry.queues:
        most = max((jt.max_attempts for jt in registry.job_types_on(name)), default=0)
        assert registry.max_receive_count(name) > most, name


def test_visibility_timeout_is_at_least_six_worker_timeouts() -> None:
    registry = load_job_types(demo=True)

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


@pytest.mark.parametrize("space", ["\u0085", "\ufeff", "\u00a0", " ", "\u2028"])
def test_an_email_with_whitespace_the_document_and_the_validator_see_differently_is_refused_by_both(
    space: str,
) -> None:
    """The payload's pattern means the same to the validator (Rust's regex) and to the document's readers
    (ECMAScript's): an address with any whitespace either counts is invalid in both."""
    import json
    import re
    import subprocess

    from pydantic import ValidationError

    from offpath.jobs.welcome_email import EMAIL_PATTERN, WelcomeEmail

    address = f"a{space}b@example.com"
    with pytest.raises(ValidationError):
        WelcomeEmail(user_id="u-1", email=address)
    assert re.fullmatch(EMAIL_PATTERN, address) is None
    # The document's readers (schemathesis, a browser) match it as ECMAScript does: Node's RegExp, unicode mode.
    script = "const [p, a] = JSON.parse(process.argv[1]); process.stdout.write(String(new RegExp(p, 'u').test(a)))"
    ecmascript = subprocess.run(
        ["node", "-e", script, json.dumps([EMAIL_PATTERN, address])], capture_output=True, text=True, check=True
    )
    assert ecmascript.stdout == "false"
    assert WelcomeEmail(user_id="u-1", email="a.b@example.com").email == "a.b@example.com"
