"""The registry refuses a wrong declaration at import time and derives the queue settings from it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from offpath.domain import registry as registry_module
from offpath.domain.backoff import Backoff
from offpath.domain.errors import RegistryError
from offpath.domain.limits import Limits
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
    queue_class,
    schedule,
)
from offpath.jobs import load_job_types
from offpath.jobs.billing import MAX_AMOUNT_CENTS, MonthlyBillingPayload
from offpath_tools.fakes import AnyPayload, StrictPayload, queue_classes_only


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
    with pytest.raises(
        RegistryError, match=r"queue class 'reports' is not declared \(declared: bulk, critical, default\)"
    ):
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
    with pytest.raises(RegistryError, match=r"^job type 'reports.build': timeout_s must be 1\.\.890$"):
        registry.add_job_type(job_type(timeout_s=timeout_s))


@pytest.mark.parametrize("timeout_s", [1, 890])
def test_a_timeout_at_the_bounds_is_accepted(registry: Registry, timeout_s: int) -> None:
    assert registry.add_job_type(job_type(timeout_s=timeout_s)).timeout_s == timeout_s


def test_a_limit_keyed_on_a_field_the_payload_cannot_have_is_refused(registry: Registry) -> None:
    declared = job_type(payload_model=StrictPayload, limits=Limits(concurrency_key="account", max_concurrency=2))

    with pytest.raises(RegistryError) as refused:
        registry.add_job_type(declared)

    assert (
        str(refused.value) == "job type 'reports.build': concurrency_key 'account': the payload has no field 'account'"
    )
    assert registry.job_types == {}


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


def test_a_job_declared_without_a_policy_gets_the_default_one(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry_module, "REGISTRY", registry)

    @job("reports.rebuild", payload=AnyPayload)
    def rebuild(payload: Any, ctx: Any) -> None:
        return None

    declared = registry.job_types["reports.rebuild"]
    assert declared == JobType(
        name="reports.rebuild",
        function=rebuild,
        payload_model=AnyPayload,
        queue="default",
        max_attempts=5,
        timeout_s=60,
        backoff=Backoff(base_s=2.0, cap_s=900.0),
        submitted_by="tenant",
        limits=Limits(),
    )


def test_a_job_declared_with_a_policy_keeps_each_setting(registry: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_module, "REGISTRY", registry)

    @job(
        "reports.rebuild",
        payload=AnyPayload,
        queue="critical",
        max_attempts=3,
        timeout_s=120,
        backoff_base_s=5.0,
        backoff_cap_s=60.0,
        submitted_by="admin",
        concurrency_key="account",
        max_concurrency=2,
    )
    def rebuild(payload: Any, ctx: Any) -> None:
        return None

    declared = registry.job_types["reports.rebuild"]
    assert (declared.function, declared.queue, declared.max_attempts, declared.timeout_s) == (
        rebuild,
        "critical",
        3,
        120,
    )
    assert (declared.backoff, declared.submitted_by) == (Backoff(base_s=5.0, cap_s=60.0), "admin")
    assert declared.limits == Limits(concurrency_key="account", max_concurrency=2)


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


def test_a_queue_class_messages_stay_invisible_for_six_worker_timeouts(registry: Registry) -> None:
    registry.add_queue(QueueClass("reports", batch_size=5, max_concurrency=3))
    registry.add_job_type(job_type(queue="reports", timeout_s=120))

    # AWS's guidance: six times the function's timeout, a full batch of 130 s records.
    assert registry.visibility_timeout_s("reports") == 6 * 5 * 130


def test_a_queue_class_without_job_types_gets_the_settings_of_a_30_s_job_type_tried_once(registry: Registry) -> None:
    registry.add_queue(QueueClass("reports", batch_size=5, max_concurrency=3))

    # The stack makes a queue and a worker for every declared queue class, whether job types use it or not.
    assert (registry.slowest_s("reports"), registry.batch_size("reports")) == (30, 5)
    assert registry.worker_timeout_s("reports") == 5 * (30 + WORKER_TIMEOUT_MARGIN_S)
    assert registry.max_receive_count("reports") == 1 + 3


def test_a_queue_class_declared_twice_with_other_settings_is_refused(registry: Registry) -> None:
    registry.add_queue(QueueClass("reports", batch_size=5))

    with pytest.raises(RegistryError, match="declared twice"):
        registry.add_queue(QueueClass("reports", batch_size=6))


DLQ_RETENTION = "DLQ retention must be longer than the queue's and at most 14 days"


@pytest.mark.parametrize(
    ("settings", "why"),
    [
        ({"name": "Reports"}, "name must match ^[a-z][a-z0-9-]{0,30}$"),
        ({"name": "reports_queue"}, "name must match ^[a-z][a-z0-9-]{0,30}$"),
        ({"name": "reports", "batch_size": 0}, "batch_size must be 1..10000"),
        ({"name": "reports", "batch_size": 10_001, "batching_window_s": 1}, "batch_size must be 1..10000"),
        ({"name": "reports", "batch_size": 11}, "batch_size over 10 needs a batching window"),
        ({"name": "reports", "batch_size": 20}, "batch_size over 10 needs a batching window"),
        ({"name": "reports", "batching_window_s": 301}, "batching_window_s must be 0..300"),
        ({"name": "reports", "max_concurrency": 1}, "max_concurrency must be 2..1000"),
        ({"name": "reports", "max_concurrency": 1001}, "max_concurrency must be 2..1000"),
        ({"name": "reports", "retention_days": 14, "dlq_retention_days": 14}, DLQ_RETENTION),
        ({"name": "reports", "dlq_retention_days": 15}, DLQ_RETENTION),
    ],
)
def test_a_queue_class_with_impossible_settings_is_refused_saying_why(settings: dict[str, Any], why: str) -> None:
    with pytest.raises(RegistryError) as refused:
        QueueClass(**settings)

    assert str(refused.value) == f"queue class {settings['name']!r}: {why}"


@pytest.mark.parametrize(
    "settings",
    [
        {"batch_size": 1},
        {"batch_size": 11, "batching_window_s": 1},
        {"batch_size": 10_000, "batching_window_s": 300},
        {"max_concurrency": 2},
        {"max_concurrency": 1000},
        {"retention_days": 13, "dlq_retention_days": 14},
    ],
)
def test_a_queue_class_at_the_edges_of_its_settings_is_accepted(settings: dict[str, Any]) -> None:
    assert QueueClass("reports", **settings) == QueueClass("reports", **settings)


def test_queue_class_declares_a_queue_class_with_its_settings(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry_module, "REGISTRY", registry)

    declared = queue_class("reports", batch_size=5, max_concurrency=3)

    assert registry.queues["reports"] == declared == QueueClass("reports", batch_size=5, max_concurrency=3)


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


# -- schedules ------------------------------------------------------------------------------------------------------


NIGHTLY: dict[str, Any] = {
    "name": "nightly",
    "expression": "cron(0 3 * * ? *)",
    "timezone": "UTC",
    "job": "reports.build",
    "payload": {"name": "nightly"},
}


@pytest.fixture
def scheduling(registry: Registry, monkeypatch: pytest.MonkeyPatch) -> Registry:
    """The registry `schedule(...)` declares into, with one job type to fire."""
    monkeypatch.setattr(registry_module, "REGISTRY", registry)
    registry.add_job_type(job_type("reports.build", payload_model=StrictPayload))
    return registry


def test_a_rate_schedule_is_declared_with_the_default_settings(scheduling: Registry) -> None:
    declared = schedule("reports-often", job="reports.build", rate="5 minutes", payload={"name": "often"})

    assert scheduling.schedules == {"reports-often": declared}
    assert declared == Schedule(
        name="reports-often",
        expression="rate(5 minutes)",
        timezone="UTC",
        job="reports.build",
        payload={"name": "often"},
        overlap="skip",
        flexible_window_min=None,
        enabled=True,
    )
    anchor = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert declared.next_after(anchor + timedelta(minutes=7), anchor) == anchor + timedelta(minutes=10)


def test_a_cron_schedule_keeps_each_setting_it_is_declared_with(scheduling: Registry) -> None:
    declared = schedule(
        "reports-nightly",
        job="reports.build",
        cron="0 3 * * ? *",
        timezone="Europe/Prague",
        payload={"name": "nightly"},
        overlap="allow",
        flexible_window_min=15,
        enabled=False,
    )

    assert (
        scheduling.schedules["reports-nightly"]
        == declared
        == Schedule(
            "reports-nightly",
            "cron(0 3 * * ? *)",
            "Europe/Prague",
            "reports.build",
            {"name": "nightly"},
            "allow",
            15,
            False,
        )
    )
    # 03:00 in Prague, in winter, is 02:00 UTC.
    after = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert declared.next_after(after) == datetime(2026, 3, 2, 2, 0, tzinfo=UTC)


@pytest.mark.parametrize("expressions", [{"cron": "0 3 * * ? *", "rate": "5 minutes"}, {}])
def test_a_schedule_needs_exactly_one_expression(scheduling: Registry, expressions: dict[str, Any]) -> None:
    with pytest.raises(RegistryError) as refused:
        schedule("reports-nightly", job="reports.build", payload={"name": "x"}, **expressions)

    assert str(refused.value) == "schedule 'reports-nightly': give exactly one of cron= and rate="
    assert scheduling.schedules == {}


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"name": "Nightly"}, "name must match ^[a-z][a-z0-9-]{0,47}$"),
        ({"overlap": "queue"}, "overlap must be one of skip, allow"),
        ({"flexible_window_min": 0}, "flexible_window_min must be 1..1440"),
        ({"flexible_window_min": 1441}, "flexible_window_min must be 1..1440"),
        ({"payload": {}}, "payload does not match 'reports.build': 1 validation error for StrictPayload"),
    ],
)
def test_a_wrong_schedule_is_refused_saying_why(scheduling: Registry, changes: dict[str, Any], why: str) -> None:
    declared = Schedule(**{**NIGHTLY, **changes})

    with pytest.raises(RegistryError) as refused:
        scheduling.add_schedule(declared)

    assert str(refused.value).startswith(f"schedule {declared.name!r}: {why}")
    assert scheduling.schedules == {}


def test_a_schedule_declared_twice_is_refused(scheduling: Registry) -> None:
    scheduling.add_schedule(Schedule(**NIGHTLY))

    with pytest.raises(RegistryError) as refused:
        scheduling.add_schedule(Schedule(**NIGHTLY))

    assert str(refused.value) == "schedule 'nightly' is declared twice"


@pytest.mark.parametrize("minutes", [1, 1440])
def test_a_flexible_window_at_the_bounds_is_accepted(scheduling: Registry, minutes: int) -> None:
    declared = scheduling.add_schedule(Schedule(**{**NIGHTLY, "flexible_window_min": minutes}))

    assert scheduling.schedules["nightly"].flexible_window_min == declared.flexible_window_min == minutes
