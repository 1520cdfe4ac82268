"""The cost model's arithmetic on a fixed, hand-made set of measured counts, and which way each knob moves it."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import pytest

from offpath.domain.registry import REGISTRY
from offpath.naming import FUNCTION_MEMORY_MB
from offpath.settings import Settings
from offpath_tools import cost, cost_command, cost_doc
from offpath_tools.cost import MILLION, Assumptions, Config

PLAIN_INDEX_UNITS = [{"by_tenant": 1, "sweep": 1}, {"by_tenant": 1, "sweep": 0}, {"by_tenant": 1, "sweep": 1}]


def write(before: int, after: int, index_units: dict[str, int], *, failed: bool = False) -> dict[str, Any]:
    payload = {"payload_json": 100}
    return {
        "operation": "PutItem" if not before else "UpdateItem",
        "item": "JOB",
        "before_bytes": before,
        "after_bytes": after,
        "before_attribute_bytes": payload if before else {},
        "after_attribute_bytes": payload,
        "condition_failed": failed,
        "table_units": 1,
        "index_units": index_units,
    }


def scenario(jobs: int = 1, **changes: Any) -> dict[str, Any]:
    """A plain job: POST /jobs, one worker invocation, three writes of a 600-byte item."""
    base: dict[str, Any] = {
        "description": "",
        "jobs": jobs,
        "invocations": {"api": 1, "worker": 1},
        "calls": {
            "api": {"DynamoDB.PutItem": 1, "SQS.SendMessage": 1},
            "worker": {"DynamoDB.UpdateItem": 2},
        },
        "esm": {"deliveries": 1, "acks": 1},
        "dynamodb": {
            "write_units": 8,
            "table_write_units": 3,
            "index_write_units": {"by_tenant": 3, "sweep": 2},
            "read_units": 0,
            "writes": [
                write(0, 500, PLAIN_INDEX_UNITS[0]),
                write(500, 550, PLAIN_INDEX_UNITS[1]),
                write(550, 600, PLAIN_INDEX_UNITS[2]),
            ],
            "reads": [],
        },
        "log_bytes": {"api": {"emf": 300}, "worker": {"emf": 500, "json_info": 500, "runtime_info": 150}},
        "metric_names": ["JobDuration", "JobsStarted", "JobsSubmitted", "JobsSucceeded", "QueueDelay"],
        "cpu_ms_median": {"api": 2.0, "worker": 2.0},
    }
    base.update(changes)
    return base


def measured_document() -> dict[str, Any]:
    plain = scenario()
    dedup = scenario(
        invocations={"api": 1},
        calls={"api": {"DynamoDB.PutItem": 1}},
        esm={"deliveries": 0, "acks": 0},
        log_bytes={"api": {"emf": 300}},
        cpu_ms_median={"api": 1.0},
    )
    dedup["dynamodb"] = {**plain["dynamodb"], "writes": [write(500, 500, {}, failed=True)]}
    retried = scenario(
        invocations={"api": 1, "worker": 2},
        calls={
            "api": {"DynamoDB.PutItem": 1, "SQS.SendMessage": 1},
            "worker": {"DynamoDB.UpdateItem": 4, "SQS.ChangeMessageVisibility": 1},
        },
        esm={"deliveries": 2, "acks": 1},
    )
    scheduled = scenario(
        invocations={"enqueue": 1, "worker": 1},
        calls={
            "enqueue": {"DynamoDB.GetItem": 3, "DynamoDB.PutItem": 2, "SQS.SendMessage": 1},
            "worker": {"DynamoDB.UpdateItem": 2},
            "scheduler": {"Scheduler.Invocation": 1},
        },
    )
    delayed = scenario(
        invocations={"api": 1, "enqueue": 1, "worker": 1},
        calls={
            "api": {"DynamoDB.PutItem": 1, "Scheduler.CreateSchedule": 1},
            "enqueue": {"DynamoDB.UpdateItem": 1, "SQS.SendMessage": 1},
            "worker": {"DynamoDB.UpdateItem": 2},
            "scheduler": {"Scheduler.Invocation": 1},
        },
    )
    batch = scenario(
        jobs=100,
        invocations={"api": 1, "worker": 10},
        calls={
            "api": {"DynamoDB.PutItem": 100, "SQS.SendMessageBatch": 10},
            "worker": {"DynamoDB.UpdateItem": 200},
        },
        esm={"deliveries": 100, "acks": 100},
        log_bytes={"api": {"emf": 300}, "worker": {"emf": 6500, "json_info": 50_000, "runtime_info": 15_000}},
        cpu_ms_median={"api": 80.0, "worker": 170.0},
    )
    batch["dynamodb"] = {**plain["dynamodb"], "writes": plain["dynamodb"]["writes"] * 100}
    return {
        "generated": "2026-01-01",
        "scenarios": {
            "plain": plain,
            "dedup": dedup,
            "retried": retried,
            "scheduled": scheduled,
            "delayed": delayed,
            "batch": batch,
        },
    }


# Nothing but measured counts: no CPU scaling, no waits, no cold starts, no platform or access log lines.
BARE = Assumptions(
    latency_ms={},
    invocation_overhead_ms=0.0,
    cpu_factor=1.0,
    cold_start_share=0.0,
    platform_log_bytes=0,
    access_log_bytes=0,
)


@pytest.fixture
def measured() -> dict[str, Any]:
    return measured_document()


def per_million(measured: dict[str, Any], config: Config, assumptions: Assumptions = cost.ASSUMPTIONS) -> float:
    return cost.estimate(measured, config, assumptions).per_million


# -- the arithmetic ---------------------------------------------------------------------------


def test_a_plain_job_uses_one_request_one_tenth_of_a_batch_and_eight_write_units(measured: dict[str, Any]) -> None:
    usage = cost.job_usage(measured, Config(), BARE)

    assert usage["api_requests"] == 1
    assert usage["lambda_requests:api"] == 1
    assert usage["lambda_requests:worker"] == pytest.approx(0.1)
    assert usage["sqs_requests"] == pytest.approx(1.2)  # send, and a tenth of a receive and of a delete
    assert usage["wru"] == 8
    assert usage["rru"] == 0


def test_the_workers_hold_is_one_sqs_request_per_invocation_not_per_job(measured: dict[str, Any]) -> None:
    """The batch's messages held until the lease ends: one ChangeMessageVisibilityBatch per worker invocation."""
    without = cost.job_usage(measured, Config(), BARE)
    for name in ("plain", "batch"):
        held = measured["scenarios"][name]
        held["calls"]["worker"]["SQS.ChangeMessageVisibilityBatch"] = held["invocations"]["worker"]

    batches_of_10 = cost.job_usage(measured, Config(), BARE)
    batches_of_1 = cost.job_usage(measured, Config(batch_size=1), BARE)

    assert batches_of_10["sqs_requests"] - without["sqs_requests"] == pytest.approx(0.1)
    assert batches_of_1["sqs_requests"] == pytest.approx(1 + 1 + 1 + 1)  # send, receive, delete, hold


def test_the_services_are_priced_from_the_usage(measured: dict[str, Any]) -> None:
    e = cost.estimate(measured, Config(tracing=False), BARE)

    per_million = {service: dollars * MILLION for service, dollars in e.per_job.items()}
    assert per_million["API Gateway"] == pytest.approx(1.00)
    assert per_million["SQS"] == pytest.approx(1.2 * 0.40)
    # 8 write units, and the finished 600-byte item (+100 bytes of overhead; in no index once finished) kept 7 days.
    storage = (600 + 100) / 1e9 * 7 / (365 / 12) * 0.25 * MILLION
    assert per_million["DynamoDB"] == pytest.approx(8 * 0.625 + storage)
    assert per_million["X-Ray"] == 0
    assert per_million["EventBridge Scheduler"] == 0


def test_lambda_duration_is_cpu_scaled_to_the_memorys_cpu_share(measured: dict[str, Any]) -> None:
    usage = cost.job_usage(measured, Config(), BARE)

    # 2 ms on a full vCPU takes 1769/512 times longer at 512 MB; GB-s = seconds x 0.5 GB.
    assert usage["lambda_gb_s:api"] == pytest.approx(2.0 * 1769 / 512 / 1000 * 0.5)
    # The worker's 2 ms of one job at 1024 MB.
    assert usage["lambda_gb_s:worker"] == pytest.approx(2.0 * 1769 / 1024 / 1000 * 1.0)


def test_lambda_duration_adds_the_waits_for_aws_calls(measured: dict[str, Any]) -> None:
    waits = replace(BARE, latency_ms={"DynamoDB": 5.0, "SQS": 10.0})

    with_waits = cost.job_usage(measured, Config(), waits)["lambda_gb_s:api"]
    without = cost.job_usage(measured, Config(), BARE)["lambda_gb_s:api"]

    assert with_waits - without == pytest.approx((5.0 + 10.0) / 1000 * 0.5)


# The worker's EMF bytes per invocation, from the plain (1 job, 1 invocation, 500 bytes) and the batch
# (100 jobs, 10 invocations, 6,500 bytes) scenarios: envelope + per job = 500, 10 envelopes + 100 per job = 6,500.
ENVELOPE = (500 * 100 - 6500 * 1) / 90
WORKER_EMF_AT_10 = 500 - ENVELOPE + ENVELOPE / 10


def test_the_workers_emf_envelope_is_paid_once_per_invocation(measured: dict[str, Any]) -> None:
    # The notifier's own lines (test_the_notifier_..._is_counted_in_the_default_estimate) left aside.
    at_10 = cost.job_usage(measured, Config(log_level="WARNING", notifier=False), BARE)["log_bytes"]
    at_1 = cost.job_usage(measured, Config(log_level="WARNING", batch_size=1, notifier=False), BARE)["log_bytes"]

    assert at_10 == pytest.approx(300 + WORKER_EMF_AT_10)
    assert at_1 - at_10 == pytest.approx(ENVELOPE * 0.9)


def test_log_bytes_follow_the_level(measured: dict[str, Any]) -> None:
    info = cost.job_usage(measured, Config(log_level="INFO"), BARE)["log_bytes"]
    warning = cost.job_usage(measured, Config(log_level="WARNING"), BARE)["log_bytes"]
    with_copy = cost.job_usage(measured, Config(log_level="INFO", runtime_log_copy=True), BARE)["log_bytes"]

    assert info - warning == pytest.approx(500)
    assert with_copy - info == pytest.approx(150)


def test_a_retried_job_replaces_a_plain_one_in_the_mix(measured: dict[str, Any]) -> None:
    plain = cost.job_usage(measured, Config(), BARE)
    half = cost.job_usage(measured, Config(retried_share=0.5), BARE)

    # A retry adds two updates' worth of write units and a delivery; the job count stays the same.
    assert half["wru"] == pytest.approx(8)  # the fixture's retried writes are the plain ones
    assert half["sqs_requests"] - plain["sqs_requests"] == pytest.approx(0.5 * (1 + 0.1))
    assert half["api_requests"] == pytest.approx(1)


def test_a_replayed_submit_costs_a_request_and_a_failed_write(measured: dict[str, Any]) -> None:
    plain = cost.job_usage(measured, Config(), BARE)
    replayed = cost.job_usage(measured, Config(deduplicated_share=1.0), BARE)

    assert replayed["api_requests"] - plain["api_requests"] == pytest.approx(1)
    assert replayed["wru"] - plain["wru"] == pytest.approx(1)


def test_a_larger_payload_is_priced_by_dynamodbs_kib_rule(measured: dict[str, Any]) -> None:
    # 600-byte items carry a 100-byte payload: with 1,000 bytes they are 1,500 bytes, 2 units per write.
    usage = cost.job_usage(measured, Config(payload_bytes=1000), BARE)

    assert usage["wru"] == 3 * 2 + 5


def test_provisioned_capacity_is_priced_per_hour_at_its_utilisation() -> None:
    wru, rru = cost.dynamodb_unit_prices(Config(capacity_mode="provisioned", utilisation=0.5))

    assert wru == pytest.approx(0.00065 / 1800)
    assert rru == pytest.approx(0.00013 / 1800)


@pytest.mark.parametrize(("rate", "share"), [(0.5, 1.0), (1.0, 1.0), (21.0, 2 / 21), (0.0, 1.0)])
def test_xray_records_one_request_a_second_then_five_percent(rate: float, share: float) -> None:
    assert cost.sampled_share(rate) == pytest.approx(share)


def test_step_functions_needs_two_transitions_a_job_and_one_per_retry(measured: dict[str, Any]) -> None:
    plain, retried = (
        cost.alternatives(measured, Config())[0],
        cost.alternatives(measured, Config(retried_share=0.1))[0],
    )

    assert plain.units_per_job == 2
    assert plain.fees_per_million == pytest.approx(50.0)
    assert retried.units_per_job == pytest.approx(2.1)


def test_temporal_cloud_needs_two_actions_a_job(measured: dict[str, Any]) -> None:
    temporal = cost.alternatives(measured, Config())[1]

    assert temporal.units_per_job == 2
    assert temporal.fees_per_million == pytest.approx(50.0)


@pytest.mark.parametrize(
    "values",
    [
        {"retried_share": 1.5},
        {"scheduled_share": 0.6, "batched_share": 0.6},
        {"batch_size": 0},
        {"capacity_mode": "reserved"},
        {"log_level": "DEBUG"},
        {"jobs_per_month": 0},
        {"worker_memory_mb": 64},
        {"payload_bytes": 1_000_000},
    ],
)
def test_inputs_that_cannot_be_priced_are_refused(measured: dict[str, Any], values: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        cost.estimate(measured, Config(**values))


def test_a_changed_configuration_is_checked_as_a_new_one() -> None:
    with pytest.raises(ValueError, match="retried_share"):
        Config().changed(retried_share=2.0)


def test_the_defaults_are_what_the_stack_deploys() -> None:
    config = Config()

    assert config.memory("api") == FUNCTION_MEMORY_MB["api"]
    assert config.memory("worker") == FUNCTION_MEMORY_MB["worker"]
    assert config.memory("enqueue") == FUNCTION_MEMORY_MB["enqueue"]
    assert config.retention_days == Settings(table_name="t").retention_days
    assert config.queue_classes == len(REGISTRY.queues)


def test_a_document_without_every_scenario_is_refused(tmp_path: Any, measured: dict[str, Any]) -> None:
    incomplete = copy.deepcopy(measured)
    del incomplete["scenarios"]["batch"]
    path = tmp_path / "measured.json"
    path.write_text(json.dumps(incomplete))

    with pytest.raises(ValueError, match="batch"):
        cost.load_measured(path)


# -- the knobs --------------------------------------------------------------------------------


def test_smaller_batches_cost_more(measured: dict[str, Any]) -> None:
    assert per_million(measured, Config(batch_size=1)) > per_million(measured, Config(batch_size=10))


def test_more_memory_costs_more_for_io_bound_handlers(measured: dict[str, Any]) -> None:
    costs = [per_million(measured, Config().with_memory(mb)) for mb in (256, 512, 1024)]

    assert costs == sorted(costs)
    assert costs[0] < costs[2]


def test_provisioned_capacity_well_used_costs_less_than_on_demand(measured: dict[str, Any]) -> None:
    provisioned = per_million(measured, Config(capacity_mode="provisioned", utilisation=0.7))

    assert provisioned < per_million(measured, Config())


def test_warning_logs_cost_less_than_info(measured: dict[str, Any]) -> None:
    assert per_million(measured, Config(log_level="WARNING")) < per_million(measured, Config(log_level="INFO"))


def test_a_64_kb_payload_costs_more_than_a_1_kb_one(measured: dict[str, Any]) -> None:
    small = per_million(measured, Config(payload_bytes=1024))

    assert per_million(measured, Config()) < small < per_million(measured, Config(payload_bytes=65_536))


def test_the_rest_api_costs_more_than_the_http_api(measured: dict[str, Any]) -> None:
    rest = per_million(measured, Config(api_type="rest"))

    assert rest - per_million(measured, Config()) == pytest.approx(2.50)


def test_tracing_costs_more_and_batched_submits_cost_less(measured: dict[str, Any]) -> None:
    default = per_million(measured, Config())

    assert per_million(measured, Config(tracing=True)) > default
    assert per_million(measured, Config(batched_share=1.0)) < default


def test_the_document_states_the_prices_date_and_the_verdict(measured: dict[str, Any]) -> None:
    text = cost_doc.markdown(measured)

    assert cost.PRICES_TAKEN in text
    assert "its $4.50 target" in text
    assert "against its $3.00 target" in text
    assert "Step Functions Standard" in text
    assert "Temporal Cloud" in text


def test_the_shipped_measurements_can_be_priced() -> None:
    measured = cost.load_measured()

    assert cost.estimate(measured, Config()).per_million > 0
    # The table's three writes: no listing-index entry, no sweep-index entry.
    assert measured["scenarios"]["plain"]["dynamodb"]["write_units"] == 3
    assert measured["scenarios"]["plain"]["dynamodb"]["index_write_units"] == {"sweep": 0}


def test_without_a_configured_payload_every_scenario_carries_the_measured_payload_size(
    measured: dict[str, Any],
) -> None:
    as_measured = cost.job_usage(measured, Config(), BARE)["wru"]
    measured["payload_bytes"] = 1000

    assert cost.job_usage(measured, Config(), BARE)["wru"] > as_measured
    assert cost.job_usage(measured, Config(payload_bytes=100), BARE)["wru"] == as_measured


def test_a_get_stats_call_costs_ten_metrics_per_queue_and_job_type_and_six_listings() -> None:
    assert cost.stats_call_cost(10) == pytest.approx((10 * 10 + 6) * 0.01 / 1000)


def test_the_cost_report_states_what_the_consoles_statistics_cost(measured: dict[str, Any]) -> None:
    import io

    out = io.StringIO()
    config = Config(job_types=10)
    cost_command.render_text(measured, config, out)

    hour = 60 * cost.stats_call_cost(10)
    assert (
        f"100 metrics per call (GetMetricData, 10 queue and job type pair(s)) = {cost.money(cost.stats_call_cost(10))}"
        in out.getvalue()
    )
    assert f"{cost.money(hour)} an hour" in out.getvalue()


# -- the default's logs, SnapStart, the metric dimensions, the cheapest configuration ---------


def test_the_default_has_no_platform_lines_and_keeping_them_costs_their_bytes(measured: dict[str, Any]) -> None:
    assumptions = cost.Assumptions(platform_log_bytes=340)
    default = cost.job_usage(measured, Config(), assumptions)["log_bytes"]
    kept = cost.job_usage(measured, Config(platform_logs=True), assumptions)["log_bytes"]
    invocations = sum(v for k, v in cost.job_usage(measured, Config(), assumptions).items() if "lambda_requests" in k)
    assert kept - default == pytest.approx(340 * invocations)
    assert Config().log_level == "WARNING"


def test_snapstart_charges_a_cache_per_function_and_a_restore_per_cold_start(measured: dict[str, Any]) -> None:
    on = cost.estimate(measured, Config(snapstart=True))
    off = cost.estimate(measured, Config())
    assert "SnapStart snapshot cache" not in off.fixed_monthly
    gb = (512 + Config().queue_classes * 512 + 512 + cost.FUNCTION_MEMORY_MB["sweeper"]) / 1024
    assert on.fixed_monthly["SnapStart snapshot cache"] == pytest.approx(
        gb * cost.SECONDS_PER_MONTH * cost.price("snapstart_cache_gb_second")
    )
    restored = sum(v for k, v in on.usage.items() if k.startswith("snapstart_restore_gb:"))
    assert restored == pytest.approx(cost.ASSUMPTIONS.cold_start_share * (1 * 0.5 + 0.1 * 0.5))
    assert not any(k.startswith("snapstart_restore_gb:") for k in off.usage)


def test_custom_metrics_stay_bounded_as_job_types_grow_unless_per_job_type_is_asked_for(
    measured: dict[str, Any],
) -> None:
    def metrics(config: Config) -> float:
        fixed = cost.estimate(measured, config).fixed_monthly
        return sum(v for k, v in fixed.items() if k.startswith("custom metrics"))

    assert metrics(Config(job_types=1)) == metrics(Config(job_types=100))
    assert metrics(Config(job_types=100, metrics_by_job_type=True)) > 10 * metrics(Config(job_types=1))


def test_the_cheapest_documented_configuration_batches_provisions_and_logs_warnings(measured: dict[str, Any]) -> None:
    cheapest = cost.cheapest(Config())
    assert (cheapest.batched_share, cheapest.capacity_mode, cheapest.log_level) == (1.0, "provisioned", "WARNING")
    assert per_million(measured, cheapest) < per_million(measured, Config())


def test_the_notifier_the_stack_deploys_is_counted_in_the_default_estimate(measured: dict[str, Any]) -> None:
    with_notifier = cost.job_usage(measured, Config(), BARE)
    without = cost.job_usage(measured, Config(notifier=False), BARE)

    # A plain job's three job item writes are three stream records, batched together at 1 s windows.
    records = 3
    rate = Config().jobs_per_month / cost.SECONDS_PER_MONTH
    assert with_notifier["lambda_requests:notifier"] == pytest.approx(1 / (1 + rate * BARE.notifier_batching_window_s))
    assert "lambda_requests:notifier" not in without
    # Its EMF line, one per batch, is paid for in the logs.
    invocations = with_notifier["lambda_requests:notifier"]
    assert with_notifier["log_bytes"] - without["log_bytes"] == pytest.approx(
        invocations * cost.notifier_emf_bytes(Config())
    )
    busy = Config(jobs_per_month=1e12)
    assert cost.job_usage(measured, busy, BARE)["lambda_requests:notifier"] == pytest.approx(
        records / BARE.notifier_batch_size
    )
    assert per_million(measured, Config(), BARE) > per_million(measured, Config(notifier=False), BARE)
    assert "notifier (Lambda)" not in dict(cost.notices_rows())


def test_the_pause_flags_cost_one_read_per_busy_worker_environment_every_10_s(measured: dict[str, Any]) -> None:
    config = Config()
    fixed = cost.estimate(measured, config).fixed_monthly

    _, rru_price = cost.dynamodb_unit_prices(config)
    reads = config.queue_classes_in_use * cost.SECONDS_PER_MONTH / 10
    assert fixed["pause flags (a worker environment's read per 10 s)"] == pytest.approx(reads * rru_price)
    assert fixed["pause flags (a worker environment's read per 10 s)"] < 0.5, "cents a month: a cached flag"
