"""A tenant's jobs are sharded: one tenant's job items spread over its partitions of the table (`JOB#<tenant>#<shard>`,
no hot partition for a big tenant), and a listing queries them and merges the shards newest first, page after
page, with its filters, for a tenant as for an admin's listing of the jobs schedules made."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from offpath.adapters.dynamodb_store import (
    DynamoDbJobStore,
    attribute_values,
    encode_cursor,
    job_partition,
    to_item,
)
from offpath.domain.errors import InvalidRequestError
from offpath.domain.job import Job, JobStatus
from offpath.naming import JOB_SHARDS
from offpath.tenancy import SYSTEM_TENANT
from offpath_local.resources import ACCOUNT_ID, REGION, Resources
from tests.integration.conftest import Pipeline

BIG = "tenant-big"
JOBS = 10_000
T0 = datetime(2026, 12, 1, tzinfo=UTC)
ADMIN = ["offpath/admin"]


def job(n: int, job_id: str, *, tenant: str = BIG) -> Job:
    """Job n of a tenant, created n milliseconds after T0; every third one finished, every fifth a demo.sleep."""
    created = T0 + timedelta(milliseconds=n)
    return Job(
        job_id=job_id,
        tenant=tenant,
        type="demo.sleep" if n % 5 == 0 else "demo.echo",
        queue="default",
        payload={"n": n},
        payload_hash="h",
        status=JobStatus.SUCCEEDED if n % 3 == 0 else JobStatus.QUEUED,
        created_at=created,
        updated_at=created,
        max_attempts=3,
        submission_id="s",
    )


def write_all(clients: dict[str, Any], table: str, jobs: list[Job]) -> None:
    """The store's own items (to_item), written 25 to a BatchWriteItem."""
    dynamodb = clients["dynamodb"]
    for start in range(0, len(jobs), 25):
        pending: Any = {table: [{"PutRequest": {"Item": to_item(j)}} for j in jobs[start : start + 25]]}
        while pending:
            pending = dynamodb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or None


def put_directly(table: str, jobs: list[Job]) -> None:
    """The store's own items (to_item), put into moto's table by moto's own put_item, without the HTTP round trip
    of each BatchWriteItem: 10,000 jobs in seconds."""
    from moto.dynamodb.models import dynamodb_backends

    backend = dynamodb_backends[ACCOUNT_ID][REGION]
    for j in jobs:
        backend.put_item(table, to_item(j))


def tenant_jobs(tenant: str, count: int, seed: int) -> list[Job]:
    """`count` jobs of a tenant with ids as offpath.domain.ids makes them (the creation time in milliseconds, then
    80 random bits; seeded here), oldest first."""
    rng = random.Random(seed)
    millis = int(T0.timestamp()) * 1000
    return [job(n, f"{millis + n:012x}{rng.getrandbits(80):020x}", tenant=tenant) for n in range(count)]


@pytest.fixture
def tenant_240(clients: dict[str, Any], resources: Resources) -> list[Job]:
    """240 jobs of BIG: about 30 a shard, enough to page across every shard many times."""
    jobs = tenant_jobs(BIG, 240, seed=5)
    write_all(clients, resources.table_name, jobs)
    return jobs


def shard_count(clients: dict[str, Any], table: str, tenant: str, shard: int) -> int:
    request: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "pk = :k",
        "ExpressionAttributeValues": attribute_values({":k": job_partition(tenant, shard)}),
        "Select": "COUNT",
    }
    count = 0
    while True:
        response = clients["dynamodb"].query(**request)
        count += int(response["Count"])
        if "LastEvaluatedKey" not in response:
            return count
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def listing(
    store: DynamoDbJobStore, tenant: str, *, limit: int, status: JobStatus | None = None, job_type: str | None = None
) -> tuple[list[str], int]:
    """Every job id of the listing, page after page, and how many pages it took."""
    ids: list[str] = []
    cursor, pages = None, 0
    while True:
        page = store.list_jobs(tenant, status=status, job_type=job_type, limit=limit, cursor=cursor)
        pages += 1
        ids.extend(j.job_id for j in page.jobs)
        cursor = page.cursor
        if cursor is None:
            return ids, pages


def test_ten_thousand_jobs_of_one_tenant_spread_over_the_shards_and_list_newest_first(
    clients: dict[str, Any], resources: Resources, store: DynamoDbJobStore
) -> None:
    jobs = tenant_jobs(BIG, JOBS, seed=13)
    put_directly(resources.table_name, jobs)

    per_shard = Counter(str(to_item(j)["pk"]["S"]) for j in jobs)  # type: ignore[index]
    first = store.list_jobs(BIG, status=None, job_type=None, limit=100, cursor=None)
    second = store.list_jobs(BIG, status=None, job_type=None, limit=100, cursor=first.cursor)

    assert JOB_SHARDS == 16
    assert set(per_shard) == {job_partition(BIG, shard) for shard in range(JOB_SHARDS)}
    even = JOBS / JOB_SHARDS
    assert all(abs(count - even) < 0.15 * even for count in per_shard.values()), per_shard
    # The table's partition holds what the items say (one shard counted: moto sorts a partition on every query).
    assert shard_count(clients, resources.table_name, BIG, 0) == per_shard[job_partition(BIG, 0)]
    newest_first = [j.job_id for j in reversed(jobs)]
    assert [j.job_id for j in first.jobs + second.jobs] == newest_first[:200]
    assert second.cursor is not None


@pytest.mark.parametrize("readers", [16, 1])
@pytest.mark.parametrize("limit", [7, 100])
def test_the_listing_merges_the_shards_newest_first_across_pages(
    tenant_240: list[Job], store: DynamoDbJobStore, limit: int, readers: int
) -> None:
    """The same listing whether the shards' queries go out together or one after another."""
    store.listing_readers = readers
    every, pages = listing(store, BIG, limit=limit)

    assert every == [j.job_id for j in reversed(tenant_240)]
    assert pages in {-(-240 // limit), -(-240 // limit) + 1}  # DynamoDB may hand out a cursor to an empty page


def test_filters_apply_to_the_merged_listing(tenant_240: list[Job], store: DynamoDbJobStore) -> None:
    finished, _ = listing(store, BIG, limit=30, status=JobStatus.SUCCEEDED)
    sleeps, _ = listing(store, BIG, limit=30, job_type="demo.sleep")

    assert finished == [j.job_id for j in reversed(tenant_240) if j.status is JobStatus.SUCCEEDED]
    assert sleeps == [j.job_id for j in reversed(tenant_240) if j.type == "demo.sleep"]


def test_a_short_tenant_listing_ends_without_a_cursor(store: DynamoDbJobStore) -> None:
    for n in range(3):
        store.create(job(n, f"{n + 1:032x}", tenant="tenant-small"))

    page = store.list_jobs("tenant-small", status=None, job_type=None, limit=10, cursor=None)

    assert [j.job_id for j in page.jobs] == [f"{n:032x}" for n in (3, 2, 1)]
    assert page.cursor is None


def test_an_admin_pages_through_the_jobs_schedules_made(pipeline: Pipeline) -> None:
    jobs = tenant_jobs(SYSTEM_TENANT, 25, seed=3)
    write_all(pipeline.clients, pipeline.resources.table_name, jobs)

    ids: list[str] = []
    path = "/jobs?tenant=system&limit=7"
    while path:
        code, page, _ = pipeline.call("GET", path, scopes=ADMIN)
        assert code == 200, page
        ids.extend(j["job_id"] for j in page["jobs"])
        path = f"/jobs?tenant=system&limit=7&cursor={page['cursor']}" if page.get("cursor") else ""

    assert ids == [j.job_id for j in reversed(jobs)]


@pytest.mark.parametrize(
    "positions",
    [
        [None] * (JOB_SHARDS - 1),  # a shard missing
        [None] * (JOB_SHARDS - 1) + ["2026-12-01T00:00:00.000000Z#" + "0" * 31],  # not a key the table makes
        [True] * JOB_SHARDS,  # neither a position nor done
    ],
    ids=["shard-missing", "bad-key", "bad-position"],
)
def test_a_cursor_with_a_bad_position_is_refused(store: DynamoDbJobStore, positions: list[Any]) -> None:
    with pytest.raises(InvalidRequestError):
        store.list_jobs(BIG, status=None, job_type=None, limit=10, cursor=encode_cursor(BIG, positions))


def test_a_cursor_key_from_another_shard_is_refused(tenant_240: list[Job], store: DynamoDbJobStore) -> None:
    cursor = store.list_jobs(BIG, status=None, job_type=None, limit=50, cursor=None).cursor
    assert cursor is not None
    positions = decode(cursor)
    moved = positions[1:] + positions[:1]  # every key now sits in a shard it does not belong to

    with pytest.raises(InvalidRequestError):
        store.list_jobs(BIG, status=None, job_type=None, limit=10, cursor=encode_cursor(BIG, moved))


def decode(cursor: str) -> list[Any]:
    from offpath.adapters.dynamodb_store import decode_cursor

    return list(decode_cursor(cursor, BIG))


def test_a_filtered_page_is_full_when_enough_jobs_match(tenant_240: list[Job], store: DynamoDbJobStore) -> None:
    """240 jobs, one in five a demo.sleep: a page of 20 sleeps reads on past the first 20 jobs, and its cursor
    carries on exactly where the page ended."""
    sleeps = [j.job_id for j in reversed(tenant_240) if j.type == "demo.sleep"]

    first = store.list_jobs(BIG, status=None, job_type="demo.sleep", limit=20, cursor=None)
    second = store.list_jobs(BIG, status=None, job_type="demo.sleep", limit=20, cursor=first.cursor)

    assert [j.job_id for j in first.jobs] == sleeps[:20]
    assert [j.job_id for j in second.jobs] == sleeps[20:40]


def test_a_filtered_page_of_rare_jobs_finds_them_all_within_its_budget(
    tenant_240: list[Job], store: DynamoDbJobStore
) -> None:
    rare = {tenant_240[n].job_id for n in (60, 100, 150, 239)}  # among the newest 200: within the budget of 10 x 20
    for j in tenant_240:
        if j.job_id in rare:
            store.client.update_item(
                TableName=store.table_name,
                Key={"pk": to_item(j)["pk"], "sk": to_item(j)["sk"]},
                UpdateExpression="SET #s = :f",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":f": {"S": "FAILED"}},
            )

    page = store.list_jobs(BIG, status=JobStatus.FAILED, job_type=None, limit=20, cursor=None)

    assert [j.job_id for j in page.jobs] == [tenant_240[n].job_id for n in (239, 150, 100, 60)]
    assert page.cursor is not None  # 40 older jobs not passed yet


def test_a_filtered_page_over_its_read_budget_is_short_and_carries_a_cursor(
    tenant_240: list[Job], store: DynamoDbJobStore
) -> None:
    page = store.list_jobs(BIG, status=JobStatus.FAILED, job_type=None, limit=10, cursor=None)

    assert page.jobs == []
    assert page.cursor is not None  # the budget: 10 x 10 of the 240 jobs passed
