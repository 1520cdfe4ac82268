"""What an operator reads about a failed attempt in GET /jobs/{id}: its error's type, message and the job
code's traceback (file, line, function), through the real api and worker handlers against moto."""

from __future__ import annotations

import re

from tests.integration.conftest import Pipeline


def test_an_attempt_that_raised_from_a_helper_names_its_file_line_and_function(pipeline: Pipeline) -> None:
    code, job, _ = pipeline.submit("demo.flaky", {"fail_first": 99})
    assert code == 202, job
    pipeline.drain()

    code, view, _ = pipeline.call("GET", f"/jobs/{job['job_id']}")

    assert code == 200
    *earlier, newest = view["attempt_history"]
    assert newest["outcome"] in ("RETRYING", "FAILED")
    assert newest["error"]["type"] == "RuntimeError"
    assert newest["error"]["message"] == f"flaky failure on attempt {newest['attempt']} of the first 99"
    lines = newest["error"]["traceback"].splitlines()
    assert re.fullmatch(r"offpath/jobs/demo\.py:\d+ in flaky", lines[-2]), lines
    assert re.fullmatch(r"offpath/jobs/demo\.py:\d+ in _flaky_failure", lines[-1]), lines
    assert len(lines) == 2, "offpath's own frames (the worker, the timeout) are cut away"
    assert all(a["error"]["traceback"] is None for a in earlier), "only the newest attempt keeps its traceback"


def test_a_success_after_a_failure_keeps_the_failures_type_and_message(pipeline: Pipeline) -> None:
    code, job, _ = pipeline.submit("demo.flaky", {"fail_first": 1})
    assert code == 202, job
    pipeline.drain()

    code, view, _ = pipeline.call("GET", f"/jobs/{job['job_id']}")

    assert view["status"] == "SUCCEEDED"
    first, second = view["attempt_history"]
    assert first["error"] == {
        "type": "RuntimeError",
        "message": "flaky failure on attempt 1 of the first 1",
        "traceback": None,
    }
    assert second["error"] is None


def test_the_job_level_error_stays_one_string(pipeline: Pipeline) -> None:
    code, job, _ = pipeline.submit("demo.poison", {"reason": "broken"})
    assert code == 202, job
    pipeline.drain()

    code, view, _ = pipeline.call("GET", f"/jobs/{job['job_id']}")

    assert (view["status"], view["error"]) == ("FAILED", "permanent error: broken")
    (attempt,) = view["attempt_history"]
    assert (attempt["error"]["type"], attempt["error"]["message"]) == ("PermanentError", "broken")
