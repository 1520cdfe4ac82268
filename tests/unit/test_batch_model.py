"""A batch as its notices carry it, its counts and its page ids (domain/batch.py); the batches themselves, through
the api and the worker: tests/integration/test_batches.py."""

from __future__ import annotations

from datetime import UTC, datetime

from offpath.domain.batch import ON_COMPLETE, ON_SUCCESS, Batch, batch_summary, page_id_of
from offpath.domain.job import JobStatus

AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_a_batchs_summary_has_its_status_counts_and_callback_jobs() -> None:
    batch = Batch(
        "b-1",
        "tenant-a",
        AT,
        AT,
        total=5,
        counts={"SUCCEEDED": 3, "FAILED": 1},
        sealed_at=AT,
        callback_jobs={ON_COMPLETE: "j-complete", ON_SUCCESS: "j-success"},
    )

    assert batch_summary(batch) == {
        "batch_id": "b-1",
        "status": "RUNNING",
        "total": 5,
        "pending": 1,
        "counts": {"SUCCEEDED": 3, "FAILED": 1},
        "on_complete_job_id": "j-complete",
        "on_success_job_id": "j-success",
    }


def test_a_batch_without_callbacks_names_none() -> None:
    summary = batch_summary(Batch("b-2", "tenant-a", AT, AT))

    assert (summary["on_complete_job_id"], summary["on_success_job_id"]) == (None, None)


def test_a_state_no_member_reached_counts_zero() -> None:
    batch = Batch("b-1", "tenant-a", AT, AT, total=2, counts={"SUCCEEDED": 2})

    assert (batch.count(JobStatus.SUCCEEDED), batch.count(JobStatus.FAILED)) == (2, 0)


def test_a_pages_id_is_the_same_for_its_key_on_every_deployment() -> None:
    # Kept on the page item: a replay of the request after a deployment must find the same page.
    assert page_id_of("page-1") == "0eb236e50de35c59c03b63629624351a"
    assert page_id_of("page-2") != page_id_of("page-1")
