"""The video demo's job types fail for good, with a message saying why, on input they cannot work with; each runs
on the default queue with the demo's short backoffs."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from offpath.domain.context import JobContext
from offpath.domain.errors import PermanentError
from offpath.domain.job import Job, JobStatus
from offpath.jobs import demo, load_job_types
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import InMemoryJobStore
from tests.unit.conftest import START, a_job

VIDEO_TYPES = ("demo.transcode", "demo.thumbnails", "demo.thumbnail", "demo.notify")


def context_of(job: Job, store: InMemoryJobStore) -> JobContext:
    return JobContext(
        job, store=store, clock=ManualClock(START), remaining_ms=lambda: 10_000, logger=logging.getLogger("t")
    )


def test_the_video_types_run_on_the_default_queue_with_the_demo_backoffs() -> None:
    types = load_job_types(demo=True).job_types

    assert [(types[n].queue, types[n].backoff.base_s, types[n].backoff.cap_s) for n in VIDEO_TYPES] == [
        ("default", demo.BASE_S, demo.CAP_S)
    ] * 4


def test_transcode_returns_the_renditions_and_how_many_thumbnails_to_make() -> None:
    store = InMemoryJobStore()
    job = a_job(type="demo.transcode")

    result = demo.transcode(demo.TranscodePayload(video="cat.mp4", thumbnails=3, ms=0), context_of(job, store))

    assert result == {"video": "cat.mp4", "renditions": ["720p", "480p"], "thumbnails": 3}


@pytest.mark.parametrize(
    ("parent_result", "message"),
    [
        (None, "no parent result"),
        ({"slept_ms": 5}, "not a demo.transcode result"),
        ({"video": "cat.mp4", "thumbnails": 0}, "not a demo.transcode result"),
    ],
)
def test_a_thumbnails_step_without_a_transcode_parent_fails_for_good(parent_result: Any, message: str) -> None:
    store = InMemoryJobStore()
    parent = store.put(a_job(JobStatus.SUCCEEDED, job_id="1" * 32, type="demo.sleep", result=parent_result))
    job = a_job(type="demo.thumbnails", parent_job_id=parent.job_id)

    with pytest.raises(PermanentError, match=message):
        demo.thumbnails(demo.ThumbnailsPayload(), context_of(job, store))


def test_a_thumbnails_step_with_no_parent_at_all_fails_for_good() -> None:
    with pytest.raises(PermanentError, match="no parent result"):
        demo.thumbnails(demo.ThumbnailsPayload(), context_of(a_job(type="demo.thumbnails"), InMemoryJobStore()))


def test_a_notify_of_no_batch_fails_for_good() -> None:
    with pytest.raises(PermanentError, match="has no batch"):
        demo.notify(demo.NotifyPayload(video="cat.mp4"), context_of(a_job(type="demo.notify"), InMemoryJobStore()))


@pytest.mark.parametrize("payload", [{"video": ""}, {"video": "x" * 201}, {"video": "a", "thumbnails": 21}])
def test_transcode_refuses_a_payload_out_of_bounds(payload: dict[str, Any]) -> None:
    model = load_job_types(demo=True).job_types["demo.transcode"].payload_model

    with pytest.raises(ValueError):
        model.model_validate(payload)
