"""Job ids are time-ordered: a tenant's listing reads the table's own key (offpath.domain.ids)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from offpath import contract
from offpath.domain.ids import created_millis, derived_job_id, new_job_id

T0 = datetime(2026, 12, 1, 9, 30, 15, 123456, tzinfo=UTC)


def test_an_id_is_32_lowercase_hex_as_the_contract_says() -> None:
    assert re.fullmatch(contract.JOB_ID_PATTERN, new_job_id(T0))


def test_an_id_starts_with_its_creation_time_in_milliseconds() -> None:
    job_id = new_job_id(T0)

    assert created_millis(job_id) == int(T0.replace(microsecond=123000).timestamp()) * 1000 + 123
    assert datetime.fromtimestamp(created_millis(job_id) / 1000, UTC) == T0.replace(microsecond=123000)


def test_ids_sort_by_creation_time() -> None:
    times = [T0 + timedelta(milliseconds=n * 7) for n in range(200)] + [datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)]
    made = [(when, new_job_id(when)) for when in reversed(times)]

    assert [when for when, _ in sorted(made, key=lambda pair: pair[1])] == sorted(times)


def test_ids_made_in_the_same_millisecond_differ() -> None:
    assert len({new_job_id(T0) for _ in range(1000)}) == 1000


def test_a_derived_id_is_the_same_for_its_parts_on_every_deployment() -> None:
    # A child's or a batch's id derives from its parent and a key: an attempt retried after a deployment must
    # find the same job.
    assert derived_job_id(T0, "a" * 32, "charge", "42") == "01a230f0c4d36eec44b7f451ef86858f"
    assert derived_job_id(T0, "a" * 32, "charge-42") == "01a230f0c4d31c3946a4e63d2d057740"
    assert created_millis(derived_job_id(T0, "a" * 32, "charge", "42")) == created_millis(new_job_id(T0))
