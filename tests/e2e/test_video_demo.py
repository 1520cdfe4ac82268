"""The README's video pipeline over HTTP, against any target with the demo types: a transcode, its chain's
thumbnails step fanning out a batch of thumbnails, and the batch's on_complete naming every thumbnail made."""

from __future__ import annotations

from typing import Any

from tests.e2e.target import Target

FINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}

# The body the README's curl sends (tests/unit/test_readme.py checks the README still says exactly this).
README_BODY: dict[str, Any] = {
    "type": "demo.transcode",
    "payload": {"video": "cat.mp4", "thumbnails": 4},
    "then": {"type": "demo.thumbnails", "payload": {}},
}


def test_the_readme_video_pipeline_transcodes_fans_out_thumbnails_and_notifies_once_all_are_done(
    target: Target,
) -> None:
    submitted = target.call("POST", "/jobs", body=README_BODY)
    assert submitted.status == 202, submitted.body
    transcode_id = submitted.body["job_id"]

    transcode = target.wait_for_job(transcode_id, FINAL, timeout_s=60)
    assert transcode["status"] == "SUCCEEDED", transcode
    assert transcode["result"] == {"video": "cat.mp4", "renditions": ["720p", "480p"], "thumbnails": 4}
    thumbnails_id = str(transcode["next_job_id"])
    target.wait_for(lambda: target.call("GET", f"/jobs/{thumbnails_id}").status == 200 or None, timeout_s=60)

    thumbnails = target.wait_for_job(thumbnails_id, FINAL, timeout_s=60)
    assert (thumbnails["status"], thumbnails["type"], thumbnails["parent_job_id"]) == (
        "SUCCEEDED",
        "demo.thumbnails",
        transcode_id,
    ), (thumbnails["error"], thumbnails["attempt_history"])
    batch_id = thumbnails["result"]["batch_id"]

    seen: list[dict[str, Any]] = []

    def complete() -> dict[str, Any] | None:
        batch = target.call("GET", f"/batches/{batch_id}").body
        seen[:] = [batch]
        return batch if batch["pending"] == 0 and batch["on_complete_job_id"] else None

    # On a machine loaded by the rest of the suite a member's count, or the callback, may be left to the sweeper
    # (after the follow-ups' grace): minutes at worst, not the seconds it takes on a quiet one.
    try:
        batch = target.wait_for(complete, timeout_s=240)
    except AssertionError as late:
        listed = target.call("GET", f"/batches/{batch_id}/jobs?limit=10").body.get("jobs", [])
        members = [(m["job_id"], m["status"], m["attempts"], m.get("error")) for m in listed]
        raise AssertionError(f"{late}: batch {seen[-1] if seen else None}, members {members}") from None
    assert (batch["status"], batch["total"], batch["succeeded"], batch["failed"]) == ("SUCCEEDED", 4, 4, 0)
    assert batch["parent_job_id"] == thumbnails_id
    members = target.call("GET", f"/batches/{batch_id}/jobs?limit=10").body["jobs"]
    assert sorted(m["result"]["thumbnail"] for m in members) == [f"cat.mp4-{n}.jpg" for n in range(1, 5)]
    assert {m["type"] for m in members} == {"demo.thumbnail"}

    notify = target.wait_for_job(batch["on_complete_job_id"], FINAL, timeout_s=60)
    assert (notify["status"], notify["type"], notify["callback_of"]) == ("SUCCEEDED", "demo.notify", batch_id)
    assert notify["result"] == {
        "video": "cat.mp4",
        "thumbnails": ["cat.mp4-1.jpg", "cat.mp4-2.jpg", "cat.mp4-3.jpg", "cat.mp4-4.jpg"],
        "succeeded": 4,
        "failed": 0,
    }


def test_a_thumbnails_step_submitted_alone_fails_for_good_naming_its_missing_parent(target: Target) -> None:
    submitted = target.call("POST", "/jobs", body={"type": "demo.thumbnails", "payload": {}})
    assert submitted.status == 202, submitted.body
    target.parked.add(submitted.body["job_id"])

    failed = target.wait_for_job(submitted.body["job_id"], FINAL, timeout_s=60)

    assert (failed["status"], failed["attempts"]) == ("FAILED", 1)
    assert "no parent result" in failed["error"]
