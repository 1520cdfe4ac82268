"""One-time EventBridge Scheduler schedules for delayed jobs (`at(...)`, deleted after completion)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import botocore.exceptions
from botocore.config import Config

from offpath.domain.errors import StoreUnavailableError
from offpath.domain.job import Job
from offpath.naming import SCHEDULED_TIME

if TYPE_CHECKING:
    from mypy_boto3_scheduler.client import EventBridgeSchedulerClient

# total_max_attempts counts the first try: 3 attempts in all ("max_attempts" would mean 3 retries).
SDK_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=2, read_timeout=5)
# The Scheduler's own retries of the invoke call, then its DLQ (AWS-SEMANTICS: at-least-once, async invoke).
MAX_RETRY_ATTEMPTS = 185
MAX_EVENT_AGE_S = 86_400


def default_client() -> EventBridgeSchedulerClient:
    import boto3

    return boto3.client("scheduler", config=SDK_CONFIG)


def one_time_schedule_name(job_id: str) -> str:
    return f"job-{job_id}"


def delayed_input(job: Job) -> str:
    return json.dumps(
        {"kind": "delayed", "job_id": job.job_id, "tenant": job.tenant, "scheduled_time": SCHEDULED_TIME},
        separators=(",", ":"),
    )


class EventBridgeJobScheduler:
    def __init__(
        self,
        group: str,
        *,
        target_arn: str,
        role_arn: str,
        dlq_arn: str | None,
        client: EventBridgeSchedulerClient | None = None,
    ) -> None:
        self.group = group
        self.target_arn = target_arn
        self.role_arn = role_arn
        self.dlq_arn = dlq_arn
        self.client = client or default_client()

    def create_one_time(self, job: Job) -> None:
        assert job.run_at is not None
        target: dict[str, object] = {
            "Arn": self.target_arn,
            "RoleArn": self.role_arn,
            "Input": delayed_input(job),
            "RetryPolicy": {"MaximumRetryAttempts": MAX_RETRY_ATTEMPTS, "MaximumEventAgeInSeconds": MAX_EVENT_AGE_S},
        }
        if self.dlq_arn:
            target["DeadLetterConfig"] = {"Arn": self.dlq_arn}
        try:
            self.client.create_schedule(
                Name=one_time_schedule_name(job.job_id),
                GroupName=self.group,
                ScheduleExpression=f"at({job.run_at.strftime('%Y-%m-%dT%H:%M:%S')})",
                ScheduleExpressionTimezone="UTC",
                FlexibleTimeWindow={"Mode": "OFF"},
                Target=target,  # type: ignore[arg-type]
                ActionAfterCompletion="DELETE",
                Description=f"offpath delayed job {job.job_id}",
            )
        except botocore.exceptions.ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ConflictException":
                return  # created by an earlier try of this submission
            raise StoreUnavailableError(f"Scheduler {error.response.get('Error', {}).get('Code', 'error')}") from error
        except botocore.exceptions.BotoCoreError as error:
            raise StoreUnavailableError(f"Scheduler unreachable: {type(error).__name__}") from error

    def delete_one_time(self, job_id: str) -> None:
        try:
            self.client.delete_schedule(Name=one_time_schedule_name(job_id), GroupName=self.group)
        except botocore.exceptions.ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                return  # fired and deleted itself, or never created
            raise StoreUnavailableError(f"Scheduler {error.response.get('Error', {}).get('Code', 'error')}") from error
        except botocore.exceptions.BotoCoreError as error:
            raise StoreUnavailableError(f"Scheduler unreachable: {type(error).__name__}") from error

    def exists(self, job_id: str) -> bool:
        try:
            self.client.get_schedule(Name=one_time_schedule_name(job_id), GroupName=self.group)
            return True
        except botocore.exceptions.ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                return False
            raise StoreUnavailableError("Scheduler error") from error
